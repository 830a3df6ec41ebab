/* ptrdev.c: the device the driver placed an allocation on.
 *
 * A stream-ordered allocation goes to the device of its stream, or of its
 * pool, whichever device is current (CUDA driver API: cuMemAllocAsync
 * "allocates from the current pool of the stream's device",
 * cuMemAllocFromPoolAsync from the pool's location). The driver says where
 * the pointer lives: CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL. hooks.c asks only
 * for those calls, and only when a stream other than the default ones or a
 * pool is named; every other allocation keeps the current device.
 */
#include <cuda.h>

#include "shim.h"

typedef CUresult (*pointer_get_attribute_fn)(void *, CUpointer_attribute, CUdeviceptr);

int vt_driver_pointer_device(uint64_t ptr)
{
    static _Atomic(void *) fn;
    pointer_get_attribute_fn f = (pointer_get_attribute_fn)atomic_load_explicit(&fn, memory_order_acquire);
    if (!f) {
        void *h = vt_libcuda();
        f = h ? (pointer_get_attribute_fn)vt_real_dlsym(h, "cuPointerGetAttribute") : NULL;
        if (!f)
            return -1;
        atomic_store_explicit(&fn, (void *)f, memory_order_release);
    }
    int dev = -1;
    if (f(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)ptr) != CUDA_SUCCESS || dev < 0 ||
        dev >= VT_MAX_DEVICES)
        return -1;
    return dev;
}
