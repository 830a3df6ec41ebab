#!/bin/sh
# Exit while another thread is inside a dl_iterate_phdr callback (the
# loader's lock held): the writer's walks of the loaded modules wait for
# it, and exit joined the writer, so exit took as long as the callback (5 s
# vs 0.1 s) and for ever when it never returned. Now the final drain asks
# the loader nothing for ips inside known modules (vt_symbols_final), so
# the trace is finished whole at once; and a writer already caught in a
# walk when exit comes ("early") is waited for 500 ms at most. The trace
# then ended at its last chunk with the 2 calls since uncounted (stderr
# and the report said "no clean exit", the trace held 2 of 4 calls and 0
# dropped); now the exiting thread takes the file and the ring from the
# writer (a state word the writer holds around each take and each write)
# and appends a last chunk of its own: DROPPED and END with those calls
# counted, so trace + dropped = the program's 4 calls.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
export VRAMTRACE_FLUSH_MS=1000
ms() { echo $(( $(date +%s%N) / 1000000 )); }
plain $TMP/plain timeout 30 $FP exitwalk 100
HIDE=$B/tests/shim/libhidelibs.so
# "nozstd": libzstd hidden (tests/shim/hidelibs.c), so the chunks are stored.
for args in "5000" "-1" "5000 early" "-1 early" "-1 early nozstd"; do
    name=$(echo "$args" | tr ' ' _)
    mkdir $TMP/d$name
    t0=$(ms)
    case $args in
    *nozstd) PRELOAD="${VT_SAN_RT:+$VT_SAN_RT }$HIDE $SHIM" shimmed $TMP/out$name $TMP/d$name \
                 env VT_HIDE_LIBS=libzstd.so.1 timeout 30 $FP exitwalk ${args% nozstd};;
    *) shimmed $TMP/out$name $TMP/d$name timeout 30 $FP exitwalk $args;;
    esac
    took=$(( $(ms) - t0 ))
    case $args in -1*) what="callback that never returns${args#-1}";; *) what="callback of ${args%% *} ms${args#5000}";; esac
    unchanged $TMP/plain $TMP/out$name "$what: the program exits, output unchanged (exit $(cat $TMP/out$name.rc))"
    case $args in
    *early*)
        # 1.5 s before the new path, 1.2 s in the walk, at most 0.5 s more
        check "$what: exit waits at most 500 ms for the writer ($took ms in all, 2700 without the wait)" [ $took -lt 3800 ]
        is "$(grep -c 'at exit the trace writer had waited 500 ms .* counted as dropped' $TMP/out$name.err)" 1 \
            "$what: stderr says the calls since the last chunk are counted as dropped"
        f=$(ls $TMP/d$name/*.vtrace)
        in=$(all_events $f)
        dropped=$("$VT" dump $f | sed -n 's/^end .* dropped=\([0-9]*\).*/\1/p')
        echo "# $what: $in in the trace, ${dropped:-no END} dropped"
        is "$((in + ${dropped:-0}))" 4 "$what: events in the trace + END's dropped = the program's 4 calls"
        "$VT" report $f >$TMP/report$name 2>&1
        is "$(sed -n 's/^Events: .* \([0-9]*\) dropped.*/\1/p' $TMP/report$name | head -1)" "${dropped:-none}" \
            "$what: the report says the ${dropped:-?} dropped"
        is "$(grep -c '^NOTE: no clean exit recorded' $TMP/report$name)" 0 "$what: the report finds the trace's end"
        ;;
    *)
        check "$what: exit does not wait for it ($took ms in all, 1600 without the callback)" [ $took -lt 3000 ]
        f=$(ls $TMP/d$name/*.vtrace)
        is "$(all_events $f) $("$VT" dump $f | sed -n 's/^end .* dropped=\([0-9]*\).*/\1/p')" "4 0" \
            "$what: the trace is complete: its 4 calls, END, 0 dropped"
        ;;
    esac
done
done_testing
