#!/bin/sh
# The cost of "fragmentation at peak" (analyzer/model_frag.c): a run whose
# peak creeps up one block at a time, with scratch freed between steps,
# makes a new snapshot point at nearly every event. Measured each time that
# was O(n^2) (25,000 steps: 40 s); marked and measured once it is linear.
# The figures must stay exactly those at the point, also when a long churn
# after the peak makes the log be measured early.
. tests/t/lib.sh
for f in "$VT" "$B/vtgen"; do
    [ -x "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed to read the JSON report"; exit 0; }
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
MiB=1048576

ext() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); x=d["processes"][0]["devices"][0]["fragmentation"]["external"]; print(x and (x["live_allocations"], x["span_bytes"], x["hole_bytes"], x["largest_hole_bytes"]))' "$1"; }
header() {
    echo "process pid=1 exe=/usr/bin/x"
    echo "device 0 total=80GiB free=79GiB name=Sim uuid=00112233445566778899aabbccddeeff t=0"
    echo "module 1 base=0x400000 size=64KiB path=/usr/bin/x build_id=0102"
    echo "frame 0x401000 module=1 offset=0 function=grow"
    echo "stack 1 parent=0 ip=0x401000"
    echo "frame 0x402000 module=1 offset=0 function=scratch"
    echo "stack 2 parent=0 ip=0x402000"
}

# ---- 1. creeping peak: N steps of +4 KiB kept, 8 KiB scratch freed ---------
# Blocks 8 KiB apart (4 KiB holes); the scratch lives 128 GiB away, another
# VA region. The last point: N blocks + the scratch.
N=50000
{
    header
    python3 -c 'import sys
n, t = int(sys.argv[1]), 1000
for i in range(n):
    print("event t=%d api=cudaMalloc dev=0 ptr=0x%x size=4096 stack=1" % (t, 0x7000000000 + i * 8192))
    print("event t=%d api=cudaMalloc dev=0 ptr=0x9000000000 size=8192 stack=2" % (t + 1))
    print("event t=%d api=cudaFree dev=0 ptr=0x9000000000" % (t + 2))
    t += 3' $N
} >$D/creep.vt
"$B/vtgen" -o $D/creep.vtrace $D/creep.vt || nok "vtgen creep"
start=$(date +%s)
timeout 60 "$VT" report --json $D/creep.vtrace >$D/creep.json 2>$D/creep.err
is "$?" 0 "creep: $N steps reported (within 60 s; was minutes)"
secs=$(($(date +%s) - start))
check "creep: in under 10 s (took $secs s)" [ $secs -lt 10 ]
is "$(ext $D/creep.json)" "($((N + 1)), $((N * 8192 - 4096 + 8192)), $(((N - 1) * 4096)), 4096)" \
    "creep: external fragmentation at the last peak, exact"
start=$(date +%s)
timeout 60 "$VT" report --html $D/creep.html $D/creep.vtrace 2>$D/creep.herr
is "$?" 0 "creep: --html too"
check "creep: --html in under 10 s" [ $(($(date +%s) - start)) -lt 10 ]
check "creep: --html names the ranges at peak" grep -q "<p>$((N + 1)) live ranges;" $D/creep.html

# ---- 2. a peak, then a long churn below it ---------------------------------
# 1000 blocks of 1 MiB, 2 MiB apart; the first decrease (block 0 freed) is
# the point. Then 49 more blocks freed and 25,000 small allocations and
# frees inside the holes, never back up to the peak: far more changes than
# the log keeps, so it is measured early, and must still describe the
# point, not the end.
{
    header
    python3 -c 'import sys
t = 1000
for i in range(1000):
    print("event t=%d api=cudaMalloc dev=0 ptr=0x%x size=1MiB stack=1" % (t + i, 0x7000000000 + i * 2097152))
for i in range(50):
    print("event t=%d api=cudaFree dev=0 ptr=0x%x" % (3000 + i, 0x7000000000 + i * 2097152))
t = 4000
for k in range(15000):
    p = 0x7000000000 + (k % 999) * 2097152 + 1048576 + (k // 999) * 4096
    print("event t=%d api=cudaMalloc dev=0 ptr=0x%x size=4096 stack=2" % (t, p))
    if k % 3:
        print("event t=%d api=cudaFree dev=0 ptr=0x%x" % (t + 1, p))
    t += 2'
} >$D/churn.vt
"$B/vtgen" -o $D/churn.vtrace $D/churn.vt || nok "vtgen churn"
timeout 60 "$VT" report --json $D/churn.vtrace >$D/churn.json 2>$D/churn.err
is "$?" 0 "churn: reported"
is "$(ext $D/churn.json)" "(1000, $((1999 * MiB)), $((999 * MiB)), $MiB)" \
    "churn: fragmentation is the peak's, not the end's"
"$VT" report --html $D/churn.html $D/churn.vtrace 2>$D/churn.herr
check "churn: --html layout is the peak's" grep -q "<p>1000 live ranges; 999.0 MiB in holes" $D/churn.html

# The same peak without the churn: identical figures.
head -n $((7 + 1000 + 1)) $D/churn.vt >$D/still.vt
"$B/vtgen" -o $D/still.vtrace $D/still.vt || nok "vtgen still"
"$VT" report --json $D/still.vtrace >$D/still.json 2>&1
is "$(ext $D/still.json)" "$(ext $D/churn.json)" "churn: same as the run that stopped at the point"

done_testing
