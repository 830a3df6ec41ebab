#!/bin/sh
# The field stories of examples/ (examples/README.md), each run under the
# shim on the simulated GPU, then `vramtrace report --json` on its traces:
# the verdict and the exact numbers the story promises.
. tests/t/lib.sh
EX=$B/examples
for f in "$SHIM" "$VT" "$EX/llama-cli" "$SIM/libcudart.so.13"; do
    if [ ! -e "$f" ]; then
        echo "1..0 # SKIP $f not built (make test-bins)"
        exit 0
    fi
done
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed to read the JSON report"; exit 0; }

TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
MiB=1048576

# traced DIR ENV=VAL... -- CMD ARGS: runs CMD under the shim into DIR with a
# clean simulator configuration; stdout to DIR.out, stderr to DIR.err.
traced() {
    dir=$1; shift
    mkdir -p "$dir"
    # LD_PRELOAD applies from CMD on: `env` itself is not traced.
    env -u VTSIM_SHARED -u VTSIM_EXTERNAL -u VTSIM_RESERVE -u VTSIM_GRANULARITY -u VTSIM_SYSMEM_FALLBACK \
        -u GGML_CUDA_ENABLE_UNIFIED_MEMORY -u GGML_CUDA_NO_VMM \
        ${VTSIM_SHARED_FOR:+VTSIM_SHARED=$VTSIM_SHARED_FOR} ${EXTRA_ENV:-} \
        VRAMTRACE_DIR="$dir" LD_LIBRARY_PATH="$SIM" LD_PRELOAD="$SHIM_PRELOAD" "$@" >"$dir.out" 2>"$dir.err"
}

# report DIR: the JSON report in DIR.json.
report() { "$VT" report --json "$1" >"$1.json" 2>"$1.rerr"; }

# q JSON EXPR: a Python expression over r (the report), p (first process),
# d0/d1 (its devices 0 and 1), s (its spill), M (MiB). Prints the value.
q() {
    python3 - "$1" "$2" <<'PY' 2>&1
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("no report: %s" % e)
    sys.exit(0)
p = r["processes"][0] if r["processes"] else {}
dev = {d["ordinal"]: d for d in p.get("devices", [])}
d0, d1 = dev.get(0, {}), dev.get(1, {})
s = p.get("spill") or {}
M = 1 << 20
def frames(ev): return [p["frames"][i]["function"] for i in ev.get("stack", [])]
def proc(pred): return [x for x in r["processes"] if pred(x)]
try:
    print(eval(sys.argv[2]))
except Exception as e:
    print("error: %s: %r" % (type(e).__name__, e))
PY
}

# ---- 1. 70B Q4_K_M on a 24 GiB card: spills to CUDA_Host -------------------
D=$TMP/s1
VTSIM_DEVICES=24GiB traced $D "$EX/llama-cli" -m llama-70b-q4_k_m -ngl 99 -c 8192 --no-mmap
is "$?" 0 "1: llama-cli exits 0: spilling does not crash"
is "$(cat $D.out)" "offloaded=47/81 ngl=47 n_past=528" "1: backs off to -ngl 47"
check "1: prints llama.cpp's load error" grep -q "unable to allocate CUDA0 buffer" $D.err
report $D
is "$(q $D.json 's["kind"]')" oom "1: spill kind"
is "$(q $D.json '(s["event"]["api"], s["event"]["bytes"], s["event"]["tag"], s["event"]["device"], s["event"]["result"])')" \
    "('cudaMalloc', 38608568320, 'weights', 0, 2)" "1: tipping event: the 36820 MiB CUDA0 model buffer"
is "$(q $D.json '"llama_model::load_tensors(llama_model_loader&)" in frames(s["event"])')" True "1: tipping stack names load_tensors"
is "$(q $D.json '[(l["kind"], l["api"], l["bytes"] // M, l["tag"]) for l in s["later"]]')" \
    "[('host_fallback', 'cudaMallocHost', 16234, 'weights')]" "1: 33 layers + output + token_embd fell back to CUDA_Host"
is "$(q $D.json '16234 * M <= s["more_vram_bytes"] <= 16340 * M')" True "1: more VRAM needed: 16234..16340 MiB (16340 with the CPU KV it cannot see)"
is "$(q $D.json '{k: v // M for k, v in p["host_pinned"]["by_tag"].items()}')" \
    "{'weights': 16234, 'kv': 0, 'scratch': 80, 'unknown': 0}" "1: pinned host by tag"
is "$(q $D.json '[d0["peak"]["by_tag"][k] // M for k in ("weights", "kv")]')" "[21150, 1504]" "1: GPU peak weights and KV"
is "$(q $D.json 'd0["peak"]["by_tag"]["scratch"] // M')" 1104 "1: GPU peak scratch: 1088 compute + 16 VMM pool"
is "$(q $D.json '(d0["headroom"]["context_bytes"] // M, d0["headroom"]["min_free_bytes"] // M, d0["headroom"]["above_margin"])')" \
    "(448, 370, False)" "1: headroom: 448 MiB context, 370 MiB least free, below 15%"
is "$(q $D.json 'd0["headroom"]["untracked_bytes"]')" 0 "1: nothing untracked"
# ggml's VMM pool destructor unmaps its two mappings (6 and 10 MiB) with
# one cuMemUnmap over the whole range: nothing stays live.
is "$(q $D.json '(d0["live_bytes"], p["events"]["unmatched_frees"])')" "(0, 0)" "1: nothing live at the end (one cuMemUnmap over the pool)"
"$VT" report --wide $D >$D.txt 2>&1
check "1: text report starts with the verdict" sh -c "head -3 $D.txt | grep -q 'VERDICT: SPILL'"

# The 24 GiB run replayed on 37 GiB: its weights request would fit, but it
# backed off after that failure, and a real 37 GiB run spills (1b below):
# the replay must not say FITS.
"$VT" replay --wide --capacity 37GiB $TMP/s1 >$TMP/s1.replay 2>&1
is "$?" 3 "1: replay on 37 GiB cannot tell (exit 3): the run backed off"
is "$(grep -c 'FITS' $TMP/s1.replay)" 0 "1: replay on 37 GiB never says FITS"

# ---- 1b. the same model on a 37 GiB card: the KV cache fails --------------
# The bound says its arithmetic; the compute buffer the run allocated after
# backing off (not held when KV failed) is named on top: 1.89 + 1.08 GiB,
# what a 37 GiB card really lacks (75 of 81 layers fit).
D=$TMP/s1b
VTSIM_DEVICES=37GiB traced $D "$EX/llama-cli"
is "$(cat $D.out)" "offloaded=75/81 ngl=75 n_past=528" "1b: backs off to -ngl 75"
"$VT" report --wide $D >$D.txt 2>&1
check "1b: the bound with its arithmetic" grep -q "^  More VRAM needed to hold everything: at least 1.89 GiB (the 2.50 GiB request for kv that failed, minus about 620.0 MiB free then);$" $D.txt
check "1b: what the run held after the failure, on top" grep -q "^    the run then also held 1.08 GiB of scratch, none of it held when the request failed: about 2.97 GiB if the full path needs that too\.$" $D.txt

# ---- 2. KV cache growing with the conversation -----------------------------
D=$TMP/s2
VTSIM_DEVICES=12GiB traced $D "$EX/llama-server-chat" -m llama-13b-q4_k_m --mmap -c 2048 --kv-grow 1024 --turns 8 --turn-tokens 1000
is "$?" 0 "2: the server survives the failed request"
is "$(grep -c status=ok $D.out) $(tail -1 $D.out)" "5 request=6 n_past=5000 n_ctx=5120 status=error" "2: requests 1-5 served, 6 fails near 6K"
"$VT" report --wide $D >$D.txt 2>&1
is "$(sed -n 2,3p $D.txt | tr '\n' '|')" "VERDICT: OUT OF MEMORY. A device request for kv failed on GPU 0 (vramtrace sim GPU (12 GiB)) and the process allocated nothing after it:|  no fallback was taken; nothing ran from host memory.|" \
    "2: a failed KV growth is OUT OF MEMORY, not a failed load nor a spill to host"
report $D
is "$(q $D.json '(s["kind"], s["event"]["api"], s["event"]["bytes"], s["event"]["tag"], s["event"]["device"])')" \
    "('oom', 'cudaMalloc', 838860800, 'kv', 0)" "2: tipped by an 800 MiB KV block"
is "$(q $D.json '[f in frames(s["event"]) for f in ("llama_kv_cache::llama_kv_cache(llama_model const&, unsigned int, bool)", "llama_context::decode(unsigned int)")]')" \
    "[True, True]" "2: grown from decode, in the KV cache constructor"
is "$(q $D.json '(s["device_state"]["last_free_bytes"] // M, s["oom_shortfall_bytes"])')" "(132, 700448768)" "2: 132 MiB free, 668 MiB short"
is "$(q $D.json '[d0["peak"]["by_tag"][k] // M for k in ("weights", "kv")]')" "[7400, 4000]" "2: peak weights 7400, KV 4000 (5120 cells)"
is "$(q $D.json 'd0["peak"]["by_tag"]["scratch"] // M')" 308 "2: peak scratch: 300 compute + 8 VMM pool"

# ---- 3a. another process takes VRAM while the server runs ------------------
D=$TMP/s3a
SHARED=$TMP/s3a.shared
mkdir -p $D
mkfifo $TMP/s3a.in
( VTSIM_DEVICES=12GiB VTSIM_SHARED_FOR=$SHARED traced $D "$EX/llama-server-chat" -m llama-13b-q4_k_m --mmap -c 2048 --kv-grow 1024 --stdin <$TMP/s3a.in ) &
SRV=$!
exec 3>$TMP/s3a.in
wait_lines() { i=0; while [ "$(cat "$1" 2>/dev/null | wc -l)" -lt "$2" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; }
echo 1000 >&3
wait_lines $D.out 1
env -u LD_PRELOAD VTSIM_DEVICES=12GiB VTSIM_SHARED=$SHARED LD_LIBRARY_PATH=$SIM "$EX/gpu-hog" 2048 >$TMP/s3a.hog 2>&1 3>&- &
HOG=$!
wait_lines $TMP/s3a.hog 2
echo 1000 >&3
echo 1000 >&3
exec 3>&-
wait $SRV
is "$?" 0 "3a: server exits 0"
kill -TERM $HOG; wait $HOG
is "$(cut -d' ' -f1,4 $D.out | tr '\n' ' ')" "request=1 status=ok request=2 status=ok request=3 status=error " \
    "3a: request 3 fails once gpu-hog holds 2 GiB"
report $D
is "$(q $D.json '(s["kind"], s["event"]["bytes"], s["event"]["tag"])')" "('oom', 838860800, 'kv')" "3a: tipped by the KV block"
is "$(q $D.json 'd0["headroom"]["untracked_bytes"] // M >= 2048')" True "3a: gpu-hog's 2048 MiB show as untracked"

# ---- 3b. it was there before the model loaded ------------------------------
D=$TMP/s3b
VTSIM_DEVICES=24GiB EXTRA_ENV=VTSIM_EXTERNAL=3GiB traced $D "$EX/llama-cli" -m qwen2.5-32b-q4_k_m
is "$(cat $D.out)" "offloaded=63/65 ngl=63 n_past=528" "3b: qwen2.5-32b loses 2 of 65 layers to 3 GiB held elsewhere"
report $D
is "$(q $D.json '(s["kind"], s["event"]["bytes"], s["event"]["tag"])')" "('oom', 2147483648, 'kv')" "3b: tipped by the 2 GiB KV cache"
is "$(q $D.json 'd0["headroom"]["context_bytes"] // M')" 3520 "3b: 448 MiB context + 3072 MiB of someone else's before we started"

# ---- 4. caching allocator: OOM with enough free memory, flush and retry ----
D=$TMP/s4
VTSIM_DEVICES=24GiB traced $D "$EX/torch-swap"
is "$?" 0 "4: torch-swap exits 0 (the retry succeeds)"
is "$(tr '\n' ' ' <$D.out)" "step=text_encoder allocated=8192 reserved=8192 step=load_b allocated=15360 reserved=15360 step=unload_b allocated=9216 reserved=15360 step=load_c allocated=17408 reserved=17408 step=load_b_again allocated=17408 reserved=17408 " "4: allocator steps"
report $D
is "$(q $D.json '(s["kind"], s["event"]["api"], s["event"]["bytes"])')" "('oom', 'cudaMalloc', 8589934592)" "4: the 8 GiB request failed"
F='d0["fragmentation"]'
is "$(q $D.json "($F['failed_with_free']['count'], $F['failed_with_free']['first']['free_bytes'])")" "(1, 9193914368)" "4: it failed with 8768 MiB free"
# At the failure: text encoder, LoRA and the 6144 MiB cached segment live;
# the freed 4096 MiB staging block lies between them, the rest of the free
# memory beyond the highest one (not a hole the trace can see).
is "$(q $D.json "tuple($F['failed_with_free']['first']['holes'][k] // M for k in ('bytes', 'largest_bytes')), $F['failed_with_free']['first']['holes']['live_ranges']")" \
    "((4096, 4096), 3)" "4: holes at the failure: the 4096 MiB staging block's, between 3 live allocations"
is "$(q $D.json "($F['flush_retry']['count'], $F['flush_retry']['freed_bytes'])")" "(1, 6442450944)" "4: flush of the 6 GiB cached segment, then retry"
is "$(q $D.json '(d0["peak"]["tracked_bytes"] // M, d0["headroom"]["min_free_bytes"] // M)')" "(19456, 4672)" "4: peak 19456 MiB, least free 4672 MiB"

# ---- 5. unified memory oversubscription ------------------------------------
D=$TMP/s5
VTSIM_DEVICES=24GiB EXTRA_ENV=GGML_CUDA_ENABLE_UNIFIED_MEMORY=1 traced $D "$EX/llama-cli"
is "$(cat $D.out)" "offloaded=81/81 ngl=99 n_past=528" "5: everything \"fits\" in managed memory"
report $D
is "$(q $D.json '(s["kind"], s["event"]["api"], s["event"]["bytes"])')" \
    "('managed_oversubscription', 'cudaMallocManaged', 38608568320)" "5: managed oversubscription, tipped by the weights"
is "$(q $D.json '{k: v // M for k, v in p["managed"]["by_tag"].items()}')" \
    "{'weights': 36820, 'kv': 2560, 'scratch': 1088, 'unknown': 0}" "5: managed by tag: 40468 MiB"
is "$(q $D.json 's["managed_excess_bytes"] >= (40468 - 24576) * M')" True "5: at least 15892 MiB over the card"

# ---- 6. a server that spawns runners ---------------------------------------
D=$TMP/s6
VTSIM_DEVICES=24GiB traced $D "$EX/ollama-serve"
is "$?" 0 "6: ollama-serve exits with the runner's status 0"
is "$(sed 's/pid=[0-9]* //' $D.out | tr '\n' ' ')" "discovery: killed=1 runner: status=0 " "6: discovery killed, runner done"
report $D
is "$(q $D.json 'sorted(x["trace"]["ended"] for x in r["processes"])')" "[False, True]" "6: two traced processes; the SIGKILLed one has no END"
R='proc(lambda x: x["trace"]["ended"])[0]["devices"][0]'
is "$(q $D.json "[$R['peak']['by_tag'][k] // M for k in ('weights', 'kv')]")" "[4570, 512]" "6: the runner holds the model: 4570 MiB weights, 512 MiB KV"
is "$(q $D.json "$R['peak']['by_tag']['scratch'] // M")" 268 "6: runner scratch: 260 compute + 8 VMM pool"
is "$(q $D.json 'len(r["gpus"]), [x["exe"] for x in r["gpus"][0]["processes"]]')" "(1, ['ollama-serve'])" "6: one GPU in the combined view"

# ---- 7. VMM pools through cuGetProcAddress ---------------------------------
D=$TMP/s7
VTSIM_DEVICES=24GiB traced $D "$EX/vmm-pool"
is "$(tr '\n' ' ' <$D.out)" "ggml_pool=ok expandable_va=27660 peak_mapped=10240 blocks=10 final_mapped=5120 " "7: pool sizes"
report $D
is "$(q $D.json '(p["apis"]["cuMemCreate"]["calls"], p["apis"]["cuMemMap"]["calls"], "cudaMalloc" in p["apis"], p["spill"])')" \
    "(518, 518, False, None)" "7: 6 ggml + 512 PyTorch pages mapped, no cudaMalloc, no spill"
is "$(q $D.json 'd0["fragmentation"]["va_reserved_max_bytes"] // M')" $((32768 + 27660)) "7: VA reserved: 32 GiB (ggml) + 27660 MiB (PyTorch)"
is "$(q $D.json 'd0["peak"]["tracked_bytes"] // M')" 10304 "7: device peak 10240 + 64 MiB ggml pool"

# ---- 8. two mismatched cards, --tensor-split ---------------------------------
D=$TMP/s8
VTSIM_DEVICES=24GiB,12GiB traced $D "$EX/llama-cli" -m qwen3-32b-q8_0 -ts 24,12
is "$(cat $D.out)" "offloaded=62/65 ngl=62 n_past=528" "8: backs off to -ngl 62"
report $D
is "$(q $D.json '(s["kind"], s["event"]["device"], s["event"]["bytes"], s["event"]["tag"])')" \
    "('oom', 1, 734003200, 'scratch')" "8: the 12 GiB card tipped: its 700 MiB compute buffer"
is "$(q $D.json 's["device_state"]["last_free_bytes"] // M')" 410 "8: 410 MiB left on the 12 GiB card"
is "$(q $D.json '[d1["peak"]["by_tag"][k] // M for k in ("weights", "kv")], d0["peak"]["tracked_bytes"] // M')" \
    "([10790, 640], 24108)" "8: per-card peaks"
is "$(q $D.json 'len(r["gpus"])')" 2 "8: two GPUs in the combined view"
# llama.cpp freed the whole model and reloaded it with fewer layers: not an
# allocator's flush and retry, and its CUDA_Host layers came after the
# failed compute buffer.
is "$(q $D.json 'd1["fragmentation"]["flush_retry"]["count"]')" 0 "8: the back-off is no flush-and-retry"
"$VT" report --wide $D >$D.txt 2>&1
is "$(grep -c 'flushed' $D.txt)" 0 "8: the text says nothing of a flush"
check "8: the pinned weights came after the failed scratch request" \
    grep -q "^  2.52 GiB of weights were in pinned host memory at most (32.02 GiB on the GPUs at their peaks), allocated after a device request for scratch failed: llama.cpp backs off that way" $D.txt

done_testing
