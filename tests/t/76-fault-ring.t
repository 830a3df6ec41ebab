#!/bin/sh
# Events behind a free that has not returned. A release claims its ring slot
# before the real call (a free is ordered before the allocation that reuses
# its address), and the writer drains in order: a free still blocked in the
# driver at exit, or its thread cancelled inside it, hid every event made
# after it, uncounted ("1 allocs, 0 frees, 0 dropped"). At stop the slot is
# counted as dropped and the events behind it are written.
#
# While the process runs, the writer passed nothing: for as long as the free
# blocked, a live reader saw no event made behind it, and the ring filled.
# Now a slot held across a call is passed over after 250 ms; the free, when
# it returns, goes in after the events made during its call, and one that
# never returns is counted as dropped at stop.
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
export VTSIM_SLOW_FREE_MS=1500

for how in blocked cancel; do
    if [ $how = cancel ] && [ -n "$SANITIZED" ]; then
        # ASan reports the cancelled thread's unwound stack (in the program
        # alone, without the shim): a sanitizer false positive.
        for i in 1 2 3 4 5; do skip "free cancelled at exit: $SANITIZED cannot follow pthread_cancel"; done
        continue
    fi
    D=$TMP/$how; mkdir $D
    arg=$([ $how = cancel ] && echo cancel)
    plain $TMP/$how.plain $FP slowfree 3000 $arg
    shimmed $TMP/$how.out $D $FP slowfree 3000 $arg
    unchanged $TMP/$how.plain $TMP/$how.out "free $how at exit: output unchanged"
    "$VT" dump $D/*.vtrace >$TMP/$how.dump
    is "$(count_events $TMP/$how.dump cudaMalloc 4096 0)" 3000 "free $how at exit: every allocation made after it is traced"
    is "$(count_events $TMP/$how.dump cudaFree)" 3001 "free $how at exit: every cudaFree traced (3000 and the context's)"
    is "$(sed -n 's/^end .* dropped=\([0-9]*\).*/\1/p' $TMP/$how.dump)" 1 "free $how at exit: the unreturned free counted as dropped"
    is "$(not_in $TMP/$how.out.err)" 1 "free $how at exit: stderr says 1 event not in the trace"
done

# A process that goes on: 3000 pairs behind a free blocked (or cancelled) in
# the driver for 1.5 s, read while the free is still blocked, then 3000 more.
N=3000
for how in blocked cancelled; do
    if [ $how = cancelled ] && [ -n "$SANITIZED" ]; then
        for i in 1 2 3 4 5 6 7 8 9; do skip "free cancelled, process goes on: $SANITIZED cannot follow pthread_cancel"; done
        continue
    fi
    D=$TMP/live-$how; mkdir $D
    arg=$([ $how = cancelled ] && echo cancel)
    plain $TMP/live-$how.plain $FP slowlive $N $arg
    (shimmed $TMP/live-$how.out $D $FP slowlive $N $arg) &
    pid=$!
    # Poll the trace until the pairs show or the free is over; the reading
    # counts only if the free had not returned when it was done.
    seen=0 during=no
    for i in $(seq 1 150); do
        sleep 0.01
        grep -q 'free over' $TMP/live-$how.out 2>/dev/null && break
        ls $D/*.vtrace >/dev/null 2>&1 || continue
        "$VT" dump $D/*.vtrace >$TMP/live-$how.live 2>/dev/null
        seen=$(count_events $TMP/live-$how.live cudaMalloc 4096 0)
        if [ "$seen" = $N ]; then
            grep -q 'free over' $TMP/live-$how.out || during=yes
            break
        fi
    done
    wait $pid
    is "$seen $during" "$N yes" "free $how, process goes on: a live reader sees the $N allocations made behind it while it blocks"
    is "$(count_events $TMP/live-$how.live cudaFree)" $((N + 1)) "free $how, process goes on: and the $((N + 1)) cudaFrees"
    is "$(count_events $TMP/live-$how.live cuMemFree_v2)" 0 "free $how, process goes on: the blocked free is not in the trace yet"
    unchanged $TMP/live-$how.plain $TMP/live-$how.out "free $how, process goes on: output unchanged"
    "$VT" dump $D/*.vtrace >$TMP/live-$how.dump
    is "$(count_events $TMP/live-$how.dump cudaMalloc 4096 0)" $((2 * N)) "free $how, process goes on: every allocation traced"
    is "$(count_events $TMP/live-$how.dump cudaFree)" $((2 * N + 1)) "free $how, process goes on: every cudaFree traced"
    if [ $how = blocked ]; then
        # The free returned after the first 3000 pairs: it follows them.
        is "$(awk '$1 == "event" && / api=cudaMalloc / { n++ } $1 == "event" && / api=cuMemFree_v2 / { print n + 0; exit }' $TMP/live-$how.dump)" $N \
            "free blocked, process goes on: the free is in the trace, after the $N pairs made during it"
        want_dropped=0
    else
        is "$(count_events $TMP/live-$how.dump cuMemFree_v2)" 0 "free cancelled, process goes on: the cancelled free is not in the trace"
        want_dropped=1
    fi
    is "$(sed -n 's/^end .* dropped=\([0-9]*\).*/\1/p' $TMP/live-$how.dump)" $want_dropped "free $how, process goes on: $want_dropped dropped at the end"
    is "$(not_in $TMP/live-$how.out.err)" $want_dropped "free $how, process goes on: stderr says $want_dropped events not in the trace"
done
done_testing
