/* sim_ipc.c: memory shared between processes, the exporter's side and the
 * importer's: legacy IPC (cuIpcGetMemHandle, cuIpcOpenMemHandle) and pool
 * IPC (cuMemPoolExportToShareableHandle, cuMemPoolExportPointer and their
 * imports), as PyTorch's shared CUDA tensors, vLLM's all-reduce buffers
 * and RAPIDS' pools across processes use them.
 *
 * Contract:
 *  - An export describes a live allocation: its device, size, address and
 *    the exporting pid, in the 64 opaque bytes the API hands back
 *    (CUipcMemHandle, CUmemPoolPtrExportData). cuIpcGetMemHandle takes a
 *    cuMemAlloc block; cuMemPoolExportPointer a block in use from a pool
 *    created with a shareable handle type.
 *  - cuMemPoolExportToShareableHandle (POSIX_FILE_DESCRIPTOR only, a pool
 *    created with that handle type) returns a new memfd, close-on-exec;
 *    cuMemPoolImportFromShareableHandle reads it and returns an imported
 *    pool, which allocates nothing (sim_pool.c).
 *  - An import maps the exporter's memory at a new address of this
 *    process (from 0x300000000000, never reused) and charges nothing: the
 *    memory is the exporter's, already counted on the device. A pool
 *    pointer needs an imported pool of its device; an export made by this
 *    very process is refused (CUDA_ERROR_INVALID_VALUE here; a real driver
 *    refuses it too, with a code this simulator does not promise).
 *  - Opening an IPC handle already open in this process returns the same
 *    address and takes a reference (cuda.h); each cuIpcCloseMemHandle
 *    drops one, the last unmaps. A pool pointer's import is freed by
 *    cuMemFree or cuMemFreeAsync. The wrong release for the kind is
 *    CUDA_ERROR_INVALID_VALUE.
 *  - A context teardown unmaps the imports made in that context.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SIM_IMPORT_BASE 0x300000000000ull
#define SIM_IMPORT_END 0x400000000000ull
#define SIM_MAGIC_SHARE 0x76746970u
#define SIM_MAGIC_POOL_SHARE 0x76747070u

/* What the 64 opaque bytes of an export hold. */
typedef struct sim_share {
    uint32_t magic;
    int32_t dev;
    int64_t pid;
    uint64_t addr, size;
} sim_share_t;
_Static_assert(sizeof(sim_share_t) <= sizeof(CUipcMemHandle), "an export fits the IPC handle");
_Static_assert(sizeof(sim_share_t) <= sizeof(CUmemPoolPtrExportData), "an export fits the pool's data");

typedef struct sim_import {
    uint64_t addr, size;
    int64_t pid;
    uint64_t exporter_addr;
    int dev, ipc;
    unsigned refs;
    sim_ctx_t *ctx;
    struct sim_import *next;
} sim_import_t;

static CUresult share_of(const void *bytes, sim_share_t *x)
{
    memcpy(x, bytes, sizeof *x);
    if (x->magic != SIM_MAGIC_SHARE || x->dev < 0 || x->dev >= sim.ndev || x->size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return x->pid == (int64_t)getpid() ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult export_block(void *out, size_t out_size, CUdeviceptr ptr, int kind)
{
    sim_map_t *map;
    sim_ext_t *e = sim_dev_find_locked(ptr, &map);
    if (!out || !e || e->start != ptr || e->kind != kind)
        return CUDA_ERROR_INVALID_VALUE;
    if (kind == SK_POOL_USED && ((sim_pool_t *)e->owner)->handle_types == CU_MEM_HANDLE_TYPE_NONE)
        return CUDA_ERROR_INVALID_VALUE;
    sim_share_t x = {.magic = SIM_MAGIC_SHARE, .dev = e->dev, .pid = getpid(), .addr = ptr, .size = e->req};
    memset(out, 0, out_size);
    memcpy(out, &x, sizeof x);
    return CUDA_SUCCESS;
}

static CUresult import_locked(CUdeviceptr *out, const sim_share_t *x, int ipc)
{
    sim_ctx_t *ctx;
    CUresult rc = sim_cur_ctx_locked(&ctx);
    if (rc)
        return rc;
    if (ipc)
        for (sim_import_t *m = sim.imports; m; m = m->next)
            if (m->ipc && m->pid == x->pid && m->exporter_addr == x->addr && m->ctx == ctx) {
                m->refs++;
                *out = m->addr;
                return CUDA_SUCCESS;
            }
    if (!sim.import_next)
        sim.import_next = SIM_IMPORT_BASE;
    uint64_t span = sim_round_up(x->size, 2 * SIM_MiB);
    if (span < x->size || span > SIM_IMPORT_END - sim.import_next)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim_import_t *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *m = (sim_import_t){.addr = sim.import_next, .size = x->size, .pid = x->pid, .exporter_addr = x->addr,
                        .dev = x->dev, .ipc = ipc, .refs = 1, .ctx = ctx, .next = sim.imports};
    sim.import_next += span;
    sim.imports = m;
    *out = m->addr;
    return CUDA_SUCCESS;
}

CUresult sim_export_fd(const char *name, const void *what, size_t size, void *fd_out)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (pwrite(fd, what, size, 0) != (ssize_t)size) {
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *(int *)fd_out = fd;
    return CUDA_SUCCESS;
}

int sim_import_free_locked(uint64_t addr, int ipc)
{
    for (sim_import_t **at = &sim.imports; *at; at = &(*at)->next) {
        sim_import_t *m = *at;
        if (m->addr != addr || m->ipc != ipc)
            continue;
        if (--m->refs == 0) {
            *at = m->next;
            free(m);
        }
        return 1;
    }
    return 0;
}

void sim_imports_teardown_locked(sim_ctx_t *ctx)
{
    for (sim_import_t **at = &sim.imports; *at;) {
        sim_import_t *m = *at;
        if (m->ctx == ctx) {
            *at = m->next;
            free(m);
        } else {
            at = &m->next;
        }
    }
}

SIM_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    SIM_ENTER();
    SIM_LEAVE(export_block(pHandle, sizeof *pHandle, dptr, SK_DEVICE));
}

static CUresult ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
    SIM_ENTER();
    sim_share_t x;
    if (!pdptr || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    CUresult rc = share_of(handle.reserved, &x);
    SIM_LEAVE(rc ? rc : import_locked(pdptr, &x, 1));
}

/* CUDA 4.1's and 11.0's ABI: the same call (cudaTypedefs.h). */
SIM_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    return ipc_open(pdptr, handle, Flags);
}

SIM_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    return ipc_open(pdptr, handle, Flags);
}

SIM_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    SIM_ENTER();
    SIM_LEAVE(sim_import_free_locked(dptr, 1) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

typedef struct sim_pool_share {
    uint32_t magic;
    int32_t dev;
    int64_t pid;
} sim_pool_share_t;

SIM_EXPORT CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                                     CUmemAllocationHandleType handleType, unsigned long long flags)
{
    SIM_ENTER();
    sim_pool_t *p = sim_pool_lookup_locked(pool);
    if (!handle_out || !p || p->imported || p->dev < 0 || flags ||
        handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !(p->handle_types & handleType))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_pool_share_t x = {.magic = SIM_MAGIC_POOL_SHARE, .dev = p->dev, .pid = getpid()};
    SIM_LEAVE(sim_export_fd("vtsim-pool-export", &x, sizeof x, handle_out));
}

SIM_EXPORT CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                                       CUmemAllocationHandleType handleType, unsigned long long flags)
{
    SIM_ENTER();
    sim_pool_share_t x;
    if (!pool_out || flags || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        pread((int)(intptr_t)handle, &x, sizeof x, 0) != (ssize_t)sizeof x || x.magic != SIM_MAGIC_POOL_SHARE ||
        x.dev < 0 || x.dev >= sim.ndev || x.pid == (int64_t)getpid())
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_pool_t *p = calloc(1, sizeof *p);
    if (!p)
        SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    *p = (sim_pool_t){.magic = SIM_MAGIC_POOL, .dev = x.dev, .imported = 1,
                      .handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, .next = sim.pools};
    sim.pools = p;
    *pool_out = (CUmemoryPool)p;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr)
{
    SIM_ENTER();
    SIM_LEAVE(export_block(shareData_out, sizeof *shareData_out, ptr, SK_POOL_USED));
}

SIM_EXPORT CUresult cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool, CUmemPoolPtrExportData *shareData)
{
    SIM_ENTER();
    sim_pool_t *p = sim_pool_lookup_locked(pool);
    sim_share_t x;
    if (!ptr_out || !shareData || !p || !p->imported)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    CUresult rc = share_of(shareData->reserved, &x);
    if (!rc && x.dev != p->dev)
        rc = CUDA_ERROR_INVALID_VALUE;
    SIM_LEAVE(rc ? rc : import_locked(ptr_out, &x, 0));
}
