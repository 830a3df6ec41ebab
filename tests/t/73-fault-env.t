#!/bin/sh
# Bad VRAMTRACE_* values: negative, huge, garbage, empty, hex, trailing
# junk, overflowing. The program runs unchanged; a bad value is said at most
# once on stderr and replaced by the default, so the process is still
# traced (51-shim-process.t checks one warning per variable; here every
# variable gets the whole list).
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
plain $TMP/plain $FP pairs 200

BAD="-1 -2147483649 99999999999999999999 2147483648 garbage 12abc 0x10 1e3 ' 5' '' +7 0"
for var in VRAMTRACE_DEPTH VRAMTRACE_FLUSH_MS VRAMTRACE_RING VRAMTRACE_SAMPLE_MS VRAMTRACE_TIME_RES_US \
           VRAMTRACE_DISABLE VRAMTRACE_QUIET; do
    bad_runs=0 bad_warn=0 bad_trace=0 n=0
    eval "set -- $BAD"
    for v in "$@"; do
        n=$((n + 1))
        D=$TMP/$var.$n; mkdir $D
        env "$var=$v" LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SP" VRAMTRACE_DIR=$D $FP pairs 200 >$TMP/out 2>$TMP/out.err
        echo $? >$TMP/out.rc
        if [ "$(cat $TMP/out.rc)" != "$(cat $TMP/plain.rc)" ] || ! cmp -s $TMP/out $TMP/plain; then
            bad_runs=$((bad_runs + 1)); echo "#   $var='$v': program changed"; fi
        [ "$(grep -c '^vramtrace:' $TMP/out.err)" -le 1 ] || { bad_warn=$((bad_warn + 1)); echo "#   $var='$v': more than one warning"; }
        # Only VRAMTRACE_DISABLE=1 (valid) may leave no trace.
        traces=$(ls $D/*.vtrace 2>/dev/null | wc -l)
        if [ $var = VRAMTRACE_DISABLE ] && [ "$v" = 1 ]; then want=0; else want=1; fi
        if [ "$traces" != $want ]; then bad_trace=$((bad_trace + 1)); echo "#   $var='$v': $traces traces"; fi
        for f in $D/*.vtrace; do [ -f "$f" ] && { "$VT" dump "$f" >/dev/null 2>&1 || echo "#   $var='$v': unreadable trace"; }; done
    done
    is $bad_runs 0 "$var: $n bad values, program unchanged each time"
    is $bad_warn 0 "$var: at most one warning each"
    is $bad_trace 0 "$var: still traced with the default each time"
done

# Values at the edges that are valid: the shim must accept them.
for pair in VRAMTRACE_DEPTH=0 VRAMTRACE_DEPTH=256 VRAMTRACE_FLUSH_MS=1 VRAMTRACE_FLUSH_MS=60000 \
            VRAMTRACE_RING=1024 VRAMTRACE_RING=1025 VRAMTRACE_SAMPLE_MS=0 \
            VRAMTRACE_TIME_RES_US=1 VRAMTRACE_TIME_RES_US=1000000; do
    D=$TMP/edge.$pair; mkdir $D
    env "$pair" LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SP" VRAMTRACE_DIR=$D $FP pairs 200 >$TMP/out 2>$TMP/out.err
    echo $? >$TMP/out.rc
    unchanged $TMP/plain $TMP/out "$pair: program unchanged"
    is "$(grep -c '^vramtrace:' $TMP/out.err)" 0 "$pair: accepted without a warning"
    "$VT" dump $D/*.vtrace >$TMP/dump 2>&1
    is "$(count_events $TMP/dump cudaMalloc)" 200 "$pair: all 200 allocations traced"
done

# Boolean variables take the usual spellings in any case; anything else is
# one warning naming the variable and value, and the default (traced).
n=0
for pair in "1 0" "yes 0" "YES 0" "True 0" "on 0" "ON 0" "0 1" "no 1" "False 1" "OFF 1"; do
    set -- $pair
    n=$((n + 1))
    D=$TMP/bool.$n; mkdir $D
    env VRAMTRACE_DISABLE=$1 LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SP" VRAMTRACE_DIR=$D $FP pairs 200 >$TMP/out 2>$TMP/out.err
    echo $? >$TMP/out.rc
    unchanged $TMP/plain $TMP/out "VRAMTRACE_DISABLE=$1: program unchanged"
    is "$(grep -c '^vramtrace:' $TMP/out.err)/$(ls $D | wc -l)" "0/$2" "VRAMTRACE_DISABLE=$1: no warning, $2 traces"
done
for v in 2 enable "yes please" y; do
    n=$((n + 1))
    D=$TMP/bool.$n; mkdir $D
    env "VRAMTRACE_DISABLE=$v" LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SP" VRAMTRACE_DIR=$D $FP pairs 200 >$TMP/out 2>$TMP/out.err
    is "$(cat $TMP/out.err)" "vramtrace: ignoring VRAMTRACE_DISABLE=$v (want 1/0, yes/no, true/false or on/off); using 0" \
        "VRAMTRACE_DISABLE='$v': one warning naming variable and value"
    is "$(ls $D | wc -l)" 1 "VRAMTRACE_DISABLE='$v': traced, as by default"
done

# Event times are whole multiples of VRAMTRACE_TIME_RES_US after the
# process's start (dump prints them relative to it): 1 ms by default.
for pair in "VRAMTRACE_TIME_RES_US= 1000000" "VRAMTRACE_TIME_RES_US=1 1000" \
            "VRAMTRACE_TIME_RES_US=250 250000" "VRAMTRACE_TIME_RES_US=1000000 1000000000"; do
    set -- $pair
    D=$TMP/grain.$1; mkdir $D
    env "$1" LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SP" VRAMTRACE_DIR=$D $FP pairs 200 >/dev/null 2>&1
    "$VT" dump $D/*.vtrace >$TMP/dump 2>&1
    is "$(awk -v g=$2 '$1 == "event" { n++; split($2, kv, "="); if (kv[2] % g) off++ }
        END { if (n >= 400) print off + 0; else print "only " (n + 0) " events" }' $TMP/dump)" 0 \
        "$1: every event time is a multiple of $2 ns"
    is "$(sed -n 's/^process .* time_res=\([0-9]*\)$/\1/p' $TMP/dump)" "$2" "$1: the PROCESS record states the grain"
done
# The report prints no digit finer than the grain: with 1 ms, nothing in us,
# and what happened in the first millisecond is "<1 ms", not "0.0 us".
"$VT" report --wide $TMP/grain.VRAMTRACE_TIME_RES_US=/*.vtrace >$TMP/report 2>&1
is "$(grep -c ' us\b' $TMP/report)" 0 "1 ms grain: the report prints no microseconds"
check "1 ms grain: the peak's time is in ms or s" grep -Eq 'peak .* at (<1 ms|[0-9]+ ms|[0-9]+\.[0-9]{3} s):' $TMP/report

# Bad directories: garbage bytes, a newline, relative, with .. (all legal
# path names: traced there or refused, the program unchanged either way).
mkdir $TMP/cwd
n=0
for dir in "$(printf 'a\nb')" "rel/../rel" "$(printf '\001\377dir')" "-"; do
    n=$((n + 1))
    (cd $TMP/cwd && shimmed $TMP/out "$dir" $FP pairs 200)
    unchanged $TMP/plain $TMP/out "odd VRAMTRACE_DIR #$n: program unchanged"
done
# rel/../rel needs rel to exist first: refused; the other three are made.
is "$(find $TMP/cwd -name '*.vtrace' -printf x | wc -c)" 3 "odd but legal directory names: traced into them"
done_testing
