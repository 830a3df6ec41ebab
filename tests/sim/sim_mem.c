/* sim_mem.c: plain device allocations, free memory, pointer attributes.
 *
 * Contract:
 *  - cuMemAlloc_v2 rounds up to the granularity (so cuMemAlloc(1) costs
 *    2 MiB by default) and is first-fit in the device range; see sim_core.c
 *    for when it fails with CUDA_ERROR_OUT_OF_MEMORY.
 *  - cuMemAllocPitch_v2: pitch = WidthInBytes rounded up to 512 bytes, and
 *    the block is pitch * Height bytes. ElementSizeBytes must be 4, 8 or 16.
 *  - cuMemFree_v2 frees plain, pool and managed allocations; the address
 *    must be the exact start of a live allocation. With
 *    VTSIM_SLOW_FREE_MS, cuMemFree_v2(0) sleeps that long first. With
 *    VTSIM_SLOW_RETURN_MS, a cuMemFree_v2 of a real pointer sleeps that long
 *    after the release, before it returns: another thread can get the
 *    address back while the free has not returned.
 *  - The 32-bit legacy cuMemAlloc/cuMemFree/cuMemGetInfo work on a 512 MiB
 *    window below 4 GiB per device (devices 0-6), charged like any other
 *    device memory; cuMemGetInfo clamps to UINT_MAX.
 */
#include "sim.h"

static CUresult cur_dev(sim_ctx_t **ctx)
{
    return sim_cur_ctx_locked(ctx);
}

SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    SIM_ENTER();
    if (sim_capture_forbids_locked())
        SIM_LEAVE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    sim_ctx_t *ctx;
    CUresult rc = cur_dev(&ctx);
    if (rc)
        SIM_LEAVE(rc);
    if (!dptr || bytesize == 0)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    uint64_t addr;
    rc = sim_block_alloc_locked(ctx->dev, bytesize, SK_DEVICE, ctx, NULL, &addr);
    if (rc == CUDA_SUCCESS)
        *dptr = addr;
    SIM_LEAVE(rc);
}

SIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                       size_t Height, unsigned int ElementSizeBytes)
{
    SIM_ENTER();
    sim_ctx_t *ctx;
    CUresult rc = cur_dev(&ctx);
    if (rc)
        SIM_LEAVE(rc);
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    uint64_t pitch = sim_round_up(WidthInBytes, SIM_PITCH_ALIGN);
    if (pitch < WidthInBytes || Height > UINT64_MAX / pitch)
        SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    uint64_t addr;
    rc = sim_block_alloc_locked(ctx->dev, pitch * Height, SK_DEVICE, ctx, NULL, &addr);
    if (rc == CUDA_SUCCESS) {
        *dptr = addr;
        *pPitch = pitch;
    }
    SIM_LEAVE(rc);
}

static CUresult free_locked(CUdeviceptr dptr)
{
    sim_ctx_t *ctx;
    CUresult rc = cur_dev(&ctx);
    if (rc)
        return rc;
    sim_map_t *map;
    sim_ext_t *e = sim_dev_find_locked(dptr, &map);
    if (e && e->start == dptr) {
        if (e->kind == SK_DEVICE || e->kind == SK_LEGACY) {
            sim_block_free_locked(map, e);
            return CUDA_SUCCESS;
        }
        if (e->kind == SK_POOL_USED) {
            sim_pool_t *p = e->owner;
            sim_pool_block_freed_locked(map, e);
            sim_pool_release_locked(p, p->threshold);
            return CUDA_SUCCESS;
        }
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!e && (sim_graph_free_locked(dptr) || sim_import_free_locked(dptr, 0)))
        return CUDA_SUCCESS;
    return sim_managed_free_locked(dptr);
}

SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    /* VTSIM_SLOW_FREE_MS: a free of NULL waits that long first, outside the
     * driver's lock, as a real cudaFree waits behind a long kernel; a
     * thread can be cancelled there (nanosleep is a cancellation point). */
    const char *slow = dptr ? NULL : getenv("VTSIM_SLOW_FREE_MS");
    if (slow && *slow) {
        long ms = atol(slow);
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
    SIM_ENTER();
    CUresult rc = sim_capture_forbids_locked() ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : free_locked(dptr);
    /* Read once, under the lock: a getenv per free would weigh on the
     * benchmarks' untraced baseline. */
    static long slow_return_ms = -1;
    if (slow_return_ms < 0) {
        const char *late = getenv("VTSIM_SLOW_RETURN_MS");
        slow_return_ms = late && *late ? atol(late) : 0;
    }
    long ms = dptr ? slow_return_ms : 0;
    sim_unlock();
    if (ms > 0) {
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
    return rc;
}

/* Shared by both ABI flavours: an exported function never calls another
 * exported one, so an interposer sees exactly the calls the program made. */
static CUresult meminfo(size_t *free, size_t *total)
{
    SIM_ENTER();
    if (sim_capture_forbids_locked())
        SIM_LEAVE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    sim_ctx_t *ctx;
    CUresult rc = cur_dev(&ctx);
    if (rc)
        SIM_LEAVE(rc);
    if (!free || !total)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    *free = sim_free_locked(ctx->dev);
    *total = sim.dev[ctx->dev].capacity;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total) { return meminfo(free, total); }

SIM_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    SIM_ENTER();
    sim_ctx_t *ctx;
    CUresult rc = cur_dev(&ctx);
    if (rc)
        SIM_LEAVE(rc);
    if (!dptr || bytesize == 0)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    int d = ctx->dev;
    if (d >= SIM_LEGACY_MAX_DEV)
        SIM_LEAVE(CUDA_ERROR_NOT_SUPPORTED);
    uint64_t size = sim_round_up(bytesize, sim.gran);
    sim_ext_t e = {.size = size, .req = bytesize, .kind = SK_LEGACY, .dev = d, .ctx = ctx};
    sim_map_t *map = &sim.dev[d].legacy;
    if (size > sim_free_locked(d) || sim_map_fit(map, size, sim.gran, &e.start) ||
        !sim_map_insert(map, &e))
        SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    sim_charge_locked(d, (int64_t)size);
    *dptr = (CUdeviceptr_v1)e.start;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    SIM_ENTER();
    SIM_LEAVE(free_locked(dptr));
}

SIM_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    size_t f, t;
    CUresult rc = meminfo(free ? &f : NULL, total ? &t : NULL);
    if (rc == CUDA_SUCCESS) {
        *free = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
        *total = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    }
    return rc;
}

/* Resolves ptr to the allocation containing it. Cached pool blocks are
 * freed memory as far as the program is concerned. */
static sim_ext_t *lookup(uint64_t ptr, int *host)
{
    sim_map_t *map;
    sim_ext_t *e = sim_dev_find_locked(ptr, &map);
    *host = 0;
    if (e)
        return e->kind == SK_POOL_CACHED ? NULL : e;
    if ((e = sim_vmm_find_locked(ptr)))
        return e;
    *host = 1;
    return sim_host_find_locked(ptr);
}

SIM_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    SIM_ENTER();
    if (sim_capture_forbids_locked())
        SIM_LEAVE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    int host;
    sim_ext_t *e = lookup(ptr, &host);
    if (!data || !e)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    int managed = e->kind == SK_MANAGED;
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = (CUcontext)e->ctx;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = host && !managed ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (!host)
            SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
        *(void **)data = (void *)(uintptr_t)ptr;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned int *)data = (unsigned int)managed;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = e->dev;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = e->start;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = e->req;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(unsigned int *)data = 1;
        break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(CUmemoryPool *)data = e->kind == SK_POOL_USED ? (CUmemoryPool)e->owner : NULL;
        break;
    default:
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    }
    SIM_LEAVE(CUDA_SUCCESS);
}
