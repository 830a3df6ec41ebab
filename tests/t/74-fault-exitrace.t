#!/bin/sh
# exit() racing allocating threads: 4 threads make cudaMalloc/cudaFree pairs
# while the main thread calls exit(); they keep calling while the shim
# finishes the trace. Each thread counts, in a shared file, the calls that
# returned to it. Calls made after the final drain, or after the shim
# stopped (passed through), returned uncounted: program-counted 44,246 vs
# 44,054 traced + 0 dropped, and the report said "0 dropped". Now the ring
# is closed before the final drain, END reads the losses sealed, and a call
# that no trace could count any more waits (bounded) for the process to
# end: what returned to the program is exactly the trace plus END's
# dropped. libvtfault, preloaded after the shim, holds the exit until the
# counters stand still (VTFAULT_EXIT_WAIT), so they are final.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
plain $TMP/plain env FAULTPROG_COUNT_FILE=$TMP/plain.counts timeout 60 $FP exitrace 4 200
for run in 1 2 3; do
    mkdir $TMP/d$run
    PRELOAD="$SP $VTFAULT" shimmed $TMP/out$run $TMP/d$run env FAULTPROG_COUNT_FILE=$TMP/counts$run \
        VTFAULT_EXIT_WAIT=$TMP/counts$run timeout 60 $FP exitrace 4 200
    unchanged $TMP/plain $TMP/out$run "run $run: exit with 4 threads allocating: output unchanged (exit $(cat $TMP/out$run.rc))"
    returned=$(python3 -c 'import struct, sys
w = struct.unpack("4096Q", open(sys.argv[1], "rb").read())
print(sum(w[16 * i + 8] for i in range(256)))' $TMP/counts$run)
    f=$(ls $TMP/d$run/*.vtrace)
    in=$(all_events $f)
    dropped=$("$VT" dump $f | sed -n 's/^end .* dropped=\([0-9]*\).*/\1/p')
    echo "# run $run: $returned calls returned: $in in the trace, $dropped dropped"
    is "$((in + ${dropped:-0}))" "$returned" "run $run: events in the trace + dropped = the $returned calls that returned"
    "$VT" report $f >$TMP/report$run 2>&1
    is "$(sed -n 's/^Events: .* \([0-9]*\) dropped.*/\1/p' $TMP/report$run | head -1)" "$dropped" \
        "run $run: the report says the $dropped dropped"
done
done_testing
