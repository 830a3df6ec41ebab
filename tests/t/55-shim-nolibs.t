#!/bin/sh
# A container image without libzstd.so.1 or libunwind.so.8: the shim keeps
# tracing (stored chunks; glibc's backtrace() for the frames its own
# unwinder cannot follow), says so once on stderr, and the trace and the
# report say which library was missing. The libraries are hidden by
# tests/shim/hidelibs.c, preloaded before the shim: its dlopen fails them
# as the loader fails a missing file. Each run is compared with a run that
# has both: the program's output, and every count and byte of the trace.
. tests/t/lib.sh
EX=$B/examples
HIDE=$B/tests/shim/libhidelibs.so
for f in "$SHIM" "$VT" "$HIDE" "$EX/llama-server-chat"; do
    [ -e "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed to read the JSON report"; exit 0; }
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT

# run NAME HIDDEN [ENV=VAL...]: the KV cache story (examples/README.md,
# story 2: the 6th request's KV block fails) into $TMP/NAME, with the
# sonames HIDDEN (comma-separated, or "") impossible to load.
run() {
    name=$1 hidden=$2; shift 2
    mkdir -p $TMP/$name
    env "$@" VT_HIDE_LIBS="$hidden" VTSIM_DEVICES=12GiB LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$TMP/$name \
        LD_PRELOAD="${VT_SAN_RT:+$VT_SAN_RT }$HIDE $SHIM" \
        "$EX/llama-server-chat" -m llama-13b-q4_k_m --mmap -c 2048 --kv-grow 1024 --turns 8 --turn-tokens 1000 \
        >$TMP/$name.out 2>$TMP/$name.err
    echo $? >$TMP/$name.rc
    "$VT" report --wide $TMP/$name >$TMP/$name.txt 2>&1
    "$VT" report --json $TMP/$name >$TMP/$name.json 2>/dev/null
}
# q NAME EXPR: a Python expression over p, the first process of NAME's report.
q() {
    python3 -c 'import json, sys
try:
    p = json.load(open(sys.argv[1]))["processes"][0]
    # a stack is an entry of the prefix table: walk gives its entries, innermost first
    walk = lambda i: [] if i is None else [i] + walk(p["stacks"]["prefix"][i])
    print(eval(sys.argv[2]))
except (ValueError, LookupError, TypeError) as e:
    print("no such value in the report:", repr(e))' $TMP/$1.json "$2"
}
# What must not change whatever was missing: every event count, every
# entry point's calls, failures and bytes, the peak by tag, the tipping
# request.
COUNTS='(p["events"], p["apis"], [d["peak"]["by_tag"] for d in p["devices"]], p["spill"]["event"]["bytes"])'
# The tipping stack's functions, innermost first.
STACK='[p["frames"][p["stacks"]["frame"][i]]["function"] for i in walk(p["spill"]["event"]["stack"])]'
prelude_version() { set -- $TMP/$1/*.vtrace; od -An -tu2 -j8 -N2 "$1" | tr -d ' '; }
shim_lines() { grep -c '^vramtrace: ' $TMP/$1.err; }

run full ""
run nozstd libzstd.so.1
run nounwind libunwind.so.8
run neither libzstd.so.1,libunwind.so.8

# ---- a run with both: the reference ----
is "$(cat $TMP/full.rc) $(shim_lines full)" "0 0" "with both libraries: exit 0, nothing from the shim on stderr"
is "$(tail -1 $TMP/full.out)" "request=6 n_past=5000 n_ctx=5120 status=error" "the 6th request fails, as story 2 says"
is "$(q full 'p["spill"]["event"]["bytes"], p["spill"]["event"]["tag"]')" "(838860800, 'kv')" "tipped by the 800 MiB KV block"
is "$(q full 'p["trace"]["shim_without"]')" "[]" "JSON: shim_without is empty"
is "$(prelude_version full)" 3 "a trace of zstd chunks is format version 3 (readers of version 3 read it)"
check "the text report has no NOTE about libraries" sh -c "! grep -q 'could not load' $TMP/full.txt"

# ---- each library missing ----
for name in nozstd nounwind neither; do
    is "$(cat $TMP/$name.rc)" 0 "$name: the program exits 0"
    check "$name: stdout is the same as with both libraries" cmp -s $TMP/full.out $TMP/$name.out
    grep -v '^vramtrace: ' $TMP/$name.err >$TMP/$name.err.program
    check "$name: the program's stderr is the same" cmp -s $TMP/full.err $TMP/$name.err.program
    is "$(find $TMP/$name -name '*.vtrace' | wc -l)" 1 "$name: one trace written"
    is "$(q $name "$COUNTS")" "$(q full "$COUNTS")" "$name: every event count, entry point's bytes and peak as with both"
    is "$(q $name 'p["trace"]["complete"], p["verdict"]')" "(True, 'failed')" "$name: a complete trace, the same verdict"
done

is "$(grep '^vramtrace: ' $TMP/nozstd.err)" \
    "vramtrace: libzstd.so.1 could not be loaded: writing the trace uncompressed (same events, a larger file)" \
    "no libzstd: said once on stderr"
is "$(prelude_version nozstd)" 4 "no libzstd: format version 4 (stored chunks): a version 3 reader refuses it by its version"
full_bytes=$(stat -c %s $TMP/full/*.vtrace)
nozstd_bytes=$(stat -c %s $TMP/nozstd/*.vtrace)
check "no libzstd: the trace is uncompressed, larger ($nozstd_bytes bytes against $full_bytes)" test "$nozstd_bytes" -gt "$full_bytes"
check "no libzstd: its chunks are stored (\"VTCS\"), none is zstd" \
    sh -c "grep -q VTCS $TMP/nozstd/*.vtrace && ! grep -q VTCK $TMP/nozstd/*.vtrace"
check "no libzstd: dump says degraded=no-zstd" sh -c "'$VT' dump $TMP/nozstd/*.vtrace | head -1 | grep -q ' degraded=no-zstd\$'"
is "$(q nozstd 'p["trace"]["shim_without"]')" "['libzstd.so.1']" "no libzstd: JSON shim_without"
"$VT" serve --once $TMP/nozstd >$TMP/nozstd.om 2>/dev/null
is "$(grep '^vramtrace_shim_library_missing{' $TMP/nozstd.om | sed 's/.*library="\([^"]*\)"} /\1=/' | tr '\n' ' ')" \
   "libzstd.so.1=1 libunwind.so.8=0 " "no libzstd: the Prometheus gauge says which library was missing"
"$VT" top --once $TMP/neither >$TMP/neither.top 2>/dev/null
is "$(grep -c 'traced without libzstd.so.1 and libunwind.so.8$' $TMP/neither.top)" 1 "neither: top says both were missing"
"$VT" top --once $TMP/full >$TMP/full.top 2>/dev/null
is "$(grep -c 'traced without' $TMP/full.top)" 0 "both loaded: top says nothing of it"
is "$(sed -n 2p $TMP/nozstd.txt)" \
    "NOTE: the shim could not load libzstd.so.1: the trace is uncompressed (a larger file, the same records)." \
    "no libzstd: the report's NOTE"
is "$(q nozstd "$STACK")" "$(q full "$STACK")" "no libzstd: the tipping stack is the same"

is "$(grep '^vramtrace: ' $TMP/nounwind.err)" \
    "vramtrace: libunwind.so.8 could not be loaded: frames the built-in unwinder cannot follow go to glibc's backtrace()" \
    "no libunwind: said once on stderr"
is "$(prelude_version nounwind)" 3 "no libunwind: still format version 3"
is "$(q nounwind 'p["trace"]["shim_without"]')" "['libunwind.so.8']" "no libunwind: JSON shim_without"
is "$(sed -n 2p $TMP/nounwind.txt)" \
    "NOTE: the shim could not load libunwind.so.8: frames its own unwinder could not follow were unwound by glibc's backtrace()." \
    "no libunwind: the report's NOTE"
is "$(q nounwind "$STACK")" "$(q full "$STACK")" "no libunwind: the tipping stack is the same, frame for frame"
is "$(q full 'len('"$STACK"'), '"$STACK"'[-4]')" "(12, 'main')" "the tipping stack has 12 frames, main fourth from the end"
# uncached sends every stack to libunwind: without it, to glibc's
# backtrace(), whose stacks must be libunwind's too.
run uncached libunwind.so.8 VRAMTRACE_UNWIND=uncached
is "$(q uncached "$STACK")" "$(q full "$STACK")" "no libunwind, VRAMTRACE_UNWIND=uncached: backtrace() gives the same tipping stack"
is "$(q uncached 'p["trace"]["shim_without"]')" "['libunwind.so.8']" "no libunwind, uncached: JSON shim_without"

is "$(grep -c '^vramtrace: ' $TMP/neither.err)" 2 "neither: two lines on stderr, one per library"
is "$(q neither 'p["trace"]["shim_without"]')" "['libzstd.so.1', 'libunwind.so.8']" "neither: JSON shim_without names both"
is "$(sed -n 2p $TMP/neither.txt)" \
    "NOTE: the shim could not load libzstd.so.1 (the trace is uncompressed: a larger file, the same records) nor libunwind.so.8 (frames its own unwinder could not follow were unwound by glibc's backtrace())." \
    "neither: the report's NOTE names both"
is "$(q neither "$STACK")" "$(q full "$STACK")" "neither: the tipping stack is the same"
"$VT" report --html $TMP/neither.html $TMP/neither 2>/dev/null
check "neither: the HTML page says it" grep -q "<p><b>Note:</b> the shim could not load libzstd.so.1 (the trace" $TMP/neither.html

# Frame pointers need no library: without libunwind, VRAMTRACE_UNWIND=fp
# is not degraded and says nothing.
run fp libunwind.so.8 VRAMTRACE_UNWIND=fp
is "$(cat $TMP/fp.rc) $(shim_lines fp) $(q fp 'p["trace"]["shim_without"]')" "0 0 []" \
    "VRAMTRACE_UNWIND=fp without libunwind: nothing missing, nothing said"
done_testing
