/* faultdl.c: the library the dlclose fault test loads and unloads. Built
 * twice (FAULTDL_NAME a and b) into libfaultdl_a.so and libfaultdl_b.so of
 * the same layout, so the second is likely mapped where the first was: a
 * shim that names frames after the fact must not call the first library's
 * frames by the second one's names. The inner function is static, so its
 * name lives in .symtab only, as ggml's allocators do.
 */
#include <cuda_runtime_api.h>

#define CAT3(a, b, c) a##b##c
#define XCAT3(a, b, c) CAT3(a, b, c)
#define FN(suffix) XCAT3(faultdl_, FAULTDL_NAME, suffix)

__attribute__((noinline)) static int FN(_inner)(int size)
{
    void *p;
    int rc = (int)cudaMalloc(&p, (size_t)size);
    __asm__ volatile("" ::: "memory");
    return rc == cudaSuccess ? (int)cudaFree(p) : rc;
}

__attribute__((visibility("default"), noinline)) int FN(_alloc)(void)
{
    int rc = FN(_inner)(FAULTDL_SIZE);
    __asm__ volatile("" ::: "memory");
    return rc;
}
