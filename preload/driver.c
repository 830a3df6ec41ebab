/* driver.c: the real driver, called on the shim's own account: the device
 * facts record.c captures on a device's first use, the samples it takes
 * beside the program's events, and where a stream-ordered allocation was
 * placed (hooks.c).
 *
 * Contract:
 *  - Always the real function (resolve.c), never a wrapper: these calls
 *    are the shim asking, not the program, and must not be recorded.
 *  - Each returns -1 (or a negative device) when the driver is not loaded
 *    or says no; nothing here starts the shim or records anything.
 *  - The helpers that may run on every event look their function up once.
 */
#include <string.h>

#include <cuda.h>

#include "shim.h"

typedef CUresult (*ctx_get_device_fn)(CUdevice *);
typedef CUresult (*mem_get_info_fn)(size_t *, size_t *);
typedef CUresult (*device_get_name_fn)(char *, int, CUdevice);
typedef CUresult (*device_get_uuid_fn)(CUuuid *, CUdevice);
typedef CUresult (*device_total_mem_fn)(size_t *, CUdevice);

static void *driver_sym(const char *name)
{
    void *h = vt_libcuda();
    return h ? vt_real_dlsym(h, name) : NULL;
}

/* driver_sym once per slot: the helpers that run on every event must not
 * pay a dlsym each time. A miss is asked again next time (the driver may
 * not be loaded yet). */
static void *cached_driver_sym(_Atomic(void *) *slot, const char *name)
{
    void *f = atomic_load_explicit(slot, memory_order_acquire);
    if (!f) {
        f = driver_sym(name);
        if (f)
            atomic_store_explicit(slot, f, memory_order_release);
    }
    return f;
}

int vt_driver_current_device(void)
{
    static _Atomic(void *) fn;
    ctx_get_device_fn f = (ctx_get_device_fn)cached_driver_sym(&fn, "cuCtxGetDevice");
    if (!f)
        return -1;
    CUdevice dev;
    if (f(&dev) != CUDA_SUCCESS || dev < 0 || dev >= VT_MAX_DEVICES)
        return -1;
    return dev;
}

/* Where the driver placed ptr (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL). */
int vt_driver_pointer_device(uint64_t ptr)
{
    typedef CUresult (*pointer_get_attribute_fn)(void *, CUpointer_attribute, CUdeviceptr);
    static _Atomic(void *) fn;
    pointer_get_attribute_fn f = (pointer_get_attribute_fn)cached_driver_sym(&fn, "cuPointerGetAttribute");
    if (!f)
        return -1;
    int dev = -1;
    if (f(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)ptr) != CUDA_SUCCESS || dev < 0 ||
        dev >= VT_MAX_DEVICES)
        return -1;
    return dev;
}

int vt_driver_primary_active(int dev)
{
    typedef CUresult (*primary_state_fn)(CUdevice, unsigned *, int *);
    static _Atomic(void *) fn;
    primary_state_fn f = (primary_state_fn)cached_driver_sym(&fn, "cuDevicePrimaryCtxGetState");
    unsigned flags;
    int active = 0;
    if (!f || f(dev, &flags, &active) != CUDA_SUCCESS)
        return -1;
    return active != 0;
}

_Atomic unsigned vt_captures_open; /* shim.h */
_Atomic unsigned vt_graphs_seen;   /* shim.h */

typedef CUresult (*is_capturing_fn)(CUstream, CUstreamCaptureStatus *);
typedef CUresult (*exchange_mode_fn)(CUstreamCaptureMode *);
static _Atomic(void *) is_capturing, exchange_mode;

/* Looked up when a capture begins, so that a call inside it (maybe a
 * signal handler's) finds them without a dlsym. */
void vt_driver_capture_began(void)
{
    cached_driver_sym(&is_capturing, "cuStreamIsCapturing");
    cached_driver_sym(&exchange_mode, "cuThreadExchangeStreamCaptureMode");
}

/* While a capture in global mode is open on any thread (or in thread-local
 * mode on this one), a call the driver deems unsafe fails and invalidates
 * the capture: the program's cuStreamEndCapture then fails and it gets no
 * graph (CUDA runtime API, cudaThreadExchangeStreamCaptureMode). NVIDIA
 * names cudaMalloc; which queries count is not written down. So the
 * shim's own queries (pointer attributes, free memory, pool usage, device
 * facts), made while a capture it saw begin is open, run with the thread
 * in relaxed mode, as PyTorch's allocator makes its cudaMalloc. One relaxed
 * load when no capture is open. */
int vt_driver_relax(void)
{
    if (__builtin_expect(!atomic_load_explicit(&vt_captures_open, memory_order_relaxed), 1))
        return 0;
    exchange_mode_fn f = (exchange_mode_fn)cached_driver_sym(&exchange_mode, "cuThreadExchangeStreamCaptureMode");
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    return f && f(&mode) == CUDA_SUCCESS ? (int)mode + 1 : 0;
}

void vt_driver_unrelax(int token)
{
    if (!token)
        return;
    exchange_mode_fn f = (exchange_mode_fn)atomic_load_explicit(&exchange_mode, memory_order_acquire);
    CUstreamCaptureMode mode = (CUstreamCaptureMode)(token - 1);
    if (f)
        f(&mode);
}

/* The legacy stream never captures, and is never asked: while another
 * stream of the device captures, asking it fails with
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (CUDA driver API, cuStreamIsCapturing).
 * Stream 0 of a _ptsz entry point is the thread's own stream. */
int vt_driver_stream_capturing(void *stream, int per_thread)
{
    if (!stream && per_thread)
        stream = CU_STREAM_PER_THREAD;
    if (!stream || stream == CU_STREAM_LEGACY)
        return 0;
    is_capturing_fn f = (is_capturing_fn)cached_driver_sym(&is_capturing, "cuStreamIsCapturing");
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    return f && f((CUstream)stream, &status) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

int vt_driver_meminfo(uint64_t *free_bytes, uint64_t *total_bytes)
{
    /* The real function, never our wrapper: this is a sample, not the
     * program asking. */
    mem_get_info_fn f = (mem_get_info_fn)vt_real(VT_API_cuMemGetInfo_v2);
    size_t fr = 0, tot = 0;
    if (!f || f(&fr, &tot) != CUDA_SUCCESS)
        return -1;
    *free_bytes = fr;
    *total_bytes = tot;
    return 0;
}

typedef CUresult (*pool_get_attribute_fn)(CUmemoryPool, CUmemPool_attribute, void *);
typedef CUresult (*device_get_mem_pool_fn)(CUmemoryPool *, CUdevice);

int vt_driver_pool_usage(uint64_t pool, uint64_t *reserved, uint64_t *used)
{
    /* The real function, never our wrapper: a sample, not the program. */
    pool_get_attribute_fn f = (pool_get_attribute_fn)vt_real(VT_API_cuMemPoolGetAttribute);
    cuuint64_t r = 0, u = 0;
    CUmemoryPool p = (CUmemoryPool)(uintptr_t)pool;
    if (!f || f(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &r) != CUDA_SUCCESS ||
        f(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &u) != CUDA_SUCCESS)
        return -1;
    *reserved = r;
    *used = u;
    return 0;
}

typedef CUresult (*graph_mem_attribute_fn)(CUdevice, CUgraphMem_attribute, void *);

int vt_driver_graph_pool_usage(int device, uint64_t *reserved, uint64_t *used)
{
    /* The real function, never our wrapper: a sample, not the program. */
    graph_mem_attribute_fn f = (graph_mem_attribute_fn)vt_real(VT_API_cuDeviceGetGraphMemAttribute);
    cuuint64_t r = 0, u = 0;
    if (!f || f((CUdevice)device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &r) != CUDA_SUCCESS ||
        f((CUdevice)device, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &u) != CUDA_SUCCESS)
        return -1;
    *reserved = r;
    *used = u;
    return 0;
}

int vt_driver_device_pool(int device, uint64_t *pool)
{
    static _Atomic(void *) fn;
    device_get_mem_pool_fn f = (device_get_mem_pool_fn)cached_driver_sym(&fn, "cuDeviceGetMemPool");
    if (!f)
        return -1;
    CUmemoryPool p = NULL;
    if (f(&p, device) != CUDA_SUCCESS || !p)
        return -1;
    *pool = (uint64_t)(uintptr_t)p;
    return 0;
}

int vt_driver_device_facts(int device, vt_device_slot_t *out)
{
    device_get_name_fn get_name = (device_get_name_fn)driver_sym("cuDeviceGetName");
    device_get_uuid_fn get_uuid = (device_get_uuid_fn)driver_sym("cuDeviceGetUuid_v2");
    if (!get_uuid)
        get_uuid = (device_get_uuid_fn)driver_sym("cuDeviceGetUuid");
    device_total_mem_fn total_mem = (device_total_mem_fn)driver_sym("cuDeviceTotalMem_v2");
    uint64_t fr = 0, tot = 0;
    if (vt_driver_meminfo(&fr, &tot) != 0)
        return -1;
    size_t total = tot;
    if (total_mem)
        total_mem(&total, device);
    out->total = total;
    out->free_at_first = fr;
    memset(out->name, 0, sizeof out->name);
    if (!get_name || get_name(out->name, (int)sizeof out->name - 1, device) != CUDA_SUCCESS)
        strcpy(out->name, "?");
    CUuuid uuid;
    memset(&uuid, 0, sizeof uuid);
    if (get_uuid)
        get_uuid(&uuid, device);
    memcpy(out->uuid, uuid.bytes, 16);
    return 0;
}
