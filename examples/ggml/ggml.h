/* A miniature of ggml's backend allocation layer: the part of llama.cpp
 * that turns "these tensors live on CUDA0" into cudaMalloc calls, and
 * "these tensors stay in the model file" into a CPU_Mapped buffer.
 *
 * Why it exists: vramtrace tags allocations by the names of the frames on
 * their call stack, and reads where the model runs from ggml's own API
 * (preload/ggml_buffers.c hooks ggml_backend_alloc_ctx_tensors_from_buft,
 * ggml_backend_tensor_alloc, ggml_backend_buffer_set_usage and
 * ggml_backend_buffer_free, then reads buffers and tensors through ggml's
 * exported getters). So the examples reach the CUDA runtime through the
 * same functions, in the same shared libraries (libggml-base.so,
 * libggml-cuda.so), with the same signatures, as real llama.cpp / ollama
 * builds do:
 *
 *   weights  llama_model::load_tensors        \
 *   KV       llama_kv_cache::llama_kv_cache    > ggml_backend_alloc_ctx_tensors_from_buft
 *                                             /   -> alloc_tensor_range -> ggml_backend_buft_alloc_buffer
 *                                                 -> ggml_backend_cuda_buffer_type_alloc_buffer
 *                                                 -> ggml_cuda_device_malloc -> cudaMalloc
 *                                                 then ggml_backend_tensor_alloc per tensor
 *   mmap     llama_model::load_tensors -> ggml_backend_cpu_buffer_from_ptr (CPU_Mapped),
 *            then llama_model_loader::load_all_data -> ggml_backend_tensor_alloc per tensor
 *   scratch  llama_context::graph_reserve -> ggml_backend_sched_reserve
 *                 -> ggml_gallocr_reserve_n -> ggml_backend_buft_alloc_buffer -> ...
 *            decode -> ggml_backend_sched_alloc_graph -> ggml_backend_tensor_alloc per node
 *                   -> ggml_cuda_pool_leg::alloc / ggml_cuda_pool_vmm::alloc
 *
 * Tensors are byte blobs (GGML_TYPE_I8, one dimension) with their real
 * names; no data is ever read, copied or written, and host buffers are
 * mappings that are never touched. Every function that must show up as a
 * frame is noinline and the libraries keep frame pointers. Exported
 * functions are called through the PLT from inside libggml-base too, as in
 * a real -fPIC build: the shim must tell ggml-alloc's own calls from
 * llama.cpp's.
 */
#ifndef EXAMPLES_GGML_H
#define EXAMPLES_GGML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GGML_API extern "C" __attribute__((visibility("default"), noinline))

#define MiB ((size_t)1024 * 1024)
#define GGML_MAX_NAME 64

/* ggml.h's values for the types used here. */
enum ggml_type {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_I8 = 24,
};

enum ggml_status {
    GGML_STATUS_ALLOC_FAILED = -2,
    GGML_STATUS_FAILED = -1,
    GGML_STATUS_SUCCESS = 0,
};

struct ggml_backend_buffer_type;
struct ggml_backend_buffer;
typedef struct ggml_backend_buffer_type *ggml_backend_buffer_type_t;
typedef struct ggml_backend_buffer *ggml_backend_buffer_t;

/* A tensor: a name, a size and where its bytes are. ggml keeps more (the
 * shape, strides, the op); nothing here computes. next chains the tensors
 * of a context in creation order, as ggml's object list does. */
struct ggml_tensor {
    enum ggml_type type;
    ggml_backend_buffer_t buffer;   /* set by ggml_backend_tensor_alloc / view_init */
    int64_t ne[4];
    size_t nb[4];
    struct ggml_tensor *view_src;   /* a view's source, NULL for a tensor of its own */
    size_t view_offs;
    void *data;                     /* NULL until allocated */
    char name[GGML_MAX_NAME];
    struct ggml_tensor *next;
};

struct ggml_init_params {
    size_t mem_size;    /* ggml's arena; unused here (tensors are heap objects) */
    void *mem_buffer;
    bool no_alloc;      /* llama.cpp's contexts are all no_alloc: backends place the data */
};

struct ggml_context;

GGML_API struct ggml_context *ggml_init(struct ggml_init_params params);
GGML_API void ggml_free(struct ggml_context *ctx);
GGML_API struct ggml_tensor *ggml_new_tensor_1d(struct ggml_context *ctx, enum ggml_type type, int64_t ne0);
GGML_API struct ggml_tensor *ggml_new_tensor_2d(struct ggml_context *ctx, enum ggml_type type, int64_t ne0, int64_t ne1);
GGML_API int64_t ggml_nrows(const struct ggml_tensor *tensor);
GGML_API struct ggml_tensor *ggml_view_1d(struct ggml_context *ctx, struct ggml_tensor *a, int64_t ne0, size_t offset);
GGML_API struct ggml_tensor *ggml_set_name(struct ggml_tensor *tensor, const char *name);
GGML_API struct ggml_tensor *ggml_format_name(struct ggml_tensor *tensor, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
GGML_API const char *ggml_get_name(const struct ggml_tensor *tensor);
GGML_API size_t ggml_nbytes(const struct ggml_tensor *tensor);
GGML_API void *ggml_get_data(const struct ggml_tensor *tensor);
GGML_API struct ggml_tensor *ggml_get_first_tensor(const struct ggml_context *ctx);
GGML_API struct ggml_tensor *ggml_get_next_tensor(const struct ggml_context *ctx, struct ggml_tensor *tensor);

/* --- ggml-backend.h: buffer types and buffers --- */

struct ggml_backend_buffer_type_i {
    const char *(*get_name)(ggml_backend_buffer_type_t buft);
    ggml_backend_buffer_t (*alloc_buffer)(ggml_backend_buffer_type_t buft, size_t size);
    size_t (*get_alignment)(ggml_backend_buffer_type_t buft);
    bool (*is_host)(ggml_backend_buffer_type_t buft);
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
    void (*free_buffer)(ggml_backend_buffer_t buf);   /* releases the memory; NULL: not ours (CPU_Mapped) */
    ggml_backend_buffer_type_t buft;
    void *base;
    size_t size;
#ifdef GGML_EXAMPLE_LAYOUT_B
    size_t layout_b;  /* another ggml version's layout: usage at another offset (76-fault-interpose) */
#endif
    enum ggml_backend_buffer_usage usage;  /* ANY until set_usage */
};

GGML_API const char *ggml_backend_buft_name(ggml_backend_buffer_type_t buft);
GGML_API ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size);
GGML_API size_t ggml_backend_buft_get_alignment(ggml_backend_buffer_type_t buft);
GGML_API bool ggml_backend_buft_is_host(ggml_backend_buffer_type_t buft);

/* The buffer API as libggml-base.so exports it. */
GGML_API void ggml_backend_buffer_free(ggml_backend_buffer_t buffer);
GGML_API void ggml_backend_buffer_set_usage(ggml_backend_buffer_t buffer, enum ggml_backend_buffer_usage usage);
GGML_API enum ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t buffer);
GGML_API void *ggml_backend_buffer_get_base(ggml_backend_buffer_t buffer);
GGML_API size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t buffer);
GGML_API const char *ggml_backend_buffer_name(ggml_backend_buffer_t buffer);
GGML_API ggml_backend_buffer_type_t ggml_backend_buffer_get_type(ggml_backend_buffer_t buffer);
GGML_API bool ggml_backend_buffer_is_host(ggml_backend_buffer_t buffer);
GGML_API bool ggml_backend_buffer_is_multi_buffer(ggml_backend_buffer_t buffer);

/* Places tensor at addr inside buffer (ggml-alloc calls it for each
 * tensor it allocates; llama.cpp for each weight it leaves in the mapped
 * model file). A view takes its source's buffer through view_init. */
GGML_API enum ggml_status ggml_backend_tensor_alloc(ggml_backend_buffer_t buffer, struct ggml_tensor *tensor, void *addr);
GGML_API enum ggml_status ggml_backend_view_init(struct ggml_tensor *tensor);

/* "CPU": pageable host memory, invisible to CUDA. */
GGML_API ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type(void);
/* "CPU_Mapped": memory the program already has (llama.cpp's mmap of the
 * model file), wrapped as a buffer; freeing the buffer leaves it mapped. */
GGML_API ggml_backend_buffer_t ggml_backend_cpu_buffer_from_ptr(void *ptr, size_t size);

/* --- ggml-alloc.h --- */

/* One buffer for every tensor of ctx that has no data yet, each tensor
 * placed with ggml_backend_tensor_alloc, each view with view_init. NULL
 * (and an error line, as ggml prints it) when the buffer type's
 * allocation fails, or when there is nothing to allocate. */
GGML_API ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(struct ggml_context *ctx,
                                                                       ggml_backend_buffer_type_t buft);

/* Graph allocator: one compute buffer per backend, grown on reserve; a
 * graph's nodes are placed in it at each evaluation. */
typedef struct ggml_gallocr *ggml_gallocr_t;
GGML_API ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft);
GGML_API bool ggml_gallocr_reserve_n(ggml_gallocr_t galloc, size_t graph_bytes);
GGML_API bool ggml_gallocr_alloc_graph(ggml_gallocr_t galloc, struct ggml_context *graph);
GGML_API size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc);
GGML_API void ggml_gallocr_free(ggml_gallocr_t galloc);

/* Scheduler: n backends, each with its compute buffer type and the graph
 * size it needs on that backend. */
#define GGML_SCHED_MAX_BACKENDS 8
typedef struct ggml_backend_sched *ggml_backend_sched_t;
GGML_API ggml_backend_sched_t ggml_backend_sched_new(ggml_backend_buffer_type_t *bufts, int n);
GGML_API bool ggml_backend_sched_reserve(ggml_backend_sched_t sched, const size_t *graph_bytes);
/* graphs[i]: the nodes backend i computes (NULL: none). */
GGML_API bool ggml_backend_sched_alloc_graph(ggml_backend_sched_t sched, struct ggml_context *const *graphs);
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
