#!/bin/sh
# The trace names the variables of the start-up environment that decide
# where memory goes (the shim's list, preload/writer.c), exactly as given,
# and nothing else of the environment: not the secrets that share their
# prefix, not a variable too long to quote whole.
. tests/t/lib.sh
P=$B/tests/shim/paths
D=$(tmpdir)
long=$(head -c 5000 /dev/zero | tr '\0' x)
env -i PATH="$PATH" LLAMA_ARG_FIT_TARGET=1536 LLAMA_ARG_N_GPU_LAYERS=7 'LLAMA_ARG_OVERRIDE_TENSOR=blk\.[01]\.=CPU' \
    LLAMA_ARG_API_KEY=secret LLAMA_ARG_HF_TOKEN=hf_secret LLAMA_ARG_CTX_SIZE="$long" LLAMA_ARG_FIT_TARGETX=1 \
    LLAMA_ARG_N_CPU_FFN=2 LLAMA_ARG_DEVICE=CUDA1 OLLAMA_GPU_OVERHEAD=536870912 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True CUDA_VISIBLE_DEVICES= \
    LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" VRAMTRACE_DIR=$D $P >/dev/null 2>&1
is "$?" 0 "the program ran unchanged"
$VT dump $D/*.vtrace >$D/dump 2>&1
is "$(sed -n 's/^process .* env=\[\(.*\)\] host=.*/\1/p' $D/dump)" \
    '"LLAMA_ARG_FIT_TARGET=1536","LLAMA_ARG_N_GPU_LAYERS=7","LLAMA_ARG_OVERRIDE_TENSOR=blk\\.[01]\\.=CPU","LLAMA_ARG_N_CPU_FFN=2","LLAMA_ARG_DEVICE=CUDA1","OLLAMA_GPU_OVERHEAD=536870912","PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True","CUDA_VISIBLE_DEVICES="' \
    "the placement variables, in the environment's order, values as given (an empty one too)"
check "no secret of the same prefix (LLAMA_ARG_API_KEY, LLAMA_ARG_HF_TOKEN) is in the trace" \
    sh -c "! grep -a -q 'secret' $D/*.vtrace $D/dump"
check "a variable longer than 4096 bytes is left out whole, not cut" sh -c "! grep -q 'LLAMA_ARG_CTX_SIZE' $D/dump"

# Nothing of the kind set: the field is there, and empty.
D=$(tmpdir)
env -i PATH="$PATH" LD_LIBRARY_PATH=$SIM LD_PRELOAD="$SHIM_PRELOAD" VRAMTRACE_DIR=$D $P >/dev/null 2>&1
$VT dump $D/*.vtrace >$D/dump 2>&1
check "none set: env=[] (recorded, and empty)" grep -q '^process .* env=\[\] host=' $D/dump
done_testing
