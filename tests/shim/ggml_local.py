# Loads the example ggml with RTLD_LOCAL (ctypes' default, and how node
# loads addons such as node-llama-cpp's) and lets ggml-alloc mark its
# compute buffer: its PLT call reaches the shim's set_usage, which must
# still find and call ggml's. Prints what the program reads back.
import ctypes
import sys

P = ctypes.c_void_p
cuda = ctypes.CDLL(sys.argv[1] + "/libggml-cuda.so")
base = ctypes.CDLL(sys.argv[1] + "/libggml-base.so")
cuda.ggml_backend_cuda_buffer_type.restype = P
base.ggml_gallocr_new.restype = P
base.ggml_gallocr_new.argtypes = [P]
base.ggml_gallocr_reserve_n.argtypes = [P, ctypes.c_size_t]
base.ggml_backend_buffer_get_usage.argtypes = [P]
galloc = base.ggml_gallocr_new(cuda.ggml_backend_cuda_buffer_type(0))
reserved = base.ggml_gallocr_reserve_n(galloc, 256 << 20)
buffer = ctypes.cast(galloc, ctypes.POINTER(P))[1]  # struct ggml_gallocr {buft, buffer}
print("reserved=%d usage=%d" % (reserved, base.ggml_backend_buffer_get_usage(buffer)))
