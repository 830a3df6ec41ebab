"""The few CUDA runtime calls the test programs make, through ctypes.

ctypes releases the GIL around every foreign call, as PyTorch's bindings
do around their allocator, so the shim sees a thread whose Python frames
it must find without holding the GIL. The library is the simulated
runtime under `make test` (LD_LIBRARY_PATH=build/sim) and the real one on
a GPU machine: both answer to libcudart.so.13 / .12.
"""
import ctypes

_rt = None
for _name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
    try:
        _rt = ctypes.CDLL(_name)
        break
    except OSError:
        pass
if _rt is None:
    raise SystemExit("simcuda: no libcudart found (set LD_LIBRARY_PATH)")

_rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
_rt.cudaFree.argtypes = [ctypes.c_void_p]
_rt.cudaHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]


def cuda_malloc(nbytes):
    """Returns a device pointer of nbytes; raises on failure."""
    ptr = ctypes.c_void_p()
    err = _rt.cudaMalloc(ctypes.byref(ptr), nbytes)
    if err != 0:
        raise MemoryError("cudaMalloc(%d) failed: %d" % (nbytes, err))
    return ptr.value


def cuda_free(ptr):
    err = _rt.cudaFree(ptr)
    if err != 0:
        raise RuntimeError("cudaFree failed: %d" % err)


def cuda_host_alloc(nbytes):
    """Pinned host memory of nbytes (torch's pin_memory=True reaches
    cudaHostAlloc through its CachingHostAllocator); raises on failure."""
    ptr = ctypes.c_void_p()
    err = _rt.cudaHostAlloc(ctypes.byref(ptr), nbytes, 0)
    if err != 0:
        raise MemoryError("cudaHostAlloc(%d) failed: %d" % (nbytes, err))
    return ptr.value
