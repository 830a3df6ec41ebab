// faketorch.cc: native frames named like PyTorch's CUDA allocator
// (c10/cuda/CUDACachingAllocator.cpp, c10/cuda/CUDAMallocAsyncAllocator.cpp),
// so the Python tests reach the driver through the same three backends a
// real torch uses: caching-allocator segments (cudaMalloc), expandable
// segments (cuMemCreate + cuMemMap into one reserved range) and
// backend:cudaMallocAsync (cudaMallocAsync per tensor). The names are ours;
// the shapes are PyTorch's. Every function is noinline so each is a frame.
// The Python side calls the extern "C" entry points through ctypes, which
// releases the GIL like torch's bindings do.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cstddef>

#define NOINLINE __attribute__((noinline))

namespace c10 {
namespace cuda {
namespace CUDACachingAllocator {
namespace Native {

struct DeviceCachingAllocator {
    NOINLINE void *malloc(size_t size);
};

void *DeviceCachingAllocator::malloc(size_t size)
{
    void *p = nullptr;
    return cudaMalloc(&p, size) == cudaSuccess ? p : nullptr;
}

// One reserved range grown page by page, as expandable_segments:True does.
struct ExpandableSegment {
    CUdeviceptr base = 0;
    size_t mapped = 0, reserved = size_t(1) << 30;
    NOINLINE int map(size_t size);
};

int ExpandableSegment::map(size_t size)
{
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    if (!base && cuMemAddressReserve(&base, reserved, 0, 0, 0) != CUDA_SUCCESS)
        return -1;
    CUmemGenericAllocationHandle h;
    if (mapped + size > reserved || cuMemCreate(&h, size, &prop, 0) != CUDA_SUCCESS)
        return -1;
    if (cuMemMap(base + mapped, size, 0, h, 0) != CUDA_SUCCESS)
        return -1;
    mapped += size;
    return 0;
}

} // namespace Native

namespace CudaMallocAsync {
struct CudaMallocAsyncAllocator {
    NOINLINE void *malloc(size_t size);
    NOINLINE void free(void *p);
};

void *CudaMallocAsyncAllocator::malloc(size_t size)
{
    void *p = nullptr;
    return cudaMallocAsync(&p, size, 0) == cudaSuccess ? p : nullptr;
}

void CudaMallocAsyncAllocator::free(void *p)
{
    cudaFreeAsync(p, 0);
}
} // namespace CudaMallocAsync

} // namespace CUDACachingAllocator
} // namespace cuda
} // namespace c10

using namespace c10::cuda::CUDACachingAllocator;

static Native::DeviceCachingAllocator caching;
static Native::ExpandableSegment segment;
static CudaMallocAsync::CudaMallocAsyncAllocator async_alloc;

extern "C" {
NOINLINE void *faketorch_caching_malloc(size_t size) { return caching.malloc(size); }
NOINLINE int faketorch_expandable_map(size_t size) { return segment.map(size); }
NOINLINE void *faketorch_async_malloc(size_t size) { return async_alloc.malloc(size); }
NOINLINE void faketorch_async_free(void *p) { async_alloc.free(p); }
}
