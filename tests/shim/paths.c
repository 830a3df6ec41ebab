/* paths.c: a program that reaches the (simulated) driver every way real
 * runtimes do, so tests/t/50-shim-paths.t can assert the exact events the
 * shim records for each path and flavour.
 *
 * Each step allocates a size no other step uses (a distinct number of 4 KiB
 * pages plus 1 byte), so the test can find every event by its size. Every
 * step runs in a noinline function whose name must appear in the recorded
 * stack.
 *
 * Modes (argv[1]):
 *   linked    calls cu* linked against libcuda.so.1
 *   dlsym     dlopen("libcuda.so.1") + dlsym for every entry point
 *   procaddr  cuGetProcAddress_v2 (or cuGetProcAddress where _v2 is absent)
 *   runtime   the cuda* runtime API (libcudart, which itself uses procaddr)
 *   legacy    the v1 cuMemAlloc / cuMemGetInfo, which the shim must leave alone
 *   nocuda    touches nothing CUDA
 *   fork      allocates in the parent and in a forked child
 *   exec      allocates, then execs itself in "runtime" mode
 *   hold      allocates, prints "ready", and sleeps (for SIGKILL tests)
 *   threads N allocates from N threads at once, 1000 pairs each
 *   oom       asks for more than the card has
 *   pool      stream-ordered pools with cached blocks, for pool slack: an
 *             explicit pool left holding 16 MiB of freed blocks and the
 *             current pool holding 4 MiB, at a 48 MiB peak
 *   environ   edits its environment every way libc allows, then allocates:
 *             the shim's load-time NVTX variable must not break any of them
 */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

/* cuda.h declares the per-thread flavours only for per-thread builds. */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);

#define PAGE 4096u
#define SIZE(n) ((size_t)(n) * PAGE + 1)
#define NOINLINE __attribute__((noinline))

static int failures;
#define CHECK(call)                                                            \
    do {                                                                       \
        int rc_ = (int)(call);                                                 \
        if (rc_ != 0) {                                                        \
            fprintf(stderr, "paths: %s failed: %d (line %d)\n", #call, rc_, __LINE__); \
            failures++;                                                        \
        }                                                                      \
    } while (0)

static void init_driver(CUresult (*init)(unsigned), CUresult (*get)(CUdevice *, int),
                        CUresult (*retain)(CUcontext *, CUdevice), CUresult (*set)(CUcontext))
{
    CUdevice dev;
    CUcontext ctx;
    CHECK(init(0));
    CHECK(get(&dev, 0));
    CHECK(retain(&ctx, dev));
    CHECK(set(ctx));
}

/* ---- linked ---- */

NOINLINE static void linked_device(void)
{
    CUdeviceptr p, q;
    size_t pitch;
    CHECK(cuMemAlloc_v2(&p, SIZE(1)));
    CHECK(cuMemAllocPitch_v2(&q, &pitch, 1000, 3, 4)); /* size 3000 */
    CHECK(cuMemFree_v2(p));
    CHECK(cuMemFree_v2(q));
}

NOINLINE static void linked_async(void)
{
    CUdeviceptr p, q, r;
    CUmemoryPool pool;
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cuMemAllocAsync(&p, SIZE(2), NULL));
    CHECK(cuMemAllocAsync_ptsz(&q, SIZE(3), NULL));
    CHECK(cuMemAllocFromPoolAsync(&r, SIZE(4), pool, NULL));
    CHECK(cuMemFreeAsync(p, NULL));
    CHECK(cuMemFreeAsync_ptsz(q, NULL));
    CHECK(cuMemFreeAsync(r, NULL));
    CHECK(cuCtxSynchronize());
}

NOINLINE static void linked_vmm(void)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    CHECK(cuMemAddressReserve(&va, 8 * gran, 0, 0, 0));
    CHECK(cuMemCreate(&h, 2 * gran, &prop, 0));
    CHECK(cuMemMap(va, 2 * gran, 0, h, 0));
    CHECK(cuMemUnmap(va, 2 * gran));
    CHECK(cuMemRelease(h));
    CHECK(cuMemAddressFree(va, 8 * gran));
}

NOINLINE static void linked_host(void)
{
    void *a, *b;
    CUdeviceptr m;
    static char reg[SIZE(8)];
    CHECK(cuMemAllocManaged(&m, SIZE(5), CU_MEM_ATTACH_GLOBAL));
    CHECK(cuMemAllocHost_v2(&a, SIZE(6)));
    CHECK(cuMemHostAlloc(&b, SIZE(7), 0));
    CHECK(cuMemHostRegister_v2(reg, sizeof reg, 0));
    CHECK(cuMemHostUnregister(reg));
    CHECK(cuMemFreeHost(a));
    CHECK(cuMemFreeHost(b));
    CHECK(cuMemFree_v2(m));
}

/* A pinned pool on device 0, as PyTorch and vLLM create theirs. */
static CUmemoryPool create_pool(void)
{
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool;
    CHECK(cuMemPoolCreate(&pool, &props));
    return pool;
}

NOINLINE static void linked_pool_and_info(void)
{
    CUmemoryPool pool = create_pool();
    CHECK(cuMemPoolTrimTo(pool, 0));
    CHECK(cuMemPoolDestroy(pool));
    size_t fr, tot;
    CHECK(cuMemGetInfo_v2(&fr, &tot));
    /* Some programs only want the total: whatever the driver says about
     * that, the shim must pass it on without touching the NULL. */
    printf("meminfo(NULL, &total) = %d\n", (int)cuMemGetInfo_v2(NULL, &tot));
}

static void mode_linked(void)
{
    init_driver(cuInit, cuDeviceGet, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
    linked_device();
    linked_async();
    linked_vmm();
    linked_host();
    linked_pool_and_info();
}

/* ---- dlsym and procaddr: same calls through looked-up pointers ---- */

typedef void *(*lookup_fn)(const char *name);
static void *driver_handle;

static void *by_dlsym(const char *name)
{
    return dlsym(driver_handle, name);
}

static CUresult (*procaddr_v2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
static CUresult (*procaddr_v1)(const char *, void **, int, cuuint64_t);
static cuuint64_t procaddr_flags;

/* Driver API base names; the driver picks the version and flavour. */
static void *by_procaddr(const char *abi_name)
{
    char base[128];
    snprintf(base, sizeof base, "%s", abi_name);
    char *suffix = strstr(base, "_v2");
    if (suffix && suffix[3] == 0)
        *suffix = 0;
    cuuint64_t flags = procaddr_flags;
    suffix = strstr(base, "_ptsz");
    if (suffix) {
        *suffix = 0;
        flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    }
    void *fn = NULL;
    CUdriverProcAddressQueryResult status;
    if (procaddr_v2)
        CHECK(procaddr_v2(base, &fn, 13000, flags, &status));
    else
        CHECK(procaddr_v1(base, &fn, 13000, flags));
    return fn;
}

#define LOOK(type, name) ((type)lookup(#name))

NOINLINE static void looked_up_calls(lookup_fn lookup)
{
    CUresult (*mem_alloc)(CUdeviceptr *, size_t) = LOOK(CUresult(*)(CUdeviceptr *, size_t), cuMemAlloc_v2);
    CUresult (*mem_free)(CUdeviceptr) = LOOK(CUresult(*)(CUdeviceptr), cuMemFree_v2);
    CUresult (*alloc_async_ptsz)(CUdeviceptr *, size_t, CUstream) =
        LOOK(CUresult(*)(CUdeviceptr *, size_t, CUstream), cuMemAllocAsync_ptsz);
    CUresult (*free_async)(CUdeviceptr, CUstream) = LOOK(CUresult(*)(CUdeviceptr, CUstream), cuMemFreeAsync);
    CUresult (*alloc_host)(void **, size_t) = LOOK(CUresult(*)(void **, size_t), cuMemAllocHost_v2);
    CUresult (*free_host)(void *) = LOOK(CUresult(*)(void *), cuMemFreeHost);
    CUresult (*alloc_managed)(CUdeviceptr *, size_t, unsigned) =
        LOOK(CUresult(*)(CUdeviceptr *, size_t, unsigned), cuMemAllocManaged);
    CUresult (*get_info)(size_t *, size_t *) = LOOK(CUresult(*)(size_t *, size_t *), cuMemGetInfo_v2);
    CUdeviceptr p, q, m;
    void *h;
    size_t fr, tot;
    CHECK(mem_alloc(&p, SIZE(11)));
    CHECK(alloc_async_ptsz(&q, SIZE(12), NULL));
    CHECK(alloc_host(&h, SIZE(13)));
    CHECK(alloc_managed(&m, SIZE(14), CU_MEM_ATTACH_GLOBAL));
    CHECK(get_info(&fr, &tot));
    CHECK(free_async(q, NULL));
    CHECK(free_host(h));
    CHECK(mem_free(p));
    CHECK(mem_free(m));
}

static void open_driver(void)
{
    driver_handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver_handle) {
        fprintf(stderr, "paths: dlopen libcuda.so.1: %s\n", dlerror());
        exit(2);
    }
    init_driver(dlsym(driver_handle, "cuInit"), dlsym(driver_handle, "cuDeviceGet"),
                dlsym(driver_handle, "cuDevicePrimaryCtxRetain"), dlsym(driver_handle, "cuCtxSetCurrent"));
}

static void mode_dlsym(void)
{
    open_driver();
    /* A name the driver lacks must stay missing. */
    if (dlsym(driver_handle, "cuMemAllocNoSuchThing"))
        failures++;
    looked_up_calls(by_dlsym);
}

static void mode_procaddr(void)
{
    open_driver();
    procaddr_v2 = dlsym(driver_handle, "cuGetProcAddress_v2");
    procaddr_v1 = dlsym(driver_handle, "cuGetProcAddress");
    printf("procaddr: %s\n", procaddr_v2 ? "cuGetProcAddress_v2" : "cuGetProcAddress");
    looked_up_calls(by_procaddr);
}

/* ---- runtime ---- */

NOINLINE static void runtime_calls(void)
{
    void *p, *q, *r, *h1, *h2, *m, *a1, *a2, *pp;
    size_t pitch, fr, tot;
    static char reg[SIZE(28)];
    cudaMemPool_t pool;
    CHECK(cudaMalloc(&p, SIZE(21)));
    CHECK(cudaMallocPitch(&pp, &pitch, 2000, 2)); /* size 4000 */
    CHECK(cudaMallocHost(&h1, SIZE(22)));
    CHECK(cudaHostAlloc(&h2, SIZE(23), 0));
    CHECK(cudaMallocManaged(&m, SIZE(24), cudaMemAttachGlobal));
    CHECK(cudaMallocAsync(&a1, SIZE(25), 0));
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cudaMallocFromPoolAsync(&a2, SIZE(26), pool, 0));
    CHECK(cudaMemGetInfo(&fr, &tot));
    CHECK(cudaHostRegister(reg, sizeof reg, 0));
    CHECK(cudaHostUnregister(reg));
    CHECK(cudaFreeAsync(a1, 0));
    CHECK(cudaFreeAsync(a2, 0));
    CHECK(cudaFree(p));
    CHECK(cudaFree(pp));
    CHECK(cudaFree(m));
    CHECK(cudaFreeHost(h1));
    CHECK(cudaFreeHost(h2));
    (void)q, (void)r;
}

/* ---- the rest ---- */

NOINLINE static void legacy_calls(void)
{
    init_driver(cuInit, cuDeviceGet, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    CUresult (*alloc_v1)(unsigned *, unsigned) = dlsym(h, "cuMemAlloc");
    CUresult (*free_v2)(CUdeviceptr) = dlsym(h, "cuMemFree_v2");
    unsigned p32 = 0;
    if (alloc_v1 && alloc_v1(&p32, (unsigned)SIZE(31)) == 0)
        CHECK(free_v2(p32));
}

NOINLINE static void child_allocates(void)
{
    void *p;
    CHECK(cudaMalloc(&p, SIZE(42)));
    CHECK(cudaFree(p));
}

static void mode_fork(void)
{
    void *p;
    CHECK(cudaMalloc(&p, SIZE(41)));
    pid_t pid = fork();
    if (pid == 0) {
        child_allocates();
        /* exit, not _exit: _exit skips the final flush, so like SIGKILL it
         * would lose up to VRAMTRACE_FLUSH_MS of events. */
        exit(failures ? 1 : 0);
    }
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        failures++;
    CHECK(cudaFree(p));
}

static void mode_exec(const char *self)
{
    void *p;
    CHECK(cudaMalloc(&p, SIZE(43)));
    CHECK(cudaFree(p));
    fflush(NULL);
    execl(self, self, "runtime", (char *)NULL);
    perror("paths: exec");
    exit(2);
}

NOINLINE static void hold_calls(void)
{
    void *p;
    CHECK(cudaMalloc(&p, SIZE(51)));
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}

static int pairs = 1000;

static void *thread_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < pairs; i++) {
        void *p;
        CHECK(cudaMalloc(&p, SIZE(60)));
        CHECK(cudaFree(p));
    }
    return NULL;
}

/* Freed pool blocks stay cached (reserved, not used) until a sync or trim:
 * at the 48 MiB peak (8 + 40) the explicit pool reserves 64 MiB for 48 used
 * and the current pool 4 MiB for none, 20 MiB of slack in all. */
NOINLINE static void pool_slack_run(void)
{
    const size_t MiB = 1 << 20;
    CUmemoryPool pool = create_pool();
    CUdeviceptr a[3], cur, big;
    for (int i = 0; i < 3; i++)
        CHECK(cuMemAllocFromPoolAsync(&a[i], 8 * MiB, pool, NULL));
    CHECK(cuMemFreeAsync(a[0], NULL));
    CHECK(cuMemFreeAsync(a[1], NULL));
    CHECK(cuMemAllocAsync(&cur, 4 * MiB, NULL));
    CHECK(cuMemFreeAsync(cur, NULL));
    CHECK(cuMemAllocFromPoolAsync(&big, 40 * MiB, pool, NULL));
    CHECK(cuMemFreeAsync(big, NULL));
    CHECK(cuMemFreeAsync(a[2], NULL));
    /* The program's own queries are events too: a byte count is read back,
     * an int attribute is not (the shim must not read past the int). */
    cuuint64_t high = 0;
    int opportunistic = 0;
    CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &high));
    CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &opportunistic));
    printf("used high %llu\n", (unsigned long long)high);
    CHECK(cuMemPoolDestroy(pool));
}

static void mode_pool(void)
{
    init_driver(cuInit, cuDeviceGet, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
    pool_slack_run();
}

/* The shim's constructor swaps environ for a static copy (ranges.c); every
 * later edit of the environment must behave as libc documents. */
static void mode_environ(void)
{
    const char *nvtx = getenv("NVTX_INJECTION64_PATH");
    setenv("VT_A", "1", 1);
    putenv((char *)"VT_B=2");
    unsetenv("HOME");
    setenv("VT_A", "3", 1);
    printf("nvtx=%s a=%s b=%s home=%s\n", nvtx && strstr(nvtx, "libvramtrace") ? "shim" : "other",
           getenv("VT_A"), getenv("VT_B"), getenv("HOME") ? "set" : "unset");
    void *p = NULL;
    CHECK(cudaMalloc(&p, SIZE(70)));
    CHECK(cudaFree(p));
    clearenv();
    setenv("VT_C", "4", 1);
    printf("after clearenv c=%s path=%s\n", getenv("VT_C"), getenv("PATH") ? "set" : "unset");
}

static void mode_threads(int n)
{
    pthread_t t[256];
    if (n > 256)
        n = 256;
    void *warm;
    CHECK(cudaMalloc(&warm, 1)); /* one thread starts the runtime */
    CHECK(cudaFree(warm));
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, thread_main, NULL);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

NOINLINE static void oom_calls(void)
{
    void *p;
    cudaError_t e = cudaMalloc(&p, (size_t)1 << 50);
    printf("oom result %d\n", (int)e);
    if (e == cudaSuccess)
        failures++;
}

/* The shim must start no thread in a process that never calls CUDA. */
static void print_threads(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    printf("threads %d\n", n);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "linked";
    if (!strcmp(mode, "linked"))
        mode_linked();
    else if (!strcmp(mode, "dlsym"))
        mode_dlsym();
    else if (!strcmp(mode, "procaddr"))
        mode_procaddr();
    else if (!strcmp(mode, "runtime"))
        runtime_calls();
    else if (!strcmp(mode, "legacy"))
        legacy_calls();
    else if (!strcmp(mode, "nocuda"))
        print_threads();
    else if (!strcmp(mode, "fork"))
        mode_fork();
    else if (!strcmp(mode, "exec"))
        mode_exec(argv[0]);
    else if (!strcmp(mode, "hold"))
        hold_calls();
    else if (!strcmp(mode, "pool"))
        mode_pool();
    else if (!strcmp(mode, "environ"))
        mode_environ();
    else if (!strcmp(mode, "threads"))
        mode_threads(argc > 2 ? atoi(argv[2]) : 8);
    else if (!strcmp(mode, "oom"))
        oom_calls();
    else {
        fprintf(stderr, "paths: unknown mode %s\n", mode);
        return 2;
    }
    if (failures)
        fprintf(stderr, "paths: %d calls failed\n", failures);
    return failures ? 1 : 0;
}
