/* A miniature of PyTorch's CUDA caching allocator (libc10_cuda.so), with
 * its class and method names, for field stories 4 and 7.
 *
 * DeviceCachingAllocator: every tensor is its own segment, rounded to
 * 2 MiB; freed segments stay cached (still charged to the GPU) and are
 * reused best-fit; when cudaMalloc fails the allocator releases every
 * cached segment and retries once, then raises OutOfMemoryError, as
 * PyTorch does (it also splits segments; this one never does).
 *
 * ExpandableSegment (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True):
 * one virtual range of 9/8 of the GPU's memory, backed by 20 MiB pages
 * mapped with cuMemCreate/cuMemMap/cuMemSetAccess as it grows, unmapped by
 * emptyCache. The driver is reached through cudaGetDriverEntryPointByVersion.
 */
#ifndef EXAMPLES_C10_CUDA_H
#define EXAMPLES_C10_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include <vector>

#define C10_API __attribute__((visibility("default")))
/* Methods keep their own frames: tags and the report read them. */
#define C10_NOINLINE __attribute__((noinline))

namespace c10 {
namespace cuda {
namespace CUDACachingAllocator {
namespace Native {

struct Block {
    size_t size;
    void *ptr;
    bool allocated;
};

struct OutOfMemoryError {
    size_t requested;
};

class C10_API DeviceCachingAllocator {
  public:
    explicit DeviceCachingAllocator(int device);
    ~DeviceCachingAllocator();
    C10_NOINLINE Block *malloc(size_t size);            /* throws OutOfMemoryError */
    C10_NOINLINE void free(Block *block);
    C10_NOINLINE void emptyCache();
    size_t allocated() const;
    size_t reserved() const;

  private:
    C10_NOINLINE bool alloc_block(size_t size, Block **out);
    C10_NOINLINE size_t release_cached_blocks();
    int device_;
    std::vector<Block *> segments_;
};

/* One growing segment; tensors are carved from it in order and must be
 * freed in reverse (enough for a KV cache built block by block). */
class C10_API ExpandableSegment {
  public:
    explicit ExpandableSegment(int device);
    ~ExpandableSegment();
    C10_NOINLINE void *malloc(size_t size);             /* throws OutOfMemoryError */
    C10_NOINLINE void free(void *ptr, size_t size);
    C10_NOINLINE void emptyCache();                     /* unmaps pages past the last tensor */
    size_t mapped() const { return pages_.size() * page_size_; }
    size_t reserved_va() const { return max_pages_ * page_size_; }

  private:
    C10_NOINLINE bool map(size_t begin_page, size_t n_pages);
    C10_NOINLINE void unmap(size_t begin_page, size_t n_pages);
    int device_;
    uintptr_t base_ = 0;
    size_t page_size_ = 20ull << 20, max_pages_ = 0, used_ = 0;
    std::vector<unsigned long long> pages_; /* CUmemGenericAllocationHandle per mapped page */
};

} // namespace Native
} // namespace CUDACachingAllocator
} // namespace cuda
} // namespace c10

#endif
