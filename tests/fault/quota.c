/* libquota.so: a HAMi-core-like quota interposer for the interposition
 * test (76-fault-interpose). Preloaded after the shim, as /etc/ld.so.preload
 * puts HAMi-core after LD_PRELOAD. Its cuMemAlloc_v2 refuses a request over
 * 1 GiB with CUDA_ERROR_OUT_OF_MEMORY (2) and passes the rest to the next
 * definition. Its cuGetProcAddress_v2 answers "cuMemAlloc" with its own
 * cuMemAlloc_v2, as HAMi-core's does, and passes every other symbol to the
 * next one. A pointer the driver hands out itself, or that dlsym(libcuda)
 * finds, skips it, with or without the shim. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef int (*alloc_fn)(uint64_t *, size_t);
typedef int (*procaddr_fn)(const char *, void **, int, uint64_t, int *);

__attribute__((visibility("default"))) int cuMemAlloc_v2(uint64_t *dptr, size_t bytes)
{
    if (bytes > (1ull << 30))
        return 2;
    alloc_fn next = (alloc_fn)dlsym(RTLD_NEXT, "cuMemAlloc_v2");
    return next ? next(dptr, bytes) : 500;
}

__attribute__((visibility("default"))) int cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                                                uint64_t flags, int *status)
{
    procaddr_fn next = (procaddr_fn)dlsym(RTLD_NEXT, "cuGetProcAddress_v2");
    if (!next)
        return 500;
    int rc = next(symbol, pfn, version, flags, status);
    if (rc == 0 && pfn && symbol && strcmp(symbol, "cuMemAlloc") == 0)
        *pfn = (void *)cuMemAlloc_v2;
    return rc;
}
