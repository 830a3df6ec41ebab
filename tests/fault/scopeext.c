/* scopeext.c: an extension linked to one runtime, built three times for the
 * interposition test (76-fault-interpose): libscope_13.so against the
 * simulated libcudart.so.13, libscope_12.so against a copy named
 * libcudart.so.12 (its own version node), libscope_v.so against a vendored
 * copy named libcudart-1a2b3c4d.so.11.0, as PyTorch wheels ship. The host
 * (scopeprog) loads them RTLD_LOCAL, so no runtime is in the global scope.
 *
 * scope_which: a cudaMalloc that must fail, then cudaGetLastError, which
 * the shim does not wrap and so always runs in the extension's own runtime:
 * it says the error only when the cudaMalloc ran there too. With
 * SCOPE_CTOR_TAG set, the library's constructor calls it too, inside the
 * dlopen that loads it and its runtime. */
#include <stdlib.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#define EXPORT __attribute__((visibility("default")))

/* Static: the constructor's call must not bind to another extension's
 * scope_which, global and loaded first. */
static void which(const char *tag)
{
    void *p = NULL;
    int rc = cudaMalloc(&p, (size_t)1 << 60);
    int last = cudaGetLastError();
    printf("%s: cudaMalloc(1 EiB)=%d own runtime's last error=%d\n", tag, rc, last);
}

EXPORT void scope_which(const char *tag)
{
    which(tag);
}

__attribute__((constructor)) static void scope_ctor(void)
{
    const char *tag = getenv("SCOPE_CTOR_TAG");
    if (tag)
        which(tag);
}

EXPORT int scope_alloc(const char *tag)
{
    void *p = NULL;
    int rc = cudaMalloc(&p, 1 << 20);
    printf("%s: cudaMalloc(1 MiB)=%d\n", tag, rc);
    if (rc == 0)
        cudaFree(p);
    return rc;
}

EXPORT void scope_lookup(const char *tag)
{
    typedef int (*malloc_fn)(void **, size_t);
    malloc_fn fn = (malloc_fn)dlsym(RTLD_DEFAULT, "cudaMalloc");
    printf("%s: dlsym(RTLD_DEFAULT, cudaMalloc) %s\n", tag, fn ? "found" : "NULL");
    if (fn) {
        void *p = NULL;
        int rc = fn(&p, 1 << 20);
        printf("%s: through it cudaMalloc(1 MiB)=%d\n", tag, rc);
    }
}
