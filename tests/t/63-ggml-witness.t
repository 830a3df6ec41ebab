#!/bin/sh
# ggml's buffer API as a witness (preload/ggml_buffers.c): the shim's
# ggml_backend_buffer_set_usage records each marked buffer as a GGML_BUFFER
# record (usage, base, size, name), the program sees what it saw without
# the shim, and programs without ggml get none.
. tests/t/lib.sh
EX=$B/examples
for f in "$SHIM" "$VT" "$EX/ollama-engine" "$EX/llama-cli" "$EX/torch-swap" "$SIM/libcudart.so.13"; do
    if [ ! -e "$f" ]; then
        echo "1..0 # SKIP $f not built (make test-bins)"
        exit 0
    fi
done
TMP=$(tmpdir)
trap 'rm -rf "$TMP"' EXIT

# witnesses DUMP: "USAGE SIZE NAME" per GGML_BUFFER record marking WEIGHTS
# or COMPUTE, in file order (ALL=1: the buffers the tensor allocator
# returned too, usage ANY).
witnesses() {
    awk -v all="${2:-0}" '$1 == "ggml_buffer" && (all || $0 !~ / usage=ANY /) { u = ""; s = ""; n = ""
            for (i = 2; i <= NF; i++) { split($i, kv, "=")
                if (kv[1] == "usage") u = kv[2]; if (kv[1] == "size") s = kv[2]; if (kv[1] == "name") n = kv[2] }
            gsub(/"/, "", n); print u, s, n }' "$1"
}
# unmatched DUMP: marks whose base and size are no successful allocation's.
unmatched() {
    awk '$1 == "event" && $0 ~ / kind=alloc / && $0 ~ / result=0 / { p = ""; s = ""
            for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "ptr") p = kv[2]; if (kv[1] == "size") s = kv[2] }
            have[p " " s] = 1 }
         $1 == "ggml_buffer" && $0 !~ / usage=ANY / { b = ""; s = ""
            for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "base") b = kv[2]; if (kv[1] == "size") s = kv[2] }
            want[b " " s] = 1 }
         END { n = 0; for (k in want) if (!(k in have)) n++; print n }' "$1"
}

# ---- ollama's Go engine: every buffer from one cgo gate ---------------------
D=$TMP/oe
mkdir -p $D
# In a sanitized build the sanitizer runtime must come first here too.
plain=$(VTSIM_DEVICES=24GiB LD_PRELOAD="${VT_SAN_RT:-}" LD_LIBRARY_PATH=$SIM "$EX/ollama-engine" 2>/dev/null)
traced=$(VTSIM_DEVICES=24GiB under_shim $D "$EX/ollama-engine" 2>$D.err)
is "$?" 0 "ollama-engine exits 0 under the shim"
is "$traced" "weights usage=1 kv usage=0 compute=256 MiB" "ollama-engine reads back the usages it set"
is "$traced" "$plain" "the program sees the same with and without the shim"
"$VT" dump $D/*.vtrace >$D.dump 2>$D.derr
is "$?" 0 "dump reads a trace with GGML_BUFFER records"
is "$(witnesses $D.dump | tr '\n' ';')" \
   "WEIGHTS 4294967296 CUDA0;WEIGHTS 536870912 CUDA_Host;COMPUTE 268435456 CUDA0;COMPUTE 33554432 CUDA_Host;" \
   "ollama-engine: the two weights buffers and the two compute buffers, exact sizes and names; KV (never marked) has none"
is "$(unmatched $D.dump)" 0 "ollama-engine: every witness's base and size are an allocation the trace holds"
"$VT" dump --count $D/*.vtrace >$D.count
is "$(witnesses $D.dump 1 | grep '^ANY' | tr '\n' ';')" \
   "ANY 4294967296 CUDA0;ANY 536870912 CUDA_Host;ANY 1073741824 CUDA0;" \
   "ollama-engine: each buffer ggml_backend_alloc_ctx_tensors_from_buft returned, KV cache included, before any mark"
is "$(awk '$1 == "ggml_buffer" {print $2}' $D.count)" 7 "dump --count counts ggml_buffer records: 4 marks + 3 allocated buffers"

# ---- llama.cpp-shaped: libllama marks weights, ggml-alloc marks compute -----
# Every layer on a card that holds them, mmap off: the weights buffers
# (CUDA_Host for token_embd, CUDA0) and the compute buffers are all CUDA
# allocations.
D=$TMP/lc
mkdir -p $D
VTSIM_DEVICES=48GiB under_shim $D "$EX/llama-cli" -m llama-70b-q4_k_m -ngl 99 -c 8192 --no-mmap >$D.out 2>$D.err
is "$?" 0 "llama-cli exits 0 under the shim"
"$VT" dump $D/*.vtrace >$D.dump
# Sizes from llama.cpp's own log lines (MiB), in the order it prints them.
want=$(awk '/model buffer size|compute buffer size/ {
              u = ($0 ~ /model/) ? "WEIGHTS" : "COMPUTE"
              printf "%s %.0f %s;", u, $(NF-1) * 1048576, $2 }' $D.err)
is "$(echo "$want" | tr ';' '\n' | grep -c .)" 4 "llama-cli logs two model and two compute buffers"
is "$(witnesses $D.dump | tr '\n' ';')" "$want" \
   "llama-cli: one witness per model and compute buffer, sizes as llama.cpp logs them; the KV buffer has none"
is "$(unmatched $D.dump)" 0 "llama-cli: every witness's base and size are an allocation the trace holds"

# ---- ggml loaded RTLD_LOCAL: out of RTLD_NEXT's reach ---------------------
if command -v python3 >/dev/null; then
    D=$TMP/local
    mkdir -p $D
    got=$(VTSIM_DEVICES=24GiB under_shim $D python3 tests/shim/ggml_local.py "$EX" 2>$D.err)
    is "$got" "reserved=1 usage=2" "RTLD_LOCAL ggml: the real set_usage still runs (the program reads COMPUTE back)"
    "$VT" dump $D/*.vtrace >$D.dump
    is "$(witnesses $D.dump | tr '\n' ';')" "COMPUTE 268435456 CUDA0;" "RTLD_LOCAL ggml: the compute buffer's witness"
else
    ok "# SKIP python3 needed for the RTLD_LOCAL case"
    ok "# SKIP python3 needed for the RTLD_LOCAL case"
fi

# ---- no ggml, no record -----------------------------------------------------
D=$TMP/torch
mkdir -p $D
VTSIM_DEVICES=24GiB under_shim $D "$EX/torch-swap" >/dev/null 2>&1
is "$?" 0 "torch-swap (no ggml) exits 0 under the shim"
"$VT" dump $D/*.vtrace >$D.dump
check "torch-swap: a trace with events" grep -q '^event ' $D.dump
is "$(witnesses $D.dump | wc -l | tr -d ' ')" 0 "a program without ggml has no GGML_BUFFER record"

done_testing
