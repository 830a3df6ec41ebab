/* cudart_driver.c: how the simulated runtime finds and initialises the driver.
 *
 * Contract:
 *  - First use (any runtime call): dlopen("libcuda.so.1"), dlsym of
 *    cuGetProcAddress_v2 falling back to cuGetProcAddress, every driver
 *    entry point fetched through it, then cuInit(0). A missing driver or
 *    entry point is cudaErrorInsufficientDriver; a driver without devices
 *    cudaErrorNoDevice. The outcome is sticky for the process.
 *  - Contexts are lazy, as in the real runtime: a device's primary context
 *    is retained on first use by a thread whose current device it is (or by
 *    cudaSetDevice), and made current on that thread if none is current. A
 *    context made current through the driver API is used as is.
 */
#include "cudart.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

struct rt_driver rt_drv;
int rt_ndev;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cudaError_t init_err;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary[64];
static int retained[64];
static __thread int tls_dev;

CUresult rt_proc(const char *name, void **fn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    if (rt_drv.getProcAddress_v2)
        return rt_drv.getProcAddress_v2(name, fn, version, flags, status);
    CUresult rc = rt_drv.getProcAddress(name, fn, version, flags);
    if (status)
        *status = rc == CUDA_SUCCESS ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return rc;
}

static int fetch(const char *name, void *slot, cuuint64_t flags)
{
    void *fn = NULL;
    if (rt_proc(name, &fn, RT_CUDA_VERSION, flags, NULL) != CUDA_SUCCESS || !fn)
        return -1;
    *(void **)slot = fn;
    return 0;
}

static void load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        init_err = cudaErrorInsufficientDriver;
        return;
    }
    rt_drv.getProcAddress_v2 = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
    if (!rt_drv.getProcAddress_v2)
        rt_drv.getProcAddress = (PFN_cuGetProcAddress_v11030)dlsym(h, "cuGetProcAddress");
    if (!rt_drv.getProcAddress_v2 && !rt_drv.getProcAddress) {
        init_err = cudaErrorInsufficientDriver;
        return;
    }
    const cuuint64_t D = CU_GET_PROC_ADDRESS_DEFAULT, P = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    struct { const char *name; void *slot; cuuint64_t flags; } want[] = {
        {"cuInit", &rt_drv.init, D},
        {"cuDriverGetVersion", &rt_drv.driverGetVersion, D},
        {"cuDeviceGetCount", &rt_drv.deviceGetCount, D},
        {"cuDeviceGet", &rt_drv.deviceGet, D},
        {"cuDeviceGetName", &rt_drv.deviceGetName, D},
        {"cuDeviceTotalMem", &rt_drv.deviceTotalMem, D},
        {"cuDeviceGetAttribute", &rt_drv.deviceGetAttribute, D},
        {"cuDeviceGetUuid", &rt_drv.deviceGetUuid, D},
        {"cuDevicePrimaryCtxRetain", &rt_drv.primaryCtxRetain, D},
        {"cuDevicePrimaryCtxReset", &rt_drv.primaryCtxReset, D},
        {"cuCtxSetCurrent", &rt_drv.ctxSetCurrent, D},
        {"cuCtxGetCurrent", &rt_drv.ctxGetCurrent, D},
        {"cuCtxGetDevice", &rt_drv.ctxGetDevice, D},
        {"cuCtxSynchronize", &rt_drv.ctxSynchronize, D},
        {"cuMemAlloc", &rt_drv.memAlloc, D},
        {"cuMemAllocPitch", &rt_drv.memAllocPitch, D},
        {"cuMemFree", &rt_drv.memFree, D},
        {"cuMemGetInfo", &rt_drv.memGetInfo, D},
        {"cuMemAllocHost", &rt_drv.memAllocHost, D},
        {"cuMemHostAlloc", &rt_drv.memHostAlloc, D},
        {"cuMemFreeHost", &rt_drv.memFreeHost, D},
        {"cuMemAllocManaged", &rt_drv.memAllocManaged, D},
        {"cuMemHostRegister", &rt_drv.memHostRegister, D},
        {"cuMemHostUnregister", &rt_drv.memHostUnregister, D},
        {"cuMemAllocAsync", &rt_drv.memAllocAsync, D},
        {"cuMemAllocAsync", &rt_drv.memAllocAsync_ptsz, P},
        {"cuMemFreeAsync", &rt_drv.memFreeAsync, D},
        {"cuMemFreeAsync", &rt_drv.memFreeAsync_ptsz, P},
        {"cuMemAllocFromPoolAsync", &rt_drv.memAllocFromPoolAsync, D},
        {"cuMemAllocFromPoolAsync", &rt_drv.memAllocFromPoolAsync_ptsz, P},
        {"cuStreamCreate", &rt_drv.streamCreate, D},
        {"cuStreamDestroy", &rt_drv.streamDestroy, D},
        {"cuStreamSynchronize", &rt_drv.streamSynchronize, D},
        {"cuDeviceGetDefaultMemPool", &rt_drv.deviceGetDefaultMemPool, D},
        {"cuDeviceGetMemPool", &rt_drv.deviceGetMemPool, D},
        {"cuMemPoolCreate", &rt_drv.memPoolCreate, D},
        {"cuMemPoolDestroy", &rt_drv.memPoolDestroy, D},
        {"cuMemPoolTrimTo", &rt_drv.memPoolTrimTo, D},
        {"cuMemPoolSetAttribute", &rt_drv.memPoolSetAttribute, D},
        {"cuMemPoolGetAttribute", &rt_drv.memPoolGetAttribute, D},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (fetch(want[i].name, want[i].slot, want[i].flags)) {
            init_err = cudaErrorInsufficientDriver;
            return;
        }
    struct { const char *name; void *slot; } optional[] = {
        {"cuStreamBeginCapture", &rt_drv.streamBeginCapture},
        {"cuStreamEndCapture", &rt_drv.streamEndCapture},
        {"cuStreamIsCapturing", &rt_drv.streamIsCapturing},
        {"cuGraphInstantiateWithFlags", &rt_drv.graphInstantiateWithFlags},
        {"cuGraphLaunch", &rt_drv.graphLaunch},
        {"cuGraphExecUpdate", &rt_drv.graphExecUpdate},
        {"cuGraphExecDestroy", &rt_drv.graphExecDestroy},
        {"cuGraphDestroy", &rt_drv.graphDestroy},
        {"cuGraphAddNode", &rt_drv.graphAddNode},
        {"cuIpcGetMemHandle", &rt_drv.ipcGetMemHandle},
        {"cuIpcOpenMemHandle", &rt_drv.ipcOpenMemHandle},
        {"cuIpcCloseMemHandle", &rt_drv.ipcCloseMemHandle},
    };
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++)
        fetch(optional[i].name, optional[i].slot, D);
    CUresult rc = rt_drv.init(0);
    if (rc == CUDA_SUCCESS)
        rc = rt_drv.deviceGetCount(&rt_ndev);
    if (rc == CUDA_SUCCESS && rt_ndev > 64)
        rt_ndev = 64;
    init_err = rc == CUDA_SUCCESS ? cudaSuccess : rt_error(rc);
}

cudaError_t rt_init(void)
{
    pthread_once(&once, load);
    return init_err;
}

int rt_device(void)
{
    return tls_dev;
}

static cudaError_t make_current(int dev)
{
    pthread_mutex_lock(&lock);
    if (!retained[dev]) {
        CUresult rc = rt_drv.primaryCtxRetain(&primary[dev], dev);
        if (rc != CUDA_SUCCESS) {
            pthread_mutex_unlock(&lock);
            return rt_error(rc);
        }
        retained[dev] = 1;
    }
    CUcontext c = primary[dev];
    pthread_mutex_unlock(&lock);
    return rt_error(rt_drv.ctxSetCurrent(c));
}

cudaError_t rt_ctx(void)
{
    cudaError_t e = rt_init();
    if (e)
        return e;
    CUcontext cur = NULL;
    rt_drv.ctxGetCurrent(&cur);
    if (cur) {
        /* A primary context the runtime reset must be retained again. */
        pthread_mutex_lock(&lock);
        int stale = -1;
        for (int d = 0; d < rt_ndev; d++)
            if (cur == primary[d] && !retained[d])
                stale = d;
        pthread_mutex_unlock(&lock);
        return stale < 0 ? cudaSuccess : make_current(stale);
    }
    return make_current(tls_dev);
}

cudaError_t rt_set_device(int dev)
{
    cudaError_t e = rt_init();
    if (e)
        return e;
    if (dev < 0 || dev >= rt_ndev)
        return cudaErrorInvalidDevice;
    tls_dev = dev;
    return make_current(dev);
}

void rt_forget_primary(int dev)
{
    pthread_mutex_lock(&lock);
    retained[dev] = 0;
    pthread_mutex_unlock(&lock);
}

cudaError_t rt_error(CUresult rc)
{
    switch (rc) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUDA_ERROR_DEINITIALIZED: return cudaErrorCudartUnloading;
    case CUDA_ERROR_NO_DEVICE: return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_NOT_FOUND: return cudaErrorSymbolNotFound;
    case CUDA_ERROR_NOT_SUPPORTED: return cudaErrorNotSupported;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return cudaErrorHostMemoryAlreadyRegistered;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: return cudaErrorHostMemoryNotRegistered;
    case CUDA_ERROR_ILLEGAL_ADDRESS: return cudaErrorIllegalAddress;
    default: return cudaErrorUnknown;
    }
}
