/* sim_ctx.c: contexts, the per-thread context stack, streams, synchronize.
 *
 * Contract:
 *  - The first live context on a device (primary or created) charges the
 *    device's context reserve; it is uncharged when the last one goes.
 *    Creating that first context fails with CUDA_ERROR_OUT_OF_MEMORY when
 *    free memory (after other processes and VTSIM_EXTERNAL) is below the
 *    reserve, as a real driver does on a full GPU.
 *  - Destroying a context (cuCtxDestroy, primary release to 0, primary
 *    reset) frees every device allocation it owns; a primary teardown also
 *    drops the cached memory of the device's pools.
 *  - Context and stream structs are never freed, only marked dead, so a
 *    stale handle is detected (CUDA_ERROR_INVALID_CONTEXT/HANDLE) instead of
 *    read after free.
 *  - Synchronize (stream or context) is when pools give memory above their
 *    release threshold back to the device.
 */
#include "sim.h"

#include <stdlib.h>

#define STACK_MAX 64
static __thread sim_ctx_t *stack[STACK_MAX];
static __thread int depth;

static sim_ctx_t *ctx_lookup(CUcontext c)
{
    sim_ctx_t *p = (sim_ctx_t *)c;
    for (int d = 0; d < sim.ndev; d++)
        if (p == &sim.dev[d].primary)
            return p;
    for (sim_ctx_t *x = sim.ctxs; x; x = x->next)
        if (x == p)
            return p;
    return NULL;
}

CUresult sim_cur_ctx_locked(sim_ctx_t **ctx)
{
    if (depth == 0 || !stack[depth - 1]->alive)
        return CUDA_ERROR_INVALID_CONTEXT;
    *ctx = stack[depth - 1];
    return CUDA_SUCCESS;
}

CUresult sim_ctx_attach_locked(int d)
{
    sim_dev_t *dv = &sim.dev[d];
    if (dv->nctx == 0 && sim_free_locked(d) < dv->reserve)
        return CUDA_ERROR_OUT_OF_MEMORY;
    dv->nctx++;
    sim_charge_locked(d, 0);
    return CUDA_SUCCESS;
}

void sim_ctx_detach_locked(int d)
{
    sim.dev[d].nctx--;
    sim_charge_locked(d, 0);
}

void sim_ctx_teardown_locked(sim_ctx_t *ctx)
{
    sim_dev_t *dv = &sim.dev[ctx->dev];
    sim_map_t *maps[3] = {&dv->mem, &dv->sysmem, &dv->legacy};
    for (int i = 0; i < 3; i++) {
        for (size_t j = maps[i]->n; j-- > 0;) {
            sim_ext_t *e = &maps[i]->v[j];
            if (e->ctx != ctx)
                continue;
            if (e->kind == SK_POOL_USED)
                sim_pool_block_freed_locked(maps[i], e);
            else if (e->kind != SK_POOL_CACHED)
                sim_block_free_locked(maps[i], e);
        }
    }
    sim_imports_teardown_locked(ctx);
    if (ctx->primary)
        for (sim_pool_t *p = sim.pools; p; p = p->next)
            if (p->dev == ctx->dev)
                sim_pool_release_locked(p, 0);
}

static void stack_remove(sim_ctx_t *c)
{
    int j = 0;
    for (int i = 0; i < depth; i++)
        if (stack[i] != c)
            stack[j++] = stack[i];
    depth = j;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    SIM_ENTER();
    if (!pctx)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (dev < 0 || dev >= sim.ndev)
        SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);
    sim_ctx_t *p = &sim.dev[dev].primary;
    if (p->refs == 0) {
        CUresult rc = sim_ctx_attach_locked(dev);
        if (rc)
            SIM_LEAVE(rc);
        p->alive = 1;
    }
    p->refs++;
    *pctx = (CUcontext)p;
    SIM_LEAVE(CUDA_SUCCESS);
}

static void primary_down_locked(sim_ctx_t *p)
{
    sim_ctx_teardown_locked(p);
    p->alive = 0;
    p->refs = 0;
    sim_ctx_detach_locked(p->dev);
}

static CUresult primary_release(CUdevice dev)
{
    SIM_ENTER();
    if (dev < 0 || dev >= sim.ndev)
        SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);
    sim_ctx_t *p = &sim.dev[dev].primary;
    if (p->refs == 0)
        SIM_LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    if (--p->refs == 0)
        primary_down_locked(p);
    SIM_LEAVE(CUDA_SUCCESS);
}

static CUresult primary_reset(CUdevice dev)
{
    SIM_ENTER();
    if (dev < 0 || dev >= sim.ndev)
        SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);
    sim_ctx_t *p = &sim.dev[dev].primary;
    if (p->refs > 0)
        primary_down_locked(p);
    SIM_LEAVE(CUDA_SUCCESS);
}

/* CUDA 7.0's and 11.0's ABI of each: the same calls (cudaTypedefs.h). */
SIM_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return primary_release(dev); }
SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return primary_release(dev); }
SIM_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return primary_reset(dev); }
SIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) { return primary_reset(dev); }

SIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    SIM_ENTER();
    if (dev < 0 || dev >= sim.ndev)
        SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);
    if (!flags || !active)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    *flags = 0;
    *active = sim.dev[dev].primary.refs > 0;
    SIM_LEAVE(CUDA_SUCCESS);
}

static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
    SIM_ENTER();
    if (!pctx)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (dev < 0 || dev >= sim.ndev)
        SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);
    if (depth == STACK_MAX)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_ctx_t *c = calloc(1, sizeof *c);
    if (!c)
        SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    CUresult rc = sim_ctx_attach_locked(dev);
    if (rc) {
        free(c);
        SIM_LEAVE(rc);
    }
    *c = (sim_ctx_t){.magic = SIM_MAGIC_CTX, .dev = dev, .alive = 1, .next = sim.ctxs};
    sim.ctxs = c;
    stack[depth++] = c;
    *pctx = (CUcontext)c;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    (void)flags;
    return ctx_create(pctx, dev);
}

SIM_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                   unsigned int flags, CUdevice dev)
{
    (void)paramsArray, (void)numParams, (void)flags;
    return ctx_create(pctx, dev);
}

SIM_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                   unsigned int flags, CUdevice dev)
{
    (void)ctxCreateParams, (void)flags;
    return ctx_create(pctx, dev);
}

SIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    SIM_ENTER();
    sim_ctx_t *c = ctx_lookup(ctx);
    if (!c || c->primary || !c->alive)
        SIM_LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    sim_ctx_teardown_locked(c);
    c->alive = 0;
    sim_ctx_detach_locked(c->dev);
    stack_remove(c);
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    SIM_ENTER();
    if (!ctx) {
        if (depth > 0)
            depth--;
        SIM_LEAVE(CUDA_SUCCESS);
    }
    sim_ctx_t *c = ctx_lookup(ctx);
    if (!c || !c->alive)
        SIM_LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    if (depth == 0)
        depth = 1;
    stack[depth - 1] = c;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    SIM_ENTER();
    if (!pctx)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    *pctx = depth ? (CUcontext)stack[depth - 1] : NULL;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    SIM_ENTER();
    sim_ctx_t *c = ctx_lookup(ctx);
    if (!c || !c->alive)
        SIM_LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    if (depth == STACK_MAX)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    stack[depth++] = c;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    SIM_ENTER();
    if (depth == 0)
        SIM_LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    sim_ctx_t *c = stack[--depth];
    if (pctx)
        *pctx = (CUcontext)c;
    SIM_LEAVE(CUDA_SUCCESS);
}

static CUresult ctx_or_current(CUcontext ctx, sim_ctx_t **out)
{
    if (!ctx)
        return sim_cur_ctx_locked(out);
    sim_ctx_t *c = ctx_lookup(ctx);
    if (!c || !c->alive)
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = c;
    return CUDA_SUCCESS;
}

static CUresult get_device(CUdevice *device, CUcontext ctx)
{
    SIM_ENTER();
    sim_ctx_t *c;
    CUresult rc = ctx_or_current(ctx, &c);
    if (rc)
        SIM_LEAVE(rc);
    if (!device)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    *device = c->dev;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx) { return get_device(device, ctx); }
SIM_EXPORT CUresult cuCtxGetDevice(CUdevice *device) { return get_device(device, NULL); }

static CUresult ctx_sync(CUcontext ctx)
{
    SIM_ENTER();
    sim_ctx_t *c;
    CUresult rc = ctx_or_current(ctx, &c);
    if (rc)
        SIM_LEAVE(rc);
    sim_pools_sync_locked(c->dev);
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) { return ctx_sync(ctx); }
SIM_EXPORT CUresult cuCtxSynchronize(void) { return ctx_sync(NULL); }

sim_stream_t *sim_stream_locked(CUstream h)
{
    for (sim_stream_t *s = sim.streams; s; s = s->next)
        if (s == (sim_stream_t *)h)
            return s;
    return NULL;
}

CUresult sim_stream_dev_locked(CUstream h, int *dev)
{
    sim_ctx_t *c;
    CUresult rc = sim_cur_ctx_locked(&c);
    if (rc)
        return rc;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        *dev = c->dev;
        return CUDA_SUCCESS;
    }
    sim_stream_t *s = sim_stream_locked(h);
    if (!s || !s->alive || !s->ctx->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    *dev = s->ctx->dev;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    SIM_ENTER();
    sim_ctx_t *c;
    CUresult rc = sim_cur_ctx_locked(&c);
    if (rc)
        SIM_LEAVE(rc);
    if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_stream_t *s = calloc(1, sizeof *s);
    if (!s)
        SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    *s = (sim_stream_t){.magic = SIM_MAGIC_STREAM, .alive = 1, .ctx = c, .next = sim.streams};
    sim.streams = s;
    *phStream = (CUstream)s;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
    SIM_ENTER();
    sim_stream_t *s = sim_stream_locked(hStream);
    if (!s || !s->alive)
        SIM_LEAVE(CUDA_ERROR_INVALID_HANDLE);
    s->alive = 0;
    SIM_LEAVE(CUDA_SUCCESS);
}

static CUresult stream_sync(CUstream hStream)
{
    SIM_ENTER();
    int dev;
    CUresult rc = sim_stream_dev_locked(hStream, &dev);
    if (rc)
        SIM_LEAVE(rc);
    sim_pools_sync_locked(dev);
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuStreamSynchronize(CUstream hStream) { return stream_sync(hStream); }
SIM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream) { return stream_sync(hStream); }
