#!/bin/sh
# One truth in every view: every example story, traced, then report
# (JSON), top --once, serve --once, the HTML page and the --fail-on-spill
# gate over it; tests/tools/views_agree.py prints any two views that
# disagree on a verdict, a peak, the least free memory or the number of
# processes, and each story must print nothing.
. tests/t/lib.sh
EX=$B/examples
for f in "$SHIM" "$VT" "$EX/llama-cli" "$EX/llama-server" "$EX/ollama-serve" "$EX/torch-swap" "$EX/vmm-pool"; do
    [ -e "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT
traced() {
    dir=$1 card=$2; shift 2
    mkdir -p "$dir"
    env -u VTSIM_SHARED -u VTSIM_EXTERNAL -u VTSIM_RESERVE -u VTSIM_GRANULARITY -u VTSIM_SYSMEM_FALLBACK \
        -u GGML_CUDA_NO_VMM VTSIM_DEVICES=$card VRAMTRACE_DIR="$dir" LD_LIBRARY_PATH="$SIM" \
        LD_PRELOAD="$SHIM_PRELOAD" ${EXTRA_ENV:-} "$@" >"$dir.out" 2>"$dir.err"
}
# views NAME WANT: every view over $TMP/NAME compared (views_disagree,
# tests/t/lib.sh); WANT is the report's verdicts, sorted, to know the
# story ran as told.
views() {
    d=$TMP/$1
    is "$(views_disagree "$d")" "" "$1: report, top, serve, the HTML page and the gate agree"
    is "$(python3 -c 'import json,sys; print(" ".join(sorted(p["verdict"] for p in json.load(open(sys.argv[1]))["processes"])))' "$d.views.json")" \
        "$2" "$1: the report's verdicts"
}
traced "$TMP/demo" 24GiB "$EX/ollama-serve" -m llama-70b-q4_k_m -c 8192
views demo "no_gpu_memory partial_offload"
traced "$TMP/fits" 24GiB "$EX/llama-server" -m llama-70b-q4_k_m -ngl 39 -c 8192
views fits "partial_offload"
traced "$TMP/kvgrow" 12GiB "$EX/llama-server-chat" -m llama-13b-q4_k_m --mmap -c 2048 --kv-grow 1024 --turns 8 --turn-tokens 1000
views kvgrow "failed"
traced "$TMP/swap" 24GiB "$EX/torch-swap"
views swap "near_spill"
traced "$TMP/vmm" 24GiB "$EX/vmm-pool"
views vmm "no_spill"
# The KV cache's request refused by a sticky error (a kernel's illegal
# memory access), not for lack of memory: no view may call it out of memory.
EXTRA_ENV=VTSIM_FAULT_AFTER=1
traced "$TMP/sticky" 24GiB "$EX/llama-server" -m llama-13b-q4_k_m -ngl 99 -c 2048
unset EXTRA_ENV
views sticky "no_spill"
is "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["processes"][0]["events"]["failed_not_oom"])' "$TMP/sticky.views.json")" 1 \
    "sticky: the KV cache's request was refused (the fault took effect)"
traced "$TMP/split" 24GiB,12GiB "$EX/llama-cli" -m qwen3-32b-q8_0 -ts 24,12
views split "partial_offload"
# Stream-ordered allocations captured into CUDA graphs hold no memory:
# every view's peak is the 1.125 GiB the program held, not 3.12 GiB.
traced "$TMP/graph" 24GiB "$B/tests/fault/drvcases" graph
views graph "no_spill"
is "$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["processes"][0]; print(p["events"]["captured_allocs"], p["devices"][0]["peak"]["tracked_bytes"])' "$TMP/graph.views.json")" \
    "3 1207959552" "graph: 3 captured allocations, a peak of 1.125 GiB"
# A graph launch that failed for lack of memory: out of memory in every
# view, not the NO SPILL of a trace without it.
traced "$TMP/graph-oom" 24GiB "$B/tests/fault/drvcases" graph-oom
views graph-oom "failed"
traced "$TMP/graph-relaunch" 24GiB "$B/tests/fault/drvcases" graph-relaunch
views graph-relaunch "near_spill"
EXTRA_ENV=GGML_CUDA_ENABLE_UNIFIED_MEMORY=1 traced "$TMP/managed" 24GiB "$EX/llama-cli" -m llama-70b-q4_k_m -ngl 99 -c 8192 --no-mmap
views managed "spill"
done_testing
