/* libc10_cuda.so: see c10_cuda.h. */
#include "c10_cuda.h"

#include <algorithm>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

namespace c10 {
namespace cuda {
namespace CUDACachingAllocator {
namespace Native {

static const size_t kRoundLarge = 2ull << 20;

static double mib(size_t b) { return b / 1048576.0; }

DeviceCachingAllocator::DeviceCachingAllocator(int device) : device_(device) {}

DeviceCachingAllocator::~DeviceCachingAllocator()
{
    for (Block *b : segments_) {
        cudaFree(b->ptr);
        delete b;
    }
}

bool DeviceCachingAllocator::alloc_block(size_t size, Block **out)
{
    void *p = nullptr;
    cudaSetDevice(device_);
    if (cudaMalloc(&p, size) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    *out = new Block{size, p, true};
    segments_.push_back(*out);
    return true;
}

size_t DeviceCachingAllocator::release_cached_blocks()
{
    size_t released = 0;
    std::vector<Block *> keep;
    for (Block *b : segments_) {
        if (b->allocated) {
            keep.push_back(b);
            continue;
        }
        cudaFree(b->ptr);
        released += b->size;
        delete b;
    }
    segments_.swap(keep);
    return released;
}

Block *DeviceCachingAllocator::malloc(size_t size)
{
    size = (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
    Block *best = nullptr;
    for (Block *b : segments_)
        if (!b->allocated && b->size >= size && (!best || b->size < best->size))
            best = b;
    if (best) {
        best->allocated = true;
        return best;
    }
    Block *b;
    if (alloc_block(size, &b))
        return b;
    size_t free_b = 0, total = 0;
    cudaMemGetInfo(&free_b, &total);
    size_t released = release_cached_blocks();
    fprintf(stderr, "c10: cudaMalloc(%.0f MiB) failed with %.0f MiB free; released %.0f MiB of cached blocks and retrying\n",
            mib(size), mib(free_b), mib(released));
    if (released && alloc_block(size, &b))
        return b;
    fprintf(stderr,
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %.2f GiB. GPU %d has a total capacity of %.2f GiB "
            "of which %.2f GiB is free. Of the allocated memory %.2f GiB is allocated by PyTorch, and %.2f GiB is reserved by "
            "PyTorch but unallocated.\n",
            size / 1073741824.0, device_, total / 1073741824.0, free_b / 1073741824.0, allocated() / 1073741824.0,
            (reserved() - allocated()) / 1073741824.0);
    throw OutOfMemoryError{size};
}

void DeviceCachingAllocator::free(Block *block)
{
    block->allocated = false;
}

void DeviceCachingAllocator::emptyCache()
{
    release_cached_blocks();
}

size_t DeviceCachingAllocator::allocated() const
{
    size_t n = 0;
    for (const Block *b : segments_)
        n += b->allocated ? b->size : 0;
    return n;
}

size_t DeviceCachingAllocator::reserved() const
{
    size_t n = 0;
    for (const Block *b : segments_)
        n += b->size;
    return n;
}

/* ------------------------------------------------------------------ */

struct DriverAPI {
    PFN_cuMemCreate_v10020 cuMemCreate_;
    PFN_cuMemRelease_v10020 cuMemRelease_;
    PFN_cuMemAddressReserve_v10020 cuMemAddressReserve_;
    PFN_cuMemAddressFree_v10020 cuMemAddressFree_;
    PFN_cuMemMap_v10020 cuMemMap_;
    PFN_cuMemUnmap_v10020 cuMemUnmap_;
    PFN_cuMemSetAccess_v10020 cuMemSetAccess_;
    bool ok;

    static const DriverAPI &get()
    {
        static DriverAPI d = load();
        return d;
    }

  private:
    static bool sym(const char *name, void **fn)
    {
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        return cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
               q == cudaDriverEntryPointSuccess && *fn;
    }
    static DriverAPI load()
    {
        DriverAPI d = {};
        d.ok = sym("cuMemCreate", (void **)&d.cuMemCreate_) && sym("cuMemRelease", (void **)&d.cuMemRelease_) &&
               sym("cuMemAddressReserve", (void **)&d.cuMemAddressReserve_) &&
               sym("cuMemAddressFree", (void **)&d.cuMemAddressFree_) && sym("cuMemMap", (void **)&d.cuMemMap_) &&
               sym("cuMemUnmap", (void **)&d.cuMemUnmap_) && sym("cuMemSetAccess", (void **)&d.cuMemSetAccess_);
        if (!d.ok)
            fprintf(stderr, "c10: driver VMM entry points unavailable\n");
        return d;
    }
};

ExpandableSegment::ExpandableSegment(int device) : device_(device)
{
    size_t free_b = 0, total = 0;
    cudaSetDevice(device);
    cudaMemGetInfo(&free_b, &total);
    max_pages_ = (total + total / 8 + page_size_ - 1) / page_size_;
    const DriverAPI &d = DriverAPI::get();
    CUdeviceptr va = 0;
    if (d.ok && d.cuMemAddressReserve_(&va, max_pages_ * page_size_, 0, 0, 0) == CUDA_SUCCESS)
        base_ = (uintptr_t)va;
    else
        max_pages_ = 0;
}

ExpandableSegment::~ExpandableSegment()
{
    if (!base_)
        return;
    unmap(0, pages_.size());
    DriverAPI::get().cuMemAddressFree_((CUdeviceptr)base_, max_pages_ * page_size_);
}

bool ExpandableSegment::map(size_t begin_page, size_t n_pages)
{
    const DriverAPI &d = DriverAPI::get();
    for (size_t i = begin_page; i < begin_page + n_pages; i++) {
        CUmemAllocationProp prop = {};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = device_;
        CUmemGenericAllocationHandle h;
        if (d.cuMemCreate_(&h, page_size_, &prop, 0) != CUDA_SUCCESS)
            return false;
        CUdeviceptr at = (CUdeviceptr)(base_ + i * page_size_);
        if (d.cuMemMap_(at, page_size_, 0, h, 0) != CUDA_SUCCESS) {
            d.cuMemRelease_(h);
            return false;
        }
        pages_.push_back(h);
        CUmemAccessDesc access = {};
        access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access.location.id = device_;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        d.cuMemSetAccess_(at, page_size_, &access, 1);
    }
    return true;
}

/* PyTorch keeps each page's handle until it unmaps the page. */
void ExpandableSegment::unmap(size_t begin_page, size_t n_pages)
{
    const DriverAPI &d = DriverAPI::get();
    for (size_t i = begin_page + n_pages; i-- > begin_page;) {
        d.cuMemUnmap_((CUdeviceptr)(base_ + i * page_size_), page_size_);
        d.cuMemRelease_(pages_[i]);
        pages_.pop_back();
    }
}

void *ExpandableSegment::malloc(size_t size)
{
    size = (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
    size_t need = (used_ + size + page_size_ - 1) / page_size_;
    if (need > max_pages_ || (need > pages_.size() && !map(pages_.size(), need - pages_.size()))) {
        size_t free_b = 0, total = 0;
        cudaMemGetInfo(&free_b, &total);
        fprintf(stderr,
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %.2f GiB. GPU %d has a total capacity of "
                "%.2f GiB of which %.2f GiB is free. %.2f GiB is mapped by PyTorch's expandable segment.\n",
                size / 1073741824.0, device_, total / 1073741824.0, free_b / 1073741824.0, mapped() / 1073741824.0);
        throw OutOfMemoryError{size};
    }
    void *p = (void *)(base_ + used_);
    used_ += size;
    return p;
}

void ExpandableSegment::free(void *ptr, size_t size)
{
    size = (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
    if ((uintptr_t)ptr + size == base_ + used_)
        used_ -= size;
}

void ExpandableSegment::emptyCache()
{
    size_t keep = (used_ + page_size_ - 1) / page_size_;
    if (keep < pages_.size())
        unmap(keep, pages_.size() - keep);
}

} // namespace Native
} // namespace CUDACachingAllocator
} // namespace cuda
} // namespace c10
