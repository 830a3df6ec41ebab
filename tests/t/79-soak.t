#!/bin/sh
# Soak: SOAK_EVENTS events (1 million in `make test`, 10 million in
# `make soak`) from 16 threads through 10,000 distinct call stacks.
#  - No event is lost except as counted: events in the trace + the dropped
#    count = the program's own count (VRAMTRACE_SAMPLE_MS=0: no shim
#    samples to tell apart). With nothing dropped (the ring is big enough
#    for 1 million events here), the report's totals equal the program's
#    counts exactly. At 10 million the writer falls behind and drops.
#  - Every distinct stack is interned once: 10,000 distinct leaves.
#  - The shim's memory is bounded by its ring and the unique stacks, not by
#    the events: RSS with the shim minus RSS without (both read by the
#    program itself at the end) <= ring bytes + 512 B per stack node +
#    16 MiB (zstd and chunk buffers, symbol tables, libunwind).
. tests/t/lib.sh
. tests/fault/lib.sh
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
EV=${SOAK_EVENTS:-1000000}
RING=1048576
SLOT=72                 # sizeof(vt_ring_slot_t): seq + a 64-byte event
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed to read the JSON report"; exit 0; }

# The accounting first, with a ring far too small: most events are dropped.
D=$TMP/small; mkdir $D
VRAMTRACE_RING=1024 VRAMTRACE_SAMPLE_MS=0 shimmed $TMP/out $D $FP pairs 20000 8
in=$(all_events $D/*.vtrace)
is "$((in + $(not_in $TMP/out.err)))" 320000 "1024-slot ring, 8 threads: events in the trace + said dropped = the program's 320000"

# At the default ring (64k events) a burst six times its size from one
# thread: the writer drains as fast as the burst comes, so (nearly) nothing
# is dropped. Before it paced its looks by the rate it saw, it slept through
# the burst and dropped 334464 of the 400000 events. The bound leaves room
# for a loaded machine that deschedules the writer for a while.
D=$TMP/burst; mkdir $D
VRAMTRACE_SAMPLE_MS=0 shimmed $TMP/out $D $FP pairs 200000
in=$(all_events $D/*.vtrace); dropped=$(not_in $TMP/out.err)
is "$((in + dropped))" 400000 "default ring, 400000-event burst: events in the trace + said dropped = the program's"
if [ "$dropped" -le 40000 ]; then ok "default ring, 400000-event burst: at most 10% dropped ($dropped)"
else nok "default ring, 400000-event burst: at most 10% dropped ($dropped)"; fi

# Threads that come and go (a thread per request): 8 at a time, 4 pairs
# each. Each thread's unwind memo (3.5 KB, preload/stacks.c) is taken at
# its first stack and given back at its exit, so 200 rounds (1,600
# threads) hold no more than 20 rounds (160) do; kept, they would hold
# ~5 MB more. Every event is in the trace either way.
D=$TMP/churn20; mkdir $D
VRAMTRACE_SAMPLE_MS=0 shimmed $TMP/c20 $D $FP churn 20 8
D=$TMP/churn200; mkdir $D
VRAMTRACE_SAMPLE_MS=0 shimmed $TMP/c200 $D $FP churn 200 8
is "$(cat $TMP/c200)" "churn threads=1600 allocs=6400 frees=6400 fails=0" "thread churn: 1,600 threads, every pair succeeded"
is "$(all_events $D/*.vtrace)" 12800 "thread churn: all 12,800 events in the trace"
hwm20=$(sed -n 's/^rss [0-9]* hwm \([0-9]*\)/\1/p' $TMP/c20.err)
hwm200=$(sed -n 's/^rss [0-9]* hwm \([0-9]*\)/\1/p' $TMP/c200.err)
echo "# peak RSS: 160 threads ${hwm20} KiB, 1,600 threads ${hwm200} KiB"
if [ -n "$SANITIZED" ]; then
    # ASan keeps state for every thread that ever ran (+9 MB here): the
    # peak measures the sanitizer, not the shim.
    skip "thread churn: peak RSS under $SANITIZED measures the sanitizer"
else
    # The ring's pages are touched as events fill it (zero pages until
    # then): the 11,520 more events of the longer run may add their slots.
    ring_kib=$(( (12800 - 1280) * SLOT / 1024 ))
    check "thread churn: 1,600 threads peak within 1 MiB (+ ${ring_kib} KiB of ring slots) of 160 threads' (${hwm20} -> ${hwm200} KiB)" \
        [ $((hwm200 - hwm20)) -le $((1024 + ring_kib)) ]
fi

plain $TMP/plain $FP soak $EV 16
D=$TMP/soak; mkdir $D
start=$(date +%s)
VRAMTRACE_RING=$RING VRAMTRACE_SAMPLE_MS=0 shimmed $TMP/out $D $FP soak $EV 16
secs=$(( $(date +%s) - start ))
unchanged $TMP/plain $TMP/out "soak $EV events, 16 threads: program unchanged (${secs}s under the shim)"
allocs=$(sed -n 's/.*allocs=\([0-9]*\).*/\1/p' $TMP/out)
frees=$(sed -n 's/.*frees=\([0-9]*\).*/\1/p' $TMP/out)
is $((allocs + frees)) $EV "soak: the program made $EV events"

"$VT" report --json $D >$TMP/r.json 2>$TMP/r.err
is "$?" 0 "soak: report reads the trace"
ev() { python3 -c "import json,sys; print(json.load(open('$TMP/r.json'))['processes'][0]['events']['$1'])"; }
dropped=$(ev dropped)
if [ "$dropped" = 0 ]; then
    is "$(ev allocs)" "$allocs" "soak: report events.allocs = the program's count"
    is "$(ev frees)" "$frees" "soak: report events.frees = the program's count"
    is "$(ev total)" $EV "soak: every event in the trace, nothing dropped"
else
    echo "# the writer fell behind: $dropped events dropped (counted)"
    is "$(( $(ev total) + dropped ))" $EV "soak: events in the trace + dropped = the program's $EV"
fi
is "$(ev stacks_lost)" 0 "soak: no stack lost"

"$VT" dump $D/*.vtrace >$TMP/dump
nodes=$(grep -c '^stack ' $TMP/dump)
leaves=$(awk '$1 == "event" && / api=cudaMalloc / { for (i = 2; i <= NF; i++) if ($i ~ /^stack=/) s[$i] = 1 } END { print length(s) }' $TMP/dump)
is "$leaves" 10000 "soak: 10,000 distinct allocation stacks ($nodes stack nodes)"

rss_plain=$(sed -n 's/^rss \([0-9]*\) .*/\1/p' $TMP/plain.err)
rss_shim=$(sed -n 's/^rss \([0-9]*\) .*/\1/p' $TMP/out.err)
growth=$((rss_shim - rss_plain))
bound=$(( (RING * SLOT + nodes * 512 + 16 * 1048576) / 1024 ))
echo "# RSS without the shim ${rss_plain} KiB, with ${rss_shim} KiB: +${growth} KiB, of which ring $((RING * SLOT / 1024)) KiB; bound ${bound} KiB"
if [ "$SANITIZED" = libtsan ]; then
    # TSan's shadow and per-thread state grow with every page and thread
    # the program touches (+1.1 GB here).
    skip "soak: shim memory under TSan measures the sanitizer"
else
    check "soak: shim memory ${growth} KiB <= ring + 512 B x $nodes nodes + 16 MiB = ${bound} KiB" [ $growth -le $bound ]
fi
done_testing
