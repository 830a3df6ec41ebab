#!/bin/sh
# A signal handler that allocates: a 10 kHz SIGALRM whose handler makes a
# cuMemAlloc/cuMemFree pair, landing anywhere in a loop of driver pairs,
# inside the shim too. A handler that entered a wrapper while its thread was
# in the shim went through unrecorded and uncounted: about 2,000 pairs in
# 5,000 missing from the trace, and the report said "0 dropped". Now those
# calls are counted as dropped, so the trace plus the dropped count is every
# call the program made, and the report says so. The simulated driver blocks
# signals while it holds its lock (VTSIM_SIGNAL_SAFE), as a driver safe to
# call from a handler would: without it the handler deadlocks with or
# without the shim.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
export VTSIM_SIGNAL_SAFE=1
N=100000
plain $TMP/plain timeout 120 $FP sigalloc $N
mkdir $TMP/d
shimmed $TMP/out $TMP/d timeout 120 $FP sigalloc $N
unchanged $TMP/plain $TMP/out "handler allocating at 10 kHz: output unchanged, no deadlock (exit $(cat $TMP/out.rc))"
H=$(sed -n 's/^sigalloc handler pairs \([0-9]*\)$/\1/p' $TMP/out.err)
check "handler allocating: the handler ran ($H pairs)" [ "${H:-0}" -gt 0 ]
# the warm-up pair, the main loop's pairs and the handler's
calls=$((2 + 2 * N + 2 * ${H:-0}))
f=$(ls $TMP/d/*.vtrace)
in=$(all_events $f)
dropped=$("$VT" dump $f | sed -n 's/^end .* dropped=\([0-9]*\).*/\1/p')
echo "# $calls calls: $in in the trace, $dropped dropped"
is "$((in + dropped))" $calls "handler allocating: events in the trace + dropped = all $calls calls"
is "$(not_in $TMP/out.err)" "$dropped" "handler allocating: stderr says the $dropped events not in the trace"
"$VT" report --wide $f >$TMP/report 2>&1
is "$(sed -n 's/^Events: .* \([0-9]*\) dropped.*/\1/p' $TMP/report | head -1)" "$dropped" \
    "handler allocating: the report says the $dropped events it does not count"
is "$("$VT" dump $f | sed -n 's/^end .* lost=\(.*\)/\1/p')" \
    "buffer_full:0,signal_handler_in_shim:$dropped,call_not_returned:0,not_written:0" \
    "handler allocating: END says all $dropped came from a signal handler inside the shim"
is "$(grep -c "^NOTE: the shim lost $dropped events ($dropped from a signal handler inside the shim)" $TMP/report)" 1 \
    "handler allocating: the report's note says why"
done_testing
