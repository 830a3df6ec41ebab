/* libctoralloc.so, for tests/shim/ctoralloc.c: allocates in its
 * constructor, as a library that sets up device state at load does. */
#include <cuda_runtime_api.h>

static void *held;

__attribute__((constructor)) static void allocate_at_load(void)
{
    cudaMalloc(&held, 1 << 20);
}
