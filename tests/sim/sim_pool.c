/* sim_pool.c: memory pools and the stream-ordered allocator.
 *
 * Contract:
 *  - Each device has a default pool (release threshold 0), which is also its
 *    current pool until cuDeviceSetMemPool says otherwise.
 *  - A pool block is a contiguous device block rounded to the granularity.
 *    Freeing it (cuMemFreeAsync, or cuMemFree) keeps it cached in the pool:
 *    still charged to the device, counted in RESERVED_MEM_CURRENT, not in
 *    USED_MEM_CURRENT. A later allocation reuses the smallest cached block
 *    that is large enough, whole.
 *  - Cached memory above the release threshold goes back to the device at
 *    cuStreamSynchronize / cuCtxSynchronize; cuMemPoolTrimTo releases down to
 *    its argument. Release order is highest address first.
 *  - When a new block does not fit, the pool first drops its own cache and
 *    retries once, as the real driver reclaims unused pool memory before
 *    reporting CUDA_ERROR_OUT_OF_MEMORY.
 *  - cuMemFree on a pool block is a free followed by that pool's sync.
 *  - A destroyed pool drops its cache at once, and each block still in use
 *    is released when freed.
 *  - An imported pool (cuMemPoolImportFromShareableHandle, sim_ipc.c) is
 *    no source of allocations: cuMemAllocFromPoolAsync and
 *    cuDeviceSetMemPool refuse it (INVALID_VALUE), as the driver's
 *    documentation says.
 *  - A pool located in host memory (CU_MEM_LOCATION_TYPE_HOST, HOST_NUMA,
 *    HOST_NUMA_CURRENT) has dev -1: its blocks are host mappings like pinned
 *    memory (charged to no device), not cached: freeing one unmaps it.
 */
#include "sim.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static int host_location(CUmemLocationType t)
{
    return t == CU_MEM_LOCATION_TYPE_HOST || t == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           t == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

static CUresult host_pool_alloc_locked(CUdeviceptr *dptr, size_t bytes, sim_pool_t *p, sim_ctx_t *ctx)
{
    uint64_t size = sim_round_up(bytes, (uint64_t)sysconf(_SC_PAGESIZE));
    if (size < bytes || size > sim.host_limit - sim.host_bytes || sim.host_bytes > sim.host_limit)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim_ext_t e = {.start = (uintptr_t)m, .size = size, .req = bytes, .kind = SK_POOL_USED, .dev = ctx->dev,
                   .ctx = ctx, .owner = p};
    if (!sim_map_insert(&sim.host, &e)) {
        munmap(m, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    sim.host_bytes += size;
    p->used += size;
    p->reserved += size;
    if (p->used > p->used_high)
        p->used_high = p->used;
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
    *dptr = (CUdeviceptr)(uintptr_t)m;
    return CUDA_SUCCESS;
}

/* A host pool's block: unmapped at once. 0 when addr is not one. */
static int host_pool_free_locked(uint64_t addr)
{
    sim_ext_t *e = sim_map_find(&sim.host, addr);
    if (!e || e->start != addr || e->kind != SK_POOL_USED)
        return 0;
    sim_pool_t *p = e->owner;
    p->used -= e->size;
    p->reserved -= e->size;
    munmap((void *)(uintptr_t)e->start, e->size);
    sim.host_bytes -= e->size;
    sim_map_remove(&sim.host, e);
    return 1;
}

static sim_pool_t *pool_new(int dev)
{
    sim_pool_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->magic = SIM_MAGIC_POOL;
    p->dev = dev;
    p->next = sim.pools;
    sim.pools = p;
    return p;
}

CUresult sim_pools_init_locked(int d)
{
    sim_pool_t *p = pool_new(d);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->is_default = 1;
    sim.dev[d].default_pool = sim.dev[d].current_pool = p;
    return CUDA_SUCCESS;
}

sim_pool_t *sim_pool_lookup_locked(CUmemoryPool h)
{
    for (sim_pool_t *p = sim.pools; p; p = p->next)
        if (p == (sim_pool_t *)h && !p->destroyed)
            return p;
    return NULL;
}

void sim_pool_release_locked(sim_pool_t *p, uint64_t keep)
{
    if (p->dev < 0)
        return; /* a host pool caches nothing */
    sim_dev_t *dv = &sim.dev[p->dev];
    sim_map_t *maps[2] = {&dv->sysmem, &dv->mem};
    for (int i = 0; i < 2; i++) {
        for (size_t j = maps[i]->n; j-- > 0 && p->reserved > keep;) {
            sim_ext_t *e = &maps[i]->v[j];
            if (e->kind != SK_POOL_CACHED || e->owner != p)
                continue;
            p->reserved -= e->size;
            sim_block_free_locked(maps[i], e);
        }
    }
}

void sim_pools_sync_locked(int d)
{
    for (sim_pool_t *p = sim.pools; p; p = p->next)
        if (p->dev == d)
            sim_pool_release_locked(p, p->threshold);
}

void sim_pool_block_freed_locked(sim_map_t *map, sim_ext_t *e)
{
    sim_pool_t *p = e->owner;
    p->used -= e->size;
    if (p->destroyed) {
        p->reserved -= e->size;
        sim_block_free_locked(map, e);
        return;
    }
    e->kind = SK_POOL_CACHED;
    e->ctx = NULL;
}

static void highs(sim_pool_t *p)
{
    if (p->used > p->used_high)
        p->used_high = p->used;
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
}

static CUresult pool_alloc_locked(CUdeviceptr *dptr, size_t bytes, sim_pool_t *p, CUstream h)
{
    int sdev;
    sim_ctx_t *ctx;
    CUresult rc = sim_stream_dev_locked(h, &sdev);
    if (rc || (rc = sim_cur_ctx_locked(&ctx)))
        return rc;
    if (!dptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->dev < 0)
        return host_pool_alloc_locked(dptr, bytes, p, ctx);
    uint64_t size = sim_round_up(bytes, sim.gran);
    if (size < bytes)
        return CUDA_ERROR_OUT_OF_MEMORY;

    sim_dev_t *dv = &sim.dev[p->dev];
    sim_map_t *maps[2] = {&dv->mem, &dv->sysmem};
    sim_ext_t *best = NULL;
    for (int i = 0; i < 2; i++)
        for (size_t j = 0; j < maps[i]->n; j++) {
            sim_ext_t *e = &maps[i]->v[j];
            if (e->kind == SK_POOL_CACHED && e->owner == p && e->size >= size &&
                (!best || e->size < best->size))
                best = e;
        }
    if (best) {
        best->kind = SK_POOL_USED;
        best->req = bytes;
        best->ctx = ctx;
        p->used += best->size;
        highs(p);
        *dptr = best->start;
        return CUDA_SUCCESS;
    }

    uint64_t addr;
    if (p->max_size && p->reserved + size > p->max_size) {
        sim_pool_release_locked(p, 0);
        if (p->reserved + size > p->max_size)
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rc = sim_block_alloc_locked(p->dev, bytes, SK_POOL_USED, ctx, p, &addr);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && p->reserved > p->used) {
        sim_pool_release_locked(p, 0);
        rc = sim_block_alloc_locked(p->dev, bytes, SK_POOL_USED, ctx, p, &addr);
    }
    if (rc)
        return rc;
    p->reserved += size;
    p->used += size;
    highs(p);
    *dptr = addr;
    return CUDA_SUCCESS;
}

/* A stream-ordered call's stream: its device, and the graph it captures
 * into (NULL when it does not). */
static CUresult stream_of_call(CUstream h, int *dev, sim_graph_t **g)
{
    CUresult rc = sim_stream_dev_locked(h, dev);
    *g = rc ? NULL : sim_graph_capturing_locked(h);
    return rc;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    SIM_ENTER();
    int dev;
    sim_graph_t *g;
    CUresult rc = stream_of_call(hStream, &dev, &g);
    if (rc)
        SIM_LEAVE(rc);
    if (g)
        SIM_LEAVE(sim_graph_capture_alloc_locked(g, dev, dptr, bytesize));
    SIM_LEAVE(pool_alloc_locked(dptr, bytesize, sim.dev[dev].current_pool, hStream));
}

SIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, hStream);
}

SIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, hStream);
}

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    SIM_ENTER();
    sim_pool_t *p = sim_pool_lookup_locked(pool);
    if (!p || p->imported)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_graph_t *g = p->dev >= 0 ? sim_graph_capturing_locked(hStream) : NULL;
    if (g)
        SIM_LEAVE(sim_graph_capture_alloc_locked(g, p->dev, dptr, bytesize));
    SIM_LEAVE(pool_alloc_locked(dptr, bytesize, p, hStream));
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                            CUstream hStream)
{
    return alloc_from_pool(dptr, bytesize, pool, hStream);
}

#ifndef VTSIM_NO_V2
SIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                 CUstream hStream)
{
    return alloc_from_pool(dptr, bytesize, pool, hStream);
}
#endif

CUresult sim_free_async_locked(CUdeviceptr dptr)
{
    sim_map_t *map;
    sim_ext_t *e = sim_dev_find_locked(dptr, &map);
    if (!e && (host_pool_free_locked(dptr) || sim_graph_free_locked(dptr) || sim_import_free_locked(dptr, 0)))
        return CUDA_SUCCESS;
    if (!e || e->start != dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (e->kind == SK_POOL_USED)
        sim_pool_block_freed_locked(map, e);
    else if (e->kind == SK_DEVICE)
        sim_block_free_locked(map, e);
    else
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult free_async(CUdeviceptr dptr, CUstream hStream)
{
    SIM_ENTER();
    int dev;
    sim_graph_t *g;
    CUresult rc = stream_of_call(hStream, &dev, &g);
    if (rc)
        SIM_LEAVE(rc);
    SIM_LEAVE(g ? sim_graph_capture_free_locked(g, dptr) : sim_free_async_locked(dptr));
}

SIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) { return free_async(dptr, hStream); }
SIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) { return free_async(dptr, hStream); }

SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    SIM_ENTER();
    if (!pool_out)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (dev < 0 || dev >= sim.ndev)
        SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);
    *pool_out = (CUmemoryPool)sim.dev[dev].default_pool;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    SIM_ENTER();
    if (!pool)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (dev < 0 || dev >= sim.ndev)
        SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);
    *pool = (CUmemoryPool)sim.dev[dev].current_pool;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    SIM_ENTER();
    if (dev < 0 || dev >= sim.ndev)
        SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);
    sim_pool_t *p = sim_pool_lookup_locked(pool);
    if (!p || p->dev != dev || p->imported)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim.dev[dev].current_pool = p;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    SIM_ENTER();
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    int host = host_location(poolProps->location.type);
    if (poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE && !host)
        SIM_LEAVE(CUDA_ERROR_NOT_SUPPORTED);
    int dev = host ? -1 : poolProps->location.id;
    if (!host && (dev < 0 || dev >= sim.ndev))
        SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);
    sim_pool_t *p = pool_new(dev);
    if (!p)
        SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    p->max_size = poolProps->maxSize;
    p->handle_types = poolProps->handleTypes;
    *pool = (CUmemoryPool)p;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    SIM_ENTER();
    sim_pool_t *p = sim_pool_lookup_locked(pool);
    if (!p || p->is_default)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_pool_release_locked(p, 0);
    p->destroyed = 1;
    if (p->dev >= 0 && sim.dev[p->dev].current_pool == p)
        sim.dev[p->dev].current_pool = sim.dev[p->dev].default_pool;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    SIM_ENTER();
    sim_pool_t *p = sim_pool_lookup_locked(pool);
    if (!p)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_pool_release_locked(p, minBytesToKeep);
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    SIM_ENTER();
    sim_pool_t *p = sim_pool_lookup_locked(pool);
    if (!p || !value)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        p->threshold = *(cuuint64_t *)value;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
        p->reserved_high = p->reserved;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
        p->used_high = p->used;
        break;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        break;
    default:
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    }
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    SIM_ENTER();
    if (sim_capture_forbids_locked())
        SIM_LEAVE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    sim_pool_t *p = sim_pool_lookup_locked(pool);
    if (!p || !value)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    cuuint64_t *v = value;
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *v = p->threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *v = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *v = p->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *v = p->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *v = p->used_high; break;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = 1;
        break;
    default:
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    }
    SIM_LEAVE(CUDA_SUCCESS);
}
