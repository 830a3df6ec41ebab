#!/bin/sh
# More tag pushes and pops than the range buffer holds between two drains:
# 200,000 push/pop pairs, every other one with a nested pair, as fast as
# they go. ranges.c counted the records lost to its full buffer but never
# wrote the count: the trace held 78,318 RANGE records of 600,000 and
# nothing said the rest were missing. Now a push dropped is tried again at
# the thread's next record, a record is counted once it can no longer go
# out, and the trace's last NOTE says how many: RANGE records + lost = the
# pushes and pops made.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
N=200000
plain $TMP/plain timeout 120 $FP rangeflood $N
for run in 1 2; do
    mkdir $TMP/d$run
    shimmed $TMP/out$run $TMP/d$run timeout 120 $FP rangeflood $N
    unchanged $TMP/plain $TMP/out$run "run $run, $N tag pairs: output unchanged (exit $(cat $TMP/out$run.rc))"
    ops=$(sed -n 's/^rangeflood ops \([0-9]*\)$/\1/p' $TMP/out$run.err)
    f=$(ls $TMP/d$run/*.vtrace)
    "$VT" dump $f >$TMP/dump$run
    records=$(grep -c '^range ' $TMP/dump$run)
    lost=$(sed -n 's/^note .* text="ranges: \([0-9]*\) range records lost, their buffer full"$/\1/p' $TMP/dump$run)
    echo "# run $run: $ops pushes and pops: $records RANGE records, ${lost:-no count of} lost"
    check "run $run: the buffer overflowed (${lost:-0} records lost)" [ "${lost:-0}" -gt 0 ]
    is "$((records + ${lost:-0}))" "$ops" "run $run: RANGE records + the lost count the trace gives = all $ops pushes and pops"
done
done_testing
