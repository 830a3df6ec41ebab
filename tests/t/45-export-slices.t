#!/bin/sh
# `vramtrace export --format perfetto`: a slice ("X") per allocation, from
# its allocation to its free (or the end of the trace), in lanes per GPU,
# pinned host and managed memory; the tipping event on a track of its own;
# --slices caps them. A vtgen trace (times in us):
#   GPU 0: weights 1 GiB [10, 100); KV 256 MiB [50, 200); scratch 64 MiB
#          [120, 300): lane 0 again, free since 100; unknown 8 MiB [130, 140)
#          and 16 MiB [150, end 400): both lane 2 (0 and 1 busy), the second
#          at the address the first freed; a 20 GiB KV request fails at 160:
#          the tipping event (oom).
#   pinned host: weights 32 MiB [20, end); managed: 4 MiB [30, 60).
. tests/t/lib.sh
GEN=$B/vtgen
for f in "$VT" "$GEN"; do
    [ -x "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed"; exit 0; }
D=$(tmpdir)
trap '[ -n "${KEEP:-}" ] || rm -rf "$D"' EXIT
GiB=1073741824
MiB=1048576
P=$((0x7000000000))
{
    echo "process pid=321 ppid=1 exe=/opt/llama.cpp/bin/llama-server argv=llama-server start=1000000000"
    echo "device 0 total=24GiB free=23GiB name=Sim uuid=0123456789abcdef0123456789abcdef t=0"
    cat tests/golden/llama_stacks.vt
    echo "event t=10000 api=cudaMalloc dev=0 ptr=$P size=1GiB stack=8"
    echo "event t=20000 api=cudaMallocHost dev=-1 ptr=$((0x600000000)) size=32MiB stack=10"
    echo "event t=30000 api=cudaMallocManaged dev=0 ptr=$((0x500000000)) size=4MiB stack=31"
    echo "event t=50000 api=cudaMalloc dev=0 ptr=$((P + 2 * GiB)) size=256MiB stack=17"
    echo "event t=60000 api=cudaFree dev=0 ptr=$((0x500000000))"
    echo "event t=100000 api=cudaFree dev=0 ptr=$P"
    echo "event t=120000 api=cudaMalloc dev=0 ptr=$((P + 4 * GiB)) size=64MiB stack=23"
    echo "event t=130000 api=cudaMalloc dev=0 ptr=$((P + 5 * GiB)) size=8MiB stack=29"
    echo "event t=140000 api=cudaFree dev=0 ptr=$((P + 5 * GiB))"
    echo "event t=150000 api=cudaMalloc dev=0 ptr=$((P + 5 * GiB)) size=16MiB stack=29"
    echo "event t=160000 api=cudaMalloc dev=0 size=20GiB result=2 stack=17 tid=9"
    echo "event t=200000 api=cudaFree dev=0 ptr=$((P + 2 * GiB))"
    echo "event t=300000 api=cudaFree dev=0 ptr=$((P + 4 * GiB))"
    echo "end t=400000 events=0 dropped=0"
} >"$D/s.vt"
"$GEN" "$D/s.vt" -o "$D/s.vtrace" || nok "vtgen"

# slices JSON: the structure checks, then one line per slice in file order:
# track lane ts dur name bytes api freed cname stack-depth
slices() {
    python3 - "$1" <<'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
X = [e for e in ev if e["ph"] == "X"]
names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
bad = [e for e in X if not all(k in e for k in ("ts", "dur", "pid", "tid")) or e["dur"] < 0]
by_tid = {}
for e in X:
    by_tid.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
partial = 0
for spans in by_tid.values():
    spans.sort()
    for (s0, e0), (s1, e1) in zip(spans, spans[1:]):
        partial += s1 < e0 and e1 > e0   # starts inside the previous one, ends after it
print("structure", len(bad), partial, all(e["tid"] in names for e in X), all(e["pid"] == 321 for e in X))
for e in X:
    a = e["args"]
    print(names[e["tid"]], e["ts"], e["dur"], e["name"], a["bytes"], a["api"], a["freed"], e["cname"], len(a["stack"]))
T = [e for e in ev if e.get("cat") == "tipping"]
for e in T:
    print("tip", e["ph"], e["s"], names[e["tid"]], e["ts"], e["name"], e["args"]["bytes"], e["cname"], len(e["args"]["stack"]))
S = {e["tid"]: e["args"]["sort_index"] for e in ev if e["ph"] == "M" and e["name"] == "thread_sort_index"}
if T:
    print("tip on top", S[T[0]["tid"]] < min((v for t, v in S.items() if t != T[0]["tid"]), default=0))
for e in ev:
    if e["ph"] == "M" and e["name"] == "process_labels":
        print("label", e["args"]["labels"], e["args"]["slices_left_out"])
PY
}

"$VT" export --format perfetto -o "$D/s.json" "$D/s.vtrace" 2>"$D/s.err"
is "$?" 0 "export perfetto: exits 0"
slices "$D/s.json" >"$D/s.out"
is "$(sed -n 1p "$D/s.out")" "structure 0 0 True True" \
    "every X has ts, pid, tid and dur >= 0; no slice partly overlaps another on its tid; every lane named"
is "$(grep -vc '^structure\|^tip\|^label' "$D/s.out")" 7 "seven slices: one per successful allocation"
is "$(sed -n '2,8p' "$D/s.out")" "GPU 0 allocations, lane 0 10.0 90.0 weights llama_model::load_tensors $GiB cudaMalloc True good 8
pinned host allocations, lane 0 20.0 380.0 weights llama_model::load_tensors $((32 * MiB)) cudaMallocHost False good 8
managed allocations, lane 0 30.0 30.0 unknown myapp_alloc $((4 * MiB)) cudaMallocManaged True grey 3
GPU 0 allocations, lane 1 50.0 150.0 kv llama_kv_cache::llama_kv_cache $((256 * MiB)) cudaMalloc True rail_response 8
GPU 0 allocations, lane 0 120.0 180.0 scratch ggml_gallocr_reserve_n $((64 * MiB)) cudaMalloc True yellow 8
GPU 0 allocations, lane 2 130.0 10.0 unknown myapp_alloc $((8 * MiB)) cudaMalloc True grey 3
GPU 0 allocations, lane 2 150.0 250.0 unknown myapp_alloc $((16 * MiB)) cudaMalloc False grey 3" \
    "slices: lanes reused from the lowest free one, names by tag and telling frame, colours by tag, open ones to the end"
is "$(grep '^tip' "$D/s.out")" "tip i t tipped into spill 160.0 tipped into spill: oom cudaMalloc 20.00 GiB (kv) $((20 * GiB)) terrible 8
tip on top True" "the tipping event: an instant on its own track, sorted above the others"
is "$(grep -c '^label' "$D/s.out")" 0 "nothing left out: no label"
is "$(python3 -c 'import json,sys; ev=json.load(open(sys.argv[1]))["traceEvents"]; print(sorted({e["tid"] - 0x40000000 for e in ev if e["ph"] == "X"}))' "$D/s.json")" \
    "[1048576, 2097152, 3145728, 3145729, 3145730]" "lanes: pinned host 1, managed 1, GPU 0 3 (tids above any Linux tid)"

# -- the cap ------------------------------------------------------------------
"$VT" export --format perfetto --slices 3 -o "$D/cap.json" "$D/s.vtrace" 2>"$D/cap.err"
is "$?" 0 "--slices 3: exits 0"
slices "$D/cap.json" >"$D/cap.out"
is "$(sed -n 1p "$D/cap.out")" "structure 0 0 True True" "--slices 3: still well formed"
is "$(grep -vc '^structure\|^tip\|^label' "$D/cap.out")" 3 "--slices 3: the first three allocations only"
is "$(grep '^label' "$D/cap.out")" "label 4 allocation slices left out (export --slices) 4" "--slices 3: the four others counted in a process label"
"$VT" export --format perfetto --slices 0 -o "$D/none.json" "$D/s.vtrace" 2>/dev/null
is "$(grep -vc '^structure\|^tip\|^label' "$(slices "$D/none.json" >"$D/none.out"; echo "$D/none.out")")" 0 "--slices 0: no slices"
check "--slices wants a count" sh -c "! '$VT' export --format perfetto --slices many '$D/s.vtrace' >/dev/null 2>&1"
check "--slices above 1000000 is refused" sh -c "! '$VT' export --format perfetto --slices 1000001 '$D/s.vtrace' >/dev/null 2>&1"
check "--slices -1 is refused" sh -c "! '$VT' export --format perfetto --slices -1 '$D/s.vtrace' >/dev/null 2>&1"
done_testing
