/* sim_vmm.c: the virtual memory management API (cuMemCreate and friends).
 *
 * Contract:
 *  - Sizes, offsets and reservations are multiples of the granularity
 *    (VTSIM_GRANULARITY), else CUDA_ERROR_INVALID_VALUE.
 *  - cuMemCreate charges the device by count only (it needs free bytes, no
 *    contiguous hole); the charge lasts until the handle is released AND its
 *    last mapping is unmapped, in either order.
 *  - cuMemAddressReserve hands out VA from one global range starting at
 *    0x200000000000, first-fit, honouring a free aligned `addr` hint. VA is
 *    never charged. Freeing a range that still has mappings fails.
 *  - cuMemUnmap must cover whole mappings; it fails on a partial overlap.
 *  - A handle located in host memory (CU_MEM_LOCATION_TYPE_HOST,
 *    HOST_NUMA, HOST_NUMA_CURRENT) charges no device: its memory is the
 *    host's.
 *  - cuMemRetainAllocationHandle(addr) returns the handle mapped at addr
 *    (the same value cuMemCreate gave) and takes a reference: each
 *    reference needs its cuMemRelease before the memory can go.
 *  - cuMemExportToShareableHandle (POSIX_FILE_DESCRIPTOR only, and only for
 *    a handle created with it in requestedHandleTypes) returns a new
 *    memfd, close-on-exec, that describes the allocation: the descriptor
 *    another process gets over a socket or across exec.
 *  - cuMemImportFromShareableHandle reads such a descriptor and returns a
 *    new handle of the same size, device and properties. It charges
 *    nothing: the exporter's handle holds the memory (a real driver keeps
 *    it while any handle is open; this one frees it at the exporter's
 *    release). A descriptor that is not an export is INVALID_VALUE.
 *  - cuMulticastCreate returns a handle that charges nothing, mappable once
 *    its numDevices devices are added (cuMulticastAddDevice). Binding a
 *    handle to it (cuMulticastBindMem, at most 4) keeps that handle's
 *    memory as a mapping does, until cuMulticastUnbind of its range.
 */
#include "sim.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static sim_handle_t *handle_lookup(CUmemGenericAllocationHandle h)
{
    for (sim_handle_t *x = sim.handles; x; x = x->next)
        if ((CUmemGenericAllocationHandle)(uintptr_t)x == h)
            return x;
    return NULL;
}

static void handle_maybe_destroy(sim_handle_t *h)
{
    if (!h->released || h->nmaps)
        return;
    if (h->dev >= 0 && !h->holds_nothing)
        sim_charge_locked(h->dev, -(int64_t)h->size);
    /* A multicast object's end unbinds what is bound to it. */
    for (unsigned i = 0; i < sizeof h->mc_bound / sizeof h->mc_bound[0]; i++) {
        sim_handle_t *mem = h->mc_bound[i].mem;
        if (mem) {
            h->mc_bound[i].mem = NULL;
            mem->nmaps--;
            handle_maybe_destroy(mem);
        }
    }
    for (sim_handle_t **pp = &sim.handles; *pp; pp = &(*pp)->next)
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    free(h);
}

#define SIM_HOST_LOCATED (-2)

/* The device of a DEVICE location, SIM_HOST_LOCATED for a host one, -1 when
 * invalid. */
static int prop_dev(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return -1;
    if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST || prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
        prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)
        return SIM_HOST_LOCATED;
    if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
        prop->location.id >= sim.ndev)
        return -1;
    return prop->location.id;
}

SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                                  CUmemAllocationGranularity_flags option)
{
    SIM_ENTER();
    if (!granularity || prop_dev(prop) == -1 ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    *granularity = sim.gran;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags)
{
    SIM_ENTER();
    int d = prop_dev(prop);
    if (!handle || d == -1 || flags != 0 || size == 0 || size % sim.gran)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (d >= 0 && size > sim_free_locked(d))
        SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    sim_handle_t *h = calloc(1, sizeof *h);
    if (!h)
        SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    if (d == SIM_HOST_LOCATED)
        d = -1;
    *h = (sim_handle_t){.magic = SIM_MAGIC_HANDLE, .dev = d, .refs = 1, .size = size, .prop = *prop,
                        .next = sim.handles};
    sim.handles = h;
    if (d >= 0)
        sim_charge_locked(d, (int64_t)size);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    SIM_ENTER();
    sim_handle_t *h = handle_lookup(handle);
    if (!h || h->released)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (--h->refs == 0) {
        h->released = 1;
        handle_maybe_destroy(h);
    }
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    SIM_ENTER();
    sim_ext_t *m = handle && addr ? sim_vmm_find_locked((uint64_t)(uintptr_t)addr) : NULL;
    if (!m)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_handle_t *h = m->owner;
    h->refs++;
    h->released = 0;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    SIM_LEAVE(CUDA_SUCCESS);
}

/* What an exported descriptor holds. */
typedef struct {
    uint32_t magic;
    int dev;
    uint64_t size;
    CUmemAllocationProp prop;
} sim_export_t;

#define SIM_MAGIC_EXPORT 0x76746578u

SIM_EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                                 CUmemAllocationHandleType handleType, unsigned long long flags)
{
    SIM_ENTER();
    sim_handle_t *h = handle_lookup(handle);
    if (!shareableHandle || !h || h->released || flags || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        !(h->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_export_t x = {.magic = SIM_MAGIC_EXPORT, .dev = h->dev, .size = h->size, .prop = h->prop};
    SIM_LEAVE(sim_export_fd("vtsim-export", &x, sizeof x, shareableHandle));
}

SIM_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                   CUmemAllocationHandleType shHandleType)
{
    SIM_ENTER();
    sim_export_t x;
    if (!handle || shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        pread((int)(intptr_t)osHandle, &x, sizeof x, 0) != (ssize_t)sizeof x || x.magic != SIM_MAGIC_EXPORT ||
        x.dev >= sim.ndev || x.size == 0 || x.size % sim.gran)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_handle_t *h = calloc(1, sizeof *h);
    if (!h)
        SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    *h = (sim_handle_t){.magic = SIM_MAGIC_HANDLE, .dev = x.dev, .refs = 1, .holds_nothing = 1, .size = x.size,
                        .prop = x.prop, .next = sim.handles};
    sim.handles = h;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMulticastGetGranularity(size_t *granularity, const CUmulticastObjectProp *prop,
                                              CUmulticastGranularity_flags option)
{
    SIM_ENTER();
    if (!granularity || !prop || prop->numDevices == 0 || prop->numDevices > (unsigned)sim.ndev ||
        (option != CU_MULTICAST_GRANULARITY_MINIMUM && option != CU_MULTICAST_GRANULARITY_RECOMMENDED))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    *granularity = sim.gran;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMulticastCreate(CUmemGenericAllocationHandle *mcHandle, const CUmulticastObjectProp *prop)
{
    SIM_ENTER();
    if (!mcHandle || !prop || prop->numDevices == 0 || prop->numDevices > (unsigned)sim.ndev || prop->size == 0 ||
        prop->size % sim.gran)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_handle_t *h = calloc(1, sizeof *h);
    if (!h)
        SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    *h = (sim_handle_t){.magic = SIM_MAGIC_HANDLE, .dev = -1, .refs = 1, .holds_nothing = 1, .size = prop->size,
                        .mc_devices = prop->numDevices, .next = sim.handles};
    h->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    h->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    sim.handles = h;
    *mcHandle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    SIM_LEAVE(CUDA_SUCCESS);
}

/* The multicast object a handle names, or NULL. */
static sim_handle_t *multicast_lookup(CUmemGenericAllocationHandle handle)
{
    sim_handle_t *h = handle_lookup(handle);
    return h && h->mc_devices && !h->released ? h : NULL;
}

SIM_EXPORT CUresult cuMulticastAddDevice(CUmemGenericAllocationHandle mcHandle, CUdevice dev)
{
    SIM_ENTER();
    sim_handle_t *mc = multicast_lookup(mcHandle);
    if (!mc || mc->mc_added == mc->mc_devices)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (dev < 0 || dev >= sim.ndev)
        SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);
    if (mc->mc_added++ == 0)
        mc->dev = mc->prop.location.id = dev;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
                                       CUmemGenericAllocationHandle memHandle, size_t memOffset, size_t size,
                                       unsigned long long flags)
{
    SIM_ENTER();
    sim_handle_t *mc = multicast_lookup(mcHandle), *mem = handle_lookup(memHandle);
    if (!mc || !mem || mem->released || mem->mc_devices || mem->holds_nothing || mc->mc_added != mc->mc_devices ||
        flags || size == 0 || size % sim.gran || mcOffset % sim.gran || memOffset % sim.gran ||
        mcOffset > mc->size || size > mc->size - mcOffset || memOffset > mem->size || size > mem->size - memOffset)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    for (unsigned i = 0; i < sizeof mc->mc_bound / sizeof mc->mc_bound[0]; i++)
        if (!mc->mc_bound[i].mem) {
            mc->mc_bound[i].mem = mem;
            mc->mc_bound[i].offset = mcOffset;
            mc->mc_bound[i].size = size;
            mem->nmaps++;
            SIM_LEAVE(CUDA_SUCCESS);
        }
    SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
}

SIM_EXPORT CUresult cuMulticastUnbind(CUmemGenericAllocationHandle mcHandle, CUdevice dev, size_t mcOffset,
                                      size_t size)
{
    SIM_ENTER();
    sim_handle_t *mc = multicast_lookup(mcHandle);
    if (!mc || dev < 0 || dev >= sim.ndev)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    for (unsigned i = 0; i < sizeof mc->mc_bound / sizeof mc->mc_bound[0]; i++) {
        sim_handle_t *mem = mc->mc_bound[i].mem;
        if (mem && mc->mc_bound[i].offset >= mcOffset && mc->mc_bound[i].offset - mcOffset < size) {
            mc->mc_bound[i].mem = NULL;
            mem->nmaps--;
            handle_maybe_destroy(mem);
        }
    }
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                           CUmemGenericAllocationHandle handle)
{
    SIM_ENTER();
    sim_handle_t *h = handle_lookup(handle);
    if (!prop || !h || h->released)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    *prop = h->prop;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                        unsigned long long flags)
{
    SIM_ENTER();
    (void)flags;
    if (!ptr || size == 0 || size % sim.gran || (alignment & (alignment - 1)))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (alignment < sim.gran)
        alignment = sim.gran;
    sim_ext_t e = {.start = addr, .size = size, .req = size, .kind = SK_VA, .dev = -1};
    if (!addr || addr % alignment || addr < sim.va.base || addr + size > sim.va.end ||
        sim_map_overlaps(&sim.va, addr, size)) {
        if (sim_map_fit(&sim.va, size, alignment, &e.start))
            SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    }
    if (!sim_map_insert(&sim.va, &e))
        SIM_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
    *ptr = e.start;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    SIM_ENTER();
    sim_ext_t *e = sim_map_find(&sim.va, ptr);
    if (!e || e->start != ptr || e->size != size || sim_map_overlaps(&sim.maps, ptr, size))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_map_remove(&sim.va, e);
    SIM_LEAVE(CUDA_SUCCESS);
}

/* 1 if [ptr, ptr+size) lies inside one reserved range. */
static int reserved(CUdeviceptr ptr, size_t size)
{
    sim_ext_t *r = sim_map_find(&sim.va, ptr);
    return r && size && size <= r->size - (ptr - r->start);
}

SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                             unsigned long long flags)
{
    SIM_ENTER();
    sim_handle_t *h = handle_lookup(handle);
    if (!h || h->released)
        SIM_LEAVE(CUDA_ERROR_INVALID_HANDLE);
    if (flags || h->mc_added != h->mc_devices || size % sim.gran || offset % sim.gran || ptr % sim.gran || offset > h->size ||
        size > h->size - offset || !reserved(ptr, size))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    sim_ext_t e = {.start = ptr, .size = size, .req = size, .kind = SK_MAPPING, .dev = h->dev, .owner = h};
    if (!sim_map_insert(&sim.maps, &e))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    h->nmaps++;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    SIM_ENTER();
    if (!reserved(ptr, size))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    uint64_t end = ptr + size;
    for (size_t i = 0; i < sim.maps.n; i++) {
        sim_ext_t *m = &sim.maps.v[i];
        if (m->start < end && m->start + m->size > ptr && (m->start < ptr || m->start + m->size > end))
            SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    }
    for (size_t i = sim.maps.n; i-- > 0;) {
        sim_ext_t *m = &sim.maps.v[i];
        if (m->start >= ptr && m->start + m->size <= end) {
            sim_handle_t *h = m->owner;
            sim_map_remove(&sim.maps, m);
            h->nmaps--;
            handle_maybe_destroy(h);
        }
    }
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    SIM_ENTER();
    if (!desc || count == 0 || !reserved(ptr, size))
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < count; i++)
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
            desc[i].location.id >= sim.ndev)
            SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);
    /* Every byte of the range must be mapped. */
    for (uint64_t at = ptr; at < ptr + size;) {
        sim_ext_t *m = sim_map_find(&sim.maps, at);
        if (!m)
            SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
        at = m->start + m->size;
    }
    SIM_LEAVE(CUDA_SUCCESS);
}

sim_ext_t *sim_vmm_find_locked(uint64_t addr)
{
    if (addr < sim.maps.base || addr >= sim.maps.end)
        return NULL;
    return sim_map_find(&sim.maps, addr);
}
