#!/bin/sh
# --json's stacks (schema vramtrace-report/3): a prefix table per process,
# each entry a frame and the entry of its caller, so a site's stack is one
# index and the JSON grows with the trace's stack nodes, not with sites x
# depth. Two checks: the table gives back, frame for frame, what the text
# report prints under each site (a stack deeper than the 256 frames a walk
# keeps included); and a trace of 20,000 sites with 200-frame stacks gives
# JSON under a fixed multiple of the trace, no larger than with 20-frame
# stacks.
. tests/t/lib.sh
for f in "$VT" "$B/vtgen" "$B/bench/gentrace"; do
    [ -e "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed"; exit 0; }
TMP=$(tmpdir)
trap '[ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT

# ---- 1. the table reconstructs the text's frames ---------------------------
# One chain of 300 nodes (node k calls... node k-1 is its caller, frame fK),
# a branch off node 40, and sites at node 300 (deeper than 256: the walk
# keeps its innermost 256), node 100 (inside the first one's chain), the
# branch's leaf and node 3. Sizes rank them in that order.
{
    echo 'process pid=7 ppid=1 exe=/usr/bin/deep argv=deep host=box start=1000000000'
    echo 'device 0 total=80GiB free=79GiB name="NVIDIA Sim" uuid=0123456789abcdef0123456789abcdef t=0'
    echo 'module 0 base=0x400000 size=0x100000 path=/usr/bin/deep'
    k=1
    while [ $k -le 300 ]; do
        printf 'frame 0x%x module=0 offset=0x%x function=f%d\n' $((0x400000 + 16 * k)) $((16 * k)) $k
        printf 'stack %d parent=%d ip=0x%x\n' $k $((k - 1)) $((0x400000 + 16 * k))
        k=$((k + 1))
    done
    echo 'frame 0x4ff000 module=0 offset=0xff000 function=branch'
    echo 'stack 301 parent=40 ip=0x4ff000'
    echo 'event t=1000 api=cudaMalloc dev=0 ptr=0x7000000000 size=4GiB stack=300'
    echo 'event t=2000 api=cudaMalloc dev=0 ptr=0x7100000000 size=3GiB stack=100'
    echo 'event t=3000 api=cudaMalloc dev=0 ptr=0x7200000000 size=2GiB stack=301'
    echo 'event t=4000 api=cudaMalloc dev=0 ptr=0x7300000000 size=1GiB stack=3'
    echo 'end t=9000 events=4 dropped=0'
} >"$TMP/deep.vt"
"$B/vtgen" -o "$TMP/deep.vtrace" "$TMP/deep.vt" || nok "vtgen deep"
"$VT" report --color never --top 4 "$TMP/deep.vtrace" >"$TMP/deep.txt" 2>&1
is "$?" 0 "deep: report exits 0"
"$VT" report --json "$TMP/deep.vtrace" >"$TMP/deep.json" 2>&1
is "$?" 0 "deep: report --json exits 0"
# The text's frame lines ("#N  fK  [deep]"), one line of functions a site.
awk '/^ +[0-9]+\. / { if (s != "") print s; s = "" } /^ +#[0-9]+ / { s = s " " $2 } END { if (s != "") print s }' \
    "$TMP/deep.txt" >"$TMP/text.stacks"
python3 - "$TMP/deep.json" >"$TMP/json.stacks" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["processes"][0]
st = p["stacks"]
assert all(q is None or q < i for i, q in enumerate(st["prefix"])), "a prefix after its entry"
for s in p["sites"]:
    i, names = s["stack"], []
    while i is not None:
        names.append(p["frames"][st["frame"][i]]["function"])
        i = st["prefix"][i]
    print("", " ".join(names))
PY
is "$(wc -l <"$TMP/text.stacks")" 4 "deep: the text prints four sites"
is "$(cat "$TMP/json.stacks")" "$(cat "$TMP/text.stacks")" "deep: every site's frames from the prefix table are the text's"
is "$(awk '{ print NF, $1, $NF }' "$TMP/json.stacks" | tr '\n' ' ')" "256 f300 f45 100 f100 f1 41 branch f1 3 f3 f1 " \
    "deep: 256 frames of the 300-deep stack (f300..f45), 100, the branch's 41, 3"
is "$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["processes"][0]; print(len(p["stacks"]["frame"]), len(p["frames"]))' "$TMP/deep.json")" \
    "357 301" "deep: 357 entries (256 of the cut stack, 100 of the chain below node 100, the branch), 301 frames"

# ---- 2. JSON proportional to the trace -------------------------------------
# 20,000 stacks of 200 frames (a shared trunk, branching innermost), 20,000
# live allocations: each site's stack used to be 200 indices, 44x the trace;
# now one index, and the table holds the trace's 22k nodes once.
for d in 20 200; do
    "$B/bench/gentrace" -o "$TMP/d$d.vtrace" -e 40000 -l 20000 -s 20000 -d $d >/dev/null || nok "gentrace -d $d"
    "$VT" report --json "$TMP/d$d.vtrace" >"$TMP/d$d.json" 2>"$TMP/d$d.err"
    is "$?" 0 "many sites, depth $d: report --json exits 0"
done
tb=$(stat -c %s "$TMP/d200.vtrace") jb=$(stat -c %s "$TMP/d200.json") j20=$(stat -c %s "$TMP/d20.json")
check "depth 200: $jb bytes of JSON from a $tb-byte trace, under 25x" test "$jb" -lt $((25 * tb))
check "depth 200: the JSON ($jb) within 5% of depth 20's ($j20)" test $((100 * jb)) -le $((105 * j20))
is "$(python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["processes"][0]; st = p["stacks"]
def depth(i):
    n = 0
    while i is not None: n, i = n + 1, st["prefix"][i]
    return n
print(len(p["sites"]) > 15000, set(depth(s["stack"]) for s in p["sites"]), len(st["frame"]) < 23000)' "$TMP/d200.json")" \
    "True {200} True" "depth 200: over 15,000 sites, each stack 200 frames, under 23,000 entries"
done_testing
