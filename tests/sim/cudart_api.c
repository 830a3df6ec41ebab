/* cudart_api.c: the runtime API of the simulated libcudart.so.13.
 *
 * Contract:
 *  - Each call is a thin translation to the driver entry points fetched in
 *    cudart_driver.c; errors are mapped by rt_error (out of memory is
 *    cudaErrorMemoryAllocation) and recorded as the thread's last error.
 *  - As in the real runtime: cudaMalloc(p, 0) and cudaMallocHost(p, 0)
 *    succeed with NULL; cudaFree(NULL), cudaFreeHost(NULL) and
 *    cudaFreeAsync(NULL, s) succeed (cudaFree(0) still creates the context).
 *  - cudaMallocPitch passes ElementSizeBytes 16, so pitch is the width
 *    rounded up to 512 bytes.
 *  - cudaGetDriverEntryPoint(ByVersion) go through cuGetProcAddress; an
 *    unknown symbol is cudaSuccess with *funcPtr NULL and the status set.
 *  - cudaGetDeviceProperties fills name, uuid, totalGlobalMem and the
 *    attributes the simulated driver knows; every other field is 0.
 */
#include "cudart.h"

#include <stdint.h>
#include <string.h>
#include <stdio.h>

static __thread cudaError_t last_error;

static cudaError_t ret(cudaError_t e)
{
    if (e != cudaSuccess)
        last_error = e;
    return e;
}

static cudaError_t drv(CUresult rc) { return ret(rt_error(rc)); }

#define NEED_CTX()                          \
    do {                                    \
        cudaError_t need_e_ = rt_ctx();     \
        if (need_e_)                        \
            return ret(need_e_);            \
    } while (0)

RT_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    NEED_CTX();
    if (!devPtr)
        return ret(cudaErrorInvalidValue);
    if (size == 0) {
        *devPtr = NULL;
        return cudaSuccess;
    }
    CUdeviceptr d;
    CUresult rc = rt_drv.memAlloc(&d, size);
    if (rc == CUDA_SUCCESS)
        *devPtr = (void *)(uintptr_t)d;
    return drv(rc);
}

RT_EXPORT cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    NEED_CTX();
    if (!devPtr || !pitch)
        return ret(cudaErrorInvalidValue);
    CUdeviceptr d;
    CUresult rc = rt_drv.memAllocPitch(&d, pitch, width, height, 16);
    if (rc == CUDA_SUCCESS)
        *devPtr = (void *)(uintptr_t)d;
    return drv(rc);
}

RT_EXPORT cudaError_t cudaFree(void *devPtr)
{
    NEED_CTX();
    if (!devPtr)
        return cudaSuccess;
    return drv(rt_drv.memFree((CUdeviceptr)(uintptr_t)devPtr));
}

RT_EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    NEED_CTX();
    if (!ptr)
        return ret(cudaErrorInvalidValue);
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    return drv(rt_drv.memAllocHost(ptr, size));
}

RT_EXPORT cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    NEED_CTX();
    return drv(rt_drv.memHostAlloc(pHost, size, flags));
}

RT_EXPORT cudaError_t cudaFreeHost(void *ptr)
{
    NEED_CTX();
    if (!ptr)
        return cudaSuccess;
    return drv(rt_drv.memFreeHost(ptr));
}

RT_EXPORT cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    NEED_CTX();
    if (!devPtr)
        return ret(cudaErrorInvalidValue);
    CUdeviceptr d;
    CUresult rc = rt_drv.memAllocManaged(&d, size, flags);
    if (rc == CUDA_SUCCESS)
        *devPtr = (void *)(uintptr_t)d;
    return drv(rc);
}

/* The flavour is chosen after NEED_CTX: the pointers exist only once the
 * driver is loaded, and this may be the process's first runtime call. */
static cudaError_t malloc_async(int ptsz, void **devPtr, size_t size, cudaStream_t s)
{
    NEED_CTX();
    PFN_cuMemAllocAsync_v11020 fn = ptsz ? rt_drv.memAllocAsync_ptsz : rt_drv.memAllocAsync;
    if (!devPtr)
        return ret(cudaErrorInvalidValue);
    CUdeviceptr d;
    CUresult rc = fn(&d, size, s);
    if (rc == CUDA_SUCCESS)
        *devPtr = (void *)(uintptr_t)d;
    return drv(rc);
}

RT_EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    return malloc_async(0, devPtr, size, hStream);
}

RT_EXPORT cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    return malloc_async(1, devPtr, size, hStream);
}

static cudaError_t free_async(int ptsz, void *devPtr, cudaStream_t s)
{
    NEED_CTX();
    PFN_cuMemFreeAsync_v11020 fn = ptsz ? rt_drv.memFreeAsync_ptsz : rt_drv.memFreeAsync;
    if (!devPtr)
        return cudaSuccess;
    return drv(fn((CUdeviceptr)(uintptr_t)devPtr, s));
}

RT_EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    return free_async(0, devPtr, hStream);
}

RT_EXPORT cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    return free_async(1, devPtr, hStream);
}

static cudaError_t from_pool(int ptsz, void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t s)
{
    NEED_CTX();
    PFN_cuMemAllocFromPoolAsync_v11020 fn = ptsz ? rt_drv.memAllocFromPoolAsync_ptsz : rt_drv.memAllocFromPoolAsync;
    if (!ptr)
        return ret(cudaErrorInvalidValue);
    CUdeviceptr d;
    CUresult rc = fn(&d, size, pool, s);
    if (rc == CUDA_SUCCESS)
        *ptr = (void *)(uintptr_t)d;
    return drv(rc);
}

RT_EXPORT cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream)
{
    return from_pool(0, ptr, size, memPool, stream);
}

RT_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                                   cudaStream_t stream)
{
    return from_pool(1, ptr, size, memPool, stream);
}

RT_EXPORT cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    NEED_CTX();
    return drv(rt_drv.memHostRegister(ptr, size, flags));
}

RT_EXPORT cudaError_t cudaHostUnregister(void *ptr)
{
    NEED_CTX();
    return drv(rt_drv.memHostUnregister(ptr));
}

RT_EXPORT cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
    NEED_CTX();
    return drv(rt_drv.memGetInfo(free, total));
}

RT_EXPORT cudaError_t cudaSetDevice(int device)
{
    return ret(rt_set_device(device));
}

static cudaError_t get_device(int *device)
{
    cudaError_t e = rt_init();
    if (e)
        return ret(e);
    if (!device)
        return ret(cudaErrorInvalidValue);
    CUcontext cur = NULL;
    CUdevice d;
    if (rt_drv.ctxGetCurrent(&cur) == CUDA_SUCCESS && cur && rt_drv.ctxGetDevice(&d, NULL) == CUDA_SUCCESS)
        *device = d;
    else
        *device = rt_device();
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaGetDevice(int *device) { return get_device(device); }

RT_EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return ret(cudaErrorInvalidValue);
    cudaError_t e = rt_init();
    *count = e ? 0 : rt_ndev;
    return ret(e);
}

static int attr(CUdevice_attribute a, int dev)
{
    int v = 0;
    rt_drv.deviceGetAttribute(&v, a, dev);
    return v;
}

static cudaError_t get_props(struct cudaDeviceProp *prop, int device)
{
    cudaError_t e = rt_init();
    if (e)
        return ret(e);
    if (!prop)
        return ret(cudaErrorInvalidValue);
    if (device < 0 || device >= rt_ndev)
        return ret(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    CUresult rc = rt_drv.deviceGetName(prop->name, sizeof prop->name, device);
    if (rc == CUDA_SUCCESS)
        rc = rt_drv.deviceTotalMem(&prop->totalGlobalMem, device);
    CUuuid u;
    if (rc == CUDA_SUCCESS && (rc = rt_drv.deviceGetUuid(&u, device)) == CUDA_SUCCESS)
        memcpy(prop->uuid.bytes, u.bytes, sizeof u.bytes);
    if (rc)
        return drv(rc);
    prop->major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    prop->minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    prop->multiProcessorCount = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
    prop->warpSize = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, device);
    prop->maxThreadsPerBlock = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device);
    prop->sharedMemPerBlock = (size_t)attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, device);
    prop->sharedMemPerBlockOptin = (size_t)attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device);
    prop->totalConstMem = (size_t)attr(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, device);
    prop->l2CacheSize = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device);
    prop->memoryBusWidth = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, device);
    prop->pciBusID = attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, device);
    prop->unifiedAddressing = attr(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, device);
    prop->canMapHostMemory = attr(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, device);
    prop->managedMemory = attr(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, device);
    prop->concurrentManagedAccess = attr(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, device);
    prop->memoryPoolsSupported = attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device);
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    return get_props(prop, device);
}

/* The CUDA 12 name of the same call; CUDA 13 headers call it plainly. */
RT_EXPORT cudaError_t cudaGetDeviceProperties_v2(struct cudaDeviceProp *prop, int device)
{
    return get_props(prop, device);
}

RT_EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    NEED_CTX();
    return drv(rt_drv.ctxSynchronize(NULL));
}

RT_EXPORT cudaError_t cudaDeviceReset(void)
{
    int dev;
    cudaError_t e = get_device(&dev);
    if (e)
        return e;
    CUresult rc = rt_drv.primaryCtxReset(dev);
    rt_forget_primary(dev);
    return drv(rc);
}

RT_EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

RT_EXPORT cudaError_t cudaPeekAtLastError(void)
{
    return last_error;
}

static const struct { cudaError_t e; const char *name, *text; } errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized", "invalid device context"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

RT_EXPORT const char *cudaGetErrorString(cudaError_t error)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].e == error)
            return errors[i].text;
    return "unrecognized error code";
}

RT_EXPORT const char *cudaGetErrorName(cudaError_t error)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].e == error)
            return errors[i].name;
    return "unrecognized error code";
}

RT_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    NEED_CTX();
    return drv(rt_drv.streamCreate(pStream, CU_STREAM_DEFAULT));
}

RT_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    NEED_CTX();
    return drv(rt_drv.streamDestroy(stream));
}

RT_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    NEED_CTX();
    return drv(rt_drv.streamSynchronize(stream));
}

RT_EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    cudaError_t e = rt_init();
    if (e)
        return ret(e);
    return drv(rt_drv.deviceGetDefaultMemPool(memPool, device));
}

RT_EXPORT cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device)
{
    cudaError_t e = rt_init();
    if (e)
        return ret(e);
    return drv(rt_drv.deviceGetMemPool(memPool, device));
}

RT_EXPORT cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool, const struct cudaMemPoolProps *poolProps)
{
    cudaError_t e = rt_init();
    if (e)
        return ret(e);
    if (!poolProps)
        return ret(cudaErrorInvalidValue);
    CUmemPoolProps p;
    memset(&p, 0, sizeof p);
    p.allocType = (CUmemAllocationType)poolProps->allocType;
    p.handleTypes = (CUmemAllocationHandleType)poolProps->handleTypes;
    p.location.type = (CUmemLocationType)poolProps->location.type;
    p.location.id = poolProps->location.id;
    p.win32SecurityAttributes = poolProps->win32SecurityAttributes;
    p.maxSize = poolProps->maxSize;
    p.usage = poolProps->usage;
    return drv(rt_drv.memPoolCreate(memPool, &p));
}

RT_EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool)
{
    cudaError_t e = rt_init();
    if (e)
        return ret(e);
    return drv(rt_drv.memPoolDestroy(memPool));
}

RT_EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    cudaError_t e = rt_init();
    if (e)
        return ret(e);
    return drv(rt_drv.memPoolTrimTo(memPool, minBytesToKeep));
}

/* cudaMemPoolAttr and CUmemPool_attribute share their values (1..8). */
RT_EXPORT cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    cudaError_t e = rt_init();
    if (e)
        return ret(e);
    return drv(rt_drv.memPoolSetAttribute(memPool, (CUmemPool_attribute)attr, value));
}

RT_EXPORT cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    cudaError_t e = rt_init();
    if (e)
        return ret(e);
    return drv(rt_drv.memPoolGetAttribute(memPool, (CUmemPool_attribute)attr, value));
}

static cudaError_t entry_point(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                               unsigned long long flags, enum cudaDriverEntryPointQueryResult *status,
                               unsigned long long dflt)
{
    cudaError_t e = rt_init();
    if (e)
        return ret(e);
    if (!symbol || !funcPtr ||
        (flags & ~(unsigned long long)(cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)))
        return ret(cudaErrorInvalidValue);
    if (flags == cudaEnableDefault)
        flags = dflt;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult rc = rt_proc(symbol, funcPtr, (int)cudaVersion, flags, &st);
    if (rc != CUDA_SUCCESS)
        *funcPtr = NULL;
    if (status)
        *status = (enum cudaDriverEntryPointQueryResult)st;
    return rc == CUDA_SUCCESS || rc == CUDA_ERROR_NOT_FOUND ? cudaSuccess : drv(rc);
}

RT_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                                              enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus, cudaEnableLegacyStream);
}

RT_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                                                   enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus, cudaEnablePerThreadDefaultStream);
}

RT_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                                       unsigned long long flags,
                                                       enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, cudaEnableLegacyStream);
}

RT_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr,
                                                            unsigned int cudaVersion, unsigned long long flags,
                                                            enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, cudaEnablePerThreadDefaultStream);
}

/* What libggml-cuda.so imports beyond memory: kernels, copies, events and
 * graphs. Nothing executes on the simulated GPU, so launches and copies
 * succeed without touching memory; a device-to-host copy zero-fills its
 * destination so the host never reads uninitialised bytes. Graph capture is
 * refused (ggml then launches kernels one by one). */

RT_EXPORT void **__cudaRegisterFatBinary(void *fatCubin)
{
    static void *handle;
    handle = fatCubin;
    return &handle;
}
RT_EXPORT void __cudaRegisterFatBinaryEnd(void **fatCubinHandle) { (void)fatCubinHandle; }
RT_EXPORT void __cudaUnregisterFatBinary(void **fatCubinHandle) { (void)fatCubinHandle; }
RT_EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                      const char *deviceName, int thread_limit, void *tid, void *bid,
                                      void *bDim, void *gDim, int *wSize)
{
    (void)fatCubinHandle, (void)hostFun, (void)deviceFun, (void)deviceName, (void)thread_limit;
    (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
}
RT_EXPORT void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                 const char *deviceName, int ext, size_t size, int constant, int global)
{
    (void)fatCubinHandle, (void)hostVar, (void)deviceAddress, (void)deviceName;
    (void)ext, (void)size, (void)constant, (void)global;
}
RT_EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, void *stream)
{
    (void)gridDim, (void)blockDim, (void)sharedMem, (void)stream;
    return 0;
}
RT_EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
    if (gridDim)
        *gridDim = (dim3){1, 1, 1};
    if (blockDim)
        *blockDim = (dim3){1, 1, 1};
    if (sharedMem)
        *sharedMem = 0;
    if (stream)
        *(cudaStream_t *)stream = NULL;
    return cudaSuccess;
}
RT_EXPORT cudaError_t __cudaGetKernel(void **kernel, const void *func)
{
    if (kernel)
        *kernel = (void *)func;
    return cudaSuccess;
}
RT_EXPORT cudaError_t __cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                         size_t sharedMem, cudaStream_t stream)
{
    (void)func, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
    return cudaSuccess;
}
/* The exported name CUDA 12 programs link (CUDA 13's header sends its
 * callers to __cudaLaunchKernel). */
RT_EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                                       cudaStream_t stream)
{
    return __cudaLaunchKernel(func, gridDim, blockDim, args, sharedMem, stream);
}
RT_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    (void)config, (void)func, (void)args;
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                                  size_t sharedMem, cudaStream_t stream)
{
    (void)func, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr_out, const void *func)
{
    (void)func;
    if (!attr_out)
        return ret(cudaErrorInvalidValue);
    memset(attr_out, 0, sizeof *attr_out);
    attr_out->maxThreadsPerBlock = 1024;
    attr_out->numRegs = 32;
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute a, int value)
{
    (void)func, (void)a, (void)value;
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, const void *func,
                                                                            int blockSize, size_t smem,
                                                                            unsigned int flags)
{
    (void)func, (void)blockSize, (void)smem, (void)flags;
    if (!numBlocks)
        return ret(cudaErrorInvalidValue);
    *numBlocks = 1;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr a, int device)
{
    cudaError_t e = rt_init();
    if (e)
        return ret(e);
    if (!value || device < 0 || device >= rt_ndev)
        return ret(cudaErrorInvalidValue);
    /* The runtime's attribute numbers are the driver's for every attribute
     * ggml asks for (compute capability, SM count, shared memory). */
    *value = attr((CUdevice_attribute)a, device);
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    if (!pciBusId || len <= 0 || device < 0)
        return ret(cudaErrorInvalidValue);
    snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", device + 1);
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
    (void)flags;
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
    (void)device, (void)peerDevice;
    if (!canAccessPeer)
        return ret(cudaErrorInvalidValue);
    *canAccessPeer = 0;
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    (void)peerDevice, (void)flags;
    return ret(cudaErrorPeerAccessUnsupported);
}
RT_EXPORT cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    (void)flags;
    if (!pDevice)
        return ret(cudaErrorInvalidValue);
    *pDevice = pHost;
    return cudaSuccess;
}

static cudaError_t copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    if (kind == cudaMemcpyHostToHost)
        memmove(dst, src, count);
    else if (kind == cudaMemcpyDeviceToHost)
        memset(dst, 0, count);
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                      cudaStream_t stream)
{
    (void)stream;
    return copy(dst, src, count, kind);
}
RT_EXPORT cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                        size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)stream;
    for (size_t row = 0; row < height; row++)
        copy((char *)dst + row * dpitch, (const char *)src + row * spitch, width, kind);
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
                                          cudaStream_t stream)
{
    (void)dst, (void)dstDevice, (void)src, (void)srcDevice, (void)count, (void)stream;
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    (void)devPtr, (void)value, (void)count;
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    (void)devPtr, (void)value, (void)count, (void)stream;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    NEED_CTX();
    return drv(rt_drv.streamCreate(pStream, flags));
}
RT_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    (void)stream, (void)event, (void)flags;
    return cudaSuccess;
}
/* Stream capture, graphs and IPC go to the driver, as the real runtime's do
 * (the driver's cuStreamBeginCapture_v2 and kin, through cuGetProcAddress);
 * a driver without them leaves them cudaErrorNotSupported. */
#define RT_OPTIONAL_CALL(fn, ...)                                                   \
    do {                                                                         \
        cudaError_t e_ = rt_init();                                              \
        if (e_)                                                                  \
            return ret(e_);                                                      \
        if (!rt_drv.fn)                                                          \
            return ret(cudaErrorNotSupported);                                   \
        return drv(rt_drv.fn(__VA_ARGS__));                                      \
    } while (0)

RT_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status)
{
    if (!status)
        return ret(cudaErrorInvalidValue);
    RT_OPTIONAL_CALL(streamIsCapturing, (CUstream)stream, (CUstreamCaptureStatus *)status);
}
RT_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    RT_OPTIONAL_CALL(streamBeginCapture, (CUstream)stream, (CUstreamCaptureMode)mode);
}
RT_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    RT_OPTIONAL_CALL(streamEndCapture, (CUstream)stream, (CUgraph *)graph);
}
RT_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
    RT_OPTIONAL_CALL(graphInstantiateWithFlags, (CUgraphExec *)exec, (CUgraph)graph, flags);
}
RT_EXPORT cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
                                          cudaGraphExecUpdateResultInfo *info)
{
    RT_OPTIONAL_CALL(graphExecUpdate, (CUgraphExec)exec, (CUgraph)graph, (CUgraphExecUpdateResultInfo *)info);
}
RT_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    RT_OPTIONAL_CALL(graphLaunch, (CUgraphExec)exec, (CUstream)stream);
}
RT_EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    RT_OPTIONAL_CALL(graphExecDestroy, (CUgraphExec)exec);
}
RT_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    RT_OPTIONAL_CALL(graphDestroy, (CUgraph)graph);
}
/* The runtime's node parameters have the driver's layout (cudaGraphNodeType
 * is CUgraphNodeType, value for value). */
_Static_assert(sizeof(struct cudaGraphNodeParams) == sizeof(CUgraphNodeParams), "one layout");
RT_EXPORT cudaError_t cudaGraphAddNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                       const cudaGraphNode_t *pDependencies, const cudaGraphEdgeData *dependencyData,
                                       size_t numDependencies, struct cudaGraphNodeParams *nodeParams)
{
    RT_OPTIONAL_CALL(graphAddNode, (CUgraphNode *)pGraphNode, (CUgraph)graph, (const CUgraphNode *)pDependencies,
                  (const CUgraphEdgeData *)dependencyData, numDependencies, (CUgraphNodeParams *)nodeParams);
}

/* Legacy IPC (PyTorch's shared CUDA tensors): the handle's 64 bytes are
 * the driver's, passed through. */
RT_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    RT_OPTIONAL_CALL(ipcGetMemHandle, (CUipcMemHandle *)handle, (CUdeviceptr)(uintptr_t)devPtr);
}
RT_EXPORT cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags)
{
    CUipcMemHandle h;
    CUdeviceptr d = 0;
    if (!devPtr)
        return ret(cudaErrorInvalidValue);
    memcpy(&h, &handle, sizeof h);
    cudaError_t e = rt_ctx();
    if (e)
        return ret(e);
    if (!rt_drv.ipcOpenMemHandle)
        return ret(cudaErrorNotSupported);
    e = drv(rt_drv.ipcOpenMemHandle(&d, h, flags));
    if (e == cudaSuccess)
        *devPtr = (void *)(uintptr_t)d;
    return e;
}
RT_EXPORT cudaError_t cudaIpcCloseMemHandle(void *devPtr)
{
    RT_OPTIONAL_CALL(ipcCloseMemHandle, (CUdeviceptr)(uintptr_t)devPtr);
}

/* Events carry no time on a GPU that runs nothing: one static handle. */
static char event_handle;
RT_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    (void)flags;
    if (!event)
        return ret(cudaErrorInvalidValue);
    *event = (cudaEvent_t)&event_handle;
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    (void)event;
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    (void)event, (void)stream;
    return cudaSuccess;
}
RT_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    (void)event;
    return cudaSuccess;
}
