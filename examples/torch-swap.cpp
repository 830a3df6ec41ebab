/* torch-swap: an app that swaps models on one GPU through PyTorch's caching
 * allocator (a ComfyUI / diffusers style pipeline: the text encoder stays,
 * the big model changes).
 *
 * Field story 4: "CUDA out of memory, but nvidia-smi says 8.5 GiB free."
 * The free memory is there, but in two holes, neither big enough:
 *
 *   1. text encoder, kept:            8192 MiB  [0, 8 GiB)
 *   2. load model B: a 4096 MiB staging tensor for the dtype cast
 *      [8, 12 GiB), B's weights 6144 MiB [12, 18 GiB), B's LoRA adapter
 *      1024 MiB [18, 19 GiB) which the app keeps across swaps; then the
 *      staging tensor is freed and torch.cuda.empty_cache() returns it:
 *      a 4096 MiB hole.
 *   3. unload B: its weights go back to the allocator's cache, still held.
 *   4. load model C: 8192 MiB. No cached block is big enough; cudaMalloc
 *      fails although the driver reports 8768 MiB free (24576 - 448
 *      reserve - 15360 held): the holes are 4096 and 5120 MiB. The
 *      allocator releases its cached 6144 MiB segment and retries: the
 *      hole is now 10240 MiB and C loads.
 *   5. swap back to B: served from C's cached segment, no cudaMalloc.
 *
 * Exact numbers on VTSIM_DEVICES=24GiB (first-fit placement): failed
 * cudaMalloc of 8589934592 bytes while cudaMemGetInfo said 9193914368
 * free; flush: one cudaFree of 6442450944 bytes; retry succeeds. Exit 0.
 * Peak held: 8192 + 4096 + 6144 + 1024 = 19456 MiB.
 *
 * stdout: one line per step, "step=NAME allocated=MiB reserved=MiB".
 */
#include "common/pace.h"
#include "c10/c10_cuda.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

using c10::cuda::CUDACachingAllocator::Native::Block;
using c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator;
using c10::cuda::CUDACachingAllocator::Native::OutOfMemoryError;

static const size_t MiB = 1ull << 20;

static void report(const char *step, const DeviceCachingAllocator &a)
{
    printf("step=%s allocated=%zu reserved=%zu\n", step, a.allocated() / MiB, a.reserved() / MiB);
    fflush(stdout);
}

struct Model {
    Block *weights = nullptr, *adapter = nullptr;
};

__attribute__((noinline)) static void load_model(DeviceCachingAllocator &a, Model &m, size_t weights_mib,
                                                 size_t staging_mib, size_t adapter_mib)
{
    Block *staging = staging_mib ? a.malloc(staging_mib * MiB) : nullptr;
    m.weights = a.malloc(weights_mib * MiB);
    if (adapter_mib)
        m.adapter = a.malloc(adapter_mib * MiB);
    example_pace_read(weights_mib * MiB);
    if (staging) {
        a.free(staging);
        a.emptyCache();
    }
}

__attribute__((noinline)) static void unload_model(DeviceCachingAllocator &a, Model &m)
{
    a.free(m.weights);
    m.weights = nullptr;
}

int main(int argc, char **argv)
{
    size_t encoder = 8192, staging = 4096, b = 6144, lora = 1024, c = 8192;
    if (argc == 6) {
        encoder = strtoull(argv[1], nullptr, 10), staging = strtoull(argv[2], nullptr, 10);
        b = strtoull(argv[3], nullptr, 10), lora = strtoull(argv[4], nullptr, 10), c = strtoull(argv[5], nullptr, 10);
    } else if (argc != 1) {
        fprintf(stderr, "usage: torch-swap [ENCODER_MiB STAGING_MiB B_MiB LORA_MiB C_MiB]  (8192 4096 6144 1024 8192)\n");
        return 2;
    }
    if (cudaSetDevice(0) != cudaSuccess) {
        fprintf(stderr, "torch-swap: no CUDA device\n");
        return 1;
    }
    DeviceCachingAllocator alloc(0);
    try {
        Block *text_encoder = alloc.malloc(encoder * MiB);
        report("text_encoder", alloc);
        Model mb, mc;
        load_model(alloc, mb, b, staging, lora);
        report("load_b", alloc);
        unload_model(alloc, mb);
        report("unload_b", alloc);
        load_model(alloc, mc, c, 0, 0);
        report("load_c", alloc);
        unload_model(alloc, mc);
        load_model(alloc, mb, b, 0, 0);
        report("load_b_again", alloc);
        unload_model(alloc, mb);
        alloc.free(text_encoder);
    } catch (const OutOfMemoryError &e) {
        report("oom", alloc);
        return 1;
    }
    return 0;
}
