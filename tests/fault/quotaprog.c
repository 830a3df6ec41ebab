/* quotaprog: linked to the simulated runtime and driver, run under a quota
 * interposer (libquota.so: requests over 1 GiB refused) preloaded after the
 * shim (76-fault-interpose).
 *
 *   linked   cudaMalloc(1 MiB) (the runtime fetches the driver's entry
 *            points through cuGetProcAddress), then a linked
 *            cuMemAlloc_v2(2 GiB): the quota refuses it
 *   dlsym    a linked cuMemAlloc_v2(1 MiB) (passes the quota), then
 *            cuMemAlloc_v2(2 GiB) through dlsym(libcuda handle): the driver
 *            itself, past the quota, allocates it
 *   procaddr a 2 GiB allocation through the linked cuGetProcAddress_v2's
 *            "cuMemAlloc" (the quota's own: refused), then through the
 *            cuGetProcAddress_v2 of dlsym(libcuda) (the driver's: made)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    CUdeviceptr d = 0;
    if (strcmp(mode, "linked") == 0) {
        void *p = NULL;
        printf("cudaMalloc(1 MiB)=%d\n", (int)cudaMalloc(&p, 1 << 20));
        printf("linked cuMemAlloc_v2(2 GiB)=%d\n", (int)cuMemAlloc(&d, 2ull << 30));
        return 0;
    }
    if (strcmp(mode, "dlsym") == 0) {
        cuInit(0);
        CUdevice dev;
        CUcontext ctx;
        cuDeviceGet(&dev, 0);
        cuDevicePrimaryCtxRetain(&ctx, dev);
        cuCtxSetCurrent(ctx);
        printf("linked cuMemAlloc_v2(1 MiB)=%d\n", (int)cuMemAlloc(&d, 1 << 20));
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        CUresult (*fn)(CUdeviceptr *, size_t) = (CUresult(*)(CUdeviceptr *, size_t))dlsym(h, "cuMemAlloc_v2");
        printf("dlsym(libcuda) cuMemAlloc_v2(2 GiB)=%d\n", fn ? (int)fn(&d, 2ull << 30) : -1);
        return 0;
    }
    if (strcmp(mode, "procaddr") == 0) {
        void *p = NULL;
        cudaMalloc(&p, 1 << 20); /* a context */
        typedef CUresult (*alloc_t)(CUdeviceptr *, size_t);
        typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
        alloc_t fn = NULL;
        CUresult rc = cuGetProcAddress_v2("cuMemAlloc", (void **)&fn, 13000, 0, NULL);
        printf("linked cuGetProcAddress_v2(cuMemAlloc)=%d, 2 GiB through it=%d\n", (int)rc,
               fn ? (int)fn(&d, 2ull << 30) : -1);
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
        fn = NULL;
        rc = gpa ? gpa("cuMemAlloc", (void **)&fn, 13000, 0, NULL) : (CUresult)-1;
        printf("dlsym(libcuda) cuGetProcAddress_v2 %s, (cuMemAlloc)=%d, 2 GiB through it=%d\n",
               gpa ? "found" : "NULL", (int)rc, fn ? (int)fn(&d, 2ull << 30) : -1);
        return 0;
    }
    fprintf(stderr, "usage: quotaprog linked|dlsym|procaddr\n");
    return 3;
}
