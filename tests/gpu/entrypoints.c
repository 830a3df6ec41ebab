/* entrypoints: every allocation entry point of include/vramtrace/
 * entrypoints.def, once each, through the real libcudart and libcuda
 * (make test-gpu builds it with nvcc; a dry run builds it with cc against
 * the simulated GPU). Each call's result is checked; the suite then checks
 * the shim recorded each one.
 *
 *   entrypoints all   every entry point, then a driver pointer obtained
 *                     with cuGetProcAddress, then stream captures
 *   entrypoints oom   a device request twice the card, then the pinned
 *                     host fallback a loader would take, both inside the
 *                     annotation tag "weights"
 *   entrypoints leak  1 MiB by cudaMalloc and 1 MiB by cuMemAlloc_v2, left
 *                     for the exit
 *   entrypoints graph-oom
 *                     a graph whose one memory node is 1 GiB more than the
 *                     card, launched: the launch must fail for lack of
 *                     memory (prints each step's result)
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "vramtrace/annotate.h"

/* Per-thread-default-stream flavours: exported by the libraries, declared
 * by the headers only under CUDA_API_PER_THREAD_DEFAULT_STREAM. */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                          const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                          CUstreamCaptureMode mode);
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);

#define MiB ((size_t)1 << 20)
static int failures;
#define CHECK(x)                                                              \
    do {                                                                      \
        int rc_ = (int)(x);                                                   \
        if (rc_ != 0) {                                                       \
            fprintf(stderr, "entrypoints: %s = %d\n", #x, rc_);               \
            failures++;                                                       \
        }                                                                     \
    } while (0)

/* Another process's memory mapped here: a legacy IPC handle opened (the
 * linked call, then CUDA 4.1's ABI through cuGetProcAddress) and closed,
 * and a shared pool's pointer imported. The driver refuses an IPC handle
 * opened in the process that made it, and may refuse to import its own
 * pool: every call is recorded all the same (tests/gpu/run.sh), and a
 * refusal is said on stderr. */
static void ipc_calls(void)
{
    CUdeviceptr d, opened = 0, pooled = 0;
    CUipcMemHandle handle;
    CHECK(cuMemAlloc_v2(&d, 2 * MiB));
    CHECK(cuIpcGetMemHandle(&handle, d));
    CUresult rc = cuIpcOpenMemHandle(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    fprintf(stderr, "entrypoints: cuIpcOpenMemHandle_v2 of this process's handle: %d\n", (int)rc);
    rc = rc == CUDA_SUCCESS ? cuIpcCloseMemHandle(opened) : cuIpcCloseMemHandle(d);
    fprintf(stderr, "entrypoints: cuIpcCloseMemHandle: %d\n", (int)rc);
    CUresult (*open_4010)(CUdeviceptr *, CUipcMemHandle, unsigned) = NULL;
    CHECK(cuGetProcAddress("cuIpcOpenMemHandle", (void **)&open_4010, 4010, 0, NULL));
    if (open_4010 && open_4010(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS)
        CHECK(cuIpcCloseMemHandle(opened));
    CHECK(cuMemFree_v2(d));

    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemoryPool pool, imported;
    CUmemPoolPtrExportData data;
    int fd = -1;
    CHECK(cuMemPoolCreate(&pool, &props));
    CHECK(cuMemAllocFromPoolAsync(&d, 2 * MiB, pool, 0));
    CHECK(cuStreamSynchronize(0));
    CHECK(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CHECK(cuMemPoolExportPointer(&data, d));
    rc = cuMemPoolImportFromShareableHandle(&imported, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                            0);
    fprintf(stderr, "entrypoints: cuMemPoolImportFromShareableHandle of this process's pool: %d\n", (int)rc);
    rc = cuMemPoolImportPointer(&pooled, rc == CUDA_SUCCESS ? imported : pool, &data);
    fprintf(stderr, "entrypoints: cuMemPoolImportPointer: %d\n", (int)rc);
    if (rc == CUDA_SUCCESS)
        CHECK(cuMemFreeAsync(pooled, 0));
    CHECK(cuMemFreeAsync(d, 0));
    CHECK(cuStreamSynchronize(0));
    CHECK(cuMemPoolDestroy(pool));
    if (fd >= 0)
        close(fd);
}

static void driver_calls(void)
{
    CUdeviceptr d;
    size_t pitch;
    CHECK(cuMemAlloc_v2(&d, 1 * MiB));
    CHECK(cuMemFree_v2(d));
    CHECK(cuMemAllocPitch_v2(&d, &pitch, 1000, 100, 4));
    CHECK(cuMemFree_v2(d));
    CHECK(cuMemAllocAsync(&d, 1 * MiB, 0));
    CHECK(cuMemFreeAsync(d, 0));
    CHECK(cuMemAllocAsync_ptsz(&d, 1 * MiB, 0));
    CHECK(cuMemFreeAsync_ptsz(d, 0));

    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool;
    CHECK(cuMemPoolCreate(&pool, &props));
    CHECK(cuMemAllocFromPoolAsync(&d, 1 * MiB, pool, 0));
    CHECK(cuMemFreeAsync(d, 0));
    CHECK(cuMemAllocFromPoolAsync_ptsz(&d, 1 * MiB, pool, 0));
    CHECK(cuMemFreeAsync(d, 0));
    CHECK(cuCtxSynchronize());
    cuuint64_t reserved = 0;
    CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
    CHECK(cuMemPoolTrimTo(pool, 0));
    CHECK(cuMemPoolDestroy(pool));

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    CHECK(cuMemAddressReserve(&va, 4 * gran, 0, 0, 0));
    CHECK(cuMemCreate(&h, 2 * gran, &prop, 0));
    CHECK(cuMemMap(va, 2 * gran, 0, h, 0));
    CUmemGenericAllocationHandle again;
    CHECK(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)va));
    CHECK(cuMemRelease(again));
    CHECK(cuMemUnmap(va, 2 * gran));
    CHECK(cuMemRelease(h));
    /* A handle exported as a descriptor and imported back, as a peer
     * process imports NCCL's cuMem buffers. Whether a driver imports a
     * process's own export is not written down: a refused import is
     * recorded too (tests/gpu/run.sh), and said on stderr. */
    int posix_fd = 0;
    CHECK(cuDeviceGetAttribute(&posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0));
    prop.requestedHandleTypes = posix_fd ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : 0;
    CUmemGenericAllocationHandle shared, imported;
    int fd = -1;
    CHECK(cuMemCreate(&shared, 2 * gran, &prop, 0));
    if (posix_fd)
        CHECK(cuMemExportToShareableHandle(&fd, shared, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CUresult import_rc =
        cuMemImportFromShareableHandle(&imported, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (import_rc == CUDA_SUCCESS) {
        CHECK(cuMemMap(va, 2 * gran, 0, imported, 0));
        CHECK(cuMemUnmap(va, 2 * gran));
        CHECK(cuMemRelease(imported));
    } else {
        fprintf(stderr, "entrypoints: cuMemImportFromShareableHandle of this process's export: %d\n", (int)import_rc);
    }
    CHECK(cuMemRelease(shared));
    if (fd >= 0)
        close(fd);
    prop.requestedHandleTypes = 0;
    /* A multicast object: a card without NVSwitch multicast refuses it
     * (CUDA_ERROR_NOT_SUPPORTED), and the failed call is recorded too. */
    int multicast = 0;
    CHECK(cuDeviceGetAttribute(&multicast, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, 0));
    CUmulticastObjectProp mc_prop;
    memset(&mc_prop, 0, sizeof mc_prop);
    mc_prop.numDevices = 1;
    size_t mc_gran = 2 * gran;
    if (multicast)
        CHECK(cuMulticastGetGranularity(&mc_gran, &mc_prop, CU_MULTICAST_GRANULARITY_MINIMUM));
    mc_prop.size = mc_gran;
    CUmemGenericAllocationHandle mc;
    CUresult mc_rc = cuMulticastCreate(&mc, &mc_prop);
    if (multicast) {
        CHECK(mc_rc);
        CHECK(cuMemRelease(mc));
    }
    CHECK(cuMemAddressFree(va, 4 * gran));
    ipc_calls();

    CHECK(cuMemAllocManaged(&d, 1 * MiB, CU_MEM_ATTACH_GLOBAL));
    CHECK(cuMemFree_v2(d));
    void *hp;
    CHECK(cuMemAllocHost_v2(&hp, 1 * MiB));
    CHECK(cuMemFreeHost(hp));
    CHECK(cuMemHostAlloc(&hp, 1 * MiB, 0));
    CHECK(cuMemFreeHost(hp));
    void *reg = aligned_alloc(1 << 16, 1 * MiB);
    CHECK(cuMemHostRegister_v2(reg, 1 * MiB, 0));
    CHECK(cuMemHostUnregister(reg));
    free(reg);
    size_t fr, tot;
    CHECK(cuMemGetInfo_v2(&fr, &tot));

    CUDA_ARRAY_DESCRIPTOR d2;
    CUDA_ARRAY3D_DESCRIPTOR d3;
    memset(&d2, 0, sizeof d2);
    memset(&d3, 0, sizeof d3);
    d2.Width = 256, d2.Height = 256, d2.Format = CU_AD_FORMAT_FLOAT, d2.NumChannels = 1;
    d3.Width = 64, d3.Height = 64, d3.Depth = 64, d3.Format = CU_AD_FORMAT_UNSIGNED_INT8, d3.NumChannels = 4;
    CUarray arr;
    CUmipmappedArray mip;
    CHECK(cuArrayCreate_v2(&arr, &d2));
    CHECK(cuArrayDestroy(arr));
    CHECK(cuArray3DCreate_v2(&arr, &d3));
    CHECK(cuArrayDestroy(arr));
    d3.Depth = 0;
    CHECK(cuMipmappedArrayCreate(&mip, &d3, 4));
    CHECK(cuMipmappedArrayDestroy(mip));

    /* The 32-bit legacy pair, by name (cuda.h maps both to _v2). A driver
     * may refuse it; the event is recorded either way. */
    CUresult (*alloc_v1)(unsigned *, unsigned) = (CUresult(*)(unsigned *, unsigned))dlsym(RTLD_DEFAULT, "cuMemAlloc");
    CUresult (*free_v1)(unsigned) = (CUresult(*)(unsigned))dlsym(RTLD_DEFAULT, "cuMemFree");
    unsigned p32 = 0;
    if (alloc_v1 && free_v1 && alloc_v1(&p32, (unsigned)MiB) == CUDA_SUCCESS)
        free_v1(p32);
}

/* Context teardown, last: a context made and destroyed, then the primary
 * context reset by the runtime and, last of all, by the driver. */
static void teardown_calls(void)
{
    CUcontext ctx;
    CUdeviceptr d;
#if CUDA_VERSION >= 12050
    CHECK(cuCtxCreate_v4(&ctx, NULL, 0, 0));
#else
    CHECK(cuCtxCreate_v2(&ctx, 0, 0));
#endif
    CHECK(cuMemAlloc_v2(&d, 1 * MiB));
    CHECK(cuCtxDestroy_v2(ctx));
    CHECK(cudaSetDevice(0));
    void *p;
    CHECK(cudaMalloc(&p, 1 * MiB));
    CHECK(cudaDeviceReset());
    CHECK(cudaMalloc(&p, 1 * MiB)); /* the runtime makes the primary context again */
    /* A retain and release beside the runtime's reference (which keeps the
     * context), by the _v2 call and CUDA 7.0's ABI through cuGetProcAddress. */
    CUresult (*release_7000)(CUdevice) = NULL, (*reset_7000)(CUdevice) = NULL;
    CHECK(cuGetProcAddress("cuDevicePrimaryCtxRelease", (void **)&release_7000, 7000, 0, NULL));
    CHECK(cuGetProcAddress("cuDevicePrimaryCtxReset", (void **)&reset_7000, 7000, 0, NULL));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(cuDevicePrimaryCtxRelease_v2(0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(release_7000 ? release_7000(0) : CUDA_ERROR_NOT_FOUND);
    CHECK(cuDevicePrimaryCtxReset_v2(0));
    /* 7.0's reset of a context already reset: recorded whatever it returns
     * (tests/gpu/run.sh). */
    if (reset_7000)
        fprintf(stderr, "entrypoints: cuDevicePrimaryCtxReset (7.0) after the reset: %d\n", (int)reset_7000(0));
}

static void runtime_calls(void)
{
    void *p;
    size_t pitch;
    CHECK(cudaMalloc(&p, 1 * MiB));
    CHECK(cudaFree(p));
    CHECK(cudaMallocPitch(&p, &pitch, 1000, 100));
    CHECK(cudaFree(p));
    CHECK(cudaMallocHost(&p, 1 * MiB));
    CHECK(cudaFreeHost(p));
    CHECK(cudaHostAlloc(&p, 1 * MiB, cudaHostAllocDefault));
    CHECK(cudaFreeHost(p));
    CHECK(cudaMallocManaged(&p, 1 * MiB, cudaMemAttachGlobal));
    CHECK(cudaFree(p));
    CHECK(cudaMallocAsync(&p, 1 * MiB, 0));
    CHECK(cudaFreeAsync(p, 0));
    CHECK(cudaMallocAsync_ptsz(&p, 1 * MiB, 0));
    CHECK(cudaFreeAsync_ptsz(p, 0));
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cudaMallocFromPoolAsync(&p, 1 * MiB, pool, 0));
    CHECK(cudaFreeAsync(p, 0));
    CHECK(cudaMallocFromPoolAsync_ptsz(&p, 1 * MiB, pool, 0));
    CHECK(cudaFreeAsync(p, 0));
    CHECK(cudaDeviceSynchronize());
    void *reg = aligned_alloc(1 << 16, 1 * MiB);
    CHECK(cudaHostRegister(reg, 1 * MiB, cudaHostRegisterDefault));
    CHECK(cudaHostUnregister(reg));
    free(reg);
    size_t fr, tot;
    CHECK(cudaMemGetInfo(&fr, &tot));
}

/* A graph memory node of bytes on device 0. */
static CUDA_MEM_ALLOC_NODE_PARAMS device_node(size_t bytes)
{
    CUDA_MEM_ALLOC_NODE_PARAMS params;
    memset(&params, 0, sizeof params);
    params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    params.poolProps.location.id = 0;
    params.bytesize = bytes;
    return params;
}

/* Each way to begin and end a stream capture, with a stream-ordered
 * allocation and its free captured in each, then the runtime's capture,
 * then graph memory nodes added by hand, by their own calls and by the
 * generic node add, and the one of launch_calls (the suite counts them
 * flagged `captured`: CAPTURED_CALLS, 11 allocations). CUDA 10.0's begin,
 * without a mode, is looked up as a program built against 10.0 would
 * link it. */
#define CAPTURED_CALLS 20
static void capture_one(CUstream s, int how)
{
    CUgraph g = NULL, into = NULL;
    CUdeviceptr d;
    if (how == 0)
        CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    else if (how == 1)
        CHECK(cuStreamBeginCapture_v2_ptsz(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    else if (how >= 4) {
        CUresult (*begin_10000)(CUstream) = NULL;
        CHECK(cuGetProcAddress_v2("cuStreamBeginCapture", (void **)&begin_10000, 10000,
                                  how == 5 ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT,
                                  NULL));
        if (!begin_10000)
            return;
        CHECK(begin_10000(s));
    } else {
        CHECK(cuGraphCreate(&into, 0));
        if (how == 2)
            CHECK(cuStreamBeginCaptureToGraph(s, into, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
        else
            CHECK(cuStreamBeginCaptureToGraph_ptsz(s, into, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
    }
    CHECK(cuMemAllocAsync(&d, 1 * MiB, s));
    CHECK(cuMemFreeAsync(d, s));
    CHECK(how & 1 ? cuStreamEndCapture_ptsz(s, &g) : cuStreamEndCapture(s, &g));
    if (g)
        CHECK(cuGraphDestroy(g));
}

static void capture_calls(void)
{
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int how = 0; how < 6; how++)
        capture_one(s, how);
    cudaStream_t rs;
    cudaGraph_t rg = NULL;
    void *p;
    CHECK(cudaStreamCreateWithFlags(&rs, cudaStreamNonBlocking));
    CHECK(cudaStreamBeginCapture(rs, cudaStreamCaptureModeRelaxed));
    CHECK(cudaMallocAsync(&p, 1 * MiB, rs));
    CHECK(cudaFreeAsync(p, rs));
    CHECK(cudaStreamEndCapture(rs, &rg));
    if (rg)
        CHECK(cudaGraphDestroy(rg));
    CHECK(cudaStreamDestroy(rs));
    CHECK(cuStreamDestroy_v2(s));
    /* Graph memory nodes added by hand. */
    CUgraph g;
    CUgraphNode alloc_node, free_node;
    CUDA_MEM_ALLOC_NODE_PARAMS params = device_node(1 * MiB);
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddMemAllocNode(&alloc_node, g, NULL, 0, &params));
    CHECK(cuGraphAddMemFreeNode(&free_node, g, &alloc_node, 1, params.dptr));
    /* The generic node add: CUDA 12.2's (what a program built against
     * 12.2 links), then the runtime's cudaGraphAddNode (12.3's _v2). */
    CUgraphNodeParams generic;
    CUgraphNode generic_alloc, generic_free;
    memset(&generic, 0, sizeof generic);
    generic.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    CUDA_MEM_ALLOC_NODE_PARAMS node = device_node(1 * MiB);
    memcpy(&generic.alloc, &node, sizeof node);
    typedef CUresult (*add_node_12020_t)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraphNodeParams *);
    void *fn = NULL;
    CHECK(cuGetProcAddress_v2("cuGraphAddNode", &fn, 12020, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    if (fn)
        CHECK(((add_node_12020_t)fn)(&generic_alloc, g, NULL, 0, &generic));
    struct cudaGraphNodeParams rt_node;
    memset(&rt_node, 0, sizeof rt_node);
    rt_node.type = cudaGraphNodeTypeMemAlloc;
    memcpy(&rt_node.alloc, &node, sizeof node);
    CHECK(cudaGraphAddNode((cudaGraphNode_t *)&generic_alloc, (cudaGraph_t)g, NULL, NULL, 0, &rt_node));
    CUdeviceptr generic_ptr = (CUdeviceptr)(uintptr_t)rt_node.alloc.dptr;
    memset(&rt_node, 0, sizeof rt_node);
    rt_node.type = cudaGraphNodeTypeMemFree;
    rt_node.free.dptr = (void *)(uintptr_t)generic_ptr;
    CHECK(cudaGraphAddNode((cudaGraphNode_t *)&generic_free, (cudaGraph_t)g, (cudaGraphNode_t *)&generic_alloc, NULL, 1,
                           &rt_node));
    CHECK(cuGraphDestroy(g));
}

/* A launch is an event only when it fails. A graph whose allocation is
 * still live from its last launch fails the next with
 * CUDA_ERROR_INVALID_VALUE (cudaGraphLaunch's documentation), a failure
 * made safely through each launch entry point. */
static void launch_calls(void)
{
    CUstream s;
    CUgraph g;
    CUgraphExec x;
    CUgraphNode node;
    CUDA_MEM_ALLOC_NODE_PARAMS params = device_node(1 * MiB);
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddMemAllocNode(&node, g, NULL, 0, &params));
    CHECK(cuGraphInstantiateWithFlags(&x, g, 0));
    CHECK(cuGraphLaunch(x, s));
    if (cuGraphLaunch(x, s) == CUDA_SUCCESS || cuGraphLaunch_ptsz(x, s) == CUDA_SUCCESS) {
        fprintf(stderr, "entrypoints: a graph relaunched with its allocation live did not fail\n");
        failures++;
    }
    CHECK(cuMemFreeAsync(params.dptr, s));
    CHECK(cuStreamSynchronize(s));
    cuuint64_t reserved = 0;
    CHECK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved));
    CHECK(cuGraphExecDestroy(x));
    CHECK(cuGraphDestroy(g));
    CHECK(cuStreamDestroy_v2(s));
}

/* The graph pool cannot grow past the card: the launch fails, and the
 * suite checks the report says so. Each step's result is printed, so a
 * driver that refuses the graph earlier shows where. */
static void graph_oom_calls(void)
{
    size_t fr = 0, tot = 0;
    CUstream s;
    CUgraph g;
    CUgraphExec x;
    CUgraphNode node;
    CHECK(cuMemGetInfo_v2(&fr, &tot));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS params = device_node(tot + 1024 * MiB);
    CUresult add = cuGraphAddMemAllocNode(&node, g, NULL, 0, &params);
    CUresult inst = add ? add : cuGraphInstantiateWithFlags(&x, g, 0);
    CUresult launch = add || inst ? CUDA_SUCCESS : cuGraphLaunch(x, s);
    printf("graph-oom: add-node=%d instantiate=%d launch=%d\n", (int)add, (int)inst, (int)launch);
    cuStreamSynchronize(s);
    if (!add && !inst)
        cuGraphExecDestroy(x);
    CHECK(cuGraphDestroy(g));
    CHECK(cuStreamDestroy_v2(s));
}

/* A driver pointer from cuGetProcAddress, as libcudart and PyTorch get
 * theirs: the shim must hand back its wrapper. */
static void procaddr_calls(void)
{
    typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
    typedef CUresult (*free_fn)(CUdeviceptr);
    void *a = NULL, *f = NULL;
    CUdriverProcAddressQueryResult st;
    CHECK(cuGetProcAddress("cuMemAlloc", &a, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
    CHECK(cuGetProcAddress("cuMemFree", &f, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
    if (a && f) {
        CUdeviceptr d;
        CHECK(((alloc_fn)a)(&d, 3 * MiB));
        CHECK(((free_fn)f)(d));
    }
}

static void oom_calls(void)
{
    size_t fr = 0, tot = 0;
    void *p;
    CHECK(cudaMemGetInfo(&fr, &tot));
    vramtrace_annotate_push("weights");
    cudaError_t e = cudaMalloc(&p, 2 * tot);
    if (e == cudaSuccess) {
        fprintf(stderr, "entrypoints: a request of twice the card succeeded\n");
        failures++;
    }
    cudaGetLastError();
    CHECK(cudaMallocHost(&p, 64 * MiB)); /* the loader's fallback: weights in pinned host memory */
    vramtrace_annotate_pop();
    CHECK(cudaFreeHost(p));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "all";
    CHECK(cudaSetDevice(0));
    if (!strcmp(mode, "all")) {
        driver_calls();
        runtime_calls();
        procaddr_calls();
        capture_calls();
        launch_calls();
        teardown_calls();
    } else if (!strcmp(mode, "oom")) {
        oom_calls();
    } else if (!strcmp(mode, "graph-oom")) {
        graph_oom_calls();
    } else if (!strcmp(mode, "leak")) {
        /* Left for the process's exit: whatever libcudart does then with
         * its primary context (a release that drops the last reference
         * would be a teardown in the trace), the report must still name
         * them as never freed (tests/gpu/run.sh). */
        void *p;
        CUdeviceptr d;
        CHECK(cudaMalloc(&p, 1 * MiB));
        CHECK(cuMemAlloc_v2(&d, 1 * MiB));
    } else {
        fprintf(stderr, "entrypoints: unknown mode %s\n", mode);
        return 2;
    }
    printf("entrypoints %s: %d failures\n", mode, failures);
    return failures ? 1 : 0;
}
