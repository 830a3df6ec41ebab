/* cublas.c: the simulated libcublas.so.13 (build/sim/libcublas.so.13).
 *
 * Contract:
 *  - Exports, under the libcublas.so.13 version node, the 13 cuBLAS entry
 *    points libggml-cuda.so imports. Nothing runs on the simulated GPU, so
 *    every call succeeds without touching memory.
 *  - cublasCreate_v2 allocates nothing on the device: the workspace the
 *    real cuBLAS 13 would want is the caller's (ggml passes its own through
 *    cublasSetWorkspace_v2), so every byte the traced program holds is one
 *    it asked the runtime for.
 */
#include <stddef.h>

#define BLAS_EXPORT __attribute__((visibility("default")))

typedef int blas_status;
typedef void *blas_handle;

static char handle_storage;

BLAS_EXPORT blas_status cublasCreate_v2(blas_handle *handle)
{
    if (!handle)
        return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    *handle = &handle_storage;
    return 0;
}

BLAS_EXPORT const char *cublasGetStatusString(blas_status status)
{
    return status == 0 ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_INVALID_VALUE";
}

/* The rest take arguments the simulation never reads; a C definition
 * without parameters accepts any. */
#define BLAS_NOOP(name) \
    BLAS_EXPORT blas_status name() { return 0; }
BLAS_NOOP(cublasDestroy_v2)
BLAS_NOOP(cublasSetStream_v2)
BLAS_NOOP(cublasSetWorkspace_v2)
BLAS_NOOP(cublasSetMathMode)
BLAS_NOOP(cublasGemmEx)
BLAS_NOOP(cublasGemmBatchedEx)
BLAS_NOOP(cublasGemmStridedBatchedEx)
BLAS_NOOP(cublasSgemm_v2)
BLAS_NOOP(cublasSgemmBatched)
BLAS_NOOP(cublasSgemmStridedBatched)
BLAS_NOOP(cublasStrsmBatched)
