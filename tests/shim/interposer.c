/* Another interposer, preloaded BEFORE the shim, that defines one wrapped
 * name (cuMemAlloc_v2) and calls the driver directly, as HAMi-core's
 * libvgpu.so does. Its definition preempts the shim's export, so linked
 * calls never reach the shim; but a pointer the shim hands out (dlsym,
 * cuGetProcAddress) must be the shim's own wrapper, not this one. Counts
 * its calls and prints the count at exit, so a test can see it was used.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef void *(*dlsym_fn)(void *, const char *);

static unsigned calls;

/* glibc's own dlsym, taken from libc so no interposed dlsym answers. */
static alloc_fn driver_alloc(void)
{
    static alloc_fn fn;
    if (fn)
        return fn;
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    dlsym_fn real_dlsym = libc ? (dlsym_fn)dlvsym(libc, "dlsym", "GLIBC_2.34") : NULL;
    if (libc && !real_dlsym)
        real_dlsym = (dlsym_fn)dlvsym(libc, "dlsym", "GLIBC_2.2.5");
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY);
    if (real_dlsym && cuda)
        fn = (alloc_fn)real_dlsym(cuda, "cuMemAlloc_v2");
    return fn;
}

__attribute__((visibility("default"))) int cuMemAlloc_v2(unsigned long long *dptr, size_t bytesize)
{
    calls++;
    alloc_fn fn = driver_alloc();
    return fn ? fn(dptr, bytesize) : 500; /* CUDA_ERROR_NOT_FOUND */
}

__attribute__((destructor)) static void report(void)
{
    char line[64];
    int n = snprintf(line, sizeof line, "interposer: cuMemAlloc_v2 calls=%u\n", calls);
    if (n > 0 && write(2, line, (size_t)n) < 0)
        return;
}
