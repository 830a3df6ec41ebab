#!/bin/sh
# `vramtrace diff` by call site: sites matched across two runs by their
# symbolized stacks (not addresses), with exact numbers.
#   1. build/examples/llama-cli, llama-8b-q4_k_m on a 24 GiB card, -c 2048
#      vs -c 8192: only the KV cache site changes, by (8192 - 2048) cells x
#      4096 B per token per layer x 32 layers = 768 MiB (examples/llama).
#   2. vtgen traces with the same frames at other addresses, a site only in
#      one of them.
. tests/t/lib.sh
EX=$B/examples
GEN=$B/vtgen
for f in "$SHIM" "$VT" "$GEN" "$EX/llama-cli" "$SIM/libcudart.so.13"; do
    [ -e "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed"; exit 0; }
D=$(tmpdir)
trap '[ -n "${KEEP:-}" ] || rm -rf "$D"' EXIT
GiB=1073741824
MiB=1048576

# sites JSON: one line per site of the diff: status space device tag a b
# delta calls_a calls_b function module frames
sites() {
    python3 - "$1" <<'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["sites"]:
    print(s["status"], s["space"], s["device"], s["tag"], s["a"], s["b"], s["delta"], s["calls_a"], s["calls_b"],
          s["function"].split("(")[0], s["module"], len(s["stack"]))
PY
}

# ---- 1. llama-cli -c 2048 vs -c 8192 ----------------------------------------
for c in 2048 8192; do
    mkdir -p "$D/c$c"
    VTSIM_DEVICES=24GiB under_shim "$D/c$c" "$EX/llama-cli" -m llama-8b-q4_k_m -ngl 99 -c $c --no-mmap \
        >"$D/c$c.out" 2>"$D/c$c.err"
    is "$?" 0 "llama-cli -c $c exits 0"
done
"$VT" diff --json "$D/c2048" "$D/c8192" >"$D/c.json" 2>"$D/c.err"
is "$?" 0 "diff --json of the two contexts: exits 0"
sites "$D/c.json" >"$D/c.sites"
is "$(sed -n 1p "$D/c.sites")" \
    "changed device 0 kv $((256 * MiB)) $GiB $((768 * MiB)) 1 1 llama_kv_cache::llama_kv_cache libllama.so 13" \
    "the KV cache site first: 256 MiB -> 1 GiB, +768 MiB, named by the frame its rule matched"
is "$(wc -l <"$D/c.sites" | tr -d ' ')" 6 "six sites in all"
is "$(grep -c '^same ' "$D/c.sites")" 5 "every other site unchanged"
is "$(awk '$1 == "same" && $7 != 0' "$D/c.sites" | wc -l | tr -d ' ')" 0 "unchanged sites: delta 0"
check "the weights on the GPU matched, 4570 MiB both" \
    grep -q "^same device 0 weights $((4570 * MiB)) $((4570 * MiB)) 0 1 1 llama_model::load_tensors libllama.so 13$" "$D/c.sites"
check "the pinned host weights matched apart from the GPU's" \
    grep -q "^same host -1 weights $((282 * MiB)) $((282 * MiB)) 0 1 1 llama_model::load_tensors libllama.so 13$" "$D/c.sites"
"$VT" diff --color never "$D/c2048" "$D/c8192" >"$D/c.txt" 2>&1
sed -n '/^Call sites/,$p' "$D/c.txt" >"$D/c.sitestxt"
is "$(cat "$D/c.sitestxt")" "Call sites by |B - A| of their bytes at peak (matched by stack)
  tag      where                  A            B        B - A
  kv       GPU 0          256.0 MiB     1.00 GiB   +768.0 MiB
    llama_kv_cache::llama_kv_cache(…)  [libllama.so]
  5 sites unchanged" "diff text: the one changed site, its telling frame, the unchanged count"
"$VT" diff --color never "$D/c2048" "$D/c2048" >"$D/same.txt" 2>&1
is "$(tail -1 "$D/same.txt")" "Call sites: none changed (6 matched)." "a run against itself: every site matched"

# ---- 2. the same frames at other addresses; a site in one run only ----------
STACKS=tests/golden/llama_stacks.vt
# run NAME STACKS EXTRA: weights 2 x 1 GiB (stack 8), KV 512 MiB (17), and
# with EXTRA a 64 MiB myapp_alloc (29), all live at the peak.
run() {
    {
        echo "process pid=300 ppid=1 exe=/opt/llama.cpp/bin/llama-server argv=llama-server start=1000000000"
        echo "device 0 total=24GiB free=23GiB name=Sim uuid=0123456789abcdef0123456789abcdef t=0"
        cat "$2"
        echo "event t=1000 api=cudaMalloc dev=0 ptr=$((0x7000000000)) size=1GiB stack=8"
        echo "event t=2000 api=cudaMalloc dev=0 ptr=$((0x7000000000 + GiB)) size=1GiB stack=8"
        echo "event t=3000 api=cudaMalloc dev=0 ptr=$((0x7000000000 + 4 * GiB)) size=512MiB stack=17"
        [ -n "$3" ] && echo "event t=4000 api=cudaMalloc dev=0 ptr=$((0x7000000000 + 6 * GiB)) size=64MiB stack=29"
        echo "end t=5000 events=0 dropped=0"
    } >"$D/$1.vt"
    "$GEN" "$D/$1.vt" -o "$D/$1.vtrace" || nok "vtgen $1"
}
# Every module and frame 0x7f0... moved to 0x7e0...: no ip is the same.
sed 's/0x7f0/0x7e0/g' "$STACKS" >"$D/relocated-stacks.vt"
is "$(grep -c 0x7f0 "$D/relocated-stacks.vt")" 0 "relocated stacks share no library address"
run plain "$STACKS" ""
run moved "$D/relocated-stacks.vt" extra
"$VT" diff --json "$D/plain.vtrace" "$D/moved.vtrace" >"$D/m.json" 2>"$D/m.err"
is "$?" 0 "diff --json across addresses: exits 0"
sites "$D/m.json" >"$D/m.sites"
is "$(cat "$D/m.sites")" "new device 0 unknown 0 $((64 * MiB)) $((64 * MiB)) 0 1 myapp_alloc llama-server 3
same device 0 weights $((2 * GiB)) $((2 * GiB)) 0 2 2 llama_model::load_tensors libllama.so 8
same device 0 kv $((512 * MiB)) $((512 * MiB)) 0 1 1 llama_kv_cache::llama_kv_cache libllama.so 8" \
    "sites matched by names across addresses; the 64 MiB site only in B is new; ranked by |B - A|, then size"
"$VT" diff --json "$D/moved.vtrace" "$D/plain.vtrace" >"$D/g.json" 2>/dev/null
is "$(sites "$D/g.json" | head -1)" "gone device 0 unknown $((64 * MiB)) 0 -$((64 * MiB)) 1 0 myapp_alloc llama-server 3" \
    "the other way round it is gone"
"$VT" diff --color never "$D/moved.vtrace" "$D/plain.vtrace" >"$D/g.txt" 2>&1
check "diff text: a gone site shows - for B" \
    grep -Eq '^  unknown +GPU 0 +64.0 MiB +- +-64.0 MiB  gone$' "$D/g.txt"
check "diff text: its telling frame, outside the CUDA runtime" grep -q '^    myapp_alloc  \[llama-server\]$' "$D/g.txt"
"$VT" diff --top 0 --color never "$D/moved.vtrace" "$D/plain.vtrace" >/dev/null 2>&1
is "$?" 0 "diff --top 0: all sites"
check "diff --top wants a count" sh -c "! '$VT' diff --top x '$D/moved.vtrace' '$D/plain.vtrace' 2>/dev/null"
done_testing
