/* atexitfree: memory freed at exit by handlers the program registered
 * before its first CUDA call: an atexit handler and, in C++ programs, the
 * static destructors that run the same way.
 *
 *   atexitfree
 *
 * Registers the handler, then allocates 64 MiB with cudaMalloc and 32 MiB
 * with cuMemAlloc; the handler frees both. Exits 0. */
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

static void *runtime_block;
static CUdeviceptr driver_block;

static void free_at_exit(void)
{
    cudaFree(runtime_block);
    cuMemFree(driver_block);
}

int main(void)
{
    atexit(free_at_exit);
    if (cudaMalloc(&runtime_block, 64u << 20) != cudaSuccess || cuMemAlloc(&driver_block, 32u << 20) != CUDA_SUCCESS)
        return 1;
    return 0;
}
