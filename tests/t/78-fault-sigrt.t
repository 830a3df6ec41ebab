#!/bin/sh
# A signal handler that allocates while the thread is inside a runtime
# call: a 10 kHz SIGALRM whose handler makes a linked cuMemAlloc/cuMemFree
# pair, landing in a loop of cudaMalloc/cudaFree pairs, inside the
# runtime's own body too. The driver calls a runtime call makes are folded
# into its event; the handler's were folded with them, so they were in
# neither the trace nor the dropped count. A driver call is folded only
# when it comes from the runtime whose call is under way. As in
# 78-fault-sigalloc.t, the simulated driver blocks signals while it holds
# its lock (VTSIM_SIGNAL_SAFE).
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
export VTSIM_SIGNAL_SAFE=1
N=100000
plain $TMP/plain timeout 120 $FP sigrt $N
mkdir $TMP/d
shimmed $TMP/out $TMP/d timeout 120 $FP sigrt $N
unchanged $TMP/plain $TMP/out "handler allocating inside runtime calls: output unchanged, no deadlock (exit $(cat $TMP/out.rc))"
H=$(sed -n 's/^sigrt handler pairs \([0-9]*\)$/\1/p' $TMP/out.err)
check "the handler ran ($H pairs)" [ "${H:-0}" -gt 0 ]
# the warm-up pair, the main loop's runtime pairs and the handler's driver pairs
calls=$((2 + 2 * N + 2 * ${H:-0}))
f=$(ls $TMP/d/*.vtrace)
in=$(all_events $f)
dropped=$("$VT" dump $f | sed -n 's/^end .* dropped=\([0-9]*\).*/\1/p')
echo "# $calls calls: $in in the trace, $dropped dropped"
is "$((in + dropped))" $calls "events in the trace + dropped = all $calls calls"
"$VT" dump $f >$TMP/dump
is "$(grep '^event ' $TMP/dump | grep -c 'api=cudaMalloc ')" $((N + 1)) "every cudaMalloc is one event"
handler=$(grep '^event ' $TMP/dump | grep -c 'api=cuMemAlloc_v2 \|api=cuMemFree_v2 ')
handler_dropped=$(sed -n 's/^end .*signal_handler_in_shim:\([0-9]*\).*/\1/p' $TMP/dump)
is "$((handler + handler_dropped))" $((2 * ${H:-0})) \
    "the handler's $((2 * ${H:-0})) driver calls: $handler in the trace, $handler_dropped counted as made inside the shim"
done_testing
