/* cudart.h: internals of the simulated runtime (build/sim/libcudart.so.13).
 *
 * Contract:
 *  - The runtime never links or dlsyms a driver function: it dlopens
 *    libcuda.so.1, dlsyms only cuGetProcAddress_v2 (else the 4-argument
 *    cuGetProcAddress) and fetches every other entry point through it with
 *    cudaVersion 13000, exactly the path the real libcudart takes, so a
 *    shim that hooks only symbols misses it and one that wraps
 *    cuGetProcAddress sees it all.
 *  - Plain functions are fetched with CU_GET_PROC_ADDRESS_DEFAULT, the
 *    runtime's _ptsz flavours with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
 *  - Compiled with __CUDA_API_VERSION_INTERNAL so cuda_runtime_api.h declares
 *    both the plain and the _ptsz runtime symbols.
 */
#ifndef VTSIM_CUDART_H
#define VTSIM_CUDART_H

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#define RT_EXPORT __attribute__((visibility("default")))
#define RT_CUDA_VERSION 13000

struct rt_driver {
    PFN_cuGetProcAddress_v12000 getProcAddress_v2; /* NULL on a pre-12.0 driver */
    PFN_cuGetProcAddress_v11030 getProcAddress;
    PFN_cuInit_v2000 init;
    PFN_cuDriverGetVersion_v2020 driverGetVersion;
    PFN_cuDeviceGetCount_v2000 deviceGetCount;
    PFN_cuDeviceGet_v2000 deviceGet;
    PFN_cuDeviceGetName_v2000 deviceGetName;
    PFN_cuDeviceTotalMem_v3020 deviceTotalMem;
    PFN_cuDeviceGetAttribute_v2000 deviceGetAttribute;
    PFN_cuDeviceGetUuid_v11040 deviceGetUuid;
    PFN_cuDevicePrimaryCtxRetain_v7000 primaryCtxRetain;
    PFN_cuDevicePrimaryCtxReset_v11000 primaryCtxReset;
    PFN_cuCtxSetCurrent_v4000 ctxSetCurrent;
    PFN_cuCtxGetCurrent_v4000 ctxGetCurrent;
    PFN_cuCtxGetDevice_v13000 ctxGetDevice;
    PFN_cuCtxSynchronize_v13000 ctxSynchronize;
    PFN_cuMemAlloc_v3020 memAlloc;
    PFN_cuMemAllocPitch_v3020 memAllocPitch;
    PFN_cuMemFree_v3020 memFree;
    PFN_cuMemGetInfo_v3020 memGetInfo;
    PFN_cuMemAllocHost_v3020 memAllocHost;
    PFN_cuMemHostAlloc_v2020 memHostAlloc;
    PFN_cuMemFreeHost_v2000 memFreeHost;
    PFN_cuMemAllocManaged_v6000 memAllocManaged;
    PFN_cuMemHostRegister_v6050 memHostRegister;
    PFN_cuMemHostUnregister_v4000 memHostUnregister;
    PFN_cuMemAllocAsync_v11020 memAllocAsync;
    PFN_cuMemAllocAsync_v11020_ptsz memAllocAsync_ptsz;
    PFN_cuMemFreeAsync_v11020 memFreeAsync;
    PFN_cuMemFreeAsync_v11020_ptsz memFreeAsync_ptsz;
    PFN_cuMemAllocFromPoolAsync_v11020 memAllocFromPoolAsync;
    PFN_cuMemAllocFromPoolAsync_v11020_ptsz memAllocFromPoolAsync_ptsz;
    PFN_cuStreamCreate_v2000 streamCreate;
    PFN_cuStreamDestroy_v4000 streamDestroy;
    PFN_cuStreamSynchronize_v2000 streamSynchronize;
    PFN_cuDeviceGetDefaultMemPool_v11020 deviceGetDefaultMemPool;
    PFN_cuDeviceGetMemPool_v11020 deviceGetMemPool;
    PFN_cuMemPoolCreate_v11020 memPoolCreate;
    PFN_cuMemPoolDestroy_v11020 memPoolDestroy;
    PFN_cuMemPoolTrimTo_v11020 memPoolTrimTo;
    PFN_cuMemPoolSetAttribute_v11020 memPoolSetAttribute;
    PFN_cuMemPoolGetAttribute_v11020 memPoolGetAttribute;
    /* Stream capture and graphs: optional (a driver without them leaves
     * them NULL, and the runtime's graph calls say cudaErrorNotSupported). */
    PFN_cuStreamBeginCapture_v10010 streamBeginCapture;
    PFN_cuStreamEndCapture_v10000 streamEndCapture;
    PFN_cuStreamIsCapturing_v10000 streamIsCapturing;
    PFN_cuGraphInstantiateWithFlags_v11040 graphInstantiateWithFlags;
    PFN_cuGraphLaunch_v10000 graphLaunch;
    PFN_cuGraphExecUpdate_v12000 graphExecUpdate;
    PFN_cuGraphExecDestroy_v10000 graphExecDestroy;
    PFN_cuGraphDestroy_v10000 graphDestroy;
    PFN_cuGraphAddNode_v12030 graphAddNode;
    PFN_cuIpcGetMemHandle_v4010 ipcGetMemHandle;
    PFN_cuIpcOpenMemHandle_v11000 ipcOpenMemHandle;
    PFN_cuIpcCloseMemHandle_v4010 ipcCloseMemHandle;
};
extern struct rt_driver rt_drv;
extern int rt_ndev;

/* Loads the driver and runs cuInit once; cudaSuccess or the sticky error. */
cudaError_t rt_init(void);
/* Makes a live context current on this thread (primary of the thread's
 * device unless one is already current). */
cudaError_t rt_ctx(void);
/* Thread's current device for the runtime. */
int rt_device(void);
cudaError_t rt_set_device(int dev);
void rt_forget_primary(int dev);
/* Any driver lookup, as cudaGetDriverEntryPoint does. */
CUresult rt_proc(const char *name, void **fn, int version, cuuint64_t flags,
                 CUdriverProcAddressQueryResult *status);
cudaError_t rt_error(CUresult rc);

#endif
