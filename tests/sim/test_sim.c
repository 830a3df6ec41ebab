/* test_sim.c: TAP checks of the simulated GPU (run by tests/t/10-sim.t).
 *
 * Contract:
 *  - One mode per process, chosen by argv[1], because the simulation reads
 *    its VTSIM_* configuration once at cuInit; 10-sim.t sets the
 *    environment each mode expects (documented at each mode).
 *  - Checks exact numbers: a failure prints got/want.
 *  - Entry points a pre-12.0 driver lacks are reached through dlsym only,
 *    so the binary also loads against build/sim-nov2.
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"

/* The per-thread flavours, declared by the headers only under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM (which would rename the plain ones). */
cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream);
/* Deprecated in CUDA 13 but still what older PyTorch calls. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)
#define OKC(call) TAP_EQ_U64((call), CUDA_SUCCESS, "%s", #call)
#define RC(call, want) TAP_EQ_U64((call), (want), "%s -> %s", #call, #want)

static void *drv;

static void *sym(const char *name)
{
    if (!drv)
        drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return drv ? dlsym(drv, name) : NULL;
}

static size_t freemem(void)
{
    size_t f = 0, t = 0;
    cuMemGetInfo(&f, &t);
    return f;
}

static uint64_t pool_attr(CUmemoryPool p, CUmemPool_attribute a)
{
    cuuint64_t v = ~0ull;
    cuMemPoolGetAttribute(p, a, &v);
    return v;
}

/* Base name of an ABI symbol: cuMemAllocAsync_ptsz -> cuMemAllocAsync,
 * cuMemAlloc_v2 -> cuMemAlloc. */
static void base_name(const char *abi, char *out, size_t len, int *ptsz)
{
    snprintf(out, len, "%s", abi);
    size_t n = strlen(out);
    *ptsz = n > 5 && strcmp(out + n - 5, "_ptsz") == 0;
    if (*ptsz)
        out[n -= 5] = '\0';
    char *v = strrchr(out, '_');
    if (v && v[1] == 'v' && v[2] >= '0' && v[2] <= '9')
        *v = '\0';
}

static const char *exported[] = {
    "cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName",
    "cuDeviceGetUuid", "cuDeviceGetUuid_v2", "cuDeviceTotalMem_v2", "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxReset_v2",
    "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxGetState",
    "cuCtxCreate_v2", "cuCtxCreate_v3", "cuCtxCreate_v4", "cuCtxDestroy_v2", "cuCtxSetCurrent",
    "cuCtxGetCurrent", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2", "cuCtxGetDevice",
    "cuCtxGetDevice_v2", "cuCtxSynchronize", "cuCtxSynchronize_v2", "cuStreamCreate",
    "cuStreamDestroy_v2", "cuStreamSynchronize", "cuStreamSynchronize_ptsz", "cuGetErrorString",
    "cuGetErrorName", "cuPointerGetAttribute", "cuMemAlloc", "cuMemAlloc_v2", "cuMemAllocPitch_v2",
    "cuMemFree", "cuMemFree_v2", "cuMemGetInfo", "cuMemGetInfo_v2", "cuMemAllocAsync",
    "cuMemAllocAsync_ptsz", "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz",
    "cuMemFreeAsync", "cuMemFreeAsync_ptsz", "cuDeviceGetDefaultMemPool", "cuDeviceGetMemPool",
    "cuDeviceSetMemPool", "cuMemPoolCreate", "cuMemPoolDestroy", "cuMemPoolTrimTo",
    "cuMemPoolSetAttribute", "cuMemPoolGetAttribute", "cuMemGetAllocationGranularity", "cuMemCreate",
    "cuMemRelease", "cuMemAddressReserve", "cuMemAddressFree", "cuMemMap", "cuMemUnmap",
    "cuMemSetAccess", "cuMemGetAllocationPropertiesFromHandle", "cuMemExportToShareableHandle",
    "cuMemImportFromShareableHandle", "cuMulticastGetGranularity", "cuMulticastCreate", "cuMulticastAddDevice",
    "cuMulticastBindMem", "cuMulticastUnbind", "cuGraphAddNode", "cuGraphAddNode_v2", "cuStreamBeginCapture",
    "cuStreamBeginCapture_ptsz", "cuMemAllocManaged",
    "cuMemAllocHost_v2", "cuMemHostAlloc", "cuMemFreeHost", "cuMemHostRegister_v2",
    "cuMemHostUnregister", "cuMemHostGetDevicePointer_v2", "cuGetProcAddress", "cuGetProcAddress_v2",
    "cuIpcGetMemHandle", "cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2", "cuIpcCloseMemHandle",
    "cuMemPoolExportToShareableHandle", "cuMemPoolImportFromShareableHandle", "cuMemPoolExportPointer",
    "cuMemPoolImportPointer",
};

/* Every exported symbol must be what cuGetProcAddress returns for its base
 * name at some version and flavour. */
static void check_all_reachable(PFN_cuGetProcAddress_v11030 gpa)
{
    static const int versions[] = {13000, 12050, 12020, 12000, 11040, 11030, 10000, 3020, 2000};
    int missing = 0, seen = 0;
    for (size_t i = 0; i < sizeof exported / sizeof exported[0]; i++) {
        void *want = sym(exported[i]);
        if (!want)
            continue; /* absent from this driver flavour */
        seen++;
        char base[128];
        int ptsz, found = 0;
        base_name(exported[i], base, sizeof base, &ptsz);
        for (size_t v = 0; v < sizeof versions / sizeof versions[0] && !found; v++) {
            void *fn = NULL;
            gpa(base, &fn, versions[v], ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0);
            found = fn == want;
        }
        if (!found) {
            missing++;
            printf("# %s is not reachable through cuGetProcAddress(\"%s\")\n", exported[i], base);
        }
    }
    TAP_OK(seen > 60 && missing == 0, "all %d exported entry points reachable via cuGetProcAddress", seen);
}

/* Legacy and pool IPC (sim_ipc.c): refused in the exporting process; in a
 * forked child (another pid), imports that charge nothing, one address per
 * IPC handle with a reference per open. The child's findings come back as
 * its exit status: the number of the first check that failed, else 0;
 * the checks after a failed one are not made. */
#define CHILD_CHECK(n, failed) \
    do {                       \
        if (!bad && (failed))  \
            bad = (n);         \
    } while (0)
static int ipc_child(CUipcMemHandle handle, int pool_fd, CUmemPoolPtrExportData *data, size_t base)
{
    int bad = 0; /* the first check that failed, counted from 1 */
    CUdeviceptr a = 0, b = 0, shared = 0, own;
    CUmemoryPool pool;
    CHILD_CHECK(1, cuIpcOpenMemHandle_v2(&a, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CHILD_CHECK(2, cuIpcOpenMemHandle_v2(&b, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) || a != b);
    CHILD_CHECK(3, freemem() != base);
    CHILD_CHECK(4, cuIpcCloseMemHandle(a) || cuIpcCloseMemHandle(b));
    CHILD_CHECK(5, cuIpcCloseMemHandle(a) != CUDA_ERROR_INVALID_VALUE);
    CHILD_CHECK(6, cuMemPoolImportFromShareableHandle(&pool, (void *)(intptr_t)pool_fd,
                                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CHILD_CHECK(7, cuMemAllocFromPoolAsync(&own, MiB, pool, 0) != CUDA_ERROR_INVALID_VALUE);
    CHILD_CHECK(8, cuMemPoolImportPointer(&shared, pool, data) || freemem() != base);
    CHILD_CHECK(9, cuIpcCloseMemHandle(shared) != CUDA_ERROR_INVALID_VALUE || cuMemFreeAsync(shared, 0));
    CHILD_CHECK(10, cuMemFree_v2(shared) != CUDA_ERROR_INVALID_VALUE);
    return bad;
}

static void ipc_checks(size_t base)
{
    CUdeviceptr d, from_pool, opened;
    CUipcMemHandle handle;
    CUmemPoolPtrExportData data;
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemoryPool pool, imported;
    int fd = -1;
    OKC(cuMemAlloc_v2(&d, 8 * MiB));
    OKC(cuIpcGetMemHandle(&handle, d));
    RC(cuIpcOpenMemHandle_v2(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_VALUE);
    OKC(cuMemPoolCreate(&pool, &props));
    OKC(cuMemAllocFromPoolAsync(&from_pool, 4 * MiB, pool, 0));
    RC(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_ERROR_INVALID_VALUE);
    RC(cuMemPoolExportPointer(&data, from_pool), CUDA_ERROR_INVALID_VALUE);
    OKC(cuMemFreeAsync(from_pool, 0));
    OKC(cuMemPoolDestroy(pool));
    props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    OKC(cuMemPoolCreate(&pool, &props));
    OKC(cuMemAllocFromPoolAsync(&from_pool, 4 * MiB, pool, 0));
    OKC(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    OKC(cuMemPoolExportPointer(&data, from_pool));
    RC(cuMemPoolImportFromShareableHandle(&imported, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
       CUDA_ERROR_INVALID_VALUE);
    size_t held = freemem();
    pid_t pid = fork();
    if (pid == 0)
        _exit(ipc_child(handle, fd, &data, held));
    int status = -1;
    waitpid(pid, &status, 0);
    TAP_EQ_U64(WIFEXITED(status) ? WEXITSTATUS(status) : 999, 0,
               "ipc in another process: one address per handle, nothing charged, the right release for each");
    OKC(cuMemFreeAsync(from_pool, 0));
    OKC(cuMemPoolDestroy(pool));
    OKC(cuMemFree_v2(d));
    TAP_EQ_U64(freemem(), base, "ipc: the exporter's memory freed");
    close(fd);
}

/* VTSIM_DEVICES="24GiB,12GiB" VTSIM_NAMES=",Second Sim", defaults otherwise. */
static void mode_driver(void)
{
    CUdeviceptr p = 0, q = 0;
    int n = -1, v = 0;
    RC(cuMemAlloc(&p, 1), CUDA_ERROR_NOT_INITIALIZED);
    RC(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    OKC(cuDriverGetVersion(&v));
    TAP_EQ_U64(v, 13000, "driver version before cuInit");
    RC(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    OKC(cuInit(0));
    OKC(cuDeviceGetCount(&n));
    TAP_EQ_U64(n, 2, "two devices");
    char name[256];
    cuDeviceGetName(name, sizeof name, 0);
    TAP_EQ_STR(name, "vramtrace sim GPU (24 GiB)", "default name");
    cuDeviceGetName(name, sizeof name, 1);
    TAP_EQ_STR(name, "Second Sim", "VTSIM_NAMES");
    CUuuid u;
    OKC(cuDeviceGetUuid_v2(&u, 1));
    TAP_OK(memcmp(u.bytes, "vtsim\0\0\0\0\0\0\0\0\0\0\1", 16) == 0, "uuid of device 1");
    size_t total = 0;
    cuDeviceTotalMem(&total, 1);
    TAP_EQ_U64(total, 12 * GiB, "cuDeviceTotalMem device 1");
    RC(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0), CUDA_SUCCESS);
    TAP_EQ_U64(v, 8, "compute capability major");
    cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_PITCH, 0);
    TAP_EQ_U64(v, 0, "unknown attribute reads 0");
    RC(cuDeviceGet(&n, 2), CUDA_ERROR_INVALID_DEVICE);

    /* Contexts and the reserve. */
    size_t f, t;
    RC(cuMemAlloc(&p, 1), CUDA_ERROR_INVALID_CONTEXT);
    RC(cuMemGetInfo(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    CUcontext c0, cur;
    OKC(cuDevicePrimaryCtxRetain(&c0, 0));
    OKC(cuCtxSetCurrent(c0));
    cuCtxGetCurrent(&cur);
    TAP_OK(cur == c0, "primary context current");
    OKC(cuMemGetInfo(&f, &t));
    const size_t base = 24 * GiB - 448 * MiB;
    TAP_EQ_U64(f, base, "free = capacity - 448MiB reserve");
    TAP_EQ_U64(t, 24 * GiB, "total = capacity");

    /* Plain allocations: granularity, addresses, exact OOM. */
    OKC(cuMemAlloc(&p, 1));
    TAP_EQ_U64(p, 0x10000000000ull, "first allocation at device 0's VA base");
    TAP_EQ_U64(freemem(), base - 2 * MiB, "1 byte costs 2MiB");
    OKC(cuMemAlloc(&q, 3 * MiB));
    TAP_EQ_U64(q, 0x10000000000ull + 2 * MiB, "next allocation follows");
    TAP_EQ_U64(freemem(), base - 6 * MiB, "3MiB rounds to 4MiB");
    OKC(cuMemFree(p));
    OKC(cuMemFree(q));
    RC(cuMemFree(q), CUDA_ERROR_INVALID_VALUE);
    TAP_EQ_U64(freemem(), base, "frees restore free memory");
    RC(cuMemAlloc(&p, base + 1), CUDA_ERROR_OUT_OF_MEMORY);
    OKC(cuMemAlloc(&p, base));
    TAP_EQ_U64(freemem(), 0, "everything allocated");
    RC(cuMemAlloc(&q, 1), CUDA_ERROR_OUT_OF_MEMORY);
    cuMemFree(p);
    RC(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);

    size_t pitch = 0;
    OKC(cuMemAllocPitch(&p, &pitch, 1000, 10, 4));
    TAP_EQ_U64(pitch, 1024, "pitch rounded up to 512");
    TAP_EQ_U64(freemem(), base - 2 * MiB, "pitch allocation charged");
    cuMemFree(p);
    RC(cuMemAllocPitch(&p, &pitch, 1000, 10, 3), CUDA_ERROR_INVALID_VALUE);

    /* Legacy 32-bit entry points. */
    CUresult (*alloc_v1)(unsigned int *, unsigned int) = (CUresult(*)(unsigned int *, unsigned int))sym("cuMemAlloc");
    CUresult (*free_v1)(unsigned int) = (CUresult(*)(unsigned int))sym("cuMemFree");
    CUresult (*info_v1)(unsigned int *, unsigned int *) = (CUresult(*)(unsigned int *, unsigned int *))sym("cuMemGetInfo");
    unsigned int p32 = 0, f32 = 0, t32 = 0;
    TAP_OK(alloc_v1 && free_v1 && info_v1, "legacy cuMemAlloc/cuMemFree/cuMemGetInfo exported");
    OKC(alloc_v1(&p32, 4096));
    TAP_EQ_U64(p32, 0x20000000u, "legacy allocation in the 32-bit window");
    TAP_EQ_U64(freemem(), base - 2 * MiB, "legacy allocation charged");
    OKC(info_v1(&f32, &t32));
    TAP_EQ_U64(t32, UINT32_MAX, "legacy cuMemGetInfo clamps");
    OKC(free_v1(p32));
    TAP_EQ_U64(freemem(), base, "legacy free");

    /* Stream-ordered allocations and the default pool. */
    CUmemoryPool pool, cp;
    OKC(cuDeviceGetDefaultMemPool(&pool, 0));
    cuDeviceGetMemPool(&cp, 0);
    TAP_OK(cp == pool, "current pool is the default pool");
    TAP_EQ_U64(pool_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0, "default release threshold 0");
    OKC(cuMemAllocAsync(&p, 10 * MiB, NULL));
    TAP_EQ_U64(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 10 * MiB, "pool used");
    OKC(cuMemFreeAsync(p, NULL));
    TAP_EQ_U64(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0, "pool used after free");
    TAP_EQ_U64(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 10 * MiB, "freed block cached");
    TAP_EQ_U64(freemem(), base - 10 * MiB, "cached block still charged");
    CUstream s;
    OKC(cuStreamCreate(&s, 0));
    OKC(cuStreamSynchronize(s));
    TAP_EQ_U64(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0, "sync releases above threshold 0");
    TAP_EQ_U64(freemem(), base, "released at sync");

    cuuint64_t thr = 64 * MiB;
    OKC(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
    OKC(cuMemAllocAsync(&p, 10 * MiB, s));
    OKC(cuMemAllocAsync(&q, 20 * MiB, s));
    cuMemFreeAsync(p, s);
    cuMemFreeAsync(q, s);
    cuCtxSynchronize();
    TAP_EQ_U64(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 30 * MiB, "kept below threshold");
    TAP_EQ_U64(freemem(), base - 30 * MiB, "kept memory charged");
    CUdeviceptr r;
    OKC(cuMemAllocAsync(&r, 8 * MiB, s));
    TAP_EQ_U64(r, p, "smallest cached block reused");
    TAP_EQ_U64(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 10 * MiB, "reused block counts whole");
    TAP_EQ_U64(freemem(), base - 30 * MiB, "reuse charges nothing new");
    OKC(cuMemPoolTrimTo(pool, 0));
    TAP_EQ_U64(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 10 * MiB, "trim keeps blocks in use");
    cuMemFree(r);
    TAP_EQ_U64(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 10 * MiB, "cuMemFree caches under threshold");
    OKC(cuMemPoolTrimTo(pool, 0));
    TAP_EQ_U64(freemem(), base, "trim releases everything");
    /* A cached block is reclaimed when a new one would not fit. */
    OKC(cuMemAllocAsync(&p, 20 * MiB, s));
    cuMemFreeAsync(p, s);
    OKC(cuMemAllocAsync(&p, base, s));
    TAP_EQ_U64(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), base, "cache reclaimed on OOM");
    cuMemFreeAsync(p, s);
    thr = 0;
    cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr);
    cuStreamSynchronize(s);
    TAP_EQ_U64(freemem(), base, "threshold 0 again");

    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemoryPool mine;
    OKC(cuMemPoolCreate(&mine, &props));
    OKC(cuMemAllocFromPoolAsync(&p, 4 * MiB, mine, s));
    CUmemoryPool owner = NULL;
    cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p);
    TAP_OK(owner == mine, "pointer's pool");
    OKC(cuMemPoolDestroy(mine));
    TAP_EQ_U64(freemem(), base - 4 * MiB, "destroyed pool keeps blocks in use");
    OKC(cuMemFreeAsync(p, s));
    TAP_EQ_U64(freemem(), base, "freed block of a destroyed pool released");
    RC(cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE);
    OKC(cuStreamDestroy(s));

    /* VMM. */
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    size_t g = 0;
    OKC(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    TAP_EQ_U64(g, 2 * MiB, "granularity");
    CUmemGenericAllocationHandle h;
    RC(cuMemCreate(&h, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    OKC(cuMemCreate(&h, 4 * MiB, &prop, 0));
    TAP_EQ_U64(freemem(), base - 4 * MiB, "cuMemCreate charges");
    CUdeviceptr va;
    OKC(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
    TAP_EQ_U64(va, 0x200000000000ull, "VA reserve range");
    TAP_EQ_U64(freemem(), base - 4 * MiB, "VA is not charged");
    OKC(cuMemMap(va + 2 * MiB, 4 * MiB, 0, h, 0));
    CUmemAccessDesc acc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                           .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    OKC(cuMemSetAccess(va + 2 * MiB, 4 * MiB, &acc, 1));
    RC(cuMemSetAccess(va, 4 * MiB, &acc, 1), CUDA_ERROR_INVALID_VALUE);
    int ord = -1;
    OKC(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va + 3 * MiB));
    TAP_EQ_U64(ord, 0, "mapped VA's device");
    OKC(cuMemRelease(h));
    TAP_EQ_U64(freemem(), base - 4 * MiB, "released but mapped: still charged");
    RC(cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE);
    RC(cuMemUnmap(va + 2 * MiB, 2 * MiB), CUDA_ERROR_INVALID_VALUE);
    OKC(cuMemUnmap(va, 8 * MiB));
    TAP_EQ_U64(freemem(), base, "unmapped and released: freed");
    OKC(cuMemCreate(&h, 2 * MiB, &prop, 0));
    OKC(cuMemMap(va, 2 * MiB, 0, h, 0));
    OKC(cuMemUnmap(va, 2 * MiB));
    TAP_EQ_U64(freemem(), base - 2 * MiB, "unmapped but not released: charged");
    CUmemAllocationProp got;
    OKC(cuMemGetAllocationPropertiesFromHandle(&got, h));
    TAP_EQ_U64(got.location.id, 0, "handle properties");
    OKC(cuMemRelease(h));
    TAP_EQ_U64(freemem(), base, "released after unmap: freed");
    /* Export to a descriptor and import: the import charges nothing. */
    int fd = -1;
    OKC(cuMemCreate(&h, 2 * MiB, &prop, 0));
    RC(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_ERROR_INVALID_VALUE);
    OKC(cuMemRelease(h));
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    OKC(cuMemCreate(&h, 4 * MiB, &prop, 0));
    OKC(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    TAP_OK(fd > 2 && (fcntl(fd, F_GETFD) & FD_CLOEXEC), "export: a close-on-exec descriptor");
    CUmemGenericAllocationHandle imp;
    OKC(cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    TAP_OK(imp != h, "import: a handle of its own");
    TAP_EQ_U64(freemem(), base - 4 * MiB, "import charges nothing");
    OKC(cuMemMap(va, 4 * MiB, 0, imp, 0));
    OKC(cuMemGetAllocationPropertiesFromHandle(&got, imp));
    TAP_EQ_U64(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, "import: the exporter's properties");
    OKC(cuMemUnmap(va, 4 * MiB));
    OKC(cuMemRelease(imp));
    TAP_EQ_U64(freemem(), base - 4 * MiB, "imported handle released: the exporter's memory stays");
    OKC(cuMemRelease(h));
    TAP_EQ_U64(freemem(), base, "exporter's handle released: freed");
    int not_export = open("/dev/null", O_RDONLY);
    RC(cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)not_export, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
       CUDA_ERROR_INVALID_VALUE);
    close(not_export);
    close(fd);
    prop.requestedHandleTypes = 0;
    ipc_checks(base);
    /* A multicast object charges nothing; what is bound to it stays until
     * unbound. */
    CUmulticastObjectProp mcp = {.numDevices = 1, .size = 4 * MiB};
    CUmemGenericAllocationHandle mc;
    OKC(cuMulticastCreate(&mc, &mcp));
    TAP_EQ_U64(freemem(), base, "multicast object charges nothing");
    OKC(cuMemCreate(&h, 4 * MiB, &prop, 0));
    RC(cuMulticastBindMem(mc, 0, h, 0, 4 * MiB, 0), CUDA_ERROR_INVALID_VALUE);
    RC(cuMemMap(va, 4 * MiB, 0, mc, 0), CUDA_ERROR_INVALID_VALUE);
    OKC(cuMulticastAddDevice(mc, 0));
    OKC(cuMulticastBindMem(mc, 0, h, 0, 4 * MiB, 0));
    OKC(cuMemRelease(h));
    TAP_EQ_U64(freemem(), base - 4 * MiB, "bound handle released: still charged");
    OKC(cuMemMap(va, 4 * MiB, 0, mc, 0));
    OKC(cuMemUnmap(va, 4 * MiB));
    OKC(cuMulticastUnbind(mc, 0, 0, 4 * MiB));
    TAP_EQ_U64(freemem(), base, "unbound: freed");
    OKC(cuMemRelease(mc));
    OKC(cuMemAddressFree(va, 8 * MiB));

    /* Managed and pinned host memory. */
    OKC(cuMemAllocManaged(&p, 100 * GiB, CU_MEM_ATTACH_GLOBAL));
    *(volatile char *)(uintptr_t)p = 1;
    TAP_EQ_U64(freemem(), base, "managed oversubscribes without charging");
    unsigned int managed = 0;
    cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p);
    TAP_EQ_U64(managed, 1, "IS_MANAGED");
    RC(cuMemAllocManaged(&q, 500 * GiB, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
    OKC(cuMemFree(p));
    void *hp;
    OKC(cuMemAllocHost(&hp, 20 * GiB));
    ((volatile char *)hp)[20 * GiB - 1] = 7;
    TAP_EQ_U64(((volatile char *)hp)[20 * GiB - 1], 7, "pinned memory is writable");
    CUdeviceptr dp;
    OKC(cuMemHostGetDevicePointer(&dp, hp, 0));
    TAP_EQ_U64(dp, (uintptr_t)hp, "unified addressing");
    unsigned int mt = 0;
    cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp);
    TAP_EQ_U64(mt, CU_MEMORYTYPE_HOST, "pinned memory type");
    OKC(cuMemFreeHost(hp));
    RC(cuMemFreeHost(hp), CUDA_ERROR_INVALID_VALUE);
    OKC(cuMemHostAlloc(&hp, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    cuMemFreeHost(hp);
    char *buf = malloc(1 << 20);
    OKC(cuMemHostRegister(buf, 1 << 20, 0));
    RC(cuMemHostRegister(buf + 4096, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    OKC(cuMemHostUnregister(buf));
    RC(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    free(buf);

    /* Second device, created contexts and the context stack. */
    CUcontext c1, popped;
    OKC(cuCtxCreate(&c1, NULL, 0, 1));
    cuCtxGetCurrent(&cur);
    TAP_OK(cur == c1, "cuCtxCreate pushes the new context");
    CUdevice d = -1;
    cuCtxGetDevice(&d);
    TAP_EQ_U64(d, 1, "current device 1");
    const size_t base1 = 12 * GiB - 448 * MiB;
    TAP_EQ_U64(freemem(), base1, "device 1 free");
    OKC(cuMemAlloc(&p, 1 * GiB));
    TAP_EQ_U64(p, 0x20000000000ull, "device 1 VA base");
    cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p);
    TAP_EQ_U64(ord, 1, "DEVICE_ORDINAL");
    OKC(cuCtxPopCurrent(&popped));
    TAP_OK(popped == c1, "popped");
    TAP_EQ_U64(freemem(), base, "device 0 unaffected");
    OKC(cuCtxPushCurrent(c1));
    OKC(cuCtxDestroy(c1));
    cuCtxGetCurrent(&cur);
    TAP_OK(cur == c0, "destroy pops");
    RC(cuCtxSetCurrent(c1), CUDA_ERROR_INVALID_CONTEXT);
    CUcontext p1;
    cuDevicePrimaryCtxRetain(&p1, 1);
    cuCtxPushCurrent(p1);
    TAP_EQ_U64(freemem(), base1, "context destroy freed its allocations");
    cuCtxPopCurrent(NULL);
    cuDevicePrimaryCtxRelease(1);

    /* Primary reset frees everything it owns. */
    OKC(cuMemAlloc(&p, 1 * GiB));
    OKC(cuDevicePrimaryCtxReset(0));
    RC(cuMemGetInfo(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    cuDevicePrimaryCtxRetain(&c0, 0);
    TAP_EQ_U64(freemem(), base, "reset freed allocations");

    /* cuGetProcAddress. */
    PFN_cuGetProcAddress_v12000 gpa2 = (PFN_cuGetProcAddress_v12000)sym("cuGetProcAddress_v2");
    PFN_cuGetProcAddress_v11030 gpa1 = (PFN_cuGetProcAddress_v11030)sym("cuGetProcAddress");
    TAP_OK(gpa1 && gpa2, "both cuGetProcAddress exported");
    void *fn;
    CUdriverProcAddressQueryResult st;
    struct { const char *name; int ver; cuuint64_t flags; const char *want; } cases[] = {
        {"cuMemAlloc", 13000, 0, "cuMemAlloc_v2"},
        {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2"},
        {"cuMemAlloc", 3010, 0, "cuMemAlloc"},
        {"cuMemGetInfo", 2000, 0, "cuMemGetInfo"},
        {"cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemAllocAsync_ptsz"},
        {"cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuMemAllocAsync"},
        {"cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_DEFAULT, "cuMemAllocAsync"},
        {"cuMemFreeAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemFreeAsync_ptsz"},
        {"cuMemAllocFromPoolAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemAllocFromPoolAsync_ptsz"},
        {"cuMemCreate", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemCreate"},
        {"cuGetProcAddress", 13000, 0, "cuGetProcAddress_v2"},
        {"cuGetProcAddress", 11080, 0, "cuGetProcAddress"},
        {"cuCtxCreate", 13000, 0, "cuCtxCreate_v4"},
        {"cuCtxCreate", 12000, 0, "cuCtxCreate_v3"},
        {"cuCtxGetDevice", 13000, 0, "cuCtxGetDevice_v2"},
        {"cuCtxGetDevice", 12080, 0, "cuCtxGetDevice"},
        {"cuDeviceGetUuid", 11040, 0, "cuDeviceGetUuid_v2"},
        {"cuMemHostRegister", 13000, 0, "cuMemHostRegister_v2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fn = NULL;
        st = -1;
        CUresult rc = gpa2(cases[i].name, &fn, cases[i].ver, cases[i].flags, &st);
        TAP_OK(rc == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS && fn && fn == sym(cases[i].want),
               "cuGetProcAddress_v2(%s, %d, %llu) = %s", cases[i].name, cases[i].ver,
               (unsigned long long)cases[i].flags, cases[i].want);
    }
    fn = (void *)1;
    RC(gpa2("cuNoSuchThing", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    TAP_OK(fn == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, "unknown name: SYMBOL_NOT_FOUND");
    RC(gpa2("cuMemAllocAsync", &fn, 11010, 0, &st), CUDA_ERROR_NOT_FOUND);
    TAP_OK(fn == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, "too old: VERSION_NOT_SUFFICIENT");
    RC(gpa2("cuMemAlloc", &fn, 13000, 4, &st), CUDA_ERROR_INVALID_VALUE);
    OKC(gpa1("cuMemAllocAsync", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
    TAP_OK(fn == sym("cuMemAllocAsync_ptsz"), "4-argument cuGetProcAddress");
    check_all_reachable(gpa1);

    const char *str = NULL;
    OKC(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &str));
    TAP_EQ_STR(str, "CUDA_ERROR_OUT_OF_MEMORY", "cuGetErrorName");
    cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &str);
    TAP_EQ_STR(str, "out of memory", "cuGetErrorString");
}

/* Default environment; runtime API only (a fresh process: lazy init). */
static void mode_runtime(void)
{
    int n = -1;
    OKC(cudaGetDeviceCount(&n));
    TAP_EQ_U64(n, 1, "one device by default");
    struct cudaDeviceProp prop;
    OKC(cudaGetDeviceProperties(&prop, 0));
    TAP_EQ_STR(prop.name, "vramtrace sim GPU (24 GiB)", "properties name");
    TAP_EQ_U64(prop.totalGlobalMem, 24 * GiB, "properties totalGlobalMem");
    CUcontext cur = (CUcontext)1;
    cuCtxGetCurrent(&cur);
    TAP_OK(cur == NULL, "no context before the first allocation");
    size_t f = 0, t = 0;
    OKC(cudaMemGetInfo(&f, &t));
    const size_t base = 24 * GiB - 448 * MiB;
    TAP_EQ_U64(f, base, "cudaMemGetInfo free");
    void *p = NULL, *q = NULL;
    OKC(cudaMalloc(&p, 100 * MiB));
    TAP_EQ_U64((uintptr_t)p, 0x10000000000ull, "cudaMalloc address");
    cudaMemGetInfo(&f, &t);
    TAP_EQ_U64(f, base - 100 * MiB, "cudaMalloc charged");
    RC(cudaMalloc(&q, 30 * GiB), cudaErrorMemoryAllocation);
    RC(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
    RC(cudaGetLastError(), cudaErrorMemoryAllocation);
    RC(cudaGetLastError(), cudaSuccess);
    TAP_EQ_STR(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation", "cudaGetErrorName");
    OKC(cudaMalloc(&q, 0));
    TAP_OK(q == NULL, "cudaMalloc(0) gives NULL");
    OKC(cudaFree(p));
    OKC(cudaFree(NULL));
    size_t pitch = 0;
    OKC(cudaMallocPitch(&p, &pitch, 100, 3));
    TAP_EQ_U64(pitch, 512, "cudaMallocPitch pitch");
    cudaFree(p);

    cudaStream_t s;
    OKC(cudaStreamCreate(&s));
    OKC(cudaMallocAsync(&p, 4 * MiB, s));
    OKC(cudaMallocAsync_ptsz(&q, 4 * MiB, s));
    cudaMemPool_t pool;
    OKC(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t used = 0;
    OKC(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
    TAP_EQ_U64(used, 8 * MiB, "runtime pool used");
    OKC(cudaFreeAsync(p, s));
    OKC(cudaFreeAsync_ptsz(q, s));
    OKC(cudaStreamSynchronize(s));
    cudaMemGetInfo(&f, &t);
    TAP_EQ_U64(f, base, "pool released at sync");
    struct cudaMemPoolProps pp;
    memset(&pp, 0, sizeof pp);
    pp.allocType = cudaMemAllocationTypePinned;
    pp.location.type = cudaMemLocationTypeDevice;
    pp.location.id = 0;
    cudaMemPool_t mine;
    OKC(cudaMemPoolCreate(&mine, &pp));
    uint64_t thr = 1 * GiB;
    OKC(cudaMemPoolSetAttribute(mine, cudaMemPoolAttrReleaseThreshold, &thr));
    OKC(cudaMallocFromPoolAsync(&p, 6 * MiB, mine, s));
    OKC(cudaMallocFromPoolAsync_ptsz(&q, 6 * MiB, mine, s));
    cudaFreeAsync(p, s);
    cudaFreeAsync(q, s);
    cudaDeviceSynchronize();
    cudaMemGetInfo(&f, &t);
    TAP_EQ_U64(f, base - 12 * MiB, "pool above... below threshold keeps 12MiB");
    OKC(cudaMemPoolTrimTo(mine, 0));
    OKC(cudaMemPoolDestroy(mine));
    OKC(cudaStreamDestroy(s));

    OKC(cudaMallocManaged(&p, 64 * GiB, cudaMemAttachGlobal));
    OKC(cudaFree(p));
    OKC(cudaMallocHost(&p, 1 * MiB));
    OKC(cudaFreeHost(p));
    OKC(cudaHostAlloc(&p, 1 * MiB, cudaHostAllocMapped));
    OKC(cudaFreeHost(p));
    static char reg[8192];
    OKC(cudaHostRegister(reg, sizeof reg, cudaHostRegisterDefault));
    RC(cudaHostRegister(reg, sizeof reg, cudaHostRegisterDefault), cudaErrorHostMemoryAlreadyRegistered);
    OKC(cudaHostUnregister(reg));
    cudaGetLastError();

    /* Entry points, the way PyTorch reaches the driver. */
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    OKC(cudaGetDriverEntryPoint("cuMemAlloc", &fn, cudaEnableDefault, &st));
    TAP_OK(fn == sym("cuMemAlloc_v2") && st == cudaDriverEntryPointSuccess, "cudaGetDriverEntryPoint(cuMemAlloc)");
    OKC(cudaGetDriverEntryPointByVersion("cuMemAllocAsync", &fn, 12000, cudaEnablePerThreadDefaultStream, &st));
    TAP_OK(fn == sym("cuMemAllocAsync_ptsz"), "ByVersion per-thread flavour");
    OKC(cudaGetDriverEntryPointByVersion("cuNope", &fn, 13000, cudaEnableDefault, &st));
    TAP_OK(fn == NULL && st == cudaDriverEntryPointSymbolNotFound, "unknown symbol: success, NULL");

    int dev = -1;
    OKC(cudaGetDevice(&dev));
    TAP_EQ_U64(dev, 0, "cudaGetDevice");
    RC(cudaSetDevice(1), cudaErrorInvalidDevice);
    OKC(cudaMalloc(&p, 1 * GiB));
    OKC(cudaDeviceReset());
    cudaMemGetInfo(&f, &t);
    TAP_EQ_U64(f, base, "cudaDeviceReset frees and the context comes back");
}

/* VTSIM_DEVICES=1GiB VTSIM_RESERVE=0 */
static void mode_frag(void)
{
    void *a, *b, *c, *d, *e;
    /* The process's first runtime call may be a stream-ordered one. */
    OKC(cudaMallocAsync(&a, 1, NULL));
    OKC(cudaFreeAsync(a, NULL));
    OKC(cudaDeviceSynchronize());
    OKC(cudaMalloc(&a, 256 * MiB));
    OKC(cudaMalloc(&b, 256 * MiB));
    OKC(cudaMalloc(&c, 256 * MiB));
    OKC(cudaMalloc(&d, 256 * MiB));
    cudaFree(a);
    cudaFree(c);
    size_t f, t;
    cudaMemGetInfo(&f, &t);
    TAP_EQ_U64(f, 512 * MiB, "512MiB free in two holes");
    RC(cudaMalloc(&e, 512 * MiB), cudaErrorMemoryAllocation);
    OKC(cudaMalloc(&e, 256 * MiB));
    TAP_OK(e == a, "first fit reuses the lowest hole");
    cudaFree(b);
    cudaFree(e);
    OKC(cudaMalloc(&e, 768 * MiB));
    TAP_OK(e == a, "holes coalesce");
}

/* VTSIM_DEVICES=1GiB VTSIM_SYSMEM_FALLBACK=1 VTSIM_RESERVE=0 */
static void mode_fallback(void)
{
    void *a, *b;
    OKC(cudaMalloc(&a, 768 * MiB));
    OKC(cudaMalloc(&b, 512 * MiB));
    TAP_EQ_U64((uintptr_t)b, 0x10000000000ull + 512 * GiB, "placed in system memory range");
    size_t f, t;
    cudaMemGetInfo(&f, &t);
    TAP_EQ_U64(f, 0, "free stays 0");
    cudaFree(b);
    cudaMemGetInfo(&f, &t);
    TAP_EQ_U64(f, 256 * MiB, "fallback freed");
}

/* VTSIM_DEVICES=4GiB VTSIM_RESERVE=0,1GiB VTSIM_EXTERNAL=1GiB VTSIM_GRANULARITY=4MiB
 * plus one invalid variable (VTSIM_HOST_LIMIT=lots), which must warn. */
static void mode_config(void)
{
    size_t f, t;
    void *p;
    OKC(cudaMemGetInfo(&f, &t));
    TAP_EQ_U64(f, 3 * GiB, "external bytes lower free");
    OKC(cudaMalloc(&p, 1));
    cudaMemGetInfo(&f, &t);
    TAP_EQ_U64(f, 3 * GiB - 4 * MiB, "VTSIM_GRANULARITY");
    OKC(cudaMallocManaged(&p, 400 * GiB, cudaMemAttachGlobal));
}

/* VTSIM_DEVICES=none */
static void mode_nodev(void)
{
    RC(cuInit(0), CUDA_ERROR_NO_DEVICE);
    int n = -1;
    RC(cudaGetDeviceCount(&n), cudaErrorNoDevice);
    TAP_EQ_U64(n, 0, "no device");
}

/* LD_LIBRARY_PATH=build/sim-nov2 */
static void mode_nov2(void)
{
    void *p;
    TAP_OK(sym("cuGetProcAddress") != NULL || (cuInit(0), sym("cuGetProcAddress")), "cuGetProcAddress present");
    TAP_OK(sym("cuGetProcAddress_v2") == NULL, "cuGetProcAddress_v2 absent");
    TAP_OK(sym("cuMemAllocFromPoolAsync_ptsz") == NULL, "cuMemAllocFromPoolAsync_ptsz absent");
    int v = 0;
    cuDriverGetVersion(&v);
    TAP_EQ_U64(v, 11080, "pre-12.0 driver version");
    OKC(cudaMalloc(&p, 1 * MiB));
    cudaMemPool_t pool;
    OKC(cudaDeviceGetDefaultMemPool(&pool, 0));
    OKC(cudaMallocFromPoolAsync_ptsz(&p, 1 * MiB, pool, NULL));
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    OKC(cudaGetDriverEntryPoint("cuMemAllocFromPoolAsync", &fn, cudaEnablePerThreadDefaultStream, &st));
    TAP_OK(fn == sym("cuMemAllocFromPoolAsync"), "no _ptsz twin: the legacy-stream function");
    OKC(cudaGetDriverEntryPoint("cuGetProcAddress", &fn, cudaEnableDefault, &st));
    TAP_OK(fn == sym("cuGetProcAddress"), "cuGetProcAddress resolves to the 4-argument one");
    PFN_cuGetProcAddress_v11030 gpa1 = (PFN_cuGetProcAddress_v11030)sym("cuGetProcAddress");
    check_all_reachable(gpa1);
}

/* VTSIM_SHARED=<file> VTSIM_DEVICES=8GiB VTSIM_RESERVE=512MiB: a second process
 * (this binary, exec'ed in mode shared-child) holds 1GiB and is SIGKILLed. */
static void mode_shared(const char *self)
{
    size_t f, t;
    OKC(cudaMemGetInfo(&f, &t));
    TAP_EQ_U64(f, 7680 * MiB, "alone: capacity - reserve");
    int to_child[2], from_child[2];
    if (pipe(to_child) || pipe(from_child))
        abort();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        execl(self, self, "shared-child", (char *)NULL);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    char c = 0;
    TAP_OK(read(from_child[0], &c, 1) == 1 && c == 'r', "child allocated");
    cudaMemGetInfo(&f, &t);
    TAP_EQ_U64(f, 7680 * MiB - 512 * MiB - 1 * GiB, "other process's reserve and 1GiB lower free");
    void *p;
    RC(cudaMalloc(&p, 6 * GiB + 2 * MiB), cudaErrorMemoryAllocation);
    cudaGetLastError();
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    cudaMemGetInfo(&f, &t);
    TAP_EQ_U64(f, 7680 * MiB, "dead process cleaned up lazily");
    OKC(cudaMalloc(&p, 6 * GiB));
}

/* Default environment: threads allocating concurrently through the runtime
 * (each gets its context lazily) leave the accounting exact. */
static void *thread_body(void *arg)
{
    uintptr_t seed = (uintptr_t)arg, bad = 0;
    void *live[16] = {0};
    for (int i = 0; i < 2000; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int slot = (int)((seed >> 33) % 16);
        if (live[slot]) {
            bad += cudaFree(live[slot]) != cudaSuccess;
            live[slot] = NULL;
        } else if (slot & 1) {
            bad += cudaMallocAsync(&live[slot], (size_t)((seed >> 40) % (8 * MiB) + 1), NULL) != cudaSuccess;
        } else {
            bad += cudaMalloc(&live[slot], (size_t)((seed >> 40) % (64 * MiB) + 1)) != cudaSuccess;
        }
    }
    for (int i = 0; i < 16; i++)
        if (live[i])
            bad += cudaFree(live[i]) != cudaSuccess;
    return (void *)bad;
}

static void mode_threads(void)
{
    pthread_t th[8];
    uintptr_t bad = 0;
    for (uintptr_t i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, thread_body, (void *)(i + 1));
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(th[i], &r);
        bad += (uintptr_t)r;
    }
    TAP_EQ_U64(bad, 0, "every call of 8 threads succeeded");
    size_t f, t;
    cudaDeviceSynchronize();
    cudaMemGetInfo(&f, &t);
    TAP_EQ_U64(f, 24 * GiB - 448 * MiB, "accounting exact after the threads");
}

static void mode_shared_child(void)
{
    void *p;
    if (cudaMalloc(&p, 1 * GiB) != cudaSuccess)
        _exit(2);
    if (write(1, "r", 1) != 1)
        _exit(3);
    char c;
    while (read(0, &c, 1) > 0)
        ;
    _exit(0);
}

/* Stream capture and graphs (VTSIM_DEVICES=24GiB): a captured allocation
 * charges nothing; a launch takes it from the graph pool, which keeps its
 * bytes until cuDeviceGraphMemTrim. */
static uint64_t graph_attr(CUgraphMem_attribute attr)
{
    cuuint64_t v = ~0ull;
    cuDeviceGetGraphMemAttribute(0, attr, &v);
    return v;
}

static void mode_graph(void)
{
    CUcontext c;
    CUstream s;
    CUgraph g, g2;
    CUgraphExec x, x2;
    CUdeviceptr a = 0, b = 0;
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    size_t f0, f, t;
    OKC(cuInit(0));
    OKC(cuDevicePrimaryCtxRetain(&c, 0));
    OKC(cuCtxSetCurrent(c));
    OKC(cuStreamCreate(&s, 0));
    OKC(cuMemGetInfo_v2(&f0, &t));
    RC(cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    OKC(cuStreamIsCapturing(s, &st));
    TAP_EQ_U64(st, CU_STREAM_CAPTURE_STATUS_NONE, "not capturing before the capture");
    OKC(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    RC(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_ERROR_ILLEGAL_STATE);
    OKC(cuStreamIsCapturing(s, &st));
    TAP_EQ_U64(st, CU_STREAM_CAPTURE_STATUS_ACTIVE, "capturing");
    OKC(cuMemAllocAsync(&a, GiB, s));
    TAP_OK(a >= 0x300000000000ull, "a captured allocation's address is in the graph range");
    OKC(cuMemFreeAsync(a, s));
    OKC(cuMemGetInfo_v2(&f, &t));
    TAP_EQ_U64(f, f0, "a captured allocation charges nothing");
    OKC(cuStreamEndCapture(s, &g));
    RC(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    OKC(cuGraphInstantiateWithFlags(&x, g, 0));
    OKC(cuGraphLaunch(x, s));
    OKC(cuMemGetInfo_v2(&f, &t));
    TAP_EQ_U64(f, f0 - GiB, "a launch charges the graph pool's growth");
    TAP_EQ_U64(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0, "freed in the graph: nothing used");
    TAP_EQ_U64(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), GiB, "the pool keeps 1 GiB");
    TAP_EQ_U64(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), GiB, "used high 1 GiB");
    OKC(cuGraphLaunch(x, s));
    OKC(cuMemGetInfo_v2(&f, &t));
    TAP_EQ_U64(f, f0 - GiB, "a second launch reuses the pool");
    OKC(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OKC(cuMemAllocAsync(&b, GiB / 2, s));
    OKC(cuStreamEndCapture(s, &g2));
    OKC(cuGraphInstantiateWithFlags(&x2, g2, 0));
    OKC(cuGraphLaunch(x2, s));
    TAP_EQ_U64(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), GiB / 2, "an allocation the graph keeps");
    RC(cuGraphLaunch(x2, s), CUDA_ERROR_INVALID_VALUE);
    OKC(cuMemFree_v2(b));
    TAP_EQ_U64(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0, "freed outside its graph");
    RC(cuMemFree_v2(b), CUDA_ERROR_INVALID_VALUE);
    CUgraphExecUpdateResultInfo info;
    OKC(cuGraphExecUpdate_v2(x2, g, &info));
    OKC(cuGraphLaunch(x2, s));
    OKC(cuGraphLaunch(x2, s));
    TAP_EQ_U64(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0, "updated: the executable graph runs the other's nodes");
    OKC(cuDeviceGraphMemTrim(0));
    OKC(cuMemGetInfo_v2(&f, &t));
    TAP_EQ_U64(f, f0, "a trim gives the pool back");
    TAP_EQ_U64(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0, "nothing reserved after the trim");
    /* Global mode: an unsafe call invalidates the capture; in relaxed mode
     * the thread may make it. */
    CUgraph g3 = NULL;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    OKC(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OKC(cuThreadExchangeStreamCaptureMode(&mode));
    TAP_EQ_U64(mode, CU_STREAM_CAPTURE_MODE_GLOBAL, "a thread's capture mode is global by default");
    OKC(cuMemGetInfo_v2(&f, &t));
    OKC(cuThreadExchangeStreamCaptureMode(&mode));
    TAP_EQ_U64(mode, CU_STREAM_CAPTURE_MODE_RELAXED, "the relaxed mode given back");
    RC(cuMemGetInfo_v2(&f, &t), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    OKC(cuStreamIsCapturing(s, &st));
    TAP_EQ_U64(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED, "an unsafe call in global mode invalidates the capture");
    RC(cuMemAllocAsync(&a, GiB, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    RC(cuStreamEndCapture(s, &g3), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    TAP_OK(g3 == NULL, "an invalidated capture gives no graph");
    OKC(cuMemGetInfo_v2(&f, &t));
    OKC(cuGraphExecDestroy(x));
    OKC(cuGraphExecDestroy(x2));
    OKC(cuGraphDestroy(g));
    OKC(cuGraphDestroy(g2));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "driver";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(mode, "shared-child"))
        mode_shared_child();
    drv = dlopen("libcuda.so.1", RTLD_NOW);
    if (!strcmp(mode, "driver"))
        mode_driver();
    else if (!strcmp(mode, "runtime"))
        mode_runtime();
    else if (!strcmp(mode, "frag"))
        mode_frag();
    else if (!strcmp(mode, "fallback"))
        mode_fallback();
    else if (!strcmp(mode, "config"))
        mode_config();
    else if (!strcmp(mode, "nodev"))
        mode_nodev();
    else if (!strcmp(mode, "nov2"))
        mode_nov2();
    else if (!strcmp(mode, "threads"))
        mode_threads();
    else if (!strcmp(mode, "shared"))
        mode_shared(argv[0]);
    else if (!strcmp(mode, "graph"))
        mode_graph();
    else {
        fprintf(stderr, "usage: %s driver|runtime|frag|fallback|config|nodev|nov2|threads|shared|graph\n", argv[0]);
        return 2;
    }
    return tap_done();
}
