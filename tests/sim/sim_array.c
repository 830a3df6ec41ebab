/* sim_array.c: CUDA arrays (textures and surfaces' memory).
 *
 * Contract:
 *  - cuArrayCreate_v2, cuArray3DCreate_v2 and cuMipmappedArrayCreate charge
 *    the current device with a contiguous block of the descriptor's bytes
 *    (include/vramtrace/array_bytes.h: the same formula the shim records),
 *    so free memory drops as on a real card. The handle is a small host
 *    object naming that block.
 *  - cuArrayDestroy / cuMipmappedArrayDestroy give the block back; a
 *    handle of the other kind, an unknown or a destroyed one is
 *    CUDA_ERROR_INVALID_HANDLE. An unknown format or a zero width is
 *    CUDA_ERROR_INVALID_VALUE.
 */
#include "sim.h"

#include <stdlib.h>

#include "vramtrace/array_bytes.h"

#define SIM_MAGIC_ARRAY 0x76746172u
#define SIM_MAGIC_MIPMAP 0x76746d70u

typedef struct sim_array {
    uint32_t magic;
    uint64_t addr;
} sim_array_t;

static CUresult array_new(uint32_t magic, uint64_t bytes, void **out)
{
    sim_ctx_t *ctx;
    CUresult rc = sim_cur_ctx_locked(&ctx);
    if (rc)
        return rc;
    if (!out || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes == UINT64_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim_array_t *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = sim_block_alloc_locked(ctx->dev, bytes, SK_DEVICE, ctx, NULL, &a->addr);
    if (rc) {
        free(a);
        return rc;
    }
    a->magic = magic;
    *out = a;
    return CUDA_SUCCESS;
}

/* Handles are checked by magic only: a test passes the ones it got. */
static CUresult array_destroy(void *h, uint32_t magic)
{
    sim_array_t *a = h;
    if (!a || a->magic != magic)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_map_t *map;
    sim_ext_t *e = sim_dev_find_locked(a->addr, &map);
    if (e && e->start == a->addr && e->kind == SK_DEVICE)
        sim_block_free_locked(map, e);
    a->magic = 0;
    free(a);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    SIM_ENTER();
    if (!d || !d->Width)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    uint64_t bytes = vt_array_bytes(d->Format, d->NumChannels, d->Width, d->Height, 1, 1, 0);
    SIM_LEAVE(array_new(SIM_MAGIC_ARRAY, bytes, (void **)pHandle));
}

SIM_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    SIM_ENTER();
    if (!d || !d->Width)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    uint64_t bytes = vt_array_bytes(d->Format, d->NumChannels, d->Width, d->Height, d->Depth, 1,
                                    (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0);
    SIM_LEAVE(array_new(SIM_MAGIC_ARRAY, bytes, (void **)pHandle));
}

SIM_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                           unsigned int numMipmapLevels)
{
    SIM_ENTER();
    if (!d || !d->Width || !numMipmapLevels)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    uint64_t bytes = vt_array_bytes(d->Format, d->NumChannels, d->Width, d->Height, d->Depth, numMipmapLevels,
                                    (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0);
    SIM_LEAVE(array_new(SIM_MAGIC_MIPMAP, bytes, (void **)pHandle));
}

SIM_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    SIM_ENTER();
    SIM_LEAVE(array_destroy(hArray, SIM_MAGIC_ARRAY));
}

SIM_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    SIM_ENTER();
    SIM_LEAVE(array_destroy(hMipmappedArray, SIM_MAGIC_MIPMAP));
}
