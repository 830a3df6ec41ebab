/* libquota.so: a HAMi-core-like quota interposer for the interposition
 * test (76-fault-interpose). Preloaded after the shim, as /etc/ld.so.preload
 * puts HAMi-core after LD_PRELOAD. Its cuMemAlloc_v2 refuses a request over
 * 1 GiB with CUDA_ERROR_OUT_OF_MEMORY (2) and passes the rest to the next
 * definition; it wraps nothing else (no cuGetProcAddress), so a pointer the
 * driver hands out, or dlsym(libcuda) finds, skips it, with or without the
 * shim. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

typedef int (*alloc_fn)(uint64_t *, size_t);

__attribute__((visibility("default"))) int cuMemAlloc_v2(uint64_t *dptr, size_t bytes)
{
    if (bytes > (1ull << 30))
        return 2;
    alloc_fn next = (alloc_fn)dlsym(RTLD_NEXT, "cuMemAlloc_v2");
    return next ? next(dptr, bytes) : 500;
}
