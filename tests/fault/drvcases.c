/* drvcases.c: what the driver does that the report must follow
 * (tests/t/76-fault-driver.t). Each mode prints only result codes, so a test
 * compares its stdout with and without the shim.
 *
 * Modes (argv[1]):
 *   teardown-rt       cudaMalloc 2 GiB + 1 GiB, cudaDeviceReset, 3 GiB,
 *                     cudaDeviceReset: peak 3 GiB, nothing live at the end
 *   teardown-primary  the same with cuMemAlloc_v2 in the primary context
 *                     and cuDevicePrimaryCtxReset_v2
 *   teardown-destroy  the same in contexts made by cuCtxCreate_v4 and
 *                     ended by cuCtxDestroy_v2
 *   teardown-release  the primary context retained twice: 2 GiB, a
 *                     release (one reference left: nothing freed), 1 GiB,
 *                     the last release (both freed); retained again: 1 GiB
 *                     and CUDA 7.0's cuDevicePrimaryCtxRelease (through
 *                     cuGetProcAddress), then 512 MiB and 7.0's
 *                     cuDevicePrimaryCtxReset: peak 3 GiB, nothing live at
 *                     the end
 *   teardown-mixed    cudaMalloc 2 GiB (primary context), 1 GiB in a
 *                     cuCtxCreate'd context, cuCtxDestroy of it; 1 GiB in
 *                     a second created context, cudaDeviceReset: peak
 *                     3 GiB, the second context's 1 GiB live at the end
 *   teardown-many     cudaMalloc 1 GiB (primary context), 4,096
 *                     allocations of 1 MiB in a cuCtxCreate'd context
 *                     (20 ms apart every 256),
 *                     cudaDeviceReset: the created context's 4 GiB live at
 *                     the end (each is one mark the shim writes at the
 *                     reset: more than a small event buffer holds)
 *   teardown-otherdev two devices: cudaMalloc 1 GiB on device 0, 4 GiB in
 *                     a context created on device 1, then device 0's
 *                     primary current again and cuCtxDestroy of device
 *                     1's context: device 0 keeps its 1 GiB
 *   pitchovf          cudaMalloc 1 GiB, then cuMemAllocPitch_v2 and
 *                     cudaMallocPitch of 2 rows of 2^63 + 2^29 bytes (the
 *                     product wraps to 1 GiB), refused by the driver
 *   otherdev          two devices, device 0 current: 4 GiB by
 *                     cudaMallocAsync on a stream of device 1 and 4 GiB from
 *                     a pool of device 1, 1 MiB by cudaMalloc on device 0
 *   hostmem           1 GiB of VMM memory on device 0, 4 GiB of VMM memory
 *                     located in host memory (HOST_NUMA), both mapped, and
 *                     4 GiB from a pool located in host memory
 *   arrays            cudaMalloc 1 GiB, then a 2D array of 16384 x 16384
 *                     floats (1 GiB), a 3D array of 1024 x 1024 x 512 RGBA8
 *                     texels (2 GiB) and a mipmapped 32768 x 32768 8-bit
 *                     array of 16 levels (4/3 GiB): 5.33 GiB held
 *   slowreuse         cudaMalloc 1 GiB; another thread frees it with a
 *                     cudaFree that returns VTSIM_SLOW_RETURN_MS after the
 *                     driver released it; meanwhile cudaMalloc 1 GiB gets
 *                     the address back and is never freed: 1 GiB at exit
 *   retain            a 1 GiB handle mapped, released, retained back from
 *                     its address (cuMemRetainAllocationHandle), unmapped
 *                     and mapped elsewhere, then a 2 GiB handle: 3 GiB held
 *   sticky            cudaMalloc 1 GiB, then cudaMalloc 2 GiB and
 *                     cuMemAlloc_v2 512 MiB, which fail with
 *                     CUDA_ERROR_ILLEGAL_ADDRESS under VTSIM_FAULT_AFTER=1
 *                     (as after a kernel's illegal memory access)
 *   noctx [GIB]       cudaMalloc 1 GiB, then cuMemAlloc_v2 1 GiB on a thread
 *                     with no current context (CUDA_ERROR_INVALID_CONTEXT);
 *                     with GIB, then cudaMalloc GIB GiB on the main thread
 *   graph             cudaMalloc 1 GiB, cuMemAllocAsync 128 MiB; then a
 *                     stream captures cuMemAllocAsync 2 GiB and its
 *                     cuMemFreeAsync, cuMemAllocAsync 512 MiB, and the
 *                     cuMemFreeAsync of the 128 MiB; another stream
 *                     captures cudaMallocAsync 256 MiB and its
 *                     cudaFreeAsync (the runtime's capture). Each graph is
 *                     launched once, the 512 MiB freed outside its graph
 *                     (cuMemFreeAsync), the context synchronised, and
 *                     cuMemGetInfo asked before and after
 *                     cuDeviceGraphMemTrim
 *   graph-nodes       cudaMalloc 1 GiB; a graph built by hand: a 512 MiB
 *                     allocation node, a 256 MiB one and its free node;
 *                     launched, then the 512 MiB freed outside the graph
 *                     (cuMemFreeAsync)
 *   graph-generic     graph-nodes through the generic node add: the 512 MiB
 *                     node by CUDA 12.2's cuGraphAddNode, the 256 MiB one
 *                     and its free by the runtime's cudaGraphAddNode
 *                     (cuGraphAddNode_v2), and an empty node
 *   graph-10000       cudaMalloc 1 GiB; two streams captured, begun by
 *                     CUDA 10.0's cuStreamBeginCapture (linked) and its
 *                     _ptsz flavour (from cuGetProcAddress at 10000), each
 *                     capturing a cuMemAllocAsync (2 GiB, 512 MiB) and its
 *                     free
 *   graph-global      cudaMalloc 1 GiB; a stream captures in global mode
 *                     (the default of cudaStreamBeginCapture and of
 *                     torch.cuda.graph) four cuMemAllocAsync of 256 MiB
 *                     and their frees, 5 ms apart; the graph is launched.
 *                     Any call of the shim's own the driver deems unsafe
 *                     would invalidate the capture (sim_graph.c)
 *   graph-oom         cudaMalloc 20 GiB; a graph capturing 256 MiB
 *                     (cuMemAllocAsync and its free) launched twice: it
 *                     fits; a graph capturing 8 GiB launched by
 *                     cuGraphLaunch and by cudaGraphLaunch: the graph
 *                     pool cannot grow, both fail for lack of memory;
 *                     then the pool's USED_MEM_HIGH asked
 *   graph-relaunch    cudaMalloc 20 GiB; a graph capturing 8 GiB launched:
 *                     it fails for lack of memory; the 20 GiB freed and
 *                     the graph launched three times: each succeeds
 *   import            cudaMalloc 1 MiB, a 2 GiB VMM handle exported as a
 *                     file descriptor (as NCCL's cuMem buffers are), and a
 *                     peer process (this program again, mode import-peer)
 *                     given the descriptor across exec: it allocates
 *                     1 MiB, imports the handle, maps it, retains it from
 *                     its address, unmaps it and releases both references.
 *                     The peer's memory is 1 MiB; the 2 GiB is the
 *                     exporter's
 *   ipc               cudaMalloc 2 GiB exported as an IPC handle
 *                     (cuIpcGetMemHandle: PyTorch's shared tensors), a
 *                     pool made shareable, 1 GiB from it exported
 *                     (cuMemPoolExportPointer), and a peer process (mode
 *                     ipc-peer) given the pool's descriptor, the handle
 *                     and the pointer's data across exec: it allocates
 *                     1 MiB, imports the pool and the pointer, opens the
 *                     handle three times (the linked call, CUDA 4.1's ABI
 *                     through cuGetProcAddress, cudaIpcOpenMemHandle: one
 *                     address), closes it three times, frees the pointer
 *                     (cuMemFreeAsync) and its 1 MiB. The peer's memory
 *                     is 1 MiB; the 3 GiB are the exporter's
 *   multicast         cudaMalloc 1 MiB, a multicast object of 2 GiB for one
 *                     device (NCCL's NVLS buffers), a 2 GiB handle bound to
 *                     it, the object mapped, unmapped, unbound and
 *                     released, then the handle: 2 GiB + 1 MiB held
 */
#include <cuda.h>
#include <fcntl.h>
/* cuda.h maps cuGraphAddNode to CUDA 12.3's _v2; a program built against
 * 12.2 calls this one. */
#undef cuGraphAddNode
CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                        size_t numDependencies, CUgraphNodeParams *nodeParams);
/* CUDA 10.0's capture begin, without a mode. */
#undef cuStreamBeginCapture
CUresult cuStreamBeginCapture(CUstream hStream);
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GiB (1024ull * 1024 * 1024)

static int rt_teardown(void)
{
    void *a, *b, *c;
    printf("malloc=%d\n", (int)cudaMalloc(&a, 2 * GiB));
    printf("malloc=%d\n", (int)cudaMalloc(&b, GiB));
    printf("reset=%d\n", (int)cudaDeviceReset());
    printf("malloc=%d\n", (int)cudaMalloc(&c, 3 * GiB));
    printf("reset=%d\n", (int)cudaDeviceReset());
    return 0;
}

static int primary_teardown(void)
{
    CUcontext ctx;
    CUdeviceptr a, b, c;
    printf("init=%d\n", (int)cuInit(0));
    for (int round = 0; round < 2; round++) {
        printf("retain=%d\n", (int)cuDevicePrimaryCtxRetain(&ctx, 0));
        printf("current=%d\n", (int)cuCtxSetCurrent(ctx));
        if (round == 0) {
            printf("alloc=%d\n", (int)cuMemAlloc_v2(&a, 2 * GiB));
            printf("alloc=%d\n", (int)cuMemAlloc_v2(&b, GiB));
        } else {
            printf("alloc=%d\n", (int)cuMemAlloc_v2(&c, 3 * GiB));
        }
        printf("reset=%d\n", (int)cuDevicePrimaryCtxReset_v2(0));
    }
    return 0;
}

/* A primary context's release: a teardown only when it drops the last
 * reference. */
static int release_teardown(void)
{
    CUcontext ctx;
    CUdeviceptr a, b, c, d;
    CUresult (*release_7000)(CUdevice) = NULL, (*reset_7000)(CUdevice) = NULL;
    printf("init=%d\n", (int)cuInit(0));
    printf("retain=%d\n", (int)cuDevicePrimaryCtxRetain(&ctx, 0));
    printf("retain=%d\n", (int)cuDevicePrimaryCtxRetain(&ctx, 0));
    printf("current=%d\n", (int)cuCtxSetCurrent(ctx));
    printf("alloc=%d\n", (int)cuMemAlloc_v2(&a, 2 * GiB));
    printf("release=%d\n", (int)cuDevicePrimaryCtxRelease_v2(0));
    printf("alloc=%d\n", (int)cuMemAlloc_v2(&b, GiB));
    printf("release=%d\n", (int)cuDevicePrimaryCtxRelease_v2(0));
    /* CUDA 7.0's ABI, as a program built then finds it. */
    printf("lookup=%d\n", (int)cuGetProcAddress("cuDevicePrimaryCtxRelease", (void **)&release_7000, 7000, 0, NULL));
    printf("lookup=%d\n", (int)cuGetProcAddress("cuDevicePrimaryCtxReset", (void **)&reset_7000, 7000, 0, NULL));
    printf("retain=%d\n", (int)cuDevicePrimaryCtxRetain(&ctx, 0));
    printf("current=%d\n", (int)cuCtxSetCurrent(ctx));
    printf("alloc=%d\n", (int)cuMemAlloc_v2(&c, GiB));
    printf("release=%d\n", release_7000 ? (int)release_7000(0) : -1);
    printf("retain=%d\n", (int)cuDevicePrimaryCtxRetain(&ctx, 0));
    printf("current=%d\n", (int)cuCtxSetCurrent(ctx));
    printf("alloc=%d\n", (int)cuMemAlloc_v2(&d, GiB / 2));
    printf("reset=%d\n", reset_7000 ? (int)reset_7000(0) : -1);
    return 0;
}

static int destroy_teardown(void)
{
    CUcontext ctx;
    CUdeviceptr a, b, c;
    printf("init=%d\n", (int)cuInit(0));
    for (int round = 0; round < 2; round++) {
        printf("create=%d\n", (int)cuCtxCreate_v4(&ctx, NULL, 0, 0));
        if (round == 0) {
            printf("alloc=%d\n", (int)cuMemAlloc_v2(&a, 2 * GiB));
            printf("alloc=%d\n", (int)cuMemAlloc_v2(&b, GiB));
        } else {
            printf("alloc=%d\n", (int)cuMemAlloc_v2(&c, 3 * GiB));
        }
        printf("destroy=%d\n", (int)cuCtxDestroy_v2(ctx));
    }
    return 0;
}

/* Allocates size in a new context on dev and makes the context current
 * before it current again. */
static CUcontext context_with(int dev, size_t size)
{
    CUcontext ctx = NULL, popped = NULL;
    CUdeviceptr p;
    printf("create=%d\n", (int)cuCtxCreate_v4(&ctx, NULL, 0, dev));
    printf("alloc=%d\n", (int)cuMemAlloc_v2(&p, size));
    printf("pop=%d\n", (int)cuCtxPopCurrent_v2(&popped));
    return ctx;
}

static int mixed_teardown(void)
{
    void *a;
    printf("malloc=%d\n", (int)cudaMalloc(&a, 2 * GiB));
    printf("destroy=%d\n", (int)cuCtxDestroy_v2(context_with(0, GiB)));
    context_with(0, GiB);
    printf("reset=%d\n", (int)cudaDeviceReset());
    return 0;
}

static int many_teardown(void)
{
    void *a;
    CUdevice dev;
    CUcontext ctx, popped;
    CUdeviceptr p;
    int failed = 0;
    printf("malloc=%d\n", (int)cudaMalloc(&a, GiB));
    cuDeviceGet(&dev, 0);
    printf("create=%d\n", (int)cuCtxCreate_v4(&ctx, NULL, 0, dev));
    for (int i = 0; i < 4096; i++) {
        failed += cuMemAlloc_v2(&p, 1 << 20) != CUDA_SUCCESS;
        /* Paced, so that a small event buffer keeps the allocations: only
         * the teardown's marks come all at once. */
        if (i % 256 == 255) {
            struct timespec ms = { 0, 20000000 };
            nanosleep(&ms, NULL);
        }
    }
    printf("allocs failed=%d\n", failed);
    printf("pop=%d\n", (int)cuCtxPopCurrent_v2(&popped));
    printf("reset=%d\n", (int)cudaDeviceReset());
    return 0;
}

static int otherdev_teardown(void)
{
    void *a;
    printf("malloc=%d\n", (int)cudaMalloc(&a, GiB));
    printf("destroy=%d\n", (int)cuCtxDestroy_v2(context_with(1, 4 * GiB)));
    return 0;
}

static int pitch_overflow(void)
{
    void *p, *q;
    CUdeviceptr d = 0;
    size_t pitch = 0, width = ((size_t)1 << 63) + ((size_t)1 << 29);
    printf("malloc=%d\n", (int)cudaMalloc(&p, GiB));
    printf("pitch=%d\n", (int)cuMemAllocPitch_v2(&d, &pitch, width, 2, 16));
    printf("rtpitch=%d\n", (int)cudaMallocPitch(&q, &pitch, width, 2));
    printf("free=%d\n", (int)cudaFree(p));
    return 0;
}

static int other_device(void)
{
    cudaStream_t s;
    cudaMemPool_t pool;
    struct cudaMemPoolProps props;
    void *a, *b, *c;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 1;
    printf("set1=%d\n", (int)cudaSetDevice(1));
    printf("stream=%d\n", (int)cudaStreamCreate(&s));
    printf("pool=%d\n", (int)cudaMemPoolCreate(&pool, &props));
    printf("set0=%d\n", (int)cudaSetDevice(0));
    printf("malloc=%d\n", (int)cudaMalloc(&c, 1 << 20));
    printf("async=%d\n", (int)cudaMallocAsync(&a, 4 * GiB, s));
    printf("frompool=%d\n", (int)cudaMallocFromPoolAsync(&b, 4 * GiB, pool, s));
    printf("sync=%d\n", (int)cudaStreamSynchronize(s));
    return 0;
}

static CUmemAllocationProp vmm_prop(CUmemLocationType where)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = where;
    prop.location.id = 0;
    return prop;
}

static int host_memory(void)
{
    CUmemAllocationProp dev = vmm_prop(CU_MEM_LOCATION_TYPE_DEVICE), host = vmm_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA);
    CUmemGenericAllocationHandle hd, hh;
    CUdeviceptr va;
    cudaMemPool_t pool;
    struct cudaMemPoolProps props;
    void *p, *b;
    printf("malloc=%d\n", (int)cudaMalloc(&p, 1 << 20)); /* the context */
    printf("create=%d\n", (int)cuMemCreate(&hd, GiB, &dev, 0));
    printf("create-host=%d\n", (int)cuMemCreate(&hh, 4 * GiB, &host, 0));
    printf("reserve=%d\n", (int)cuMemAddressReserve(&va, 5 * GiB, 0, 0, 0));
    printf("map=%d\n", (int)cuMemMap(va, GiB, 0, hd, 0));
    printf("map-host=%d\n", (int)cuMemMap(va + GiB, 4 * GiB, 0, hh, 0));
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeHostNuma;
    props.location.id = 0;
    printf("pool-host=%d\n", (int)cudaMemPoolCreate(&pool, &props));
    printf("frompool=%d\n", (int)cudaMallocFromPoolAsync(&b, 4 * GiB, pool, NULL));
    printf("freeasync=%d\n", (int)cudaFreeAsync(b, NULL));
    printf("unmap=%d\n", (int)cuMemUnmap(va, 5 * GiB));
    printf("release=%d\n", (int)cuMemRelease(hd));
    printf("release-host=%d\n", (int)cuMemRelease(hh));
    printf("free=%d\n", (int)cudaFree(p));
    return 0;
}

static int retain(void)
{
    CUmemAllocationProp dev = vmm_prop(CU_MEM_LOCATION_TYPE_DEVICE);
    CUmemGenericAllocationHandle a, again, b;
    CUdeviceptr va;
    void *p;
    printf("malloc=%d\n", (int)cudaMalloc(&p, 1 << 20)); /* the context */
    printf("reserve=%d\n", (int)cuMemAddressReserve(&va, 4 * GiB, 0, 0, 0));
    printf("create=%d\n", (int)cuMemCreate(&a, GiB, &dev, 0));
    printf("map=%d\n", (int)cuMemMap(va, GiB, 0, a, 0));
    printf("release=%d\n", (int)cuMemRelease(a)); /* only the mapping keeps it */
    printf("retain=%d\n", (int)cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)va));
    printf("same=%d\n", again == a);
    printf("unmap=%d\n", (int)cuMemUnmap(va, GiB)); /* the retained reference keeps it */
    printf("remap=%d\n", (int)cuMemMap(va + GiB, GiB, 0, again, 0));
    printf("create=%d\n", (int)cuMemCreate(&b, 2 * GiB, &dev, 0));
    printf("map=%d\n", (int)cuMemMap(va + 2 * GiB, 2 * GiB, 0, b, 0));
    printf("unmap=%d\n", (int)cuMemUnmap(va + GiB, 3 * GiB));
    printf("release=%d\n", (int)cuMemRelease(again));
    printf("release=%d\n", (int)cuMemRelease(b));
    printf("free=%d\n", (int)cudaFree(p));
    return 0;
}

static int arrays(void)
{
    CUDA_ARRAY_DESCRIPTOR d2;
    CUDA_ARRAY3D_DESCRIPTOR d3, dm;
    CUarray a2, a3;
    CUmipmappedArray am;
    void *p;
    memset(&d2, 0, sizeof d2);
    memset(&d3, 0, sizeof d3);
    memset(&dm, 0, sizeof dm);
    d2.Width = 16384, d2.Height = 16384, d2.Format = CU_AD_FORMAT_FLOAT, d2.NumChannels = 1;
    d3.Width = 1024, d3.Height = 1024, d3.Depth = 512, d3.Format = CU_AD_FORMAT_UNSIGNED_INT8, d3.NumChannels = 4;
    dm.Width = 32768, dm.Height = 32768, dm.Format = CU_AD_FORMAT_UNSIGNED_INT8, dm.NumChannels = 1;
    printf("malloc=%d\n", (int)cudaMalloc(&p, GiB));
    printf("array=%d\n", (int)cuArrayCreate_v2(&a2, &d2));
    printf("array3d=%d\n", (int)cuArray3DCreate_v2(&a3, &d3));
    printf("mipmapped=%d\n", (int)cuMipmappedArrayCreate(&am, &dm, 16));
    size_t fr = 0, tot = 0;
    printf("meminfo=%d\n", (int)cuMemGetInfo_v2(&fr, &tot));
    printf("destroy=%d\n", (int)cuArrayDestroy(a2));
    printf("destroy=%d\n", (int)cuArrayDestroy(a3));
    printf("destroy=%d\n", (int)cuMipmappedArrayDestroy(am));
    printf("free=%d\n", (int)cudaFree(p));
    return 0;
}

static void *slow_free(void *p)
{
    printf("free=%d\n", (int)cudaFree(p));
    return NULL;
}

static int slow_reuse(void)
{
    void *a, *b;
    pthread_t th;
    printf("malloc=%d\n", (int)cudaMalloc(&a, GiB));
    if (pthread_create(&th, NULL, slow_free, a) != 0)
        return 1;
    struct timespec settle = { 0, 100000000 }; /* the driver has released a */
    nanosleep(&settle, NULL);
    printf("malloc=%d\n", (int)cudaMalloc(&b, GiB));
    printf("reused=%d\n", a == b);
    pthread_join(th, NULL);
    return 0;
}

static int sticky_error(void)
{
    void *a, *b;
    CUdeviceptr c;
    printf("malloc=%d\n", (int)cudaMalloc(&a, GiB));
    printf("after-fault=%d\n", (int)cudaMalloc(&b, 2 * GiB));
    printf("driver-after-fault=%d\n", (int)cuMemAlloc_v2(&c, GiB / 2));
    return 0;
}

static void *alloc_without_context(void *arg)
{
    CUdeviceptr p;
    *(int *)arg = (int)cuMemAlloc_v2(&p, GiB);
    return NULL;
}

static int no_context(const char *then_gib)
{
    void *a, *b;
    printf("malloc=%d\n", (int)cudaMalloc(&a, GiB));
    int rc = -1;
    pthread_t t;
    if (pthread_create(&t, NULL, alloc_without_context, &rc) || pthread_join(t, NULL))
        return 1;
    printf("thread-without-context=%d\n", rc);
    if (then_gib)
        printf("then=%d\n", (int)cudaMalloc(&b, (size_t)atoi(then_gib) * GiB));
    return 0;
}

static int graphs(void)
{
    void *weights, *rt_block;
    CUdeviceptr before, big, kept;
    CUstream s;
    CUgraph g;
    CUgraphExec x;
    cudaStream_t rs;
    cudaGraph_t rg;
    cudaGraphExec_t rx;
    size_t fr = 0, tot = 0;
    printf("malloc=%d\n", (int)cudaMalloc(&weights, GiB));
    printf("stream=%d\n", (int)cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    printf("alloc-async=%d\n", (int)cuMemAllocAsync(&before, GiB / 8, s));
    printf("begin=%d\n", (int)cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    printf("captured-alloc=%d\n", (int)cuMemAllocAsync(&big, 2 * GiB, s));
    printf("captured-free=%d\n", (int)cuMemFreeAsync(big, s));
    printf("captured-alloc=%d\n", (int)cuMemAllocAsync(&kept, GiB / 2, s));
    printf("captured-free=%d\n", (int)cuMemFreeAsync(before, s));
    printf("end=%d\n", (int)cuStreamEndCapture(s, &g));
    printf("rt-stream=%d\n", (int)cudaStreamCreate(&rs));
    printf("rt-begin=%d\n", (int)cudaStreamBeginCapture(rs, cudaStreamCaptureModeRelaxed));
    printf("rt-captured-alloc=%d\n", (int)cudaMallocAsync(&rt_block, GiB / 4, rs));
    printf("rt-captured-free=%d\n", (int)cudaFreeAsync(rt_block, rs));
    printf("rt-end=%d\n", (int)cudaStreamEndCapture(rs, &rg));
    printf("instantiate=%d\n", (int)cuGraphInstantiateWithFlags(&x, g, 0));
    printf("launch=%d\n", (int)cuGraphLaunch(x, s));
    printf("rt-instantiate=%d\n", (int)cudaGraphInstantiate(&rx, rg, 0));
    printf("rt-launch=%d\n", (int)cudaGraphLaunch(rx, rs));
    printf("free-outside=%d\n", (int)cuMemFreeAsync(kept, s));
    printf("sync=%d\n", (int)cuCtxSynchronize());
    printf("meminfo=%d\n", (int)cuMemGetInfo_v2(&fr, &tot));
    printf("trim=%d\n", (int)cuDeviceGraphMemTrim(0));
    printf("meminfo=%d\n", (int)cuMemGetInfo_v2(&fr, &tot));
    printf("destroy=%d,%d,%d,%d\n", (int)cuGraphExecDestroy(x), (int)cuGraphDestroy(g), (int)cudaGraphExecDestroy(rx),
           (int)cudaGraphDestroy(rg));
    return 0;
}

static CUDA_MEM_ALLOC_NODE_PARAMS node_params(size_t bytes)
{
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = 0;
    p.bytesize = bytes;
    return p;
}

static int graph_nodes(void)
{
    void *weights;
    CUstream s;
    CUgraph g;
    CUgraphExec x;
    CUgraphNode kept, temp, freed;
    CUDA_MEM_ALLOC_NODE_PARAMS a = node_params(GiB / 2), b = node_params(GiB / 4);
    printf("malloc=%d\n", (int)cudaMalloc(&weights, GiB));
    printf("stream=%d\n", (int)cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    printf("graph=%d\n", (int)cuGraphCreate(&g, 0));
    printf("alloc-node=%d\n", (int)cuGraphAddMemAllocNode(&kept, g, NULL, 0, &a));
    printf("alloc-node=%d\n", (int)cuGraphAddMemAllocNode(&temp, g, NULL, 0, &b));
    printf("free-node=%d\n", (int)cuGraphAddMemFreeNode(&freed, g, &temp, 1, b.dptr));
    printf("instantiate=%d\n", (int)cuGraphInstantiateWithFlags(&x, g, 0));
    printf("launch=%d\n", (int)cuGraphLaunch(x, s));
    printf("free-outside=%d\n", (int)cuMemFreeAsync(a.dptr, s));
    printf("sync=%d\n", (int)cuCtxSynchronize());
    return 0;
}

static int graph_generic(void)
{
    void *weights;
    CUstream s;
    CUgraph g;
    CUgraphExec x;
    CUgraphNode kept, temp, freed, empty;
    CUgraphNodeParams a, b, f, e;
    CUDA_MEM_ALLOC_NODE_PARAMS pa = node_params(GiB / 2), pb = node_params(GiB / 4);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&f, 0, sizeof f);
    memset(&e, 0, sizeof e);
    a.type = b.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    memcpy(&a.alloc, &pa, sizeof pa);
    memcpy(&b.alloc, &pb, sizeof pb);
    f.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    e.type = CU_GRAPH_NODE_TYPE_EMPTY;
    printf("malloc=%d\n", (int)cudaMalloc(&weights, GiB));
    printf("stream=%d\n", (int)cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    printf("graph=%d\n", (int)cuGraphCreate(&g, 0));
    printf("alloc-node=%d\n", (int)cuGraphAddNode(&kept, g, NULL, 0, &a));
    printf("alloc-node=%d\n", (int)cudaGraphAddNode((cudaGraphNode_t *)&temp, (cudaGraph_t)g, NULL, NULL, 0,
                                                    (struct cudaGraphNodeParams *)&b));
    f.free.dptr = b.alloc.dptr;
    printf("free-node=%d\n", (int)cudaGraphAddNode((cudaGraphNode_t *)&freed, (cudaGraph_t)g,
                                                   (cudaGraphNode_t *)&temp, NULL, 1, (struct cudaGraphNodeParams *)&f));
    printf("empty-node=%d\n", (int)cuGraphAddNode(&empty, g, NULL, 0, &e));
    printf("instantiate=%d\n", (int)cuGraphInstantiateWithFlags(&x, g, 0));
    printf("launch=%d\n", (int)cuGraphLaunch(x, s));
    printf("free-outside=%d\n", (int)cuMemFreeAsync(a.alloc.dptr, s));
    printf("sync=%d\n", (int)cuCtxSynchronize());
    return 0;
}

static int graph_10000(void)
{
    void *weights;
    CUstream s, t;
    CUgraph g;
    CUdeviceptr d;
    CUresult (*begin_ptsz)(CUstream) = NULL;
    printf("malloc=%d\n", (int)cudaMalloc(&weights, GiB));
    printf("stream=%d\n", (int)cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    printf("stream=%d\n", (int)cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
    printf("begin=%d\n", (int)cuStreamBeginCapture(s));
    printf("captured-alloc=%d\n", (int)cuMemAllocAsync(&d, 2 * GiB, s));
    printf("captured-free=%d\n", (int)cuMemFreeAsync(d, s));
    printf("end=%d\n", (int)cuStreamEndCapture(s, &g));
    printf("lookup=%d\n", (int)cuGetProcAddress("cuStreamBeginCapture", (void **)&begin_ptsz, 10000,
                                                 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
    printf("begin-ptsz=%d\n", begin_ptsz ? (int)begin_ptsz(t) : -1);
    printf("captured-alloc=%d\n", (int)cuMemAllocAsync(&d, GiB / 2, t));
    printf("captured-free=%d\n", (int)cuMemFreeAsync(d, t));
    printf("end=%d\n", (int)cuStreamEndCapture(t, &g));
    return 0;
}

static int graph_global(void)
{
    void *weights;
    CUdeviceptr d[4];
    CUstream s;
    CUgraph g = NULL;
    CUgraphExec x;
    struct timespec gap = { 0, 5000000 };
    printf("malloc=%d\n", (int)cudaMalloc(&weights, GiB));
    printf("stream=%d\n", (int)cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    printf("begin=%d\n", (int)cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (int i = 0; i < 4; i++) {
        nanosleep(&gap, NULL);
        printf("captured-alloc=%d\n", (int)cuMemAllocAsync(&d[i], GiB / 4, s));
    }
    for (int i = 0; i < 4; i++)
        printf("captured-free=%d\n", (int)cuMemFreeAsync(d[i], s));
    int end = (int)cuStreamEndCapture(s, &g);
    printf("end=%d graph=%d\n", end, g != NULL);
    if (!g)
        return 1;
    printf("instantiate=%d\n", (int)cuGraphInstantiateWithFlags(&x, g, 0));
    printf("launch=%d\n", (int)cuGraphLaunch(x, s));
    return 0;
}

/* A graph whose one allocation (and its free) of bytes was captured. */
static CUresult captured_graph(CUstream s, size_t bytes, CUgraphExec *x)
{
    CUdeviceptr d;
    CUgraph g;
    CUresult rc = cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    if (!rc && !(rc = cuMemAllocAsync(&d, bytes, s)))
        rc = cuMemFreeAsync(d, s);
    CUresult end = cuStreamEndCapture(s, &g);
    if (rc || end)
        return rc ? rc : end;
    return cuGraphInstantiateWithFlags(x, g, 0);
}

static int graph_oom(void)
{
    void *weights;
    CUstream s;
    cudaStream_t rs;
    CUgraphExec small, big;
    printf("malloc=%d\n", (int)cudaMalloc(&weights, 20 * GiB));
    printf("stream=%d\n", (int)cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    printf("rt-stream=%d\n", (int)cudaStreamCreate(&rs));
    printf("small-graph=%d\n", (int)captured_graph(s, GiB / 4, &small));
    printf("launch=%d\n", (int)cuGraphLaunch(small, s));
    printf("launch=%d\n", (int)cuGraphLaunch(small, s));
    printf("big-graph=%d\n", (int)captured_graph(s, 8 * GiB, &big));
    printf("launch=%d\n", (int)cuGraphLaunch(big, s));
    printf("rt-launch=%d\n", (int)cudaGraphLaunch((cudaGraphExec_t)big, rs));
    cuuint64_t high = 0;
    printf("used-high=%d\n", (int)cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &high));
    return 0;
}

static int graph_relaunch(void)
{
    void *weights;
    CUstream s;
    CUgraphExec big;
    printf("malloc=%d\n", (int)cudaMalloc(&weights, 20 * GiB));
    printf("stream=%d\n", (int)cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    printf("big-graph=%d\n", (int)captured_graph(s, 8 * GiB, &big));
    printf("launch=%d\n", (int)cuGraphLaunch(big, s));
    printf("free=%d\n", (int)cudaFree(weights));
    for (int i = 0; i < 3; i++)
        printf("launch=%d\n", (int)cuGraphLaunch(big, s));
    return 0;
}

static int import_peer(const char *fd_text)
{
    CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUmemGenericAllocationHandle h, again;
    CUdeviceptr va;
    void *p;
    int fd = fd_text ? atoi(fd_text) : -1;
    printf("peer-malloc=%d\n", (int)cudaMalloc(&p, 1 << 20));
    printf("peer-import=%d\n",
           (int)cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    printf("peer-reserve=%d\n", (int)cuMemAddressReserve(&va, 2 * GiB, 0, 0, 0));
    printf("peer-map=%d\n", (int)cuMemMap(va, 2 * GiB, 0, h, 0));
    printf("peer-access=%d\n", (int)cuMemSetAccess(va, 2 * GiB, &access, 1));
    printf("peer-retain=%d\n", (int)cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)va));
    printf("peer-unmap=%d\n", (int)cuMemUnmap(va, 2 * GiB));
    printf("peer-release=%d\n", (int)cuMemRelease(again));
    printf("peer-release=%d\n", (int)cuMemRelease(h));
    printf("peer-vafree=%d\n", (int)cuMemAddressFree(va, 2 * GiB));
    printf("peer-free=%d\n", (int)cudaFree(p));
    return 0;
}

static int exported(void)
{
    CUmemAllocationProp prop = vmm_prop(CU_MEM_LOCATION_TYPE_DEVICE);
    CUmemGenericAllocationHandle h;
    void *p;
    int fd = -1, status = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    printf("malloc=%d\n", (int)cudaMalloc(&p, 1 << 20));
    printf("create=%d\n", (int)cuMemCreate(&h, 2 * GiB, &prop, 0));
    printf("export=%d\n", (int)cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    pid_t pid = fork();
    if (pid == 0) {
        char fd_text[16];
        snprintf(fd_text, sizeof fd_text, "%d", fd);
        fcntl(fd, F_SETFD, 0);
        execl("/proc/self/exe", "drvcases", "import-peer", fd_text, (char *)NULL);
        _exit(127);
    }
    waitpid(pid, &status, 0);
    printf("peer-exit=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    close(fd);
    printf("release=%d\n", (int)cuMemRelease(h));
    printf("free=%d\n", (int)cudaFree(p));
    return 0;
}

/* 64 opaque bytes as hex in argv, and back: how the peer gets an IPC
 * handle and a pool pointer's export data across exec. */
static void to_hex(const void *bytes, char out[129])
{
    for (int i = 0; i < 64; i++)
        sprintf(out + 2 * i, "%02x", ((const unsigned char *)bytes)[i]);
}

static int from_hex(const char *text, void *bytes)
{
    for (int i = 0; i < 64; i++) {
        unsigned v;
        if (!text || sscanf(text + 2 * i, "%2x", &v) != 1)
            return -1;
        ((unsigned char *)bytes)[i] = (unsigned char)v;
    }
    return 0;
}

static int ipc_peer(char **argv)
{
    CUipcMemHandle handle;
    CUmemPoolPtrExportData data;
    CUmemoryPool pool;
    CUdeviceptr shared, a, b;
    void *own, *c;
    CUresult (*open_4010)(CUdeviceptr *, CUipcMemHandle, unsigned int) = NULL;
    if (!argv[0] || from_hex(argv[1], &handle) || from_hex(argv[2], &data))
        return 2;
    printf("peer-malloc=%d\n", (int)cudaMalloc(&own, 1 << 20));
    printf("peer-pool-import=%d\n", (int)cuMemPoolImportFromShareableHandle(
                                         &pool, (void *)(intptr_t)atoi(argv[0]), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    printf("peer-ptr-import=%d\n", (int)cuMemPoolImportPointer(&shared, pool, &data));
    printf("peer-ipc-open=%d\n", (int)cuIpcOpenMemHandle(&a, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    /* CUDA 4.1's ABI, as a program built then finds it. */
    printf("peer-lookup=%d\n", (int)cuGetProcAddress("cuIpcOpenMemHandle", (void **)&open_4010, 4010, 0, NULL));
    printf("peer-ipc-open=%d\n", open_4010 ? (int)open_4010(&b, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) : -1);
    printf("peer-rt-ipc-open=%d\n", (int)cudaIpcOpenMemHandle(&c, *(cudaIpcMemHandle_t *)&handle,
                                                              cudaIpcMemLazyEnablePeerAccess));
    printf("same=%d\n", a == b && (void *)(uintptr_t)a == c);
    printf("peer-rt-ipc-close=%d\n", (int)cudaIpcCloseMemHandle(c));
    printf("peer-ipc-close=%d\n", (int)cuIpcCloseMemHandle(b));
    printf("peer-ipc-close=%d\n", (int)cuIpcCloseMemHandle(a));
    printf("peer-ptr-free=%d\n", (int)cuMemFreeAsync(shared, 0));
    printf("peer-pool-destroy=%d\n", (int)cuMemPoolDestroy(pool));
    printf("peer-free=%d\n", (int)cudaFree(own));
    return 0;
}

static int ipc(void)
{
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUipcMemHandle handle;
    CUmemPoolPtrExportData data;
    CUmemoryPool pool;
    CUdeviceptr from_pool;
    void *p;
    int fd = -1, status = 0;
    printf("malloc=%d\n", (int)cudaMalloc(&p, 2 * GiB));
    printf("ipc-handle=%d\n", (int)cuIpcGetMemHandle(&handle, (CUdeviceptr)(uintptr_t)p));
    printf("pool=%d\n", (int)cuMemPoolCreate(&pool, &props));
    printf("pool-alloc=%d\n", (int)cuMemAllocFromPoolAsync(&from_pool, GiB, pool, 0));
    printf("pool-export=%d\n", (int)cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    printf("ptr-export=%d\n", (int)cuMemPoolExportPointer(&data, from_pool));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char fd_text[16], handle_hex[129], data_hex[129];
        snprintf(fd_text, sizeof fd_text, "%d", fd);
        to_hex(&handle, handle_hex);
        to_hex(&data, data_hex);
        fcntl(fd, F_SETFD, 0);
        execl("/proc/self/exe", "drvcases", "ipc-peer", fd_text, handle_hex, data_hex, (char *)NULL);
        _exit(127);
    }
    waitpid(pid, &status, 0);
    printf("peer-exit=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    close(fd);
    printf("pool-free=%d\n", (int)cuMemFreeAsync(from_pool, 0));
    printf("pool-destroy=%d\n", (int)cuMemPoolDestroy(pool));
    printf("free=%d\n", (int)cudaFree(p));
    return 0;
}

static int multicast(void)
{
    CUmemAllocationProp prop = vmm_prop(CU_MEM_LOCATION_TYPE_DEVICE);
    CUmulticastObjectProp mc_prop;
    CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUmemGenericAllocationHandle mc, mem;
    CUdeviceptr va;
    size_t gran = 0;
    void *p;
    memset(&mc_prop, 0, sizeof mc_prop);
    mc_prop.numDevices = 1;
    mc_prop.size = 2 * GiB;
    printf("malloc=%d\n", (int)cudaMalloc(&p, 1 << 20));
    printf("granularity=%d\n", (int)cuMulticastGetGranularity(&gran, &mc_prop, CU_MULTICAST_GRANULARITY_RECOMMENDED));
    printf("mc-create=%d\n", (int)cuMulticastCreate(&mc, &mc_prop));
    printf("mc-add=%d\n", (int)cuMulticastAddDevice(mc, 0));
    printf("create=%d\n", (int)cuMemCreate(&mem, 2 * GiB, &prop, 0));
    printf("mc-bind=%d\n", (int)cuMulticastBindMem(mc, 0, mem, 0, 2 * GiB, 0));
    printf("reserve=%d\n", (int)cuMemAddressReserve(&va, 2 * GiB, 0, 0, 0));
    printf("mc-map=%d\n", (int)cuMemMap(va, 2 * GiB, 0, mc, 0));
    printf("mc-access=%d\n", (int)cuMemSetAccess(va, 2 * GiB, &access, 1));
    printf("mc-unmap=%d\n", (int)cuMemUnmap(va, 2 * GiB));
    printf("mc-unbind=%d\n", (int)cuMulticastUnbind(mc, 0, 0, 2 * GiB));
    printf("mc-release=%d\n", (int)cuMemRelease(mc));
    printf("release=%d\n", (int)cuMemRelease(mem));
    printf("vafree=%d\n", (int)cuMemAddressFree(va, 2 * GiB));
    printf("free=%d\n", (int)cudaFree(p));
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "teardown-rt"))
        return rt_teardown();
    if (!strcmp(mode, "teardown-primary"))
        return primary_teardown();
    if (!strcmp(mode, "teardown-destroy"))
        return destroy_teardown();
    if (!strcmp(mode, "teardown-mixed"))
        return mixed_teardown();
    if (!strcmp(mode, "teardown-many"))
        return many_teardown();
    if (!strcmp(mode, "teardown-otherdev"))
        return otherdev_teardown();
    if (!strcmp(mode, "pitchovf"))
        return pitch_overflow();
    if (!strcmp(mode, "otherdev"))
        return other_device();
    if (!strcmp(mode, "hostmem"))
        return host_memory();
    if (!strcmp(mode, "arrays"))
        return arrays();
    if (!strcmp(mode, "slowreuse"))
        return slow_reuse();
    if (!strcmp(mode, "retain"))
        return retain();
    if (!strcmp(mode, "sticky"))
        return sticky_error();
    if (!strcmp(mode, "noctx"))
        return no_context(argc > 2 ? argv[2] : NULL);
    if (!strcmp(mode, "graph"))
        return graphs();
    if (!strcmp(mode, "graph-10000"))
        return graph_10000();
    if (!strcmp(mode, "graph-generic"))
        return graph_generic();
    if (!strcmp(mode, "graph-global"))
        return graph_global();
    if (!strcmp(mode, "graph-nodes"))
        return graph_nodes();
    if (!strcmp(mode, "graph-oom"))
        return graph_oom();
    if (!strcmp(mode, "graph-relaunch"))
        return graph_relaunch();
    if (!strcmp(mode, "multicast"))
        return multicast();
    if (!strcmp(mode, "import"))
        return exported();
    if (!strcmp(mode, "import-peer"))
        return import_peer(argc > 2 ? argv[2] : NULL);
    if (!strcmp(mode, "ipc"))
        return ipc();
    if (!strcmp(mode, "teardown-release"))
        return release_teardown();
    if (!strcmp(mode, "ipc-peer"))
        return argc > 4 ? ipc_peer(argv + 2) : 2;
    fprintf(stderr, "drvcases: unknown mode '%s'\n", mode);
    return 2;
}
