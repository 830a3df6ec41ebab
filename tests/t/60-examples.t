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
def frames(ev):
    i, out = ev.get("stack"), []
    while i is not None:
        out.append(p["frames"][p["stacks"]["frame"][i]]["function"])
        i = p["stacks"]["prefix"][i]
    return out
def proc(pred): return [x for x in r["processes"] if pred(x)]
try:
    print(eval(sys.argv[2]))
except Exception as e:
    print("error: %s: %r" % (type(e).__name__, e))
PY
}

# ---- 1. a server's runner with -ngl below the layer count (make demo) ------
# ollama-serve estimates 40 layers for the 70B on a 24 GiB card and starts
# llama-server -ngl 40 -c 8192 (mmap on): 39 blocks and the output layer on
# CUDA0, 41 blocks and token_embd in the mapped model file, the KV cache of
# each layer beside it. Nothing fails; the report says PARTIAL OFFLOAD and
# estimates what fits above the 15% margin.
D=$TMP/s1
VTSIM_DEVICES=24GiB traced $D "$EX/ollama-serve" -m llama-70b-q4_k_m -c 8192
is "$?" 0 "1: ollama-serve exits 0 with its runner"
is "$(sed 's/pid=[0-9]* //' $D.out | tr '\n' ' ')" "discovery: killed=1 request=1 n_tokens=528 status=ok runner: ngl=40 status=0 " \
    "1: the server picks -ngl 40, the runner serves its request"
is "$(grep -E 'offloaded|model buffer size|KV buffer size|compute buffer size' $D.err | sed 's/^[a-z_]*: *//' | tr -s ' ' | tr '\n' '|')" \
    "offloaded 40/81 layers to GPU|CPU_Mapped model buffer size = 19014.00 MiB|CUDA0 model buffer size = 18370.00 MiB|CPU KV buffer size = 1312.00 MiB|CUDA0 KV buffer size = 1248.00 MiB|CUDA0 compute buffer size = 1088.00 MiB|CUDA_Host compute buffer size = 80.00 MiB|" \
    "1: llama.cpp's log lines: 40/81 layers, each buffer"
report $D
R='proc(lambda x: x.get("placement"))[0]'
L="$R['placement']"
is "$(q $D.json "($R['argv'][1:], $R['verdict'], $R['events']['failed'], $R['spill'])")" \
    "(['-m', 'llama-70b-q4_k_m', '-ngl', '40', '-c', '8192'], 'partial_offload', 0, None)" \
    "1: the runner's command line; PARTIAL OFFLOAD with no failed request"
is "$(q $D.json "tuple($L['layers'][k] for k in ('gpu', 'total', 'blocks_gpu', 'output_layer', 'kv_blocks_gpu'))")" \
    "(40, 81, 39, 'gpu', 39)" "1: layers on the GPU: 40 of 81 (39 blocks + the output layer), KV of 39 blocks"
is "$(q $D.json "[{k: v // M for k, v in $L[x]['by_place'].items() if v} for x in ('weights', 'layer_weights', 'kv', 'compute')]")" \
    "[{'gpu0': 18370, 'mapped_host': 19014}, {'gpu0': 18370, 'mapped_host': 18450}, {'gpu0': 1248, 'pageable_host': 1312}, {'gpu0': 1088, 'pinned_host': 80}]" \
    "1: bytes per place: weights, layer weights (without token_embd), KV, compute"
is "$(q $D.json "($L['token_embeddings_host_bytes'] // M, $L['advice']['gpu_layers'], $L['advice']['room_bytes'] // M)")" \
    "(564, 39, -281)" "1: token_embd in host memory; estimate 39 layers (281 MiB short of the margin at 40)"
R0="$R['devices'][0]"
is "$(q $D.json "([$R0['peak']['by_tag'][k] // M for k in ('weights', 'kv', 'scratch')], $R0['headroom']['min_free_bytes'] // M, $R0['headroom']['above_margin'])")" \
    "([18370, 1248, 1104], 3406, False)" "1: GPU peak (scratch: 1088 compute + 16 VMM pool), 3406 MiB least free, below 15%"
is "$(q $D.json '[(x["verdict"], x["trace"]["ended"]) for x in r["processes"] if not x.get("placement")]')" \
    "[('no_gpu_memory', False)]" "1: the discovery child allocated nothing and was killed"
"$VT" report $D >$D.txt 2>&1
check "1: the verdict and the estimate on the first screen" \
    sh -c "head -20 $D.txt | grep -q '^VERDICT: PARTIAL OFFLOAD. 41 of 81 layers run from host memory' && head -20 $D.txt | grep -q '^  Estimate: 39 of 81 layers fit on this card (-ngl 39)'"
"$VT" report --fail-on-spill $D >/dev/null 2>&1
is "$?" 1 "1: --fail-on-spill fails a run with layers in host memory"
"$VT" report --fail-on-spill --accept-offload $D >/dev/null 2>&1
is "$?" 0 "1: --accept-offload passes it: a planned split, no failed request"

# ---- 1a. the estimate's -ngl, run again ------------------------------------
NGL=$(q $D.json "$L['advice']['gpu_layers']")
D=$TMP/s1a
VTSIM_DEVICES=24GiB traced $D "$EX/llama-server" -m llama-70b-q4_k_m -ngl "$NGL" -c 8192
is "$?:$(cat $D.out)" "0:request=1 n_tokens=528 status=ok" "1a: -ngl $NGL serves its request"
report $D
is "$(q $D.json '(p["events"]["failed"], p["spill"], p["verdict"], tuple(p["placement"]["layers"][k] for k in ("gpu", "total")), p["placement"]["advice"]["gpu_layers"])')" \
    "(0, None, 'partial_offload', (39, 81), 39)" "1a: no failed request, 39 of 81 layers on the GPU, and the estimate stands"
is "$(q $D.json '[{k: v // M for k, v in p["placement"][x]["by_place"].items() if v} for x in ("weights", "kv")]')" \
    "[{'gpu0': 17920, 'mapped_host': 19464}, {'gpu0': 1216, 'pageable_host': 1344}]" "1a: one layer (450 + 32 MiB) moved to host memory"
is "$(q $D.json '(d0["headroom"]["min_free_bytes"] // M, d0["headroom"]["margin_bytes"] // M, d0["headroom"]["above_margin"])')" \
    "(3888, 3686, True)" "1a: 3888 MiB least free: above the 15% margin (3686 MiB)"
"$VT" report --fail-on-spill --accept-offload $D >/dev/null 2>&1
is "$?" 0 "1a: --fail-on-spill --accept-offload exits 0"

# ---- 1b. every layer asked for, mmap off: the load fails -------------------
D=$TMP/s1b
VTSIM_DEVICES=24GiB traced $D "$EX/llama-cli" -m llama-70b-q4_k_m -ngl 99 -c 8192 --no-mmap
is "$?:$(cat $D.out)" "1:" "1b: llama-cli exits 1, as llama.cpp does when a buffer cannot be allocated"
check "1b: prints llama.cpp's load error" grep -q "^llama_model_load: error loading model: unable to allocate CUDA0 buffer$" $D.err
report $D
is "$(q $D.json '(p["verdict"], s["kind"], s["event"]["api"], s["event"]["bytes"], s["event"]["tag"], s["event"]["device"])')" \
    "('failed', 'oom', 'cudaMalloc', 38608568320, 'weights', 0)" "1b: the 36820 MiB CUDA0 model buffer failed the load"
is "$(q $D.json '"llama_model::load_tensors(llama_model_loader&)" in frames(s["event"])')" True "1b: its stack names load_tensors"
is "$(q $D.json '(p["events"]["failed"], p["host_pinned"]["by_tag"]["weights"] // M, d0["live_bytes"])')" "(1, 564, 0)" \
    "1b: one failed request; token_embd's pinned buffer was allocated before it and freed; nothing left"

# ---- 1c. the weights fit a 37 GiB card, the KV cache does not --------------
D=$TMP/s1c
VTSIM_DEVICES=37GiB traced $D "$EX/llama-cli" -m llama-70b-q4_k_m -ngl 99 -c 8192
is "$?" 1 "1c: llama-cli exits 1: the context cannot be created"
check "1c: prints llama.cpp's context error" grep -q "failed to initialize the context: failed to allocate buffer for kv cache" $D.err
report $D
is "$(q $D.json '(s["kind"], s["event"]["bytes"], s["event"]["tag"], d0["peak"]["by_tag"]["weights"] // M)')" \
    "('oom', 2684354560, 'kv', 36820)" "1c: the 2560 MiB KV cache failed after 36820 MiB of weights"
"$VT" report --wide $D >$D.txt 2>&1
check "1c: the bound with its arithmetic" grep -q "^  More VRAM needed to hold everything: at least 1.89 GiB (the 2.50 GiB request for kv that failed, minus about 620.0 MiB free then).$" $D.txt

# ---- 1d. no -ngl: llama.cpp's --fit offloads what leaves 1 GiB free --------
D=$TMP/s1d
VTSIM_DEVICES=24GiB traced $D "$EX/llama-cli" -m llama-70b-q4_k_m
is "$?:$(cat $D.out)" "0:offloaded=44/81 ngl=44 n_past=528" "1d: --fit picks 44 layers before allocating anything"
report $D
is "$(q $D.json '(p["events"]["failed"], d0["headroom"]["min_free_bytes"] // M, p["placement"]["advice"]["gpu_layers"])')" \
    "(0, 1478, 39)" "1d: no failed request, 1478 MiB least free; the 15% margin's estimate is 39"

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
# The margin went when gpu-hog took its 2 GiB, not at the server's last
# allocation before: the driver's report found that much more gone.
is "$(q $D.json '(d0["headroom"]["first_below_margin"]["crossed_by"], d0["headroom"]["first_below_margin"]["outside_bytes"] // M >= 2048)')" \
    "('report', True)" "3a: the margin crossed by a report that found 2 GiB gone from outside"
"$VT" report --wide $D >$D.txt 2>/dev/null
check "3a: the text says another process took it" grep -q "Below the 15% margin since .*, when the driver reported .* free: .* less than this process's own allocations explain (another process, or the driver, took it)." $D.txt

# ---- 3b. it was there before the model loaded ------------------------------
# qwen2.5-32b takes all 65 layers of an empty 24 GiB card; with 3 GiB held
# elsewhere, llama.cpp's --fit (1 GiB target) offloads 59.
D=$TMP/s3b
VTSIM_DEVICES=24GiB EXTRA_ENV=VTSIM_EXTERNAL=3GiB traced $D "$EX/llama-cli" -m qwen2.5-32b-q4_k_m
is "$(cat $D.out)" "offloaded=59/65 ngl=59 n_past=528" "3b: qwen2.5-32b leaves 6 of 65 layers in host memory for 3 GiB held elsewhere"
report $D
is "$(q $D.json '(p["verdict"], p["events"]["failed"], d0["headroom"]["min_free_bytes"] // M)')" "('partial_offload', 0, 1024)" \
    "3b: a partial offload, nothing failed, the fit's 1024 MiB left free"
is "$(q $D.json 'd0["headroom"]["context_bytes"] // M')" 3520 "3b: 448 MiB context + 3072 MiB of someone else's before we started"
"$VT" report --wide $D >$D.txt 2>/dev/null
check "3b: the text says the reserve is more than a context" grep -q "The context reserve is what was not free at this process's first sight of the card; 3.44 GiB is more than a CUDA context takes, so other processes (or an earlier context) held memory before this one started." $D.txt
D=$TMP/s3b0
VTSIM_DEVICES=24GiB traced $D "$EX/llama-cli" -m qwen2.5-32b-q4_k_m
is "$(cat $D.out)" "offloaded=65/65 ngl=65 n_past=528" "3b: on an empty card every layer fits"

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
VTSIM_DEVICES=24GiB EXTRA_ENV=GGML_CUDA_ENABLE_UNIFIED_MEMORY=1 traced $D "$EX/llama-cli" -m llama-70b-q4_k_m -ngl 99 -c 8192 --no-mmap
is "$(cat $D.out)" "offloaded=81/81 ngl=99 n_past=528" "5: everything \"fits\" in managed memory"
report $D
is "$(q $D.json '(s["kind"], s["event"]["api"], s["event"]["bytes"])')" \
    "('managed_oversubscription', 'cudaMallocManaged', 38608568320)" "5: managed oversubscription, tipped by the weights"
is "$(q $D.json '{k: v // M for k, v in p["managed"]["by_tag"].items()}')" \
    "{'weights': 36820, 'kv': 2560, 'scratch': 1088, 'unknown': 0}" "5: managed by tag: 40468 MiB"
is "$(q $D.json 's["managed_excess_bytes"] >= (40468 - 24576) * M')" True "5: at least 15892 MiB over the card"
# The driver's free memory leaves managed memory out: the text says so and
# claims no room above the margin.
"$VT" report --wide "$D" >"$D.txt" 2>/dev/null
check "5: free memory said not to count the 39.52 GiB of managed memory, the margin not judged" \
    grep -q "That free memory does not count the 39.52 GiB of managed memory (at its peak), which the driver pages into the card when touched: with this process's own it is more than the card holds, so the margin is not judged." "$D.txt"
check "5: no room above the margin claimed" sh -c "! grep -q 'Stayed above the 15% margin' '$D.txt'"

# ---- 6. a server that spawns runners ---------------------------------------
D=$TMP/s6
VTSIM_DEVICES=24GiB traced $D "$EX/ollama-serve"
is "$?" 0 "6: ollama-serve exits with the runner's status 0"
is "$(sed 's/pid=[0-9]* //' $D.out | tr '\n' ' ')" "discovery: killed=1 request=1 n_tokens=528 status=ok runner: ngl=33 status=0 " \
    "6: discovery killed, every layer offloaded, runner done"
report $D
is "$(q $D.json 'sorted((x["exe"].rsplit("/", 1)[-1], x["trace"]["ended"]) for x in r["processes"])')" \
    "[('llama-server', True), ('ollama-serve', False)]" "6: two traced processes; the SIGKILLed discovery child has no END"
R='proc(lambda x: x["trace"]["ended"])[0]["devices"][0]'
is "$(q $D.json "[$R['peak']['by_tag'][k] // M for k in ('weights', 'kv')]")" "[4570, 512]" "6: the runner holds the model: 4570 MiB weights, 512 MiB KV"
is "$(q $D.json "$R['peak']['by_tag']['scratch'] // M")" 268 "6: runner scratch: 260 compute + 8 VMM pool"
is "$(q $D.json 'len(r["gpus"]), [x["exe"] for x in r["gpus"][0]["processes"]]')" "(1, ['llama-server'])" "6: one GPU in the combined view"

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
# -ts 24,12 gives the 12 GiB card a third of the layers and the output
# layer too: --fit stops when it is full, with 3 GiB of the 24 GiB card
# still free.
D=$TMP/s8
VTSIM_DEVICES=24GiB,12GiB traced $D "$EX/llama-cli" -m qwen3-32b-q8_0 -ts 24,12
is "$(cat $D.out)" "offloaded=56/65 ngl=56 n_past=528" "8: --fit offloads 56 layers"
report $D
is "$(q $D.json '(p["verdict"], p["events"]["failed"], p["placement"]["layers"]["blocks_by_gpu"])')" \
    "('partial_offload', 0, {'0': 38, '1': 17})" "8: a partial offload over two GPUs: 38 blocks on the first, 17 and the output layer on the second"
is "$(q $D.json '[[d["peak"]["by_tag"][k] // M for k in ("weights", "kv", "scratch")] for d in (d0, d1)]')" \
    "[[19000, 1216, 716], [9290, 544, 716]]" "8: per-card peaks"
is "$(q $D.json '[d["headroom"]["min_free_bytes"] // M for d in (d0, d1)]')" "[3196, 1290]" \
    "8: the 12 GiB card is down to its 1 GiB target (and the pool), the 24 GiB one keeps 3 GiB"
is "$(q $D.json '[d["headroom"]["untracked_bytes"] for d in (d0, d1)]')" "[0, 0]" "8: each card's free memory read on that card"
is "$(q $D.json 'len(r["gpus"])')" 2 "8: two GPUs in the combined view"

# ---- every story, every view --------------------------------------------
# The report (JSON), top, serve, the HTML page and the gate over each
# story's traces agree on verdicts, peaks, least free memory and the
# number of processes (views_disagree, tests/t/lib.sh).
for d in $TMP/s*/; do
    d=${d%/}
    is "$(views_disagree "$d")" "" "${d##*/}: report, top, serve, the HTML page and the gate agree"
done

done_testing
