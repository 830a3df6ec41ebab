#!/bin/sh
# The disk fills up mid-run: RLIMIT_FSIZE, a 64 KiB tmpfs, and a write(2)
# that fails with ENOSPC in the middle of a chunk (tests/fault/vtfault.c).
# The program runs unchanged (no SIGXFSZ, same output), a chunk that did
# not fit is cut off so the trace ends at a chunk boundary, and every event
# is either in the trace or in the "N events not in TRACE" count on stderr:
# in + not in = all recorded. Where a last small chunk fits (room kept below
# RLIMIT_FSIZE, space back on the disk) its END holds that count, and the
# report prints it; where none fits the report says the loss is unknown,
# never "0 dropped" (it did, 116,002 events lost on one run).
# VRAMTRACE_SAMPLE_MS=0 makes "all recorded" exactly the program's own
# allocs + frees (the pairs never make a new peak, so no samples).
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'umount "$TMP/tiny" "$TMP/shared" 2>/dev/null; rm -rf "$TMP"' EXIT
N=20000
# A pause every 1000 pairs and a 1 ms flush: the run spans many chunks.
export VRAMTRACE_FLUSH_MS=1 VRAMTRACE_SAMPLE_MS=0 VRAMTRACE_RING=1048576 FAULTPROG_PACE_US=3000
plain $TMP/plain $FP pairs $N
want=$((2 * N))
# The limits below are fractions of this run's whole trace, so they stay
# inside the trace as the encoding gets denser. At most half: the same run's
# size varies by a third between runs (chunk boundaries, time deltas).
mkdir $TMP/ref
shimmed $TMP/out $TMP/ref $FP pairs $N
S=$(cat $TMP/ref/*.vtrace | wc -c)
echo "# the whole trace of $N pairs: $S bytes"

# accounted DESC DIR: checks what the shim left in DIR after a full disk,
# and sets $lost (said on stderr) and $report (the text report's file).
accounted() {
    f=$(ls $2/*.vtrace 2>/dev/null | head -1)
    if [ -z "$f" ]; then nok "$1: a trace file exists"; return; fi
    "$VT" dump "$f" >$TMP/dump 2>$TMP/dump.err
    is "$?" 0 "$1: the trace ends at a chunk boundary (the chunk that did not fit was cut off)"
    in=$(all_events "$f")
    lost=$(not_in $TMP/out.err)
    check "$1: the disk really filled (events lost: $lost, in the trace: $in)" [ "$in" -lt $want ]
    is "$((in + lost))" $want "$1: events in the trace + events said lost = all $want"
    report=$TMP/report; "$VT" report --wide "$f" >$report 2>&1
    "$VT" report --json "$f" 2>/dev/null | python3 -c 'import json,sys; e=json.load(sys.stdin)["processes"][0]["events"]
print(e["dropped"], e["dropped_exact"], e["dropped_by_reason"])' >$TMP/json_events
}
# recorded DESC: the last chunk fitted: END and the report hold the loss.
recorded() {
    is "$(sed -n 's/^end .* dropped=\([0-9]*\) .*not_written:\([0-9]*\).*/\1 \2/p' $TMP/dump)" "$lost $lost" \
        "$1: END says the $lost events lost, all not written"
    is "$(grep -c "^Events: .*, $lost dropped\$" $report)" 1 "$1: the report says $lost dropped"
    is "$(grep -c "^NOTE: the shim lost $lost events ($lost not written: disk full or write error)" $report)" 1 \
        "$1: the report's note says why"
    is "$(grep -c 'could not record' $TMP/out.err)" 0 "$1: stderr does not say the trace lacks the loss"
    is "$(cat $TMP/json_events)" "$lost True {'buffer_full': 0, 'signal_handler_in_shim': 0, 'call_not_returned': 0, 'not_written': $lost, 'unnamed': 0}" \
        "$1: JSON: dropped exact, by reason"
}
# unrecorded DESC: no room even for the last chunk: the loss is unknown.
unrecorded() {
    is "$(grep -c '^Events: .*, dropped: unknown after the last chunk: no END record$' $report)" 1 \
        "$1: the report says the loss after the last chunk is unknown"
    is "$(grep -c '^vramtrace: .* events not in .*; the trace could not record this$' $TMP/out.err)" 1 \
        "$1: stderr says the trace could not record the loss"
    is "$(cat $TMP/json_events)" "0 False None" "$1: JSON: dropped is not exact, no reasons"
}

# RLIMIT_FSIZE: the shim checks the limit before writing, so the host never
# gets SIGXFSZ and the file ends exactly at a chunk boundary.
small=$((S / 1024 / 5)); [ $small -ge 2 ] || small=2
for kib in $small $((S / 2 / 1024)); do
    D=$TMP/fsize$kib; mkdir $D
    (ulimit -f $kib; shimmed $TMP/out $D $FP pairs $N)
    unchanged $TMP/plain $TMP/out "RLIMIT_FSIZE ${kib} KiB: program unchanged (no SIGXFSZ)"
    check "RLIMIT_FSIZE ${kib} KiB: the shim said it cannot write" grep -q '^vramtrace: cannot write' $TMP/out.err
    accounted "RLIMIT_FSIZE ${kib} KiB" $D
    recorded "RLIMIT_FSIZE ${kib} KiB"
done

# ENOSPC in the middle of a chunk, injected: deterministic, no root needed.
for at in 100 $((S / 4)) $((S / 2)); do
    D=$TMP/enospc$at; mkdir $D
    PRELOAD="$FAULT_PRELOAD" VTFAULT_ENOSPC_AFTER=$at shimmed $TMP/out $D $FP pairs $N
    unchanged $TMP/plain $TMP/out "ENOSPC after $at bytes: program unchanged"
    check "ENOSPC after $at bytes: the fault was injected" grep -q 'vtfault: .*enospc=[1-9]' $TMP/out.err
    if [ $at = 100 ]; then
        # The header itself did not fit: no half-made trace is left behind.
        is "$(ls -A $D | wc -l)" 0 "ENOSPC in the header: the partial file is removed"
        is "$(grep -c '^vramtrace:' $TMP/out.err)" 1 "ENOSPC in the header: said once, tracing off"
    else
        # vtfault keeps failing once its bytes are spent: no last chunk.
        accounted "ENOSPC after $at bytes" $D
        unrecorded "ENOSPC after $at bytes"
    fi
done

# A real full file system: a 64 KiB tmpfs.
mkdir $TMP/tiny
if mount -t tmpfs -o size=64k tmpfs $TMP/tiny 2>/dev/null; then
    # enough pairs for four times the file system at the reference's
    # density (which varies by a third between runs)
    M=$((262144 * N / S + N))
    plain $TMP/plain5 $FP pairs $M
    want=$((2 * M))
    shimmed $TMP/out $TMP/tiny $FP pairs $M
    unchanged $TMP/plain5 $TMP/out "64 KiB tmpfs: program unchanged"
    check "64 KiB tmpfs: the shim said the disk is full" grep -q 'No space left on device' $TMP/out.err
    accounted "64 KiB tmpfs" $TMP/tiny
    # The last chunk fits when cutting the partial chunk freed a page, or
    # the file's last page has room: either way the report is right.
    if grep -q '^end ' $TMP/dump; then recorded "64 KiB tmpfs"
    else unrecorded "64 KiB tmpfs"; skip "64 KiB tmpfs: no END, nothing more to check"; skip "-"; fi
    umount $TMP/tiny
else
    skip "cannot mount a tmpfs here (not root, or no mount permission)"
fi

# The same file system filled by someone else mid-run (a log, a core dump):
# the trace already holds chunks, the next write fails with ENOSPC part way,
# and space comes back before the process exits.
mkdir $TMP/shared
if mount -t tmpfs -o size=1m tmpfs $TMP/shared 2>/dev/null; then
    # 60 pauses of 10 ms: the run lasts well past the 0.2 s the disk is full
    M=60000
    want=$((2 * M))
    plain $TMP/plain6 $FP pairs $M
    FAULTPROG_PACE_US=10000 shimmed $TMP/out $TMP/shared $FP pairs $M &
    pid=$!
    # Filled once the trace holds chunks, not at a fixed time: on a loaded
    # machine the process may not have made its first CUDA call in 0.1 s.
    i=0
    while [ $i -lt 200 ] && ! [ -s "$(ls $TMP/shared/*.vtrace 2>/dev/null | head -1)" ]; do
        sleep 0.05
        i=$((i + 1))
    done
    dd if=/dev/zero of=$TMP/shared/filler bs=4k 2>/dev/null
    sleep 0.2
    rm -f $TMP/shared/filler
    wait $pid
    unchanged $TMP/plain6 $TMP/out "tmpfs filled by another file mid-run: program unchanged"
    accounted "tmpfs filled by another file mid-run" $TMP/shared
    recorded "tmpfs filled by another file mid-run"
    umount $TMP/shared
else
    for i in $(seq 10); do skip "cannot mount a tmpfs here (not root, or no mount permission)"; done
fi
done_testing
