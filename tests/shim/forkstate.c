/* forkstate: a child forked after its parent's samples, pools and live
 * allocations, which must trace itself as if it had started there.
 *
 * The parent (driver API, device 0):
 *  - allocates 8 MiB from an explicit pool and frees it (the pool keeps the
 *    block cached), then 64 MiB with cuMemAlloc and frees it: its peak
 *    samples go up to 64 MiB;
 *  - allocates 4 MiB ("kept") and forks.
 * The child frees the parent's 4 MiB, allocates 16 MiB, then 80 MiB more,
 * frees both and exits 0. The parent then frees its 4 MiB and destroys the
 * pool. Prints "forkstate child=ok" when the child exited 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#define MiB ((size_t)1 << 20)
#define NOINLINE __attribute__((noinline))

static int failures;
#define CHECK(call)                                                                                            \
    do {                                                                                                       \
        if ((call) != 0) {                                                                                     \
            fprintf(stderr, "forkstate: %s failed\n", #call);                                                  \
            failures++;                                                                                        \
        }                                                                                                      \
    } while (0)

NOINLINE static void child_frees_parents(CUdeviceptr kept)
{
    CHECK(cuMemFree_v2(kept));
}

NOINLINE static void child_allocates(void)
{
    CUdeviceptr small, large;
    CHECK(cuMemAlloc_v2(&small, 16 * MiB));
    CHECK(cuMemAlloc_v2(&large, 80 * MiB));
    CHECK(cuMemFree_v2(large));
    CHECK(cuMemFree_v2(small));
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));

    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool;
    CHECK(cuMemPoolCreate(&pool, &props));
    CUdeviceptr cached, big, kept;
    CHECK(cuMemAllocFromPoolAsync(&cached, 8 * MiB, pool, NULL));
    CHECK(cuMemFreeAsync(cached, NULL));
    CHECK(cuMemAlloc_v2(&big, 64 * MiB));
    CHECK(cuMemFree_v2(big));
    CHECK(cuMemAlloc_v2(&kept, 4 * MiB));

    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        child_frees_parents(kept);
        child_allocates();
        /* exit, not _exit: the child's trace is finished at exit. */
        exit(failures ? 1 : 0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        failures++;
    int child_ok = pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    CHECK(cuMemFree_v2(kept));
    CHECK(cuMemPoolDestroy(pool));
    printf("forkstate child=%s\n", child_ok ? "ok" : "failed");
    return failures || !child_ok;
}
