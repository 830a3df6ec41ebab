/* A miniature libllama: model loading, KV cache, context and decode, with
 * the class and method names of llama.cpp so that vramtrace's built-in
 * rules tag their allocations (weights / KV / scratch) exactly as they
 * would in a real llama.cpp or ollama process, and with llama.cpp's
 * tensor names (token_embd.weight, blk.N.attn_q.weight, ..., output.weight,
 * cache_k_lN) so that the shim's ggml hooks see where each layer went.
 *
 * A "model" is a shape (llama_model_shape): layer count and byte sizes
 * from a real GGUF of that name, rounded to MiB. Nothing is read from
 * disk: with mmap on, the "file" is a sparse in-memory file of the model's
 * size, mapped and never touched; other buffers are never filled.
 */
#ifndef EXAMPLES_LLAMA_H
#define EXAMPLES_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#define LLAMA_API __attribute__((visibility("default"), noinline))
#define LLAMA_MAX_DEVICES 8

struct llama_model_shape {
    const char *name;
    int n_layer;
    size_t layer_bytes;     /* one repeating layer's weights */
    size_t output_bytes;    /* output.weight: offloaded as "layer n_layer" */
    size_t embd_bytes;      /* token_embd: always on the CPU side */
    size_t kv_bytes_token;  /* K+V bytes per token per layer */
    size_t compute_bytes;   /* compute buffer on each GPU that holds layers */
    size_t host_compute_bytes;
    int n_embd, n_ff;       /* sizes of kernel temporaries in decode */
};

/* The built-in shapes; NULL if NAME is unknown. */
LLAMA_API const llama_model_shape *llama_model_shape_find(const char *name);
LLAMA_API void llama_model_shape_list(void);

struct llama_model_params {
    int n_gpu_layers;          /* layers to offload, the output layer first, then
                                  blocks from the last; -1: not set (all, unless
                                  llama_params_fit lowers it) */
    bool use_mmap;             /* on: CPU layers stay in the mapped model file
                                  (CPU_Mapped); off: pinned CUDA_Host buffers */
    float tensor_split[LLAMA_MAX_DEVICES]; /* all zero: split by free memory */
};

struct llama_context_params {
    uint32_t n_ctx;      /* KV cells allocated up front */
    uint32_t n_ubatch;   /* tokens per decode step */
    uint32_t kv_grow;    /* if non-zero, add KV cells in steps of this many
                            when a batch does not fit (0 = fixed, as llama.cpp) */
};

struct llama_model;
struct llama_context;

/* Where each layer goes: dev[il] for il in 0..n_layer (n_layer = output),
 * -1 = CPU. llama.cpp's rule: the last n_gpu_layers of the n_layer + 1
 * (blocks, then the output layer) go to the GPUs, split by tensor_split
 * or free memory. Returns devices used. */
LLAMA_API int llama_model_assign_layers(const llama_model_shape *shape, const llama_model_params *mp,
                                        int n_devices, const size_t *free_bytes, int *dev);

/* Device bytes each GPU would need for mp and cp (weights + KV + compute). */
LLAMA_API void llama_model_plan(const llama_model_shape *shape, const llama_model_params *mp,
                                const llama_context_params *cp, int n_devices, const size_t *free_bytes,
                                size_t *need);

/* llama.cpp's --fit: when n_gpu_layers is not set (-1), lowers it to the
 * most layers whose plan leaves `margin` bytes free on every GPU, from a
 * dry run (no allocation). An -ngl the user gave is left as it is, as
 * llama.cpp adjusts only what was not set. Returns the layers chosen, or
 * -1 when nothing was changed. */
LLAMA_API int llama_params_fit(const llama_model_shape *shape, llama_model_params *mp, const llama_context_params *cp,
                               size_t margin);

/* NULL on failure, after printing llama.cpp's error lines: a buffer that
 * cannot be allocated fails the load (llama.cpp does not retry). */
LLAMA_API llama_model *llama_model_load_from_file(const char *path, const llama_model_shape *shape,
                                                  llama_model_params mp);
LLAMA_API void llama_model_free(llama_model *model);
LLAMA_API int llama_model_n_offloaded(const llama_model *model);

/* NULL when the KV cache or a compute buffer cannot be allocated. */
LLAMA_API llama_context *llama_init_from_model(llama_model *model, llama_context_params cp);
LLAMA_API void llama_free(llama_context *ctx);
/* Forgets the conversation (a new request on a server's slot). */
LLAMA_API void llama_memory_clear(llama_context *ctx);

/* 0 on success, 1 when no KV slot could be found or made for the batch
 * (llama.cpp's return value for a full cache), -1 on other errors. */
LLAMA_API int llama_decode(llama_context *ctx, uint32_t n_tokens);
LLAMA_API uint32_t llama_n_ctx(const llama_context *ctx);
LLAMA_API uint32_t llama_n_past(const llama_context *ctx);

#endif
