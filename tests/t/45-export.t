#!/bin/sh
# `vramtrace export` (perfetto, folded), `diff` and `replay` on two
# llama.cpp-shaped runs written by vtgen, with exact numbers:
#   A: 24 GiB card, 512 MiB reserve; weights 10 x 1 GiB, KV 2 GiB, scratch
#      512 MiB (peak 12.5 GiB); then a 12 GiB KV request fails (oom).
#   B: 24 GiB card, 1 GiB reserve; weights 12 x 1 GiB, KV 1 GiB, scratch
#      768 MiB (peak 13.75 GiB); no failure.
. tests/t/lib.sh
GEN=$B/vtgen
for f in "$VT" "$GEN"; do
    [ -x "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed"; exit 0; }
D=$(tmpdir)
trap '[ -n "${KEEP:-}" ] || rm -rf "$D"' EXIT
STACKS=tests/golden/llama_stacks.vt
GiB=1073741824
MiB=1048576

run() { # NAME FREE NWEIGHTS KV SCRATCH FAIL
    {
        echo "process pid=$((100 + $3)) ppid=1 exe=/opt/llama.cpp/bin/llama-server argv=llama-server,-m,m.gguf start=1000000000"
        echo "device 0 total=24GiB free=$2 name=Sim uuid=0123456789abcdef0123456789abcdef t=0"
        cat "$STACKS"
        i=0
        while [ $i -lt "$3" ]; do
            echo "event t=$((1000 + i * 1000)) api=cudaMalloc dev=0 ptr=$((0x7000000000 + i * GiB)) size=1GiB stack=8"
            i=$((i + 1))
        done
        echo "event t=100000 api=cudaMalloc dev=0 ptr=$((0x7000000000 + 64 * GiB)) size=$4 stack=17"
        echo "event t=200000 api=cudaMalloc dev=0 ptr=$((0x7000000000 + 80 * GiB)) size=$5 stack=23"
        echo "event t=250000 api=cuMemGetInfo_v2 dev=0 size=1GiB aux=24GiB flags=sample"
        [ -n "$6" ] && echo "event t=300000 api=cudaMalloc dev=0 size=$6 result=2 stack=17 tid=9"
        echo "event t=400000 api=cudaFree dev=0 ptr=$((0x7000000000 + 80 * GiB))"
        echo "end t=500000 events=0 dropped=0"
    } >"$D/$1.vt"
    "$GEN" "$D/$1.vt" -o "$D/$1.vtrace" || nok "vtgen $1"
}
run a 23.5GiB 10 2GiB 512MiB 12GiB
run b 23GiB 12 1GiB 768MiB ""
PEAK_A=$((10 * GiB + 2 * GiB + 512 * MiB))

# -- folded ------------------------------------------------------------------
"$VT" export --format folded "$D/a.vtrace" >"$D/a.folded" 2>"$D/a.ferr"
is "$?" 0 "folded: exits 0"
is "$(awk '{ s += $NF } END { printf "%.0f", s }' "$D/a.folded")" "$PEAK_A" "folded --by peak: lines sum exactly to the peak"
is "$(wc -l <"$D/a.folded" | tr -d ' ')" 3 "folded: one line per live site (weights, kv, scratch)"
check "folded: outermost frame first, allocator last" grep -q '^main;.*llama_model::load_tensors.*;cudaMalloc [0-9]*$' "$D/a.folded"
is "$(grep load_tensors "$D/a.folded" | awk '{ print $NF }')" $((10 * GiB)) "folded: the weights line weighs 10 GiB"
"$VT" export --format folded --by total -o "$D/a.total" "$D/a.vtrace"
is "$(awk '{ s += $NF } END { printf "%.0f", s }' "$D/a.total")" "$PEAK_A" "folded --by total: all bytes allocated (the failed request allocated none)"

# -- perfetto ------------------------------------------------------------------
"$VT" export --format perfetto -o "$D/a.json" "$D/a.vtrace" 2>"$D/a.perr"
is "$?" 0 "perfetto: exits 0"
python3 - "$D/a.json" >"$D/a.pcheck" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
C = [e for e in ev if e["ph"] == "C"]
# The tipping instant and the allocation lanes (tids from 2^30) are
# checked by 45-export-slices.t.
I = [e for e in ev if e["ph"] == "i" and e["cat"] != "tipping"]
M = [e for e in ev if e["ph"] == "M" and e["name"] in ("process_name", "thread_name") and e["tid"] < 1 << 30]
print(sorted({e["name"] for e in C}))
mem = [e for e in C if e["name"] == "GPU 0 memory"]
print(sorted(mem[0]["args"]), max(e["args"]["weights"] for e in mem), max(sum(e["args"].values()) for e in mem))
print(min(e["args"]["free"] for e in C if e["name"] == "GPU 0 free (driver)"))
print(sorted((e["cat"], e["name"], e["args"]["bytes"], e["args"]["tag"], e["tid"]) for e in I))
print(all(any("llama_kv_cache" in f for f in e["args"]["stack"]) for e in I), [e["ts"] for e in I])
print(sorted((e["name"], e["args"]["name"]) for e in M))
print(all(e["pid"] == 110 for e in ev), max(len([e for e in C if e["name"] == n]) for n in {e["name"] for e in C}) <= 10000)
PY
is "$(sed -n 1p "$D/a.pcheck")" "['GPU 0 free (driver)', 'GPU 0 memory']" "perfetto: counter tracks (empty host/managed left out)"
is "$(sed -n 2p "$D/a.pcheck")" "['kv', 'scratch', 'unknown', 'weights'] $((10 * GiB)) $PEAK_A" "perfetto: one series per tag; weights 10 GiB, peak 12.5 GiB"
is "$(sed -n 3p "$D/a.pcheck")" "$GiB" "perfetto: the driver's free sample"
is "$(sed -n 4p "$D/a.pcheck")" "[('failure', 'failed cudaMalloc 12.00 GiB (kv)', 12884901888, 'kv', 9), ('spill', 'spill: oom', 12884901888, 'kv', 9)]" \
    "perfetto: one failure and one spill instant"
is "$(sed -n 5p "$D/a.pcheck")" "True [300.0, 300.0]" "perfetto: instants carry the stack, at 300 us"
is "$(sed -n 6p "$D/a.pcheck")" "[('process_name', 'llama-server (pid 110)'), ('thread_name', 'memory counters'), ('thread_name', 'thread 9')]" "perfetto: process and thread metadata"
is "$(sed -n 7p "$D/a.pcheck")" "True True" "perfetto: one pid; tracks bounded"
check "export: unknown format is bad usage" sh -c "! '$VT' export --format svg '$D/a.vtrace' 2>/dev/null"
check "export --help" sh -c "'$VT' export --help | grep -q 'usage: vramtrace export'"

# -- diff ----------------------------------------------------------------------
"$VT" diff --json "$D/a.vtrace" "$D/b.vtrace" >"$D/diff.json" 2>"$D/diff.err"
is "$?" 0 "diff --json: exits 0"
python3 - "$D/diff.json" >"$D/diff.check" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
R = d["rows"]
def row(k): r = R[k]; return "%s %d %d %d %s" % (k, r["a"], r["b"], r["delta"], r["relative"])
print(d["schema"], d["a"]["spilled"], d["b"]["spilled"])
for k in ("weights", "kv", "scratch", "unknown", "peak", "context_reserve", "untracked", "rounding_waste", "hole_bytes"):
    print(row(k))
PY
is "$(sed -n 1p "$D/diff.check")" "vramtrace-diff/1 True False" "diff: schema; A spilled, B did not"
is "$(sed -n 2p "$D/diff.check")" "weights $((10 * GiB)) $((12 * GiB)) $((2 * GiB)) 0.2" "diff: weights +2 GiB, +20%"
is "$(sed -n 3p "$D/diff.check")" "kv $((2 * GiB)) $GiB -$GiB -0.5" "diff: kv -1 GiB, -50%"
is "$(sed -n 4p "$D/diff.check")" "scratch $((512 * MiB)) $((768 * MiB)) $((256 * MiB)) 0.5" "diff: scratch +256 MiB, +50%"
is "$(sed -n 5p "$D/diff.check")" "unknown 0 0 0 None" "diff: unknown 0 both: relative null"
is "$(sed -n 6p "$D/diff.check")" "peak $PEAK_A $((13 * GiB + 768 * MiB)) $((1 * GiB + 256 * MiB)) 0.1" "diff: peak +1.25 GiB, +10%"
is "$(sed -n 7p "$D/diff.check")" "context_reserve $((512 * MiB)) $GiB $((512 * MiB)) 1.0" "diff: context reserve 512 MiB -> 1 GiB"
# untracked at the sample: A: 24 - 1 (free) - 0.5 (reserve) - 12.5 = 10 GiB; B: 24 - 1 - 1 - 13.75 = 8.25 GiB
is "$(sed -n 8p "$D/diff.check")" "untracked $((10 * GiB)) $((8 * GiB + 256 * MiB)) -$((1 * GiB + 768 * MiB)) -0.175" "diff: untracked"
is "$(sed -n 9p "$D/diff.check")" "rounding_waste 0 0 0 None" "diff: no rounding waste"
# holes: the KV block sits 54 (A) / 52 (B) GiB past the weights, more than
# the card: another VA region, no hole; the scratch block 14 / 15 GiB past it.
is "$(sed -n 10p "$D/diff.check")" "hole_bytes $((14 * GiB)) $((15 * GiB)) $GiB 0.0714" "diff: external fragmentation hole bytes"
"$VT" diff --wide --color never "$D/a.vtrace" "$D/b.vtrace" >"$D/diff.txt"
check "diff text: the weights row" grep -Eq '^weights +10.00 GiB +12.00 GiB +\+2.00 GiB +\+20.0%$' "$D/diff.txt"
# A's verdict in the report's words: its KV request failed and nothing
# followed (OUT OF MEMORY); diff said "SPILLED" for any failure.
check "diff text: A heads with the report's verdict" grep -q '^A: .*a.vtrace (1 process, 1 GPU), OUT OF MEMORY$' "$D/diff.txt"
check "diff: no colour into a pipe" sh -c "! grep -q \"\$(printf '\\033')\" '$D/diff.txt'"
check "diff: one argument is bad usage" sh -c "! '$VT' diff '$D/a.vtrace' 2>/dev/null"

# -- replay --------------------------------------------------------------------
"$VT" replay --wide --capacity 12GiB "$D/b.vtrace" >"$D/r12.txt" 2>&1
is "$?" 1 "replay 12 GiB: exit 1, does not fit"
check "replay: says bytes are counted, not placement" grep -q "Bytes are counted, placement is not" "$D/r12.txt"
check "replay: room = 12 GiB - recorded 1 GiB reserve" grep -q "11.00 GiB for allocations (12.00 GiB minus a 1.00 GiB reserve, as recorded)" "$D/r12.txt"
check "replay: first failing request: the 12th 1 GiB weights block" \
    grep -q "First request that would fail: cudaMalloc of 1.00 GiB for weights at 12.0 us," "$D/r12.txt"
check "replay: held and short" grep -q "with 11.00 GiB already held: 1.00 GiB short" "$D/r12.txt"
check "replay: its stack" grep -q "llama_model::load_tensors" "$D/r12.txt"
check "replay: the worst moment" grep -q "needs at most 13.75 GiB (at 200.0 us): weights 12.00 GiB, kv 1.00 GiB, scratch 768.0 MiB, unknown 0 B" "$D/r12.txt"
check "replay: weights must shrink 2.75 GiB (22.9%)" grep -q "by 2.75 GiB: 22.9% of its 12.00 GiB" "$D/r12.txt"
check "replay: KV alone is not enough" grep -q "kv (a smaller or quantized KV cache) *not enough alone: it is only 1.00 GiB" "$D/r12.txt"
check "replay: nor the context" grep -q "not enough alone: it is only 1.75 GiB" "$D/r12.txt"
check "replay: card needed" grep -q "or use a card of at least 14.75 GiB" "$D/r12.txt"
"$VT" replay --wide --capacity 14GiB --reserve 0 "$D/b.vtrace" >"$D/r14.txt" 2>&1
is "$?" 0 "replay 14 GiB, no reserve: fits"
check "replay: 256 MiB to spare" grep -q "FITS: the run needs at most 13.75 GiB (at 200.0 us); 256.0 MiB to spare." "$D/r14.txt"
"$VT" replay --wide --capacity 32GiB "$D/a.vtrace" >"$D/r32.txt" 2>&1
is "$?" 3 "replay A on 32 GiB: the failed 12 GiB request would fit, but the run backed off: cannot tell (exit 3)"
check "replay: CANNOT TELL, not FITS" sh -c "grep -q '^  CANNOT TELL. 1 request failed when recorded and would succeed here' '$D/r32.txt' && ! grep -q 'FITS' '$D/r32.txt'"
check "replay: --capacity required" sh -c "! '$VT' replay '$D/a.vtrace' 2>/dev/null"
check "replay: bad size" sh -c "! '$VT' replay --capacity 12XB '$D/a.vtrace' 2>/dev/null"

# -- the first screen: verdict, what filled the tipping GPU, true headroom ---
"$VT" report --wide "$D/a.vtrace" >"$D/first.txt"
head -15 "$D/first.txt" >"$D/first15.txt"
check "verdict first" sh -c "sed -n 2p '$D/first15.txt' | grep -q '^VERDICT: OUT OF MEMORY. A device request for kv failed'"
check "first screen: the tipping GPU's peak" grep -q "^  GPU 0 (Sim): peak 12.50 GiB of 24.00 GiB at 200.0 us:$" "$D/first15.txt"
check "first screen: weights / KV / scratch / unknown at peak" \
    grep -q "^    at peak: weights 10.00 GiB, kv 2.00 GiB, scratch 512.0 MiB, unknown 0 B.$" "$D/first15.txt"
check "first screen: true headroom with reserve and untracked" \
    grep -q "^    True headroom: 1.00 GiB free at the lowest (4.2% of the card), at 250.0 us; context reserve 512.0 MiB, untracked 10.00 GiB.$" "$D/first15.txt"
check "the verdict paragraph has no blank line before the headroom" sh -c "sed -n '1,/True headroom/p' '$D/first.txt' | grep -qv '^\$' && ! sed -n '1,/True headroom/p' '$D/first.txt' | grep -q '^\$'"

# -- colour ------------------------------------------------------------------
ESC=$(printf '\033')
"$VT" report --wide "$D/a.vtrace" >"$D/plain.txt"
check "report: no colour into a pipe" sh -c "! grep -q '$ESC' '$D/plain.txt'"
"$VT" report --wide --color always "$D/a.vtrace" >"$D/col.txt"
check "report --color always: the verdict in colour" grep -q "${ESC}\[1;31mVERDICT: OUT OF MEMORY." "$D/col.txt"
if command -v script >/dev/null; then
    script -qec "'$VT' report '$D/a.vtrace'" /dev/null >"$D/tty.txt" 2>&1
    check "report on a terminal: colour" grep -q "$ESC" "$D/tty.txt"
    NO_COLOR=1 script -qec "'$VT' report '$D/a.vtrace'" /dev/null >"$D/nocolor.txt" 2>&1
    check "report on a terminal with NO_COLOR: none" sh -c "! grep -q '$ESC' '$D/nocolor.txt'"
    script -qec "'$VT' report --json '$D/a.vtrace'" /dev/null >"$D/ttyjson.txt" 2>&1
    check "--json on a terminal: never colour" sh -c "! grep -q '$ESC' '$D/ttyjson.txt'"
fi
done_testing
