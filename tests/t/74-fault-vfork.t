#!/bin/sh
# vfork children of a traced process: the child borrows the parent's memory
# and stack until it execs or exits, so anything the shim did in it (its
# exit handlers, its fork handlers, a write to the parent's state) would
# land in the parent. After 2000 pairs the parent vforks a child that execs
# itself as "runner" (traced in its own file), one that calls _exit(7), and
# one whose exec fails; then 2000 pairs more. Nothing got through: the
# parent's trace holds all its events, the runner has its own.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
export VRAMTRACE_SAMPLE_MS=0
plain $TMP/plain $FP vfork 2000
mkdir $TMP/d
shimmed $TMP/out $TMP/d $FP vfork 2000
unchanged $TMP/plain $TMP/out "vfork + exec, + _exit, + failed exec: output unchanged"
is "$(ls $TMP/d | wc -l)" 2 "vfork: two traces, the parent's and the exec'd runner's"
got=$(for f in $TMP/d/*.vtrace; do "$VT" dump $f 2>&1 | awk '$1 == "end" { sub(/^end t=[0-9]* /, ""); print }'; done | sort | tr '\n' ';')
is "$got" "events=3 dropped=0 lost=buffer_full:0,signal_handler_in_shim:0,call_not_returned:0,not_written:0;events=8000 dropped=0 lost=buffer_full:0,signal_handler_in_shim:0,call_not_returned:0,not_written:0;" "vfork: the parent's 8000 events and the runner's 3, each trace whole"
is "$(cat $TMP/out.err)" "" "vfork: nothing said on stderr"
done_testing
