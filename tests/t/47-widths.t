#!/bin/sh
# Text outputs fit an 80-column terminal: report, diff and replay on the
# examples' traces (the runs of 60-examples.t), no line wider than 80
# display columns (UTF-8 characters, colour sequences not counted), the
# verdict on the first screen (24 lines), and --wide prints names whole.
. tests/t/lib.sh
EX=$B/examples
for f in "$SHIM" "$VT" "$EX/llama-cli" "$EX/torch-swap" "$EX/ollama-serve" "$SIM/libcudart.so.13"; do
    if [ ! -e "$f" ]; then
        echo "1..0 # SKIP $f not built (make test-bins)"
        exit 0
    fi
done
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 needed to count UTF-8 columns"; exit 0; }

TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT

traced() {
    dir=$1; shift
    mkdir -p "$dir"
    env -u VTSIM_SHARED -u VTSIM_EXTERNAL -u VTSIM_RESERVE -u VTSIM_GRANULARITY -u VTSIM_SYSMEM_FALLBACK \
        -u GGML_CUDA_ENABLE_UNIFIED_MEMORY -u GGML_CUDA_NO_VMM \
        VRAMTRACE_DIR="$dir" LD_LIBRARY_PATH="$SIM" LD_PRELOAD="$SHIM_PRELOAD" "$@" >"$dir.out" 2>"$dir.err"
}

# widest FILE: "COLUMNS LINE-NUMBER" of its widest line.
widest() {
    python3 - "$1" <<'PY'
import re, sys
best = (0, 0)
for n, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    cols = len(re.sub(r"\x1b\[[0-9;]*m", "", line.rstrip("\n")))
    best = max(best, (cols, -n))
print(best[0], -best[1])
PY
}
# fits FILE DESC: no line of FILE over 80 columns.
fits() {
    w=$(widest "$1")
    is "${w%% *}" "$(( ${w%% *} <= 80 ? ${w%% *} : 80 ))" "$2: widest line ${w%% *} columns (line ${w#* }) <= 80"
}

VTSIM_DEVICES=24GiB traced $TMP/s1 "$EX/ollama-serve" -m llama-70b-q4_k_m -c 8192
VTSIM_DEVICES=12GiB traced $TMP/s2 "$EX/llama-server-chat" -m llama-13b-q4_k_m --mmap -c 2048 --kv-grow 1024 --turns 8 --turn-tokens 1000
VTSIM_DEVICES=24GiB traced $TMP/s4 "$EX/torch-swap"
VTSIM_DEVICES=24GiB traced $TMP/s6 "$EX/ollama-serve"
VTSIM_DEVICES=24GiB traced $TMP/s7 "$EX/vmm-pool"
VTSIM_DEVICES=24GiB,12GiB traced $TMP/s8 "$EX/llama-cli" -m qwen3-32b-q8_0 -ts 24,12

for s in s1 s2 s4 s6 s7 s8; do
    "$VT" report --color always $TMP/$s >$TMP/$s.txt 2>/dev/null
    fits $TMP/$s.txt "report $s"
    v=$(grep -n -m1 'VERDICT:' $TMP/$s.txt | cut -d: -f1)
    is "$(( ${v:-99} <= 24 ))" 1 "report $s: the verdict on the first screen (line ${v:-none})"
    "$VT" replay --capacity 16GiB $TMP/$s >$TMP/$s.replay 2>/dev/null
    fits $TMP/$s.replay "replay $s"
done
"$VT" diff --color always $TMP/s1 $TMP/s8 >$TMP/diff.txt 2>/dev/null
fits $TMP/diff.txt "diff s1 s8"
"$VT" diff $TMP/s2 $TMP/s6 >$TMP/diff2.txt 2>/dev/null
fits $TMP/diff2.txt "diff s2 s6"

# A long name of the demo's weights stack: its parameter list is what goes.
LONG='llama_model_load_from_file(char const*, llama_model_shape const*, llama_model_params)'
is "$(grep -c -F "        #7  llama_model_load_from_file(…)  llama.cpp:433  [libllama.so]" $TMP/s1.txt)" 1 \
    "report: the long frame keeps its name, source line and module (the weights site's stack)"
"$VT" report --wide $TMP/s1 >$TMP/s1.wide 2>/dev/null
is "$(grep -c -F "        #7  $LONG  llama.cpp:433  [libllama.so]" $TMP/s1.wide)" 1 "report --wide: the name whole"
is "$(grep -c '^VERDICT: PARTIAL OFFLOAD. 41 of 81 layers run from host memory: generation runs at host-memory speed for them.$' $TMP/s1.wide)" 1 \
    "report --wide: the verdict on one line"
"$VT" replay --capacity 16GiB --wide $TMP/s1 >$TMP/s1.replay-wide 2>/dev/null
is "$(grep -c -F "      #7  $LONG  [libllama.so]" $TMP/s1.replay-wide)" 1 "replay --wide: the name whole"
is "$(grep -c -F "      #7  llama_model_load_from_file(…)  [libllama.so]" $TMP/s1.replay)" 1 "replay: the name without its parameters"
"$VT" diff --wide $TMP/s1 $TMP/s8 >$TMP/diff.wide 2>/dev/null
is "$(head -1 $TMP/diff.wide)" "A: $TMP/s1 (2 processes, 1 GPU), PARTIAL OFFLOAD" "diff --wide: a side on one line"

# Any module, file and function names fit: a library and a source file
# named at length, a long function, and a stack under it (the location
# gives way before the name goes below 24 columns).
L=$TMP/longnames
mkdir -p "$L"
cat >"$L/kv_cache_allocation_for_every_layer_of_the_model.c" <<'C'
extern int cudaMalloc(void **ptr, unsigned long size);
__attribute__((noinline)) int llama_kv_cache_allocate_every_layer_of_the_model_at_once(unsigned long n)
{
    void *p;
    return cudaMalloc(&p, n);
}
C
printf 'int llama_kv_cache_allocate_every_layer_of_the_model_at_once(unsigned long n);\nint main(void) { return llama_kv_cache_allocate_every_layer_of_the_model_at_once(1 << 20); }\n' >"$L/main.c"
if cc -g -O0 -fPIC -shared -o "$L/libmyllama-cuda-backend-with-a-long-name.so" "$L/kv_cache_allocation_for_every_layer_of_the_model.c" &&
        cc -g -O0 -o "$L/prog" "$L/main.c" -L"$L" -lmyllama-cuda-backend-with-a-long-name -Wl,-rpath,"$L" \
            -L"$SIM" -lcudart -Wl,-rpath,"$SIM"; then
    VTSIM_DEVICES=24GiB traced $L/t "$L/prog"
    "$VT" report $L/t >$L/t.txt 2>/dev/null
    fits $L/t.txt "report of long module, file and function names"
    check "... the frame keeps its line number and names its module" grep -q "#0  llama_kv_cach.*\.c:5  \[libmyllama-cuda-.*\.so\]$" $L/t.txt
else
    T=$((T+1)); echo "ok $T # SKIP cannot build the long-named library"
    T=$((T+1)); echo "ok $T # SKIP cannot build the long-named library"
fi

# Every command's --help, and the command list.
for c in "" record report dump export diff replay serve top; do
    "$VT" $c --help >$TMP/help.txt 2>&1
    fits $TMP/help.txt "vramtrace ${c:-(no command)} --help"
done
done_testing
