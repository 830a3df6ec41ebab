#!/bin/sh
# A signal handler that allocates, armed before the first CUDA call: a 10
# kHz SIGALRM whose handler makes a cuMemAlloc/cuMemFree pair lands inside
# the shim's start-up (the first cuMemAlloc_v2 of a loop of driver pairs).
# A handler that entered a wrapper while its thread was starting the shim
# went through unrecorded and uncounted: 18-28 calls missing from trace +
# dropped in each of 10 runs. Now a handler's call is counted as dropped
# from the first instant of start-up, so the trace plus the dropped count
# is every call, each run. VTSIM_SIGNAL_SAFE: as in 78-fault-sigalloc.t.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
export VTSIM_SIGNAL_SAFE=1
N=20000
plain $TMP/plain timeout 120 $FP sigstart $N
for run in 1 2 3 4 5; do
    mkdir $TMP/d$run
    shimmed $TMP/out$run $TMP/d$run timeout 120 $FP sigstart $N
    unchanged $TMP/plain $TMP/out$run "run $run, handler allocating from start-up on: output unchanged (exit $(cat $TMP/out$run.rc))"
    H=$(sed -n 's/^sigstart handler pairs \([0-9]*\)$/\1/p' $TMP/out$run.err)
    calls=$((2 * N + 2 * ${H:-0}))
    f=$(ls $TMP/d$run/*.vtrace)
    in=$(all_events $f)
    dropped=$("$VT" dump $f | sed -n 's/^end .* dropped=\([0-9]*\).*/\1/p')
    echo "# run $run: $calls calls ($H handler pairs): $in in the trace, $dropped dropped"
    is "$((in + dropped))" $calls "run $run: events in the trace + dropped = all $calls calls"
done
done_testing
