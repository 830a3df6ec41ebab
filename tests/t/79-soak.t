#!/bin/sh
# Soak: SOAK_EVENTS events (1 million in `make test`, 10 million in
# `make soak`) from 16 threads through 10,000 distinct call stacks.
#  - The report's totals equal the program's own counts exactly, nothing
#    dropped (the ring is made big enough; a drop would be counted).
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

plain $TMP/plain $FP soak $EV 16
D=$TMP/soak; mkdir $D
start=$(date +%s)
VRAMTRACE_RING=$RING shimmed $TMP/out $D $FP soak $EV 16
secs=$(( $(date +%s) - start ))
unchanged $TMP/plain $TMP/out "soak $EV events, 16 threads: program unchanged (${secs}s under the shim)"
allocs=$(sed -n 's/.*allocs=\([0-9]*\).*/\1/p' $TMP/out)
frees=$(sed -n 's/.*frees=\([0-9]*\).*/\1/p' $TMP/out)
is $((allocs + frees)) $EV "soak: the program made $EV events"

"$VT" report --json $D >$TMP/r.json 2>$TMP/r.err
is "$?" 0 "soak: report reads the trace"
ev() { python3 -c "import json,sys; print(json.load(open('$TMP/r.json'))['processes'][0]['events']['$1'])"; }
is "$(ev allocs)" "$allocs" "soak: report events.allocs = the program's count"
is "$(ev frees)" "$frees" "soak: report events.frees = the program's count"
is "$(ev dropped)" 0 "soak: nothing dropped"
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
check "soak: shim memory ${growth} KiB <= ring + 512 B x $nodes nodes + 16 MiB = ${bound} KiB" [ $growth -le $bound ]
done_testing
