/* deepext.c: a library linked to the runtime and the driver, loaded with
 * RTLD_DEEPBIND by scopeprog (76-fault-interpose, deepbind): its own scope
 * comes before the global one in its lookups, LD_PRELOAD included. Built
 * twice: lazy binding (libdeep_lazy.so) and a read-only GOT bound at load
 * (-z now, libdeep_now.so).
 *
 * deep_alloc: cudaMalloc 1 GiB and cuMemAlloc_v2 2 GiB, both freed, each
 * result printed; then which deep_whoami its call reached: its own under
 * RTLD_DEEPBIND, the program's (exported, global) without; then 512 MiB
 * through cuMemAlloc_v2 and cuMemFree_v2 looked up by hand
 * (dlopen("libcuda.so.1") + dlsym: its own scope binds those to libc's). */
#include <dlfcn.h>
#include <stdio.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#define EXPORT __attribute__((visibility("default")))
#define GiB (1024ull * 1024 * 1024)

EXPORT const char *deep_whoami(void)
{
    return "the library's own";
}

EXPORT int deep_alloc(void)
{
    void *a = NULL;
    CUdeviceptr b = 0;
    int rt = cudaMalloc(&a, GiB);
    int drv = cuMemAlloc_v2(&b, 2 * GiB);
    printf("cudaMalloc(1 GiB)=%d cuMemAlloc_v2(2 GiB)=%d\n", rt, drv);
    printf("frees=%d,%d\n", rt ? -1 : (int)cudaFree(a), drv ? -1 : (int)cuMemFree_v2(b));
    printf("deep_whoami: %s\n", deep_whoami());
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    CUresult (*alloc)(CUdeviceptr *, size_t) = h ? (CUresult(*)(CUdeviceptr *, size_t))dlsym(h, "cuMemAlloc_v2") : NULL;
    CUresult (*release)(CUdeviceptr) = h ? (CUresult(*)(CUdeviceptr))dlsym(h, "cuMemFree_v2") : NULL;
    CUdeviceptr c = 0;
    int looked = alloc && release ? (int)alloc(&c, GiB / 2) : -1;
    printf("looked-up cuMemAlloc_v2(512 MiB)=%d free=%d\n", looked, looked ? -1 : (int)release(c));
    return rt || drv || looked;
}
