/* overhead: what the shim adds to an allocation and its free. N pairs of
 * cudaMalloc/cudaFree and of cuMemAlloc/cuMemFree (1 MiB, the size
 * PyTorch's caching allocator asks for small segments... rounded), timed
 * in-process; run with and without LD_PRELOAD and compare. Prints
 * "runtime ns_per_pair=X" and "driver ns_per_pair=Y", best of 3. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    size_t size = (size_t)1 << 20;
    if (cudaSetDevice(0) != cudaSuccess) {
        fprintf(stderr, "overhead: no device\n");
        return 1;
    }
    void *p;
    CUdeviceptr d;
    for (int i = 0; i < 100; i++) { /* warm up: context, first stacks */
        cudaMalloc(&p, size);
        cudaFree(p);
    }
    double best_rt = 1e30, best_drv = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_ns();
        for (int i = 0; i < n; i++) {
            if (cudaMalloc(&p, size) != cudaSuccess || cudaFree(p) != cudaSuccess)
                return 1;
        }
        double t1 = now_ns();
        for (int i = 0; i < n; i++) {
            if (cuMemAlloc_v2(&d, size) != CUDA_SUCCESS || cuMemFree_v2(d) != CUDA_SUCCESS)
                return 1;
        }
        double t2 = now_ns();
        if ((t1 - t0) / n < best_rt)
            best_rt = (t1 - t0) / n;
        if ((t2 - t1) / n < best_drv)
            best_drv = (t2 - t1) / n;
    }
    printf("runtime ns_per_pair=%.0f\ndriver ns_per_pair=%.0f\n", best_rt, best_drv);
    return 0;
}
