/* libggml-cuda.so: the CUDA buffer types and memory pools, shaped like
 * ggml-cuda.cu. This is the only example library that calls the CUDA
 * runtime for memory, and it does so the way ggml does:
 *
 *  - device buffers (weights, KV, compute) -> ggml_cuda_device_malloc ->
 *    cudaMalloc, or cudaMallocManaged when GGML_CUDA_ENABLE_UNIFIED_MEMORY
 *    is set (the env var is ggml's own);
 *  - CUDA_Host buffers (layers kept on the CPU when mmap is off, host
 *    compute buffers) -> cudaMallocHost, falling back to plain malloc with
 *    a warning when pinning fails;
 *  - kernel temporaries -> a per-device pool: ggml_cuda_pool_vmm when the
 *    device supports virtual memory management, else ggml_cuda_pool_leg.
 *    The VMM pool reaches cuMemCreate/cuMemMap through
 *    cudaGetDriverEntryPointByVersion, never by linking libcuda, as
 *    PyTorch and other runtime-only programs do.
 *
 * The internal functions are C++ (mangled) and exported so that both the
 * dynamic symbol table and DWARF name them, as in a real -g build.
 */
#include "ggml.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, visibility("default")))

/* --- device memory --- */

NOINLINE cudaError_t ggml_cuda_device_malloc(void **ptr, size_t size, int device)
{
    cudaSetDevice(device);
    if (getenv("GGML_CUDA_ENABLE_UNIFIED_MEMORY"))
        return cudaMallocManaged(ptr, size, cudaMemAttachGlobal);
    return cudaMalloc(ptr, size);
}

struct cuda_buft_context {
    int device;
    char name[16];
};

static void cuda_buffer_free(ggml_backend_buffer_t buf) { cudaFree(buf->base); }

NOINLINE ggml_backend_buffer_t ggml_backend_cuda_buffer_type_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size)
{
    cuda_buft_context *ctx = (cuda_buft_context *)buft->context;
    void *dev_ptr = nullptr;
    cudaError_t err = ggml_cuda_device_malloc(&dev_ptr, size, ctx->device);
    if (err != cudaSuccess) {
        /* clear the sticky error so the next call starts clean */
        (void)cudaGetLastError();
        fprintf(stderr, "ggml_backend_cuda_buffer_type_alloc_buffer: allocating %.2f MiB on device %d: cudaMalloc failed: %s\n",
                size / 1024.0 / 1024.0, ctx->device, cudaGetErrorString(err));
        return nullptr;
    }
    return new ggml_backend_buffer{cuda_buffer_free, buft, dev_ptr, size, GGML_BACKEND_BUFFER_USAGE_ANY};
}

static const char *cuda_buft_name(ggml_backend_buffer_type_t buft)
{
    return ((cuda_buft_context *)buft->context)->name;
}

/* 128-byte alignment for both types; pinned memory is host memory to ggml
 * (is_host: the CPU reads it directly), device memory is not. */
static size_t cuda_alignment(ggml_backend_buffer_type_t) { return 128; }
static bool cuda_is_host(ggml_backend_buffer_type_t) { return false; }
static bool cuda_host_is_host(ggml_backend_buffer_type_t) { return true; }

GGML_API int ggml_backend_cuda_get_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        return 0;
    return n;
}

GGML_API void ggml_backend_cuda_get_device_memory(int device, size_t *free, size_t *total)
{
    *free = *total = 0;
    cudaSetDevice(device);
    cudaMemGetInfo(free, total);
}

GGML_API ggml_backend_buffer_type_t ggml_backend_cuda_buffer_type(int device)
{
    static cuda_buft_context ctx[GGML_SCHED_MAX_BACKENDS];
    static ggml_backend_buffer_type buft[GGML_SCHED_MAX_BACKENDS];
    if (device < 0 || device >= GGML_SCHED_MAX_BACKENDS)
        return nullptr;
    if (!buft[device].context) {
        ctx[device].device = device;
        snprintf(ctx[device].name, sizeof ctx[device].name, "CUDA%d", device);
        buft[device] = {{cuda_buft_name, ggml_backend_cuda_buffer_type_alloc_buffer, cuda_alignment, cuda_is_host},
                        &ctx[device]};
    }
    return &buft[device];
}

/* --- pinned host memory (CUDA_Host) --- */

NOINLINE void *ggml_cuda_host_malloc(size_t size)
{
    if (getenv("GGML_CUDA_NO_PINNED"))
        return nullptr;
    void *ptr = nullptr;
    cudaError_t err = cudaMallocHost(&ptr, size);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        fprintf(stderr, "WARNING: failed to allocate %.2f MB of pinned memory: %s\n",
                size / 1024.0 / 1024.0, cudaGetErrorString(err));
        return nullptr;
    }
    return ptr;
}

static void cuda_host_buffer_free(ggml_backend_buffer_t buf) { cudaFreeHost(buf->base); }

NOINLINE ggml_backend_buffer_t ggml_backend_cuda_host_buffer_type_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size)
{
    void *ptr = ggml_cuda_host_malloc(size);
    if (!ptr)
        return ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), size);
    return new ggml_backend_buffer{cuda_host_buffer_free, buft, ptr, size, GGML_BACKEND_BUFFER_USAGE_ANY};
}

static const char *cuda_host_name(ggml_backend_buffer_type_t) { return "CUDA_Host"; }

GGML_API ggml_backend_buffer_type_t ggml_backend_cuda_host_buffer_type(void)
{
    static ggml_backend_buffer_type host = {
        {cuda_host_name, ggml_backend_cuda_host_buffer_type_alloc_buffer, cuda_alignment, cuda_host_is_host}, nullptr};
    return &host;
}

/* --- pools --- */

/* A pool failure is fatal in ggml (CUDA_CHECK aborts): kernels cannot run
 * without their temporaries. */
[[noreturn]] static void cuda_fatal(const char *what, const char *func, int device)
{
    fprintf(stderr, "CUDA error: %s\n  current device: %d, in function %s\n", what, device, func);
    abort();
}

struct ggml_cuda_pool {
    virtual ~ggml_cuda_pool() = default;
    virtual void *alloc(size_t size, size_t *actual_size) = 0;
    virtual void free(void *ptr, size_t size) = 0;
};

/* Legacy pool: a small cache of cudaMalloc'd buffers, best fit, each new
 * buffer 5% larger than asked so the next slightly larger request fits. */
struct ggml_cuda_pool_leg : public ggml_cuda_pool {
    static const int MAX_BUFFERS = 256;
    struct buffer { void *ptr; size_t size; };
    int device;
    buffer pool[MAX_BUFFERS] = {};

    explicit ggml_cuda_pool_leg(int dev) : device(dev) {}

    ~ggml_cuda_pool_leg() override
    {
        cudaSetDevice(device);
        for (buffer &b : pool)
            if (b.ptr)
                cudaFree(b.ptr);
    }

    NOINLINE void *alloc(size_t size, size_t *actual_size) override
    {
        int best = -1;
        for (int i = 0; i < MAX_BUFFERS; i++)
            if (pool[i].ptr && pool[i].size >= size && (best < 0 || pool[i].size < pool[best].size))
                best = i;
        if (best >= 0) {
            void *p = pool[best].ptr;
            *actual_size = pool[best].size;
            pool[best] = {nullptr, 0};
            return p;
        }
        size_t look_ahead = (size_t)(1.05 * (double)size);
        look_ahead = 256 * ((look_ahead + 255) / 256);
        void *p = nullptr;
        cudaError_t err = ggml_cuda_device_malloc(&p, look_ahead, device);
        if (err != cudaSuccess)
            cuda_fatal(cudaGetErrorString(err), "alloc", device);
        *actual_size = look_ahead;
        return p;
    }

    NOINLINE void free(void *ptr, size_t size) override
    {
        for (buffer &b : pool)
            if (!b.ptr) {
                b = {ptr, size};
                return;
            }
        fprintf(stderr, "WARNING: cuda buffer pool full, increase MAX_CUDA_BUFFERS\n");
        cudaFree(ptr);
    }
};

/* Driver entry points, resolved once through the runtime. */
struct cu_driver {
    PFN_cuDeviceGet_v2000 DeviceGet;
    PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute;
    PFN_cuMemGetAllocationGranularity_v10020 MemGetAllocationGranularity;
    PFN_cuMemCreate_v10020 MemCreate;
    PFN_cuMemRelease_v10020 MemRelease;
    PFN_cuMemAddressReserve_v10020 MemAddressReserve;
    PFN_cuMemAddressFree_v10020 MemAddressFree;
    PFN_cuMemMap_v10020 MemMap;
    PFN_cuMemUnmap_v10020 MemUnmap;
    PFN_cuMemSetAccess_v10020 MemSetAccess;
    bool ok;
};

static bool get_entry(const char *name, void **fn)
{
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    *fn = nullptr;
    return cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
           q == cudaDriverEntryPointSuccess && *fn;
}

static const cu_driver &cu(void)
{
    static cu_driver d;
    static bool done;
    if (!done) {
        done = true;
        d.ok = get_entry("cuDeviceGet", (void **)&d.DeviceGet) &&
               get_entry("cuDeviceGetAttribute", (void **)&d.DeviceGetAttribute) &&
               get_entry("cuMemGetAllocationGranularity", (void **)&d.MemGetAllocationGranularity) &&
               get_entry("cuMemCreate", (void **)&d.MemCreate) &&
               get_entry("cuMemRelease", (void **)&d.MemRelease) &&
               get_entry("cuMemAddressReserve", (void **)&d.MemAddressReserve) &&
               get_entry("cuMemAddressFree", (void **)&d.MemAddressFree) &&
               get_entry("cuMemMap", (void **)&d.MemMap) &&
               get_entry("cuMemUnmap", (void **)&d.MemUnmap) &&
               get_entry("cuMemSetAccess", (void **)&d.MemSetAccess);
    }
    return d;
}

/* VMM pool: one 32 GiB virtual range per device, physical memory mapped at
 * its end in granularity steps as the stack of temporaries grows, never
 * unmapped until the pool dies. The handle is released right after
 * mapping: the mapping keeps the memory alive. */
struct ggml_cuda_pool_vmm : public ggml_cuda_pool {
    static const size_t MAX_SIZE = 1ull << 35;
    int device;
    CUdeviceptr base = 0;
    size_t used = 0, mapped = 0, granularity;

    ggml_cuda_pool_vmm(int dev, size_t gran) : device(dev), granularity(gran) {}

    ~ggml_cuda_pool_vmm() override
    {
        if (base) {
            cu().MemUnmap(base, mapped);
            cu().MemAddressFree(base, MAX_SIZE);
        }
    }

    NOINLINE void *alloc(size_t size, size_t *actual_size) override
    {
        size = 128 * ((size + 127) / 128);
        if (size > mapped - used) {
            size_t grow = size - (mapped - used);
            grow = granularity * ((grow + granularity - 1) / granularity);
            CUmemAllocationProp prop = {};
            prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
            prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            prop.location.id = device;
            CUmemGenericAllocationHandle h;
            CUresult r = cu().MemCreate(&h, grow, &prop, 0);
            if (r != CUDA_SUCCESS)
                cuda_fatal(r == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : "cuMemCreate failed", "alloc", device);
            if (!base && cu().MemAddressReserve(&base, MAX_SIZE, 0, 0, 0) != CUDA_SUCCESS)
                cuda_fatal("cuMemAddressReserve failed", "alloc", device);
            if (cu().MemMap(base + mapped, grow, 0, h, 0) != CUDA_SUCCESS)
                cuda_fatal("cuMemMap failed", "alloc", device);
            cu().MemRelease(h);
            CUmemAccessDesc access = {};
            access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            access.location.id = device;
            access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            cu().MemSetAccess(base + mapped, grow, &access, 1);
            mapped += grow;
        }
        void *p = (void *)(uintptr_t)(base + used);
        used += size;
        *actual_size = size;
        return p;
    }

    /* Strictly LIFO, like the kernels' temporaries. */
    NOINLINE void free(void *ptr, size_t size) override
    {
        used -= size;
        if (ptr != (void *)(uintptr_t)(base + used))
            cuda_fatal("pool free out of order", "free", device);
    }
};

struct ggml_cuda_pool_handle {
    ggml_cuda_pool *pool;
    int vmm, device;
};

static size_t vmm_granularity(int device)
{
    const cu_driver &d = cu();
    if (!d.ok || getenv("GGML_CUDA_NO_VMM"))
        return 0;
    CUdevice dev;
    int supported = 0;
    if (d.DeviceGet(&dev, device) != CUDA_SUCCESS ||
        d.DeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS ||
        !supported)
        return 0;
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    size_t g = 0;
    if (d.MemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS)
        return 0;
    return g;
}

GGML_API ggml_cuda_pool_t ggml_cuda_pool_new(int device)
{
    ggml_cuda_pool_handle *h = new ggml_cuda_pool_handle{nullptr, 0, device};
    size_t g = vmm_granularity(device);
    h->vmm = g != 0;
    if (h->vmm)
        h->pool = new ggml_cuda_pool_vmm(device, g);
    else
        h->pool = new ggml_cuda_pool_leg(device);
    return h;
}

GGML_API void *ggml_cuda_pool_alloc(ggml_cuda_pool_t pool, size_t size, size_t *actual)
{
    return pool->pool->alloc(size, actual);
}

GGML_API void ggml_cuda_pool_free(ggml_cuda_pool_t pool, void *ptr, size_t size)
{
    pool->pool->free(ptr, size);
}

GGML_API int ggml_cuda_pool_is_vmm(ggml_cuda_pool_t pool)
{
    return pool->vmm;
}

GGML_API void ggml_cuda_pool_destroy(ggml_cuda_pool_t pool)
{
    if (!pool)
        return;
    delete pool->pool;
    delete pool;
}

/* q8_1: 32 values in 36 bytes. */
NOINLINE void ggml_cuda_mul_mat(ggml_cuda_pool_t pool, size_t n_cols, uint32_t n_tokens)
{
    size_t bytes = n_cols * n_tokens / 32 * 36, actual = 0;
    void *p = ggml_cuda_pool_alloc(pool, bytes, &actual);
    ggml_cuda_pool_free(pool, p, actual);
}

GGML_API void ggml_backend_cuda_graph_compute(ggml_cuda_pool_t pool, size_t n_embd, size_t n_ff, uint32_t n_tokens)
{
    /* kernels run on the backend's device: ggml makes it current first */
    cudaSetDevice(pool->device);
    ggml_cuda_mul_mat(pool, n_embd, n_tokens);
    ggml_cuda_mul_mat(pool, n_ff, n_tokens);
}
