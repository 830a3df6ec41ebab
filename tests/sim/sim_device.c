/* sim_device.c: driver initialisation, device queries and error strings.
 *
 * Contract:
 *  - cuInit reads the VTSIM_* environment once; later calls return the
 *    first result. With no devices (VTSIM_DEVICES=none) it returns
 *    CUDA_ERROR_NO_DEVICE and the driver stays uninitialised.
 *  - cuDriverGetVersion, cuGetErrorString and cuGetErrorName work before
 *    cuInit, as in the real driver.
 *  - UUID of device d: the bytes "vtsim", then zeros, then d in byte 15,
 *    i.e. GPU-76747369-6d00-0000-0000-0000000000dd.
 *  - cuDeviceGetAttribute knows a handful of attributes; any other valid
 *    attribute reads 0 with CUDA_SUCCESS.
 */
#include "sim.h"

#include <stdio.h>
#include <string.h>

static CUresult init_locked(void)
{
    sim_config_t c;
    sim_config_load(&c);
    if (c.ndev == 0)
        return CUDA_ERROR_NO_DEVICE;
    sim.ndev = c.ndev;
    sim.gran = c.gran;
    sim.host_limit = c.host_limit;
    sim.fallback = c.fallback;
    sim.fault_after = c.fault_after;
    sim_map_init(&sim.va, SIM_VA_BASE, SIM_VA_BASE + SIM_VA_SIZE);
    sim_map_init(&sim.maps, SIM_VA_BASE, SIM_VA_BASE + SIM_VA_SIZE);
    sim_map_init(&sim.host, 0, UINT64_MAX);
    for (int d = 0; d < c.ndev; d++) {
        sim_dev_t *dv = &sim.dev[d];
        snprintf(dv->name, sizeof dv->name, "%s", c.names[d]);
        dv->capacity = c.cap[d];
        dv->reserve = c.reserve[d];
        dv->external = c.external[d];
        sim_map_init(&dv->mem, SIM_DEV_BASE(d), SIM_DEV_BASE(d) + c.cap[d]);
        sim_map_init(&dv->sysmem, SIM_DEV_BASE(d) + SIM_SYSMEM_OFF,
                     SIM_DEV_BASE(d) + SIM_SYSMEM_OFF + SIM_SYSMEM_SIZE);
        if (d < SIM_LEGACY_MAX_DEV)
            sim_map_init(&dv->legacy, SIM_LEGACY_BASE(d), SIM_LEGACY_BASE(d) + SIM_LEGACY_SIZE);
        else
            sim_map_init(&dv->legacy, 0, 0);
        dv->primary = (sim_ctx_t){.magic = SIM_MAGIC_CTX, .dev = d, .primary = 1};
        CUresult rc = sim_pools_init_locked(d);
        if (rc)
            return rc;
    }
    if (c.shared[0])
        sim_shared_open(c.shared);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    static int tried;
    if (!tried) {
        tried = 1;
        sim.init_rc = init_locked();
        sim.initialized = sim.init_rc == CUDA_SUCCESS;
    }
    SIM_LEAVE(sim.init_rc);
}

SIM_EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = SIM_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetCount(int *count)
{
    SIM_ENTER();
    if (!count)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    *count = sim.ndev;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    SIM_ENTER();
    if (!device)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (ordinal < 0 || ordinal >= sim.ndev)
        SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);
    *device = ordinal;
    SIM_LEAVE(CUDA_SUCCESS);
}

#define DEV_CHECK(dev)                              \
    do {                                            \
        if ((dev) < 0 || (dev) >= sim.ndev)         \
            SIM_LEAVE(CUDA_ERROR_INVALID_DEVICE);   \
    } while (0)

SIM_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    SIM_ENTER();
    DEV_CHECK(dev);
    if (!name || len <= 0)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    snprintf(name, (size_t)len, "%s", sim.dev[dev].name);
    SIM_LEAVE(CUDA_SUCCESS);
}

static CUresult get_uuid(CUuuid *uuid, CUdevice dev)
{
    SIM_ENTER();
    DEV_CHECK(dev);
    if (!uuid)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    memset(uuid->bytes, 0, sizeof uuid->bytes);
    memcpy(uuid->bytes, "vtsim", 5);
    uuid->bytes[15] = (char)dev;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return get_uuid(uuid, dev); }
SIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) { return get_uuid(uuid, dev); }

SIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    SIM_ENTER();
    DEV_CHECK(dev);
    if (!bytes)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    *bytes = sim.dev[dev].capacity;
    SIM_LEAVE(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    SIM_ENTER();
    DEV_CHECK(dev);
    if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        SIM_LEAVE(CUDA_ERROR_INVALID_VALUE);
    int v = 0;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = 128; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 8; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 9; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = 49152; break;
    /* An sm_89 card's (CUDA's occupancy tables: 99 KiB); ggml's MoE and
     * flash-attention kernels ask for more than the default 48 KiB. */
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: v = 101376; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = 72 * 1024 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 384; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = dev + 1; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED:
        v = 1;
        break;
    default: break;
    }
    *pi = v;
    SIM_LEAVE(CUDA_SUCCESS);
}

static const struct { CUresult rc; const char *name, *text; } errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "context already in use"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int error_index(CUresult rc)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].rc == rc)
            return (int)i;
    return -1;
}

SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    int i = error_index(error);
    *pStr = i < 0 ? NULL : errors[i].text;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    int i = error_index(error);
    *pStr = i < 0 ? NULL : errors[i].name;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
