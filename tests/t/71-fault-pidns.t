#!/bin/sh
# PID namespaces: three processes, each PID 1 in its own namespace (as in
# containers sharing a mounted trace directory), trace into one directory,
# two at the same time. Trace names come from the PID, so they collide: the
# O_EXCL open moves the later ones to a numbered name, and no trace
# overwrites or interleaves with another. Needs unshare -p (root).
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
if ! unshare -p -f --mount-proc true 2>/dev/null; then
    for i in $(seq 1 5); do skip "unshare -p not allowed here"; done
    done_testing; exit 0
fi
D=$TMP/shared; mkdir $D
export VRAMTRACE_SAMPLE_MS=0
for n in 3000 5000; do plain $TMP/plain-$n $FP pairs $n; done
shimmed $TMP/out-3000 $D unshare -p -f --mount-proc $FP pairs 3000 &
a=$!
shimmed $TMP/out-5000 $D unshare -p -f --mount-proc $FP pairs 5000 &
b=$!
wait $a $b
shimmed $TMP/out-1000 $D unshare -p -f --mount-proc $FP pairs 1000
plain $TMP/plain-1000 $FP pairs 1000
for n in 3000 5000 1000; do
    unchanged $TMP/plain-$n $TMP/out-$n "PID 1 in a namespace, $n pairs: output unchanged"
done
is "$(ls $D | grep -c '^faultprog\.1\(\.[0-9]*\)\?\.vtrace$')" 3 "three PID-1 processes: three trace files, none overwritten"
# Each file holds exactly one process's pairs: 2n events and a clean end.
got=$(for f in $D/*.vtrace; do "$VT" dump $f 2>&1 | awk '$1 == "end" { e = $0 } $1 == "event" && / api=cudaMalloc / { n++ } END { sub(/^end t=[0-9]* /, "", e); print n + 0, e }'; done | sort -n | tr '\n' ';')
is "$got" "1000 events=2000 dropped=0 lost=buffer_full:0,signal_handler_in_shim:0,call_not_returned:0,not_written:0;3000 events=6000 dropped=0 lost=buffer_full:0,signal_handler_in_shim:0,call_not_returned:0,not_written:0;5000 events=10000 dropped=0 lost=buffer_full:0,signal_handler_in_shim:0,call_not_returned:0,not_written:0;" \
    "three PID-1 processes: each trace holds its own process's events, whole"
done_testing
