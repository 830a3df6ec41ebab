/* hooks.c: the exported wrappers, one per line of entrypoints.def.
 *
 * Contract: a wrapper calls the real function exactly once with the
 * program's arguments and returns its result untouched, whatever happens
 * inside the shim. Recording happens around the call (vt_call_begin/end);
 * the describe_* helpers only copy arguments into the event. A missing real
 * function (a driver without this entry point) returns the "not found"
 * error a program would get from an old driver, and records nothing.
 *
 * The prototypes come from cuda.h and cuda_runtime_api.h, so the compiler
 * checks every line of the table against NVIDIA's declarations.
 */
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "shim.h"
#include "vramtrace/array_bytes.h"

/* cuda.h maps cuGetProcAddress to the _v2 ABI name; we export both. */
#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
/* The same for the 32-bit legacy cuMemAlloc / cuMemFree (cuda.h declares
 * them only for the driver's own build, with CUdeviceptr_v1 = unsigned). */
#undef cuMemAlloc
#undef cuMemFree
CUresult cuMemAlloc(unsigned int *dptr, unsigned int bytesize);
CUresult cuMemFree(unsigned int dptr);
/* The same for CUDA 10.0's cuStreamBeginCapture (no mode), CUDA 12.2's
 * cuGraphAddNode (no edge data), and CUDA 4.1's cuIpcOpenMemHandle and
 * 7.0's cuDevicePrimaryCtxRelease and cuDevicePrimaryCtxReset (the same
 * calls as 11.0's): cuda.h maps the names to their _v2. */
#undef cuGraphAddNode
#undef cuStreamBeginCapture
#undef cuIpcOpenMemHandle
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
CUresult cuStreamBeginCapture(CUstream hStream);
CUresult cuStreamBeginCapture_ptsz(CUstream hStream);
CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                        size_t numDependencies, CUgraphNodeParams *nodeParams);
CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult cuDevicePrimaryCtxReset(CUdevice dev);

#define VT_MISSING_CUresult CUDA_ERROR_NOT_FOUND
#define VT_MISSING_cudaError_t cudaErrorNotSupported

/* ---- describe helpers: copy what matters from the arguments ---- */

static void describe_alloc_dptr(vt_event_t *ev, uint32_t r, CUdeviceptr *dptr, size_t bytesize)
{
    ev->size = bytesize;
    if (r == 0 && dptr)
        ev->ptr = *dptr;
}

/* width x height as the request's size; a product over 64 bits is a request
 * no card can hold, recorded as UINT64_MAX (trace_format.h), never as its
 * wrapped low bits. */
static uint64_t pitch_request(size_t width, size_t height)
{
    size_t bytes;
    return __builtin_mul_overflow(width, height, &bytes) ? UINT64_MAX : (uint64_t)bytes;
}

static void describe_alloc_pitch(vt_event_t *ev, uint32_t r, CUdeviceptr *dptr, size_t *pitch,
                                 size_t width, size_t height, unsigned elem)
{
    (void)elem;
    ev->size = pitch_request(width, height);
    if (r == 0 && dptr && pitch) {
        ev->ptr = *dptr;
        ev->reserved = *pitch * height;
    }
}

static void describe_free_dptr(vt_event_t *ev, uint32_t r, CUdeviceptr dptr)
{
    (void)r;
    ev->ptr = dptr;
}

static void describe_alloc_v1(vt_event_t *ev, uint32_t r, unsigned int *dptr, unsigned int bytesize)
{
    ev->size = bytesize;
    if (r == 0 && dptr)
        ev->ptr = *dptr;
}

static void describe_free_v1(vt_event_t *ev, uint32_t r, unsigned int dptr)
{
    (void)r;
    ev->ptr = dptr;
}

/* A stream-ordered allocation lands on its stream's device (or its pool's),
 * not necessarily the current one (CUDA driver API: cuMemAllocAsync draws
 * from the current pool of the stream's device, cuMemAllocFromPoolAsync
 * from the pool's location): for a stream other than the default ones, or
 * a pool, the driver is asked where the pointer is. The default streams
 * belong to the current device: one compare, no call. */
static inline int default_stream(const void *stream)
{
    return (uintptr_t)stream <= (uintptr_t)CU_STREAM_PER_THREAD;
}

/* A captured allocation is not asked: the graph's address holds nothing
 * yet, and the event no memory. */
static void placed_device(vt_event_t *ev, uint32_t r)
{
    if (r == 0 && ev->ptr && !(ev->flags & VT_EF_CAPTURED)) {
        int relaxed = vt_driver_relax();
        int dev = vt_driver_pointer_device(ev->ptr);
        vt_driver_unrelax(relaxed);
        if (dev >= 0)
            ev->device = (int16_t)dev;
    }
}

/* A stream-ordered call on a stream being captured into a graph allocates
 * or frees nothing: it is a node of the graph (trace_format.h). */
static void note_captured(vt_event_t *ev, void *stream)
{
    if (__builtin_expect(atomic_load_explicit(&vt_captures_open, memory_order_relaxed) != 0, 0) &&
        vt_driver_stream_capturing(stream, (ev->flags & VT_EF_PTSZ) != 0))
        ev->flags |= VT_EF_CAPTURED;
}

static void describe_capture_begin(vt_event_t *ev, uint32_t r, CUstream stream, CUstreamCaptureMode mode)
{
    ev->aux = (uint64_t)(uintptr_t)stream;
    ev->size = (uint64_t)mode;
    if (r == CUDA_SUCCESS) {
        vt_driver_capture_began();
        atomic_fetch_add(&vt_captures_open, 1);
        atomic_store_explicit(&vt_graphs_seen, 1, memory_order_relaxed);
    }
}

static void describe_capture_begin_10000(vt_event_t *ev, uint32_t r, CUstream stream)
{
    describe_capture_begin(ev, r, stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

static void describe_capture_to_graph(vt_event_t *ev, uint32_t r, CUstream stream, CUgraph graph,
                                      const CUgraphNode *deps, const CUgraphEdgeData *edges, size_t ndeps,
                                      CUstreamCaptureMode mode)
{
    (void)deps, (void)edges, (void)ndeps;
    describe_capture_begin(ev, r, stream, mode);
    ev->ptr = (uint64_t)(uintptr_t)graph;
}

/* The capture ended when the call succeeded, and when it said the capture
 * had been invalidated (CUDA driver API, cuStreamEndCapture); otherwise
 * (another thread's capture, a stream not capturing) it goes on. */
static void describe_capture_end(vt_event_t *ev, uint32_t r, CUstream stream, CUgraph *graph)
{
    ev->aux = (uint64_t)(uintptr_t)stream;
    if (r == CUDA_SUCCESS && graph)
        ev->ptr = (uint64_t)(uintptr_t)*graph;
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        return;
    unsigned open = atomic_load(&vt_captures_open);
    while (open && !atomic_compare_exchange_weak(&vt_captures_open, &open, open - 1))
        ;
}

static void describe_graph_alloc_node(vt_event_t *ev, uint32_t r, CUgraphNode *node, CUgraph graph,
                                      const CUgraphNode *deps, size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS *params)
{
    (void)node, (void)deps, (void)ndeps;
    ev->flags |= VT_EF_CAPTURED;
    ev->aux = (uint64_t)(uintptr_t)graph;
    if (!params)
        return;
    ev->size = params->bytesize;
    if (r == CUDA_SUCCESS) {
        ev->ptr = params->dptr;
        atomic_store_explicit(&vt_graphs_seen, 1, memory_order_relaxed);
    }
    if (params->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE && params->poolProps.location.id >= 0 &&
        params->poolProps.location.id < VT_MAX_DEVICES)
        ev->device = (int16_t)params->poolProps.location.id;
}

static void describe_graph_free_node(vt_event_t *ev, uint32_t r, CUgraphNode *node, CUgraph graph,
                                     const CUgraphNode *deps, size_t ndeps, CUdeviceptr dptr)
{
    (void)r, (void)node, (void)deps, (void)ndeps;
    ev->flags |= VT_EF_CAPTURED;
    ev->aux = (uint64_t)(uintptr_t)graph;
    ev->ptr = dptr;
}

/* The generic node add (GRAPH_NODE): its memory nodes alone are events. */
_Static_assert(VT_GRAPH_NODE_MEM_ALLOC == CU_GRAPH_NODE_TYPE_MEM_ALLOC &&
                   VT_GRAPH_NODE_MEM_FREE == CU_GRAPH_NODE_TYPE_MEM_FREE,
               "trace_format.h's graph node types are cuda.h's");
static int is_memory_node(const CUgraphNodeParams *params)
{
    return params && (params->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || params->type == CU_GRAPH_NODE_TYPE_MEM_FREE);
}

static int describe_graph_node_wanted(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                      CUgraphNodeParams *params)
{
    (void)node, (void)graph, (void)deps, (void)ndeps;
    return is_memory_node(params);
}

static int describe_graph_node_v2_wanted(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                         const CUgraphEdgeData *edges, size_t ndeps, CUgraphNodeParams *params)
{
    (void)node, (void)graph, (void)deps, (void)edges, (void)ndeps;
    return is_memory_node(params);
}

static void describe_graph_node(vt_event_t *ev, uint32_t r, CUgraphNode *node, CUgraph graph,
                                const CUgraphNode *deps, size_t ndeps, CUgraphNodeParams *params)
{
    if (!is_memory_node(params))
        return;
    if (params->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
        describe_graph_free_node(ev, r, node, graph, deps, ndeps, params->free.dptr);
    } else {
        /* _v1 and _v2 have the same fields (cuda.h); the call has returned,
         * so the copy holds the address it gave. */
        _Static_assert(sizeof(CUDA_MEM_ALLOC_NODE_PARAMS) == sizeof params->alloc, "one layout");
        CUDA_MEM_ALLOC_NODE_PARAMS alloc;
        memcpy(&alloc, &params->alloc, sizeof alloc);
        describe_graph_alloc_node(ev, r, node, graph, deps, ndeps, &alloc);
    }
    ev->aux = (uint64_t)params->type;
}

static void describe_graph_node_v2(vt_event_t *ev, uint32_t r, CUgraphNode *node, CUgraph graph,
                                   const CUgraphNode *deps, const CUgraphEdgeData *edges, size_t ndeps,
                                   CUgraphNodeParams *params)
{
    (void)edges;
    describe_graph_node(ev, r, node, graph, deps, ndeps, params);
}

/* The graph pool (trace_format.h, POOL_USAGE): every attribute is a
 * cuuint64_t. */
_Static_assert(VT_GRAPH_ATTR_USED_CURRENT == CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT &&
                   VT_GRAPH_ATTR_USED_HIGH == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH &&
                   VT_GRAPH_ATTR_RESERVED_CURRENT == CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT &&
                   VT_GRAPH_ATTR_RESERVED_HIGH == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH,
               "trace_format.h's graph pool attributes are cuda.h's");
static void describe_graph_mem_attribute(vt_event_t *ev, uint32_t r, CUdevice device, CUgraphMem_attribute attr,
                                         void *value)
{
    ev->aux = (uint64_t)attr;
    if (device >= 0 && device < VT_MAX_DEVICES)
        ev->device = (int16_t)device;
    if (r == CUDA_SUCCESS && value)
        ev->size = *(const cuuint64_t *)value;
}

/* A failed graph launch was recorded and no launch has succeeded since:
 * the next success is recorded too, so the reader knows the program
 * launched again (VT_BODY_IF_FAILED, below). */
static _Atomic unsigned launch_failed_last;

/* Called for a failed launch, and the first success after one. */
static void describe_graph_launch(vt_event_t *ev, uint32_t r, CUgraphExec exec, CUstream stream)
{
    ev->ptr = (uint64_t)(uintptr_t)exec;
    ev->aux = (uint64_t)(uintptr_t)stream;
    if (r != CUDA_SUCCESS)
        atomic_store(&launch_failed_last, 1);
}

static void describe_alloc_async(vt_event_t *ev, uint32_t r, CUdeviceptr *dptr, size_t bytesize,
                                 CUstream stream)
{
    describe_alloc_dptr(ev, r, dptr, bytesize);
    ev->aux = (uint64_t)(uintptr_t)stream;
    note_captured(ev, stream);
    if (__builtin_expect(!default_stream(stream), 0))
        placed_device(ev, r);
}

static void describe_alloc_pool_async(vt_event_t *ev, uint32_t r, CUdeviceptr *dptr, size_t bytesize,
                                      CUmemoryPool pool, CUstream stream)
{
    describe_alloc_dptr(ev, r, dptr, bytesize);
    ev->aux = (uint64_t)(uintptr_t)pool;
    note_captured(ev, stream);
    placed_device(ev, r);
}

static void describe_free_async(vt_event_t *ev, uint32_t r, CUdeviceptr dptr, CUstream stream)
{
    (void)r;
    ev->ptr = dptr;
    ev->aux = (uint64_t)(uintptr_t)stream;
    note_captured(ev, stream);
}

/* Memory located in host memory: pinned host memory, not VRAM. */
static int host_location(CUmemLocationType t)
{
    return t == CU_MEM_LOCATION_TYPE_HOST || t == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           t == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

static void describe_vmm_create(vt_event_t *ev, uint32_t r, CUmemGenericAllocationHandle *handle,
                                size_t size, const CUmemAllocationProp *prop, unsigned long long flags)
{
    (void)flags;
    ev->size = size;
    ev->reserved = size;
    if (r == 0 && handle)
        ev->ptr = *handle;
    if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
        ev->device = (int16_t)prop->location.id;
    else if (prop && host_location(prop->location.type))
        ev->flags |= VT_EF_HOST_LOCATED;
}

static void describe_vmm_retain(vt_event_t *ev, uint32_t r, CUmemGenericAllocationHandle *handle, void *addr)
{
    if (r == 0 && handle)
        ev->ptr = *handle;
    ev->aux = (uint64_t)(uintptr_t)addr;
}

static void describe_vmm_import(vt_event_t *ev, uint32_t r, CUmemGenericAllocationHandle *handle, void *os_handle,
                                CUmemAllocationHandleType type)
{
    (void)os_handle;
    if (r == 0 && handle)
        ev->ptr = *handle;
    ev->aux = (uint64_t)type;
}

static void describe_multicast_create(vt_event_t *ev, uint32_t r, CUmemGenericAllocationHandle *handle,
                                      const CUmulticastObjectProp *prop)
{
    if (r == 0 && handle)
        ev->ptr = *handle;
    if (prop)
        ev->aux = prop->size;   /* the most each device may bind: none of it allocated */
}

/* Another process's memory mapped here (PTR_IMPORT): its size is in no
 * argument, and none of it is this process's. */
static void describe_pool_import_pointer(vt_event_t *ev, uint32_t r, CUdeviceptr *ptr_out, CUmemoryPool pool,
                                         CUmemPoolPtrExportData *share)
{
    (void)share;
    if (r == 0 && ptr_out)
        ev->ptr = *ptr_out;
    ev->aux = (uint64_t)(uintptr_t)pool;
}

static void describe_ipc_open(vt_event_t *ev, uint32_t r, CUdeviceptr *pdptr, CUipcMemHandle handle,
                              unsigned int flags)
{
    (void)handle;
    if (r == 0 && pdptr)
        ev->ptr = *pdptr;
    ev->aux = flags;
}

static void describe_vmm_release(vt_event_t *ev, uint32_t r, CUmemGenericAllocationHandle handle)
{
    (void)r;
    ev->ptr = handle;
}

static void describe_vmm_map(vt_event_t *ev, uint32_t r, CUdeviceptr ptr, size_t size, size_t offset,
                             CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    (void)r, (void)offset, (void)flags;
    ev->ptr = ptr;
    ev->size = size;
    ev->aux = handle;
}

static void describe_vmm_unmap(vt_event_t *ev, uint32_t r, CUdeviceptr ptr, size_t size)
{
    (void)r;
    ev->ptr = ptr;
    ev->size = size;
}

static void describe_va_reserve(vt_event_t *ev, uint32_t r, CUdeviceptr *ptr, size_t size, size_t align,
                                CUdeviceptr addr, unsigned long long flags)
{
    (void)align, (void)addr, (void)flags;
    ev->size = size;
    if (r == 0 && ptr)
        ev->ptr = *ptr;
}

static void describe_va_free(vt_event_t *ev, uint32_t r, CUdeviceptr ptr, size_t size)
{
    describe_vmm_unmap(ev, r, ptr, size);
}

static void describe_alloc_managed(vt_event_t *ev, uint32_t r, CUdeviceptr *dptr, size_t bytesize,
                                   unsigned flags)
{
    describe_alloc_dptr(ev, r, dptr, bytesize);
    ev->aux = flags;
}

static void describe_alloc_host(vt_event_t *ev, uint32_t r, void **pp, size_t bytesize)
{
    ev->size = bytesize;
    if (r == 0 && pp)
        ev->ptr = (uint64_t)(uintptr_t)*pp;
}

static void describe_alloc_host_flags(vt_event_t *ev, uint32_t r, void **pp, size_t bytesize,
                                      unsigned flags)
{
    describe_alloc_host(ev, r, pp, bytesize);
    ev->aux = flags;
}

static void describe_free_host(vt_event_t *ev, uint32_t r, void *p)
{
    (void)r;
    ev->ptr = (uint64_t)(uintptr_t)p;
}

static void describe_register(vt_event_t *ev, uint32_t r, void *p, size_t bytesize, unsigned flags)
{
    (void)r;
    ev->ptr = (uint64_t)(uintptr_t)p;
    ev->size = bytesize;
    ev->aux = flags;
}

static void describe_pool_create(vt_event_t *ev, uint32_t r, CUmemoryPool *pool, const CUmemPoolProps *props)
{
    if (r == 0 && pool)
        ev->ptr = (uint64_t)(uintptr_t)*pool;
    if (props && props->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
        ev->device = (int16_t)props->location.id;
    else if (props && host_location(props->location.type))
        ev->flags |= VT_EF_HOST_LOCATED;
}

static void describe_pool(vt_event_t *ev, uint32_t r, CUmemoryPool pool)
{
    (void)r;
    ev->ptr = (uint64_t)(uintptr_t)pool;
}

static void describe_pool_trim(vt_event_t *ev, uint32_t r, CUmemoryPool pool, size_t keep)
{
    describe_pool(ev, r, pool);
    ev->size = keep;
}

/* The CUmemPool_attribute values that are cuuint64_t byte counts (4..8,
 * RELEASE_THRESHOLD to USED_MEM_HIGH in cuda.h); the rest are ints. */
static inline int pool_attr_is_bytes(unsigned attr)
{
    return attr >= 4 && attr <= 8;
}

_Static_assert(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD == 4 && CU_MEMPOOL_ATTR_USED_MEM_HIGH == 8 &&
                   CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT == VT_POOL_ATTR_RESERVED_CURRENT &&
                   CU_MEMPOOL_ATTR_USED_MEM_CURRENT == VT_POOL_ATTR_USED_CURRENT,
               "pool_attr_is_bytes matches cuda.h");

/* Only the byte-valued attributes are read back: the others are ints, and a
 * wider read would go past what the program gave us. */
static void describe_pool_attr(vt_event_t *ev, uint32_t r, CUmemoryPool pool, CUmemPool_attribute attr,
                               void *value)
{
    ev->ptr = (uint64_t)(uintptr_t)pool;
    ev->aux = (uint64_t)attr;
    if (r == 0 && value && pool_attr_is_bytes((unsigned)attr))
        ev->size = *(const cuuint64_t *)value;
}

static void describe_meminfo(vt_event_t *ev, uint32_t r, size_t *free_b, size_t *total_b)
{
    if (r != 0)
        return;
    if (free_b)
        ev->size = *free_b;
    if (total_b)
        ev->aux = *total_b;
}

static void describe_alloc_vptr(vt_event_t *ev, uint32_t r, void **p, size_t size)
{
    describe_alloc_host(ev, r, p, size);
}

static void describe_rt_alloc_pitch(vt_event_t *ev, uint32_t r, void **p, size_t *pitch, size_t width,
                                    size_t height)
{
    ev->size = pitch_request(width, height);
    if (r == 0 && p && pitch) {
        ev->ptr = (uint64_t)(uintptr_t)*p;
        ev->reserved = *pitch * height;
    }
}

static void describe_free_vptr(vt_event_t *ev, uint32_t r, void *p)
{
    describe_free_host(ev, r, p);
}

static void describe_rt_alloc_managed(vt_event_t *ev, uint32_t r, void **p, size_t size, unsigned flags)
{
    describe_alloc_host_flags(ev, r, p, size, flags);
}

static void describe_rt_alloc_async(vt_event_t *ev, uint32_t r, void **p, size_t size, cudaStream_t s)
{
    describe_alloc_host(ev, r, p, size);
    ev->aux = (uint64_t)(uintptr_t)s;
    note_captured(ev, s);
    if (__builtin_expect(!default_stream(s), 0))
        placed_device(ev, r);
}

static void describe_rt_free_async(vt_event_t *ev, uint32_t r, void *p, cudaStream_t s)
{
    describe_free_host(ev, r, p);
    ev->aux = (uint64_t)(uintptr_t)s;
    note_captured(ev, s);
}

static void describe_rt_alloc_pool_async(vt_event_t *ev, uint32_t r, void **p, size_t size,
                                         cudaMemPool_t pool, cudaStream_t s)
{
    describe_alloc_host(ev, r, p, size);
    ev->aux = (uint64_t)(uintptr_t)pool;
    note_captured(ev, s);
    placed_device(ev, r);
}

/* Context teardown. The context's device is the one current when the call
 * began (vt_call_begin asks for it before the call: afterwards the context
 * is gone); cuDevicePrimaryCtxReset names its device; a cuCtxDestroy whose
 * freed memory lay on one device is charged there (vt_call_teardown). */
static void describe_ctx_destroy(vt_event_t *ev, uint32_t r, CUcontext ctx)
{
    ev->ptr = (uint64_t)(uintptr_t)ctx;
    vt_call_teardown(ev, r);
}

static void describe_ctx_reset(vt_event_t *ev, uint32_t r, CUdevice dev)
{
    if (dev >= 0 && dev < VT_MAX_DEVICES)
        ev->device = (int16_t)dev;
    vt_call_teardown(ev, r);
}

/* A primary context's release resets it (frees all it made, as
 * cuDevicePrimaryCtxReset does) when it drops the last reference (cuda.h):
 * numba's cuda.close(), cuda.core's thread cleanup. Whether it did is
 * asked of the driver after the call: a context still active freed
 * nothing (aux VT_CTX_RELEASE_KEPT), and the teardown's per-pointer
 * queries are not made. Where the driver cannot say, the teardown's own
 * queries find what survived. */
static void describe_ctx_release(vt_event_t *ev, uint32_t r, CUdevice dev)
{
    if (dev >= 0 && dev < VT_MAX_DEVICES)
        ev->device = (int16_t)dev;
    int active = -1;
    if (r == 0) {
        int relaxed = vt_driver_relax();
        active = vt_driver_primary_active(dev);
        vt_driver_unrelax(relaxed);
    }
    if (active == 1)
        ev->aux = VT_CTX_RELEASE_KEPT;
    else
        vt_call_teardown(ev, r);
}

static void describe_rt_device_reset(vt_event_t *ev, uint32_t r)
{
    vt_call_teardown(ev, r);
}

/* CUDA arrays: the handle stands for the address, the descriptor gives the
 * bytes (array_bytes.h). */
static int array_layered(unsigned flags)
{
    return (flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
}

static void describe_array(vt_event_t *ev, uint32_t r, CUarray *h, const CUDA_ARRAY_DESCRIPTOR *d)
{
    if (d)
        ev->size = vt_array_bytes((unsigned)d->Format, d->NumChannels, d->Width, d->Height, 1, 1, 0);
    if (r == 0 && h)
        ev->ptr = (uint64_t)(uintptr_t)*h;
}

static void describe_array3d(vt_event_t *ev, uint32_t r, CUarray *h, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (d)
        ev->size = vt_array_bytes((unsigned)d->Format, d->NumChannels, d->Width, d->Height, d->Depth, 1,
                                  array_layered(d->Flags));
    if (r == 0 && h)
        ev->ptr = (uint64_t)(uintptr_t)*h;
}

static void describe_mipmapped_array(vt_event_t *ev, uint32_t r, CUmipmappedArray *h,
                                     const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    if (d)
        ev->size = vt_array_bytes((unsigned)d->Format, d->NumChannels, d->Width, d->Height, d->Depth, levels,
                                  array_layered(d->Flags));
    if (r == 0 && h)
        ev->ptr = (uint64_t)(uintptr_t)*h;
}

static void describe_free_array(vt_event_t *ev, uint32_t r, CUarray h)
{
    (void)r;
    ev->ptr = (uint64_t)(uintptr_t)h;
}

static void describe_free_mipmapped_array(vt_event_t *ev, uint32_t r, CUmipmappedArray h)
{
    (void)r;
    ev->ptr = (uint64_t)(uintptr_t)h;
}

/* ---- the wrappers, generated from the table ---- */

#define VT_UNPAREN(...) __VA_ARGS__
/* An entry point without arguments (cudaDeviceReset) passes none. */
#define VT_DESCRIBE(describe, ev, r, ...) VT_DESCRIBE_(describe, ev, r, __VA_ARGS__)
#define VT_DESCRIBE_(describe, ev, r, ...) describe(ev, r __VA_OPT__(,) __VA_ARGS__)

/* One body per entry point, written into each way in: the linked export,
 * which calls what its caller would reach without the shim (vt_real_for),
 * and VT_SLOTS slot wrappers, each calling the one pointer a dlsym or
 * cuGetProcAddress lookup found (resolve.c). A macro, not a function
 * taking the real pointer beside the arguments: every way in has the same
 * frames for the stack's skip count, and an entry point without arguments
 * (cudaDeviceReset's (void)) needs no parameter list joined to another. */
#define VT_BODY(ret, name, describe, params, args, real_expr, linked) \
    VT_BODY_WHEN(1, ret, name, describe, params, args, real_expr, linked)

/* An entry point of which only some calls are events (the generic graph
 * node add, of which only memory nodes are): describe##_wanted picks them
 * from the arguments before the call; the others go straight through. */
#define VT_BODY_IF_WANTED(ret, name, describe, params, args, real_expr, linked) \
    VT_BODY_WHEN(describe##_wanted args, ret, name, describe, params, args, real_expr, linked)

#define VT_BODY_WHEN(wanted, ret, name, describe, params, args, real_expr, linked) \
    typedef ret(*vt_real_t) params;                                        \
    vt_real_t real = (vt_real_t)(real_expr);                               \
    if (!real)                                                             \
        return VT_MISSING_##ret;                                           \
    if (!(wanted))                                                         \
        return real args;                                                  \
    vt_call_t call;                                                        \
    if (!vt_call_begin(&call, VT_API_##name, linked))                      \
        return real args;                                                  \
    ret result = real args;                                                \
    VT_DESCRIBE(describe, &call.ev, (uint32_t)result, VT_UNPAREN args);    \
    vt_call_end(&call, (uint32_t)result);                                  \
    return result;

/* An entry point called often whose success the trace need not hold (a
 * graph launch, per token): the success path adds to the call one relaxed
 * load (launch_failed_last) and two branches. A failure is recorded after
 * the call, with the same frames as VT_BODY's; so is the first success
 * after a recorded failure. */
#define VT_BODY_IF_FAILED(ret, name, describe, params, args, real_expr, linked) \
    typedef ret(*vt_real_t) params;                                        \
    vt_real_t real = (vt_real_t)(real_expr);                               \
    if (!real)                                                             \
        return VT_MISSING_##ret;                                           \
    ret result = real args;                                                \
    if (__builtin_expect(result == 0, 1) &&                                \
        __builtin_expect(!atomic_load_explicit(&launch_failed_last, memory_order_relaxed), 1)) \
        return result;                                                     \
    if (result == 0 && !atomic_exchange(&launch_failed_last, 0))           \
        return result;                                                     \
    vt_call_t call;                                                        \
    if (!vt_call_begin(&call, VT_API_##name, linked))                      \
        return result;                                                     \
    VT_DESCRIBE(describe, &call.ev, (uint32_t)result, VT_UNPAREN args);    \
    vt_call_end(&call, (uint32_t)result);                                  \
    return result;

/* The export and the slot wrappers of an entry point, all with body. */
#define VT_GEN_WRAPPERS(body, ret, name, describe, params, args)             \
    VT_EXPORT ret name params                                              \
    {                                                                      \
        body(ret, name, describe, params, args,                            \
             vt_real_for(VT_API_##name, __builtin_return_address(0)), 1)   \
    }                                                                      \
    VT_GEN_WRAPPER_SLOT(body, ret, name, describe, params, args, 0)        \
    VT_GEN_WRAPPER_SLOT(body, ret, name, describe, params, args, 1)        \
    VT_GEN_WRAPPER_SLOT(body, ret, name, describe, params, args, 2)        \
    VT_GEN_WRAPPER_SLOT(body, ret, name, describe, params, args, 3)

#define VT_GEN_WRAPPER_SLOT(body, ret, name, describe, params, args, k)      \
    static ret vt_slot##k##_##name params                                  \
    {                                                                      \
        body(ret, name, describe, params, args,                            \
             atomic_load_explicit(&vt_slot_fn[VT_API_##name][k], memory_order_acquire), 0) \
    }

#define VT_GEN_EVENT(ret, name, describe, params, args) \
    VT_GEN_WRAPPERS(VT_BODY, ret, name, describe, params, args)

/* A lookup route's slot wrapper: its body (vt_body_NAME) is written by
 * hand below. */
#define VT_GEN_SLOT(ret, name, params, args, k)                              \
    static ret vt_slot##k##_##name params                                  \
    {                                                                      \
        return vt_body_##name((vt_real_t_##name)atomic_load_explicit(      \
                                  &vt_slot_fn[VT_API_##name][k], memory_order_acquire), \
                              __builtin_return_address(0), VT_UNPAREN args); \
    }
#define VT_GEN_SLOTS(ret, name, params, args)                                \
    VT_GEN_SLOT(ret, name, params, args, 0)                                \
    VT_GEN_SLOT(ret, name, params, args, 1)                                \
    VT_GEN_SLOT(ret, name, params, args, 2)                                \
    VT_GEN_SLOT(ret, name, params, args, 3)
_Static_assert(VT_SLOTS == 4, "one slot line per slot in VT_GEN_WRAPPERS and VT_GEN_SLOTS");

/* ---- lookup routes ---- */

static void *wrapper(unsigned api);
static void *slot_wrapper(unsigned api, unsigned k);

/* What a lookup hands the program for real, the definition it found of
 * entry point api: the wrapper that calls real (resolve.c picks which), or
 * real itself, untraced, when every slot is taken. */
void *vt_hand_out(unsigned api, void *real, const void *caller)
{
    unsigned k = vt_resolve_slot(api, real, !vt_caller_is_runtime(caller));
    return k == VT_SLOT_LINKED ? wrapper(api) : k < VT_SLOTS ? slot_wrapper(api, k) : real;
}

/* A pointer cuGetProcAddress returned: a wrapper in its place when it is
 * an entry point of the table. */
static void *route_procaddr(void *fn, const void *caller)
{
    unsigned api = vt_resolve_procaddr(fn);
    return api < VT_API_COUNT ? vt_hand_out(api, fn, caller) : fn;
}

/* cudaGetDriverEntryPoint(ByVersion) has libcudart look a driver entry
 * point up for the program. libcudart's cuGetProcAddress got the wrapper a
 * runtime gets (vt_hand_out), whose calls inside a runtime call fold into
 * its event (record.c), as libcudart's own calls must. The program's calls
 * through the pointer are its own: it gets the wrapper its own lookup of
 * that definition would. (A signal handler's calls through it, inside a
 * runtime call, were folded and counted nowhere: 78-fault-sigalloc,
 * sigrtentry.) A pointer that is not one of those wrappers passes as it
 * came. */
static void *for_program(void *fn, const void *caller)
{
    if (!fn)
        return fn;
    for (unsigned api = 0; api < VT_API_COUNT; api++)
        for (unsigned k = 0; k < VT_SLOTS; k++) {
            if (slot_wrapper(api, k) != fn)
                continue;
            void *real = atomic_load_explicit(&vt_slot_fn[api][k], memory_order_acquire);
            if (!real)
                return fn;
            /* The linked answer first, so that the definition linked calls
             * reach gets the exported wrapper, as a dlsym's would. */
            vt_real(api);
            return vt_hand_out(api, real, caller);
        }
    return fn;
}

/* A lookup route from its table line: the export and its slot wrappers
 * (a cuGetProcAddress found with dlsym(handle) is the one called, routed
 * all the same) share one body, which calls the real lookup and puts
 * route(what it found) in *out when it succeeded (ok). */
#define VT_GEN_LOOKUP(ret, name, params, args, out, route, ok)                          \
    typedef ret(*vt_real_t_##name) params;                                              \
    static inline __attribute__((always_inline)) ret vt_body_##name(                    \
        vt_real_t_##name real, const void *caller, VT_UNPAREN params)                    \
    {                                                                                   \
        if (!real)                                                                      \
            return VT_MISSING_##ret;                                                    \
        ret r = real args;                                                              \
        if (r == ok && out && !vt_tls.guard && atomic_load(&vt_state) != VT_ST_OFF)     \
            *out = route(*out, caller);                                                 \
        return r;                                                                       \
    }                                                                                   \
    VT_EXPORT ret name params                                                           \
    {                                                                                   \
        const void *caller = __builtin_return_address(0);                               \
        return vt_body_##name((vt_real_t_##name)vt_real_for(VT_API_##name, caller), caller, VT_UNPAREN args); \
    }                                                                                   \
    VT_GEN_SLOTS(ret, name, params, args)

/* The driver's routes (cuGetProcAddress) swap what they found for a
 * wrapper; the runtime's (cudaGetDriverEntryPoint and kin) hand over what
 * libcudart's lookup got as the program's own. */
#define VT_GEN_ROUTE(ret, name, describe, params, args) VT_GEN_ROUTE_##ret(name, params, args)
#define VT_GEN_ROUTE_CUresult(name, params, args) \
    VT_GEN_LOOKUP(CUresult, name, params, args, pfn, route_procaddr, CUDA_SUCCESS)
#define VT_GEN_ROUTE_cudaError_t(name, params, args) \
    VT_GEN_LOOKUP(cudaError_t, name, params, args, funcPtr, for_program, cudaSuccess)
#define VT_GEN_ALLOC VT_GEN_EVENT
#define VT_GEN_FREE VT_GEN_EVENT
#define VT_GEN_VMM_CREATE VT_GEN_EVENT
#define VT_GEN_VMM_RELEASE VT_GEN_EVENT
#define VT_GEN_VMM_MAP VT_GEN_EVENT
#define VT_GEN_VMM_UNMAP VT_GEN_EVENT
#define VT_GEN_VA_RESERVE VT_GEN_EVENT
#define VT_GEN_VA_FREE VT_GEN_EVENT
#define VT_GEN_REGISTER VT_GEN_EVENT
#define VT_GEN_UNREGISTER VT_GEN_EVENT
#define VT_GEN_POOL_CREATE VT_GEN_EVENT
#define VT_GEN_POOL_DESTROY VT_GEN_EVENT
#define VT_GEN_POOL_TRIM VT_GEN_EVENT
#define VT_GEN_MEMINFO VT_GEN_EVENT
#define VT_GEN_POOL_USAGE VT_GEN_EVENT
#define VT_GEN_CTX_RESET VT_GEN_EVENT
#define VT_GEN_VMM_RETAIN VT_GEN_EVENT
#define VT_GEN_VMM_EMPTY VT_GEN_EVENT
#define VT_GEN_PTR_IMPORT VT_GEN_EVENT
#define VT_GEN_GRAPH_NODE(ret, name, describe, params, args) \
    VT_GEN_WRAPPERS(VT_BODY_IF_WANTED, ret, name, describe, params, args)
#define VT_GEN_CAPTURE_BEGIN VT_GEN_EVENT
#define VT_GEN_CAPTURE_END VT_GEN_EVENT
#define VT_GEN_GRAPH_LAUNCH(ret, name, describe, params, args) \
    VT_GEN_WRAPPERS(VT_BODY_IF_FAILED, ret, name, describe, params, args)

#define VT_ENTRY(ret, name, kind, space, describe, params, args) \
    VT_GEN_##kind(ret, name, describe, params, args)
#include "vramtrace/entrypoints.def"
#undef VT_ENTRY

/* The table takes each wrapper's address through a hidden alias generated
 * from the same table, never through the exported name:
 *  - Semantics: an exported name is preemptible. When another interposer
 *    is preloaded before us and defines the same name (HAMi-core's
 *    libvgpu.so defines cuMemAlloc_v2 and friends), a reference by name
 *    binds to ITS function, and dlsym / cuGetProcAddress would hand the
 *    program that interposer instead of our wrapper: every allocation made
 *    through a looked-up pointer would be missed (tests/t/50-shim-paths.t,
 *    "interposer first"). The alias is always our own wrapper.
 *  - Cost: a reference by exported name is a symbol lookup at load time in
 *    every process, CUDA or not (one per line of the table, issue #6); the
 *    alias is link-time constant, a RELATIVE relocation. */
#define VT_STR_(x) #x
#define VT_STR(x) VT_STR_(x)
/* CUDA 13's headers mark cudaGetDriverEntryPoint deprecated; libcudart
 * still exports it, and so does the shim. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#define VT_ENTRY(ret, name, kind, space, describe, params, args) \
    extern __typeof__(name) vt_self_##name __attribute__((alias(VT_STR(name)), visibility("hidden")));
#include "vramtrace/entrypoints.def"
#undef VT_ENTRY
#pragma GCC diagnostic pop

static void *wrapper(unsigned api)
{
    static void *const wrappers[VT_API_COUNT] = {
#define VT_ENTRY(ret, name, kind, space, describe, params, args) (void *)&vt_self_##name,
#include "vramtrace/entrypoints.def"
#undef VT_ENTRY
    };
    return api < VT_API_COUNT ? wrappers[api] : NULL;
}

/* The slot wrappers of every entry point of the table. */
#define VT_SLOT_ROW(ret, name, kind, space, describe, params, args) VT_SLOT_ROW_##kind(name),
#define VT_SLOT_ENTRY(name) { (void *)vt_slot0_##name, (void *)vt_slot1_##name, (void *)vt_slot2_##name, (void *)vt_slot3_##name }
#define VT_SLOT_ROW_ROUTE VT_SLOT_ENTRY
#define VT_SLOT_ROW_ALLOC VT_SLOT_ENTRY
#define VT_SLOT_ROW_FREE VT_SLOT_ENTRY
#define VT_SLOT_ROW_VMM_CREATE VT_SLOT_ENTRY
#define VT_SLOT_ROW_VMM_RELEASE VT_SLOT_ENTRY
#define VT_SLOT_ROW_VMM_MAP VT_SLOT_ENTRY
#define VT_SLOT_ROW_VMM_UNMAP VT_SLOT_ENTRY
#define VT_SLOT_ROW_VA_RESERVE VT_SLOT_ENTRY
#define VT_SLOT_ROW_VA_FREE VT_SLOT_ENTRY
#define VT_SLOT_ROW_REGISTER VT_SLOT_ENTRY
#define VT_SLOT_ROW_UNREGISTER VT_SLOT_ENTRY
#define VT_SLOT_ROW_POOL_CREATE VT_SLOT_ENTRY
#define VT_SLOT_ROW_POOL_DESTROY VT_SLOT_ENTRY
#define VT_SLOT_ROW_POOL_TRIM VT_SLOT_ENTRY
#define VT_SLOT_ROW_MEMINFO VT_SLOT_ENTRY
#define VT_SLOT_ROW_POOL_USAGE VT_SLOT_ENTRY
#define VT_SLOT_ROW_CTX_RESET VT_SLOT_ENTRY
#define VT_SLOT_ROW_VMM_RETAIN VT_SLOT_ENTRY
#define VT_SLOT_ROW_VMM_EMPTY VT_SLOT_ENTRY
#define VT_SLOT_ROW_PTR_IMPORT VT_SLOT_ENTRY
#define VT_SLOT_ROW_GRAPH_NODE VT_SLOT_ENTRY
#define VT_SLOT_ROW_CAPTURE_BEGIN VT_SLOT_ENTRY
#define VT_SLOT_ROW_CAPTURE_END VT_SLOT_ENTRY
#define VT_SLOT_ROW_GRAPH_LAUNCH VT_SLOT_ENTRY

static void *slot_wrapper(unsigned api, unsigned k)
{
    static void *const slots[VT_API_COUNT][VT_SLOTS] = {
#define VT_ENTRY VT_SLOT_ROW
#include "vramtrace/entrypoints.def"
#undef VT_ENTRY
    };
    return api < VT_API_COUNT && k < VT_SLOTS ? slots[api][k] : NULL;
}
