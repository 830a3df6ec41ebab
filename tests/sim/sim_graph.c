/* sim_graph.c: stream capture and CUDA graphs, as far as memory goes.
 *
 * Contract:
 *  - A created stream captures between cuStreamBeginCapture_v2 (or its
 *    _ptsz and CUDA 10.0 flavours, or cuStreamBeginCaptureToGraph into a
 *    graph of cuGraphCreate) and cuStreamEndCapture; the legacy and
 *    per-thread streams refuse (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED).
 *    cuStreamIsCapturing says ACTIVE for a capturing stream.
 *  - On a capturing stream, cuMemAllocAsync and cuMemAllocFromPoolAsync add
 *    an allocation node: the address the graph's allocation will have is
 *    handed out (from the device's graph range, SIM_GRAPH_BASE), nothing is
 *    charged; cuMemFreeAsync adds a free node for the address it names.
 *  - cuGraphLaunch runs the nodes in order. An allocation node takes its
 *    bytes (rounded to the granularity) from the device's graph pool, which
 *    grows by what it lacks, charged to the device like any block
 *    (cuMemGetInfo shows it), or fails with CUDA_ERROR_OUT_OF_MEMORY; an
 *    allocation still live from the last launch fails it with
 *    CUDA_ERROR_INVALID_VALUE. A free node gives a graph allocation's bytes
 *    back to the pool, which keeps them charged, or frees the allocation
 *    made outside a graph that it names, as cuMemFreeAsync would.
 *  - cuMemFreeAsync and cuMemFree_v2 of a live graph allocation outside a
 *    capture give its bytes back to the pool too.
 *  - Capture modes (CUDA runtime API, cudaThreadExchangeStreamCaptureMode):
 *    while a stream captures in global mode, or this thread's capture in
 *    thread-local mode, a thread whose own mode (cuThreadExchangeStream-
 *    CaptureMode; global by default) is not relaxed may make no
 *    potentially unsafe call. cuMemAlloc_v2 and cuMemFree_v2 are such calls
 *    (cudaMalloc is NVIDIA's example); so, here, are cuMemGetInfo_v2,
 *    cuPointerGetAttribute, cuMemPoolGetAttribute and
 *    cuDeviceGetGraphMemAttribute: whether the real
 *    driver forbids those is not documented, and a tool must not find out
 *    in someone's capture. Such a call fails with
 *    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the captures:
 *    a stream-ordered call on them then fails with
 *    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamIsCapturing says
 *    INVALIDATED, and cuStreamEndCapture ends the capture with that error
 *    and no graph.
 *  - cuGraphAddMemAllocNode and cuGraphAddMemFreeNode add the same nodes to
 *    a graph of cuGraphCreate by hand, and so do cuGraphAddNode and
 *    cuGraphAddNode_v2 for CU_GRAPH_NODE_TYPE_MEM_ALLOC and _MEM_FREE; an
 *    empty node (CU_GRAPH_NODE_TYPE_EMPTY) is accepted and does nothing;
 *    other node types are CUDA_ERROR_NOT_SUPPORTED.
 *  - cuGraphExecUpdate_v2 gives an executable graph the graph's nodes.
 *  - cuDeviceGraphMemTrim returns the pool's unused bytes to the device;
 *    cuDeviceGetGraphMemAttribute reports its used and reserved bytes,
 *    current and high.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SIM_MAGIC_GRAPH 0x76746772u
#define SIM_MAGIC_GEXEC 0x76746765u
/* One 1 TiB range per device, above the devices' slots and the VA range. */
#define SIM_GRAPH_BASE(d) (0x300000000000ull + 0x10000000000ull * (uint64_t)(d))

typedef struct galloc {
    uint64_t va, size;
    int dev, live;
} galloc_t;

typedef struct gnode {
    int is_free;
    uint64_t va;
} gnode_t;

struct sim_graph {
    uint32_t magic;
    gnode_t *nodes;
    size_t n, cap;
};

typedef struct sim_gexec {
    uint32_t magic;
    gnode_t *nodes;
    size_t n;
} sim_gexec_t;

static galloc_t *gallocs;
static size_t ngallocs, gallocs_cap;
static uint64_t next_offset[SIM_MAX_DEV];
static struct {
    uint64_t used, reserved, used_high, reserved_high;
} gpool[SIM_MAX_DEV];

static int add_node(sim_graph_t *g, int is_free, uint64_t va)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        gnode_t *v = realloc(g->nodes, cap * sizeof *v);
        if (!v)
            return -1;
        g->nodes = v, g->cap = cap;
    }
    g->nodes[g->n++] = (gnode_t){is_free, va};
    return 0;
}

static galloc_t *galloc_at(uint64_t va)
{
    for (size_t i = 0; i < ngallocs; i++)
        if (gallocs[i].va == va)
            return &gallocs[i];
    return NULL;
}

static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

SIM_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    if (!mode || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                  *mode != CU_STREAM_CAPTURE_MODE_RELAXED))
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode was = thread_mode;
    thread_mode = *mode;
    *mode = was;
    return CUDA_SUCCESS;
}

int sim_capture_forbids_locked(void)
{
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return 0;
    long self = syscall(SYS_gettid);
    int forbidden = 0;
    for (sim_stream_t *s = sim.streams; s; s = s->next)
        if (s->alive && s->capture && !s->capture_invalid &&
            (s->capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
             (s->capture_mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && s->capture_tid == self))) {
            s->capture_invalid = 1;
            forbidden = 1;
        }
    return forbidden;
}

sim_graph_t *sim_graph_capturing_locked(CUstream h)
{
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
        return NULL;
    sim_stream_t *s = sim_stream_locked(h);
    return s && s->alive ? s->capture : NULL;
}

/* The stream that captures into g (for its invalidation). */
static sim_stream_t *capturer(const sim_graph_t *g)
{
    for (sim_stream_t *s = sim.streams; s; s = s->next)
        if (s->alive && s->capture == g)
            return s;
    return NULL;
}

CUresult sim_graph_capture_alloc_locked(sim_graph_t *g, int dev, CUdeviceptr *dptr, size_t bytes)
{
    sim_stream_t *s = capturer(g);
    if (s && s->capture_invalid)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (!dptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t size = sim_round_up(bytes, sim.gran);
    if (size < bytes || next_offset[dev] + size > 0x10000000000ull)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (ngallocs == gallocs_cap) {
        size_t cap = gallocs_cap ? 2 * gallocs_cap : 16;
        galloc_t *v = realloc(gallocs, cap * sizeof *v);
        if (!v)
            return CUDA_ERROR_OUT_OF_MEMORY;
        gallocs = v, gallocs_cap = cap;
    }
    uint64_t va = SIM_GRAPH_BASE(dev) + next_offset[dev];
    if (add_node(g, 0, va))
        return CUDA_ERROR_OUT_OF_MEMORY;
    next_offset[dev] += size;
    gallocs[ngallocs++] = (galloc_t){va, size, dev, 0};
    *dptr = va;
    return CUDA_SUCCESS;
}

CUresult sim_graph_capture_free_locked(sim_graph_t *g, CUdeviceptr dptr)
{
    sim_stream_t *s = capturer(g);
    if (s && s->capture_invalid)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return add_node(g, 1, dptr) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

static void pool_give_back(galloc_t *a)
{
    gpool[a->dev].used -= a->size;
    a->live = 0;
}

int sim_graph_free_locked(uint64_t addr)
{
    galloc_t *a = galloc_at(addr);
    if (!a || !a->live)
        return 0;
    pool_give_back(a);
    return 1;
}

static CUresult pool_take(galloc_t *a)
{
    if (a->live)
        return CUDA_ERROR_INVALID_VALUE;
    int d = a->dev;
    uint64_t spare = gpool[d].reserved - gpool[d].used;
    if (spare < a->size) {
        uint64_t grow = a->size - spare;
        if (sim_free_locked(d) < grow)
            return CUDA_ERROR_OUT_OF_MEMORY;
        sim_charge_locked(d, (int64_t)grow);
        gpool[d].reserved += grow;
        if (gpool[d].reserved > gpool[d].reserved_high)
            gpool[d].reserved_high = gpool[d].reserved;
    }
    gpool[d].used += a->size;
    if (gpool[d].used > gpool[d].used_high)
        gpool[d].used_high = gpool[d].used;
    a->live = 1;
    return CUDA_SUCCESS;
}

static sim_graph_t *graph_of(CUgraph h);

/* into: the graph cuStreamBeginCaptureToGraph names, or NULL for a new one. */
static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, CUgraph into)
{
    SIM_ENTER();
    int dev;
    CUresult rc = sim_stream_dev_locked(h, &dev);
    if (rc)
        SIM_LEAVE(rc);
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
        SIM_LEAVE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    sim_stream_t *s = sim_stream_locked(h);
    if (s->capture)
        SIM_LEAVE(CUDA_ERROR_ILLEGAL_STATE);
    sim_graph_t *g = into ? graph_of(into) : calloc(1, sizeof *g);
    if (!g)
        SIM_LEAVE(into ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY);
    g->magic = SIM_MAGIC_GRAPH;
    s->capture = g;
    s->capture_mode = mode;
    s->capture_invalid = 0;
    s->capture_tid = syscall(SYS_gettid);
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode)
{
    return begin_capture(h, mode, NULL);
}
SIM_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode)
{
    return begin_capture(h, mode, NULL);
}
SIM_EXPORT CUresult cuStreamBeginCapture(CUstream h) { return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL); }
SIM_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream h)
{
    return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
}

/* Dependencies are not simulated: the graph's nodes are kept in order. */
static CUresult begin_to_graph(CUstream h, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *edges,
                               size_t ndeps, CUstreamCaptureMode mode)
{
    (void)deps, (void)edges, (void)ndeps;
    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    return begin_capture(h, mode, g);
}
SIM_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream h, CUgraph g, const CUgraphNode *deps,
                                                const CUgraphEdgeData *edges, size_t ndeps, CUstreamCaptureMode mode)
{
    return begin_to_graph(h, g, deps, edges, ndeps, mode);
}
SIM_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream h, CUgraph g, const CUgraphNode *deps,
                                                     const CUgraphEdgeData *edges, size_t ndeps,
                                                     CUstreamCaptureMode mode)
{
    return begin_to_graph(h, g, deps, edges, ndeps, mode);
}

/* Nodes added by hand, in the graph's order (dependencies are not
 * simulated); a node handle is its place in the graph, plus one. */
SIM_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                           CUDA_MEM_ALLOC_NODE_PARAMS *params)
{
    (void)deps, (void)ndeps;
    SIM_ENTER();
    sim_graph_t *g = graph_of(graph);
    if (!node || !g || !params || params->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        params->poolProps.location.id < 0 || params->poolProps.location.id >= sim.ndev)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    CUresult rc = sim_graph_capture_alloc_locked(g, params->poolProps.location.id, &params->dptr, params->bytesize);
    if (rc == CUDA_SUCCESS)
        *node = (CUgraphNode)(uintptr_t)g->n;
    SIM_LEAVE(rc);
}

SIM_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                          CUdeviceptr dptr)
{
    (void)deps, (void)ndeps;
    SIM_ENTER();
    sim_graph_t *g = graph_of(graph);
    if (!node || !g)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    CUresult rc = sim_graph_capture_free_locked(g, dptr);
    if (rc == CUDA_SUCCESS)
        *node = (CUgraphNode)(uintptr_t)g->n;
    SIM_LEAVE(rc);
}

SIM_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                      const CUgraphEdgeData *edges, size_t ndeps, CUgraphNodeParams *params)
{
    (void)edges;
    if (!params)
        return CUDA_ERROR_INVALID_VALUE;
    if (params->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
        CUDA_MEM_ALLOC_NODE_PARAMS alloc;
        memcpy(&alloc, &params->alloc, sizeof alloc);
        CUresult rc = cuGraphAddMemAllocNode(node, graph, deps, ndeps, &alloc);
        params->alloc.dptr = alloc.dptr;
        return rc;
    }
    if (params->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
        return cuGraphAddMemFreeNode(node, graph, deps, ndeps, params->free.dptr);
    if (params->type != CU_GRAPH_NODE_TYPE_EMPTY)
        return CUDA_ERROR_NOT_SUPPORTED;
    SIM_ENTER();
    sim_graph_t *g = graph_of(graph);
    if (!node || !g)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    *node = (CUgraphNode)(uintptr_t)(g->n + 1);
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuGraphAddNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                   CUgraphNodeParams *params)
{
    return cuGraphAddNode_v2(node, graph, deps, NULL, ndeps, params);
}

SIM_EXPORT CUresult cuGraphCreate(CUgraph *graph, unsigned int flags)
{
    SIM_ENTER();
    if (!graph || flags)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_graph_t *g = calloc(1, sizeof *g);
    if (!g)
        SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    g->magic = SIM_MAGIC_GRAPH;
    *graph = (CUgraph)g;
    SIM_LEAVE(CUDA_SUCCESS);
}

static CUresult end_capture(CUstream h, CUgraph *graph)
{
    SIM_ENTER();
    int dev;
    CUresult rc = sim_stream_dev_locked(h, &dev);
    if (rc)
        SIM_LEAVE(rc);
    if (!graph)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_graph_t *g = sim_graph_capturing_locked(h);
    if (!g)
        SIM_LEAVE(CUDA_ERROR_ILLEGAL_STATE);
    sim_stream_t *s = sim_stream_locked(h);
    s->capture = NULL;
    if (s->capture_invalid) {
        *graph = NULL;
        SIM_LEAVE(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    }
    *graph = (CUgraph)g;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuStreamEndCapture(CUstream h, CUgraph *graph) { return end_capture(h, graph); }
SIM_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph *graph) { return end_capture(h, graph); }

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *status)
{
    SIM_ENTER();
    int dev;
    CUresult rc = sim_stream_dev_locked(h, &dev);
    if (rc)
        SIM_LEAVE(rc);
    if (!status)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    *status = !sim_graph_capturing_locked(h)            ? CU_STREAM_CAPTURE_STATUS_NONE
              : sim_stream_locked(h)->capture_invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                                      : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *status) { return is_capturing(h, status); }
SIM_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus *status)
{
    return is_capturing(h, status);
}

static sim_graph_t *graph_of(CUgraph h)
{
    sim_graph_t *g = (sim_graph_t *)h;
    return g && g->magic == SIM_MAGIC_GRAPH ? g : NULL;
}

static sim_gexec_t *exec_of(CUgraphExec h)
{
    sim_gexec_t *x = (sim_gexec_t *)h;
    return x && x->magic == SIM_MAGIC_GEXEC ? x : NULL;
}

SIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags)
{
    (void)flags;
    SIM_ENTER();
    sim_graph_t *g = graph_of(graph);
    if (!exec || !g)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_gexec_t *x = calloc(1, sizeof *x);
    if (!x || (g->n && !(x->nodes = malloc(g->n * sizeof *x->nodes)))) {
        free(x);
        SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    }
    if (g->n)
        memcpy(x->nodes, g->nodes, g->n * sizeof *x->nodes);
    x->n = g->n;
    x->magic = SIM_MAGIC_GEXEC;
    *exec = (CUgraphExec)x;
    SIM_LEAVE(CUDA_SUCCESS);
}

/* The executable graph takes the graph's nodes (a real driver checks the
 * topology is the same; ggml updates its graph each token). */
SIM_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info)
{
    SIM_ENTER();
    sim_gexec_t *x = exec_of(exec);
    sim_graph_t *g = graph_of(graph);
    if (!x || !g)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    gnode_t *nodes = g->n ? malloc(g->n * sizeof *nodes) : NULL;
    if (g->n && !nodes)
        SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    if (g->n)
        memcpy(nodes, g->nodes, g->n * sizeof *nodes);
    free(x->nodes);
    x->nodes = nodes;
    x->n = g->n;
    if (info)
        memset(info, 0, sizeof *info);
    SIM_LEAVE(CUDA_SUCCESS);
}

static CUresult launch(CUgraphExec exec, CUstream h)
{
    SIM_ENTER();
    int dev;
    CUresult rc = sim_stream_dev_locked(h, &dev);
    if (rc)
        SIM_LEAVE(rc);
    sim_gexec_t *x = exec_of(exec);
    if (!x)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < x->n && !rc; i++) {
        galloc_t *a = galloc_at(x->nodes[i].va);
        if (!x->nodes[i].is_free)
            rc = a ? pool_take(a) : CUDA_ERROR_INVALID_VALUE;
        else if (!a)
            rc = sim_free_async_locked(x->nodes[i].va);
        else if (a->live)
            pool_give_back(a);
    }
    SIM_LEAVE(rc);
}

SIM_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream h) { return launch(exec, h); }
SIM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream h) { return launch(exec, h); }

SIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec)
{
    SIM_ENTER();
    sim_gexec_t *x = exec_of(exec);
    if (!x)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    x->magic = 0;
    free(x->nodes);
    free(x);
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuGraphDestroy(CUgraph graph)
{
    SIM_ENTER();
    sim_graph_t *g = graph_of(graph);
    if (!g)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    g->magic = 0;
    free(g->nodes);
    free(g);
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    SIM_ENTER();
    if (device < 0 || device >= sim.ndev)
        SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);
    uint64_t spare = gpool[device].reserved - gpool[device].used;
    sim_charge_locked(device, -(int64_t)spare);
    gpool[device].reserved -= spare;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    SIM_ENTER();
    if (device < 0 || device >= sim.ndev)
        SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);
    if (!value)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (sim_capture_forbids_locked())
        SIM_LEAVE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cuuint64_t v;
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: v = gpool[device].used; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: v = gpool[device].used_high; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: v = gpool[device].reserved; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: v = gpool[device].reserved_high; break;
    default: SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    }
    *(cuuint64_t *)value = v;
    SIM_LEAVE(CUDA_SUCCESS);
}
