#!/bin/sh
# SIGKILL at random points, 20 times, into a program whose 4 threads
# allocate without pause: from before the first CUDA call to long after.
# The shim writes each chunk with one write(2), so every trace must read
# with `vramtrace dump` exit 0. A kill that lands before the trace header
# is written may leave no file or an empty one; any other file must be a
# complete trace up to its last chunk.
# VT_KILL_SEED=N replays one sequence of delays.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
SEED=${VT_KILL_SEED:-$(date +%s)}
echo "# delays from seed $SEED (VT_KILL_SEED=$SEED to replay)"
delays=$(awk -v s=$SEED 'BEGIN { srand(s); for (i = 0; i < 20; i++) printf "%.3f ", (i < 4 ? rand() * 0.02 : rand() * 0.6) }')
clean=0 noheader=0 bad=0 runs=0 events=0
for d in $delays; do
    runs=$((runs + 1))
    D=$TMP/k$runs; mkdir $D
    env LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SP" VRAMTRACE_DIR=$D $FP busy 4 >/dev/null 2>&1 &
    pid=$!
    sleep $d
    kill -KILL $pid; wait $pid 2>/dev/null
    f=$(ls $D/*.vtrace 2>/dev/null | head -1)
    if [ -z "$f" ] || [ ! -s "$f" ]; then noheader=$((noheader + 1)); continue; fi
    if "$VT" dump "$f" >$D/dump 2>$D/err; then
        clean=$((clean + 1)); events=$((events + $(grep -c '^event ' $D/dump)))
    else
        bad=$((bad + 1)); echo "#   kill after ${d}s: dump exit $?: $(tail -1 $D/err)"
    fi
done
is $bad 0 "SIGKILL x $runs: no trace fails to read ($clean clean, $noheader killed before the header, $events events read)"
check "SIGKILL: most kills left a trace with events" [ $clean -ge 10 ]
done_testing
