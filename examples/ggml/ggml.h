/* A miniature of ggml's backend allocation layer: the part of llama.cpp
 * that turns "these tensors live on CUDA0" into cudaMalloc calls.
 *
 * Why it exists: vramtrace tags allocations by the names of the frames on
 * their call stack, so the examples must reach the CUDA runtime through the
 * same functions, in the same shared libraries (libggml-base.so,
 * libggml-cuda.so), as real llama.cpp / ollama builds do:
 *
 *   weights  llama_model::load_tensors        \
 *   KV       llama_kv_cache::llama_kv_cache    > ggml_backend_alloc_ctx_tensors_from_buft
 *                                             /   -> ggml_backend_buft_alloc_buffer
 *                                                 -> ggml_backend_cuda_buffer_type_alloc_buffer
 *                                                 -> ggml_cuda_device_malloc -> cudaMalloc
 *   scratch  llama_context::graph_reserve -> ggml_backend_sched_reserve
 *                 -> ggml_gallocr_reserve_n -> ggml_backend_buft_alloc_buffer -> ...
 *            decode -> ggml_cuda_pool_leg::alloc / ggml_cuda_pool_vmm::alloc
 *
 * Only sizes are modelled: a "context" is a list of tensor sizes, and no
 * data is ever copied. Every function that must show up as a frame is
 * noinline and the libraries keep frame pointers.
 */
#ifndef EXAMPLES_GGML_H
#define EXAMPLES_GGML_H

#include <stddef.h>
#include <stdint.h>

#define GGML_API extern "C" __attribute__((visibility("default"), noinline))

#define MiB ((size_t)1024 * 1024)

struct ggml_backend_buffer_type;
struct ggml_backend_buffer;
typedef struct ggml_backend_buffer_type *ggml_backend_buffer_type_t;
typedef struct ggml_backend_buffer *ggml_backend_buffer_t;

struct ggml_backend_buffer_type_i {
    const char *(*get_name)(ggml_backend_buffer_type_t buft);
    ggml_backend_buffer_t (*alloc_buffer)(ggml_backend_buffer_type_t buft, size_t size);
};

struct ggml_backend_buffer_type {
    struct ggml_backend_buffer_type_i iface;
    void *context;
};

/* ggml-backend.h's values: what a buffer holds, as its owner marks it. */
enum ggml_backend_buffer_usage {
    GGML_BACKEND_BUFFER_USAGE_ANY = 0,
    GGML_BACKEND_BUFFER_USAGE_WEIGHTS = 1,
    GGML_BACKEND_BUFFER_USAGE_COMPUTE = 2,
};

struct ggml_backend_buffer {
    ggml_backend_buffer_type_t buft;
    void *base;
    size_t size;
    void (*free_buffer)(ggml_backend_buffer_t buf);
    enum ggml_backend_buffer_usage usage;  /* ANY until set_usage */
};

/* A ggml_context reduced to what allocation needs: the tensors' sizes. */
struct ggml_context {
    size_t n_tensors;
    size_t total;
};

GGML_API struct ggml_context *ggml_init(void);
GGML_API void ggml_free(struct ggml_context *ctx);
GGML_API void ggml_new_tensor_bytes(struct ggml_context *ctx, size_t nbytes);

GGML_API const char *ggml_backend_buft_name(ggml_backend_buffer_type_t buft);
GGML_API ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size);
GGML_API void ggml_backend_buffer_free(ggml_backend_buffer_t buf);
/* The buffer API as libggml-base.so exports it; callers in other libraries
 * and ggml-alloc's own calls reach it through the PLT, as in real ggml. */
GGML_API void ggml_backend_buffer_set_usage(ggml_backend_buffer_t buf, enum ggml_backend_buffer_usage usage);
GGML_API enum ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t buf);
GGML_API void *ggml_backend_buffer_get_base(ggml_backend_buffer_t buf);
GGML_API size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t buf);
GGML_API const char *ggml_backend_buffer_name(ggml_backend_buffer_t buf);
GGML_API ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type(void);

/* NULL (and an error line, as ggml prints it) when the buffer type's
 * allocation fails. */
GGML_API ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(struct ggml_context *ctx,
                                                                       ggml_backend_buffer_type_t buft);

/* Graph allocator: one compute buffer per backend, grown on reserve. */
typedef struct ggml_gallocr *ggml_gallocr_t;
GGML_API ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft);
GGML_API int ggml_gallocr_reserve_n(ggml_gallocr_t galloc, size_t graph_bytes);
GGML_API size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc);
GGML_API void ggml_gallocr_free(ggml_gallocr_t galloc);

/* Scheduler: n backends, each with its compute buffer type and the graph
 * size it needs on that backend. */
#define GGML_SCHED_MAX_BACKENDS 8
typedef struct ggml_backend_sched *ggml_backend_sched_t;
GGML_API ggml_backend_sched_t ggml_backend_sched_new(ggml_backend_buffer_type_t *bufts, int n);
GGML_API int ggml_backend_sched_reserve(ggml_backend_sched_t sched, const size_t *graph_bytes);
GGML_API size_t ggml_backend_sched_get_buffer_size(ggml_backend_sched_t sched, int i);
GGML_API const char *ggml_backend_sched_get_buffer_name(ggml_backend_sched_t sched, int i);
GGML_API void ggml_backend_sched_free(ggml_backend_sched_t sched);

/* libggml-cuda */
GGML_API int ggml_backend_cuda_get_device_count(void);
GGML_API void ggml_backend_cuda_get_device_memory(int device, size_t *free, size_t *total);
GGML_API ggml_backend_buffer_type_t ggml_backend_cuda_buffer_type(int device);
GGML_API ggml_backend_buffer_type_t ggml_backend_cuda_host_buffer_type(void);

/* The per-device memory pool used by kernels for temporaries (quantized
 * activations, dequantized weights). VMM-backed when the device supports
 * it, as ggml does; GGML_CUDA_NO_VMM=1 forces the legacy pool. */
typedef struct ggml_cuda_pool_handle *ggml_cuda_pool_t;
GGML_API ggml_cuda_pool_t ggml_cuda_pool_new(int device);
GGML_API void *ggml_cuda_pool_alloc(ggml_cuda_pool_t pool, size_t size, size_t *actual);
GGML_API void ggml_cuda_pool_free(ggml_cuda_pool_t pool, void *ptr, size_t size);
GGML_API int ggml_cuda_pool_is_vmm(ggml_cuda_pool_t pool);
GGML_API void ggml_cuda_pool_destroy(ggml_cuda_pool_t pool);

/* One layer's worth of kernels for n_tokens: each matmul quantizes its
 * input activations (n_embd, then n_ff wide) into a pool temporary. */
GGML_API void ggml_backend_cuda_graph_compute(ggml_cuda_pool_t pool, size_t n_embd, size_t n_ff, uint32_t n_tokens);

#endif
