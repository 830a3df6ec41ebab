#!/bin/sh
# `make test-gpu` cannot run without a GPU, but its script can: the same
# tests/gpu/run.sh against the simulated driver (VT_GPU_SIM) builds the
# entry-point and overhead programs, checks every entry point is traced,
# the OOM + host fallback verdict, a graph launch out of memory and the
# overhead lines. This keeps the
# real-GPU suite from rotting between runs on a GPU.
. tests/t/lib.sh
out=$(CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} VT_GPU_SIM=$SIM sh tests/gpu/run.sh 2>&1)
rc=$?
is "$rc" 0 "test-gpu dry run passes on the simulated driver"
for want in "entry points, shared libcudart  *ok *all 77 recorded" "a pointer from cuGetProcAddress  *ok" \
            "stream capture into CUDA graphs  *ok *20 captured calls flagged" \
            "OOM, then a pinned-host fallback  *ok *oom=1 host_fallback=1 tag=weights" \
            "a graph launch out of memory  *ok *add-node=0 instantiate=0 launch=2; verdict=failed tip=graph_launch" \
            "memory left for the exit  *ok *live=2097152 teardown_frees=0 ended_by=exit" \
            "cudaMalloc+cudaFree, 1 MiB  *ok" "PyTorch Llama, three allocators  *skip" \
            "unwind cache vs libunwind, entry points  *ok *[1-9][0-9]* stacks, .* 0 differences"; do
    if echo "$out" | grep -q "^$want"; then ok "table: $want"; else nok "table: $want"; fi
done
[ $rc -eq 0 ] || echo "$out" | sed 's/^/#  /'
done_testing
