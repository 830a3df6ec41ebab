/* sim_procaddr.c: cuGetProcAddress, the driver's entry point lookup.
 *
 * Contract:
 *  - Resolves a BASE name ("cuMemAlloc"), a cudaVersion and a stream flavour
 *    to the exact ABI function, like the real driver: among the table rows
 *    for that name whose minimum version is <= cudaVersion, the newest wins.
 *    Minimum versions are the ones cudaTypedefs.h encodes in its PFN names.
 *  - Flavour: a name with a _ptsz twin resolves to the twin when flags has
 *    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, and to the legacy-stream
 *    function for LEGACY_STREAM or DEFAULT. A name without a twin ignores it.
 *  - Unknown name: CUDA_ERROR_NOT_FOUND, SYMBOL_NOT_FOUND. Known name but
 *    every row newer than cudaVersion: CUDA_ERROR_NOT_FOUND,
 *    VERSION_NOT_SUFFICIENT. *pfn is NULL on failure.
 *  - Addresses are taken directly (&function) and the library links with
 *    -Bsymbolic-functions, so an LD_PRELOADed interposer never changes what
 *    this returns; it works before cuInit, as libcudart needs it to find
 *    cuInit itself.
 *  - Every function this library exports has a row here.
 */
#include "sim.h"

#include <string.h>

enum { ANY, LEGACY, PTSZ };

struct row {
    const char *name;
    void *fn;
    int version;
    int flavour;
};

#define R(name, sym, ver) {name, (void *)&sym, ver, ANY}
#define RL(name, sym, ver) {name, (void *)&sym, ver, LEGACY}
#define RP(name, sym, ver) {name, (void *)&sym, ver, PTSZ}

static const struct row table[] = {
    R("cuInit", cuInit, 2000),
    R("cuDriverGetVersion", cuDriverGetVersion, 2020),
    R("cuDeviceGetCount", cuDeviceGetCount, 2000),
    R("cuDeviceGet", cuDeviceGet, 2000),
    R("cuDeviceGetName", cuDeviceGetName, 2000),
    R("cuDeviceGetUuid", cuDeviceGetUuid, 9020),
    R("cuDeviceGetUuid", cuDeviceGetUuid_v2, 11040),
    R("cuDeviceTotalMem", cuDeviceTotalMem_v2, 3020),
    R("cuDeviceGetAttribute", cuDeviceGetAttribute, 2000),
    R("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, 7000),
    R("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease, 7000),
    R("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2, 11000),
    R("cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset, 7000),
    R("cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset_v2, 11000),
    R("cuDevicePrimaryCtxGetState", cuDevicePrimaryCtxGetState, 7000),
    R("cuCtxCreate", cuCtxCreate_v2, 3020),
    R("cuCtxCreate", cuCtxCreate_v3, 11040),
    R("cuCtxCreate", cuCtxCreate_v4, 12050),
    R("cuCtxDestroy", cuCtxDestroy_v2, 4000),
    R("cuCtxSetCurrent", cuCtxSetCurrent, 4000),
    R("cuCtxGetCurrent", cuCtxGetCurrent, 4000),
    R("cuCtxPushCurrent", cuCtxPushCurrent_v2, 4000),
    R("cuCtxPopCurrent", cuCtxPopCurrent_v2, 4000),
    R("cuCtxGetDevice", cuCtxGetDevice, 2000),
    R("cuCtxGetDevice", cuCtxGetDevice_v2, 13000),
    R("cuCtxSynchronize", cuCtxSynchronize, 2000),
    R("cuCtxSynchronize", cuCtxSynchronize_v2, 13000),
    R("cuStreamCreate", cuStreamCreate, 2000),
    R("cuStreamDestroy", cuStreamDestroy_v2, 4000),
    RL("cuStreamSynchronize", cuStreamSynchronize, 2000),
    RP("cuStreamSynchronize", cuStreamSynchronize_ptsz, 7000),
    R("cuGetErrorString", cuGetErrorString, 6000),
    R("cuGetErrorName", cuGetErrorName, 6000),
    R("cuPointerGetAttribute", cuPointerGetAttribute, 4000),
    R("cuMemAlloc", cuMemAlloc, 2000),
    R("cuMemAlloc", cuMemAlloc_v2, 3020),
    R("cuMemAllocPitch", cuMemAllocPitch_v2, 3020),
    R("cuMemFree", cuMemFree, 2000),
    R("cuMemFree", cuMemFree_v2, 3020),
    R("cuMemGetInfo", cuMemGetInfo, 2000),
    R("cuMemGetInfo", cuMemGetInfo_v2, 3020),
    RL("cuMemAllocAsync", cuMemAllocAsync, 11020),
    RP("cuMemAllocAsync", cuMemAllocAsync_ptsz, 11020),
    RL("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync, 11020),
#ifndef VTSIM_NO_V2
    RP("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync_ptsz, 11020),
#endif
    RL("cuMemFreeAsync", cuMemFreeAsync, 11020),
    RP("cuMemFreeAsync", cuMemFreeAsync_ptsz, 11020),
    R("cuDeviceGetDefaultMemPool", cuDeviceGetDefaultMemPool, 11020),
    R("cuDeviceGetMemPool", cuDeviceGetMemPool, 11020),
    R("cuDeviceSetMemPool", cuDeviceSetMemPool, 11020),
    R("cuMemPoolCreate", cuMemPoolCreate, 11020),
    R("cuMemPoolDestroy", cuMemPoolDestroy, 11020),
    R("cuMemPoolTrimTo", cuMemPoolTrimTo, 11020),
    R("cuMemPoolSetAttribute", cuMemPoolSetAttribute, 11020),
    R("cuMemPoolGetAttribute", cuMemPoolGetAttribute, 11020),
    R("cuMemGetAllocationGranularity", cuMemGetAllocationGranularity, 10020),
    R("cuMemCreate", cuMemCreate, 10020),
    R("cuMemRelease", cuMemRelease, 10020),
    R("cuMemRetainAllocationHandle", cuMemRetainAllocationHandle, 11000),
    R("cuIpcGetMemHandle", cuIpcGetMemHandle, 4010),
    R("cuIpcOpenMemHandle", cuIpcOpenMemHandle, 4010),
    R("cuIpcOpenMemHandle", cuIpcOpenMemHandle_v2, 11000),
    R("cuIpcCloseMemHandle", cuIpcCloseMemHandle, 4010),
    R("cuMemPoolExportToShareableHandle", cuMemPoolExportToShareableHandle, 11020),
    R("cuMemPoolImportFromShareableHandle", cuMemPoolImportFromShareableHandle, 11020),
    R("cuMemPoolExportPointer", cuMemPoolExportPointer, 11020),
    R("cuMemPoolImportPointer", cuMemPoolImportPointer, 11020),
    R("cuMemExportToShareableHandle", cuMemExportToShareableHandle, 10020),
    R("cuMemImportFromShareableHandle", cuMemImportFromShareableHandle, 10020),
    R("cuGraphAddNode", cuGraphAddNode, 12020),
    R("cuGraphAddNode", cuGraphAddNode_v2, 12030),
    R("cuMulticastGetGranularity", cuMulticastGetGranularity, 12010),
    R("cuMulticastCreate", cuMulticastCreate, 12010),
    R("cuMulticastAddDevice", cuMulticastAddDevice, 12010),
    R("cuMulticastBindMem", cuMulticastBindMem, 12010),
    R("cuMulticastUnbind", cuMulticastUnbind, 12010),
    R("cuArrayCreate", cuArrayCreate_v2, 3020),
    R("cuArray3DCreate", cuArray3DCreate_v2, 3020),
    R("cuMipmappedArrayCreate", cuMipmappedArrayCreate, 5000),
    R("cuArrayDestroy", cuArrayDestroy, 2000),
    R("cuMipmappedArrayDestroy", cuMipmappedArrayDestroy, 5000),
    R("cuMemAddressReserve", cuMemAddressReserve, 10020),
    R("cuMemAddressFree", cuMemAddressFree, 10020),
    R("cuMemMap", cuMemMap, 10020),
    R("cuMemUnmap", cuMemUnmap, 10020),
    R("cuMemSetAccess", cuMemSetAccess, 10020),
    R("cuMemGetAllocationPropertiesFromHandle", cuMemGetAllocationPropertiesFromHandle, 10020),
    R("cuMemAllocManaged", cuMemAllocManaged, 6000),
    R("cuMemAllocHost", cuMemAllocHost_v2, 3020),
    R("cuMemHostAlloc", cuMemHostAlloc, 2020),
    R("cuMemFreeHost", cuMemFreeHost, 2000),
    R("cuMemHostRegister", cuMemHostRegister_v2, 6050),
    R("cuMemHostUnregister", cuMemHostUnregister, 4000),
    R("cuMemHostGetDevicePointer", cuMemHostGetDevicePointer_v2, 3020),
    RL("cuStreamBeginCapture", cuStreamBeginCapture, 10000),
    RP("cuStreamBeginCapture", cuStreamBeginCapture_ptsz, 10000),
    RL("cuStreamBeginCapture", cuStreamBeginCapture_v2, 10010),
    RP("cuStreamBeginCapture", cuStreamBeginCapture_v2_ptsz, 10010),
    RL("cuStreamBeginCaptureToGraph", cuStreamBeginCaptureToGraph, 12030),
    RP("cuStreamBeginCaptureToGraph", cuStreamBeginCaptureToGraph_ptsz, 12030),
    R("cuGraphCreate", cuGraphCreate, 10000),
    R("cuGraphAddMemAllocNode", cuGraphAddMemAllocNode, 11040),
    R("cuGraphAddMemFreeNode", cuGraphAddMemFreeNode, 11040),
    RL("cuStreamEndCapture", cuStreamEndCapture, 10000),
    RP("cuStreamEndCapture", cuStreamEndCapture_ptsz, 10000),
    RL("cuStreamIsCapturing", cuStreamIsCapturing, 10000),
    RP("cuStreamIsCapturing", cuStreamIsCapturing_ptsz, 10000),
    R("cuThreadExchangeStreamCaptureMode", cuThreadExchangeStreamCaptureMode, 10010),
    R("cuGraphInstantiateWithFlags", cuGraphInstantiateWithFlags, 11040),
    R("cuGraphInstantiate", cuGraphInstantiateWithFlags, 12000),
    RL("cuGraphLaunch", cuGraphLaunch, 10000),
    RP("cuGraphLaunch", cuGraphLaunch_ptsz, 10000),
    R("cuGraphExecUpdate", cuGraphExecUpdate_v2, 12000),
    R("cuGraphExecDestroy", cuGraphExecDestroy, 10000),
    R("cuGraphDestroy", cuGraphDestroy, 10000),
    R("cuDeviceGraphMemTrim", cuDeviceGraphMemTrim, 11040),
    R("cuDeviceGetGraphMemAttribute", cuDeviceGetGraphMemAttribute, 11040),
    R("cuGetProcAddress", cuGetProcAddress, 11030),
#ifndef VTSIM_NO_V2
    R("cuGetProcAddress", cuGetProcAddress_v2, 12000),
#endif
};

static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    const cuuint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    if (pfn)
        *pfn = NULL;
    if (!symbol || !pfn || (flags & ~known))
        return CUDA_ERROR_INVALID_VALUE;
    int want = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? PTSZ : LEGACY;
    int named = 0, twin = 0;
    const struct row *best = NULL;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, symbol) == 0) {
            named = 1;
            twin |= table[i].flavour == PTSZ;
        }
    for (size_t i = 0; named && i < sizeof table / sizeof table[0]; i++) {
        const struct row *r = &table[i];
        if (strcmp(r->name, symbol) || (twin && r->flavour != want) || r->version > cudaVersion)
            continue;
        if (!best || r->version > best->version)
            best = r;
    }
    if (status)
        *status = best ? CU_GET_PROC_ADDRESS_SUCCESS
                 : named ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                         : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!best)
        return CUDA_ERROR_NOT_FOUND;
    *pfn = best->fn;
    return CUDA_SUCCESS;
}

#ifndef VTSIM_NO_V2
SIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *symbolStatus)
{
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}
#endif

SIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return lookup(symbol, pfn, cudaVersion, flags, NULL);
}
