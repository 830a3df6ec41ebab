/* sim_host.c: pinned, managed and registered host memory.
 *
 * Contract:
 *  - Pinned (cuMemAllocHost_v2, cuMemHostAlloc) and managed memory are real
 *    anonymous mappings with MAP_NORESERVE: programs write into them, and a
 *    20 GiB buffer costs nothing until touched.
 *  - Neither is charged to a device: managed memory oversubscribes the GPU
 *    (it migrates on demand), bounded only by VTSIM_HOST_LIMIT (default
 *    512 GiB) over pinned + managed bytes, page-rounded.
 *  - Host pointers are device pointers (unified addressing), so
 *    cuMemHostGetDevicePointer_v2 returns the host address itself.
 *  - Registered ranges must not overlap a registered or pinned range
 *    (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED).
 */
#include "sim.h"

#include <sys/mman.h>
#include <unistd.h>

static CUresult host_alloc(void **pp, size_t bytes, int kind)
{
    sim_ctx_t *ctx;
    CUresult rc = sim_cur_ctx_locked(&ctx);
    if (rc)
        return rc;
    if (!pp || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t size = sim_round_up(bytes, (uint64_t)sysconf(_SC_PAGESIZE));
    if (size < bytes || size > sim.host_limit - sim.host_bytes || sim.host_bytes > sim.host_limit)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim_ext_t e = {.start = (uintptr_t)p, .size = size, .req = bytes, .kind = kind, .dev = ctx->dev, .ctx = ctx};
    if (!sim_map_insert(&sim.host, &e)) {
        munmap(p, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    sim.host_bytes += size;
    *pp = p;
    return CUDA_SUCCESS;
}

static CUresult host_free(uint64_t addr, int kind)
{
    sim_ext_t *e = sim_map_find(&sim.host, addr);
    if (!e || e->start != addr || e->kind != kind)
        return CUDA_ERROR_INVALID_VALUE;
    munmap((void *)(uintptr_t)e->start, e->size);
    sim.host_bytes -= e->size;
    sim_map_remove(&sim.host, e);
    return CUDA_SUCCESS;
}

sim_ext_t *sim_host_find_locked(uint64_t addr)
{
    return sim_map_find(&sim.host, addr);
}

CUresult sim_managed_free_locked(uint64_t addr)
{
    return host_free(addr, SK_MANAGED);
}

SIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    SIM_ENTER();
    if (!dptr || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    void *p;
    CUresult rc = host_alloc(&p, bytesize, SK_MANAGED);
    if (rc == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)(uintptr_t)p;
    SIM_LEAVE(rc);
}

SIM_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    SIM_ENTER();
    SIM_LEAVE(host_alloc(pp, bytesize, SK_PINNED));
}

SIM_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    SIM_ENTER();
    if (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    SIM_LEAVE(host_alloc(pp, bytesize, SK_PINNED));
}

SIM_EXPORT CUresult cuMemFreeHost(void *p)
{
    SIM_ENTER();
    SIM_LEAVE(host_free((uintptr_t)p, SK_PINNED));
}

SIM_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    SIM_ENTER();
    sim_ctx_t *ctx;
    CUresult rc = sim_cur_ctx_locked(&ctx);
    if (rc)
        SIM_LEAVE(rc);
    if (!p || bytesize == 0 ||
        (Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                             CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_ext_t e = {.start = (uintptr_t)p, .size = bytesize, .req = bytesize, .kind = SK_REGISTERED,
                   .dev = ctx->dev, .ctx = ctx};
    if (sim_map_overlaps(&sim.host, e.start, e.size))
        SIM_LEAVE(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    if (!sim_map_insert(&sim.host, &e))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemHostUnregister(void *p)
{
    SIM_ENTER();
    sim_ext_t *e = sim_map_find(&sim.host, (uintptr_t)p);
    if (!e || e->start != (uintptr_t)p || e->kind != SK_REGISTERED)
        SIM_LEAVE(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    sim_map_remove(&sim.host, e);
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    SIM_ENTER();
    sim_ext_t *e = sim_map_find(&sim.host, (uintptr_t)p);
    if (!pdptr || Flags != 0 || !e || e->kind == SK_MANAGED)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    SIM_LEAVE(CUDA_SUCCESS);
}
