/* vmm-pool: memory that never passes through cudaMalloc. Both ggml's CUDA
 * pool and PyTorch's expandable segments reserve a large virtual range and
 * map physical memory into it with cuMemCreate / cuMemMap / cuMemSetAccess,
 * reached through cuGetProcAddress (cudaGetDriverEntryPointByVersion). A
 * tool that only hooks cudaMalloc sees none of it.
 *
 * Field story 7: "nvidia-smi shows 10 GiB more than my allocations."
 *
 *   1. ggml_cuda_pool_vmm on device 0 serves the matmul temporaries of a
 *      70B model (n_embd 8192, n_ff 28672) for ubatches of 128, 512 and
 *      2048 tokens: 32 GiB of VA reserved, 64 MiB mapped in six
 *      cuMemCreate calls, each handle released right after mapping, as
 *      ggml does (the mapping keeps the memory alive).
 *   2. An expandable segment (PyTorch) reserves 9/8 of the card's memory
 *      in VA (27660 MiB on 24 GiB) and maps 20 MiB pages as a KV cache
 *      grows by ten 1 GiB blocks: 10240 MiB mapped in 512 pages. The last
 *      five blocks are freed and emptyCache unmaps their 256 pages: 5120 MiB
 *      stay mapped until exit.
 *
 * Exact numbers on VTSIM_DEVICES=24GiB (2 MiB granularity):
 *   ggml pool mapped: 64 MiB (cuMemCreate sizes 2, 2, 2, 10, 2, 46 MiB)
 *   expandable segment: VA 27660 MiB, peak mapped 10240 MiB, final 5120 MiB
 *   device peak: 10304 MiB; no failure; exit 0.
 *
 *   vmm-pool [--blocks N] [--block-mib M] [--until-oom]
 * --until-oom keeps adding blocks until cuMemCreate fails (exit 1).
 */
#include "c10/c10_cuda.h"
#include "ggml/ggml.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

using c10::cuda::CUDACachingAllocator::Native::ExpandableSegment;
using c10::cuda::CUDACachingAllocator::Native::OutOfMemoryError;

__attribute__((noinline)) static int ggml_prompt_batches(void)
{
    ggml_cuda_pool_t pool = ggml_cuda_pool_new(0);
    if (!ggml_cuda_pool_is_vmm(pool)) {
        fprintf(stderr, "vmm-pool: device 0 does not support VMM (or GGML_CUDA_NO_VMM is set)\n");
        ggml_cuda_pool_destroy(pool);
        return 1;
    }
    const uint32_t ubatches[] = {128, 512, 2048};
    for (uint32_t ub : ubatches)
        ggml_backend_cuda_graph_compute(pool, 8192, 28672, ub);
    printf("ggml_pool=ok\n");
    /* Kept alive to the end, as a llama_context keeps its pools. */
    return 0;
}

int main(int argc, char **argv)
{
    int blocks = 10;
    size_t block_mib = 1024;
    bool until_oom = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
            blocks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--block-mib") && i + 1 < argc)
            block_mib = strtoull(argv[++i], nullptr, 10);
        else if (!strcmp(argv[i], "--until-oom"))
            until_oom = true;
        else {
            fprintf(stderr, "usage: vmm-pool [--blocks N] [--block-mib M] [--until-oom]\n");
            return 2;
        }
    }
    if (cudaSetDevice(0) != cudaSuccess) {
        fprintf(stderr, "vmm-pool: no CUDA device\n");
        return 1;
    }
    if (ggml_prompt_batches())
        return 1;

    ExpandableSegment seg(0);
    std::vector<void *> kv;
    int rc = 0;
    try {
        for (int i = 0; until_oom || i < blocks; i++)
            kv.push_back(seg.malloc(block_mib << 20));
    } catch (const OutOfMemoryError &) {
        rc = 1;
    }
    printf("expandable_va=%zu peak_mapped=%zu blocks=%zu\n", seg.reserved_va() >> 20, seg.mapped() >> 20, kv.size());
    for (size_t i = kv.size(); i > kv.size() / 2; i--)
        seg.free(kv[i - 1], block_mib << 20);
    seg.emptyCache();
    printf("final_mapped=%zu\n", seg.mapped() >> 20);
    fflush(stdout);
    return rc;
}
