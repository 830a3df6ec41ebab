#!/bin/sh
# SIGKILL at random points, 20 times, into a program whose 4 threads
# allocate without pause: from before the first CUDA call to long after.
# The shim writes each chunk with one write(2), so a trace reads with
# `vramtrace dump` exit 0, except that a SIGKILL can cut that write short
# (Linux stops a multi-page write to a file when a fatal signal is pending,
# and the part already copied stays): then the file ends inside its last
# chunk, dump says so and exits 2, and `vramtrace report` must still read
# everything before it (exit 0). A kill that lands before the trace header
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
clean=0 cut=0 noheader=0 bad=0 runs=0 events=0
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
    elif grep -q 'trace ends in the middle of a chunk: [0-9]* complete chunks read' $D/err &&
         { "$VT" report "$f" >$D/report 2>&1; [ $? = 3 ]; } && grep -q '^VERDICT: INCOMPLETE TRACE' $D/report; then
        cut=$((cut + 1)); echo "#   kill after ${d}s cut the last chunk's write short: $(tail -1 $D/err)"
    else
        bad=$((bad + 1)); echo "#   kill after ${d}s: dump exit $?: $(tail -1 $D/err)"
    fi
done
is $bad 0 "SIGKILL x $runs: no trace fails to read ($clean clean, $cut with the last write cut short, $noheader killed before the header, $events events read)"
check "SIGKILL: most kills left a trace with events" [ $clean -ge 10 ]
done_testing
