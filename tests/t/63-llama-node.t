#!/bin/sh
# The real llama.cpp as @fugood/llama.node 1.7.15 ships it for CUDA: ggml
# and llama.cpp linked into one addon (index.node), against CUDA 12 and
# NCCL, on the simulated GPU (build/sim12), as shipped and stripped. In
# that build only set_usage, tensor_alloc and two getters of ggml go
# through a PLT slot; llama's placements of its weights and KV cache come
# from inside ggml's own object, and the report once said NO SPILL for a
# load that left 3 of 5 layers in host memory. Layers and every buffer
# line are checked against llama.cpp's own log. The packages (about
# 200 MB) are installed once into $VT_LLAMA_NODE_CACHE (default
# ~/.cache/vramtrace/llama-node-1.7.15), never into the tree; without npm or
# the registry the suite skips, saying why.
. tests/t/lib.sh
SIM12=$B/sim12
for f in "$SHIM" "$VT" "$SIM12/libcudart.so.12" "$SIM12/libcublas.so.12" "$SIM12/libnccl.so.2"; do
    [ -e "$f" ] || { echo "1..0 # SKIP $f not built (make test-bins)"; exit 0; }
done
for c in node npm python3 strip; do
    command -v $c >/dev/null || { echo "1..0 # SKIP $c not installed"; exit 0; }
done
VERSION=1.7.15
CACHE=${VT_LLAMA_NODE_CACHE:-${HOME:-/tmp}/.cache/vramtrace/llama-node-$VERSION}
ADDON=@fugood/node-llama-linux-x64-cuda/index.node

. tests/llama/lib.sh
if [ ! -e "$CACHE/shipped/node_modules/$ADDON" ]; then
    install_shipped @fugood/llama.node@$VERSION @fugood/node-llama-linux-x64-cuda@$VERSION
fi
if [ ! -e "$CACHE/stripped/node_modules/$ADDON" ]; then
    # The addon stripped, and llama.node copied beside it: node resolves a
    # linked package from its real path, which would find the shipped addon.
    SHIPPED=$CACHE/shipped/node_modules
    NEW=$(mktemp -d "$CACHE/stripped.XXXXXX") && mkdir -p "$NEW/node_modules/@fugood" || exit 1
    for e in "$SHIPPED"/* "$SHIPPED"/@fugood/*; do
        rel=${e#$SHIPPED/}
        case $rel in
            @fugood/llama.node|@fugood/node-llama-linux-x64-cuda) cp -r "$e" "$NEW/node_modules/$rel" ;;
            @fugood) ;;
            *) ln -s "$e" "$NEW/node_modules/$rel" ;;
        esac
    done
    strip "$NEW/node_modules/$ADDON" || exit 1
    publish "$NEW" stripped
fi

zero_model

# run_once DIR CARD LAYERS CONTEXT MMAP: one traced run of
# tests/llama/run-llama-node.mjs on the CUDA 12 libraries (traced_run).
run_once() {
    rd=$1 rcard=$2; shift 2
    traced_run "$rd" "$rcard" "$SIM12" tests/llama/run-llama-node.mjs "$@"
}

# -ngl 2 with mmap: llama.cpp says "offloaded 2/5 layers"; the 3 others
# are mapped from the file and their KV cache is host memory.
check_partial_mmap() {
    is "$(cat "$2.rc")/$(val "$2.bytes" verdict.partial_offload)" 0/1 "$1 $name: -ngl 2 loads; PARTIAL OFFLOAD"
    is "$(val "$2.bytes" layers.gpu)/$(val "$2.bytes" layers.total)" 2/5 "$1 $name: 2 of 5 layers on the GPU"
    check_placement "$@"
    check "$1 $name: the text says 3 of 5 layers run from host memory" \
        grep -q "VERDICT: PARTIAL OFFLOAD. 3 of 5 layers run from host memory" "$2.txt"
}
scenario partial_mmap 2GiB 2 512 1
# -ngl 3 without mmap: the weights are allocated by ggml's tensor
# allocator inside the addon, in pageable host memory for the CPU layers.
check_partial_nommap() {
    is "$(cat "$2.rc")/$(val "$2.bytes" verdict.partial_offload)" 0/1 "$1 $name: -ngl 3, no mmap: PARTIAL OFFLOAD"
    check_placement "$@"
    is "$(val "$2.bytes" place.weights.mapped_host)" 0 "$1 $name: nothing mapped without mmap"
}
scenario partial_nommap 2GiB 3 512 0
# Every layer on the GPU: NO SPILL, the token embeddings alone in host
# memory, and no layer weights there.
check_full() {
    is "$(cat "$2.rc")/$(val "$2.bytes" verdict.no_spill)/$(val "$2.bytes" offloaded)" 0/1/0 \
        "$1 $name: a full offload stays NO SPILL"
    check_placement "$@"
    is "$(val "$2.bytes" place.layer_weights.host)" 0 "$1 $name: no layer weights in host memory"
}
scenario full 2GiB 99 512 1
# One process loads the model with every layer, releases it, and loads it
# again with 2: the first load's buffers are freed by direct calls the
# trace never sees. The picture is the second load's, not the two summed
# (they were: 8 blocks, 603 MiB of layer weights). llama.cpp's log of the
# second load may not reach JavaScript before the process exits, so the
# bytes are the model's own (tests/llama/make_gguf.py): a block is
# 90193920 bytes, the output layer 1069056, a layer's K and V 1 MiB.
BLOCK=90193920 OUTPUT=1069056
check_reload_partial() {
    is "$(cat "$2.rc")/$(val "$2.bytes" verdict.partial_offload)" 0/1 "$1 $name: -ngl 99 then -ngl 2: PARTIAL OFFLOAD"
    is "$(val "$2.bytes" layers.gpu)/$(val "$2.bytes" layers.total)" 2/5 "$1 $name: the second load's 2 of 5 layers"
    is "$(val "$2.bytes" place.layer_weights.gpu0)/$(val "$2.bytes" place.layer_weights.mapped_host)" \
        "$((BLOCK + OUTPUT))/$((3 * BLOCK))" "$1 $name: 1 block + the output layer on the GPU, 3 blocks mapped"
    is "$(val "$2.bytes" place.kv.gpu0)/$(val "$2.bytes" place.kv.pageable_host)" "$MiB/$((3 * MiB))" \
        "$1 $name: its KV cache: 1 layer's on the GPU, 3 in host memory"
    check "$1 $name: the text says the picture is one moment of several" \
        grep -q "Where the model runs is shown at .*; [0-9]* of its buffers lived only before or after" "$2.txt"
}
scenario reload_partial 2GiB 99,2 512 1
# The other order: the partial load comes first. A full load after it does
# not hide it: PARTIAL OFFLOAD, the first load's picture.
check_partial_then_full() {
    is "$(cat "$2.rc")/$(val "$2.bytes" verdict.partial_offload)" 0/1 "$1 $name: -ngl 2 then -ngl 99: PARTIAL OFFLOAD"
    is "$(val "$2.bytes" layers.gpu)/$(val "$2.bytes" layers.total)" 2/5 "$1 $name: the partial load's 2 of 5 layers"
    is "$(val "$2.bytes" place.layer_weights.mapped_host)" "$((3 * BLOCK))" "$1 $name: its 3 blocks mapped from the file"
}
scenario partial_then_full 2GiB 2,99 512 1
# The model loaded twice side by side (an app holding two models; ggml's
# frees unseen here, as above): -ngl 99, then -ngl 2 while the first is
# held. Summed, the KV cache was both contexts' (5 MiB on the GPU where the
# second's had 1). The picture is the second's, against llama.cpp's last
# lines, and the first is summed up beside it.
check_side_by_side() {
    is "$(cat "$2.rc")/$(val "$2.bytes" verdict.partial_offload)" 0/1 "$1 $name: -ngl 99 and -ngl 2 side by side: PARTIAL OFFLOAD"
    check_placement "$@"
    is "$(json_of "$2.json" '(p["placement"]["models_at_once"], p["placement"]["other_models"][0]["layers_gpu"], p["placement"]["other_models"][0]["layers_total"])')" \
        "(2, 5, 5)" "$1 $name: 2 models at once, the other with its 5 of 5 layers on the GPU"
}
scenario side_by_side 2GiB 99+2 512 1
done_testing
