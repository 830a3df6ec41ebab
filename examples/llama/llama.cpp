/* libllama.so: see llama.h. The allocation order, the buffer types and
 * the error paths follow llama.cpp:
 *
 *   llama_model::load_tensors   one buffer per buffer type: CUDA<d> for the
 *                               layers on each GPU, CUDA_Host (mmap off) or
 *                               CPU for token_embd and the layers left on
 *                               the CPU; "unable to allocate CUDA0 buffer"
 *                               aborts the load.
 *   llama_kv_cache::llama_kv_cache  one KV buffer per GPU for its layers, a
 *                               CPU buffer for the rest.
 *   llama_context::graph_reserve    a compute buffer per GPU (+ CUDA_Host).
 *   llama_context::decode       kernel temporaries from the device pool.
 */
#include "llama.h"

#include "../ggml/ggml.h"
#include "../common/pace.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <stdio.h>
#include <string.h>
#include <string>
#include <vector>

#define NOINLINE __attribute__((noinline, visibility("default")))

static const llama_model_shape shapes[] = {
    /* name                 layers layer     output    embd      kv/token/layer compute    host cmp  embd   ff */
    {"llama-70b-q4_k_m",    80, 450 * MiB, 820 * MiB, 564 * MiB, 4096,  1088 * MiB, 80 * MiB, 8192, 28672},
    {"qwen2.5-32b-q4_k_m",  64, 290 * MiB, 640 * MiB, 400 * MiB, 4096,   700 * MiB, 48 * MiB, 5120, 27648},
    {"qwen3-32b-q8_0",      64, 500 * MiB, 790 * MiB, 790 * MiB, 4096,   700 * MiB, 48 * MiB, 5120, 25600},
    {"llama-13b-q4_k_m",    40, 180 * MiB, 200 * MiB, 140 * MiB, 20480,  300 * MiB, 26 * MiB, 5120, 13824},
    {"llama-8b-q4_k_m",     32, 130 * MiB, 410 * MiB, 282 * MiB, 4096,   260 * MiB, 24 * MiB, 4096, 14336},
};

LLAMA_API const llama_model_shape *llama_model_shape_find(const char *name)
{
    for (const llama_model_shape &s : shapes)
        if (!strcmp(s.name, name))
            return &s;
    return nullptr;
}

LLAMA_API void llama_model_shape_list(void)
{
    for (const llama_model_shape &s : shapes)
        fprintf(stderr, "  %-20s %2d layers x %4zu MiB, output %4zu MiB, KV %zu B/token/layer\n", s.name,
                s.n_layer, s.layer_bytes / MiB, s.output_bytes / MiB, s.kv_bytes_token);
}

static double mib(size_t b) { return b / 1024.0 / 1024.0; }

LLAMA_API int llama_model_assign_layers(const llama_model_shape *shape, const llama_model_params *mp,
                                        int n_devices, const size_t *free_bytes, int *dev)
{
    int n_layer = shape->n_layer;
    int ngl = std::max(mp->n_gpu_layers, 0);
    int i_gpu_start = std::max(n_layer - ngl, 0);
    int act = n_devices > 0 ? std::min(ngl, n_layer + 1) : 0;
    float splits[LLAMA_MAX_DEVICES] = {0};
    float sum = 0;
    bool explicit_split = false;
    for (int d = 0; d < n_devices; d++)
        explicit_split |= mp->tensor_split[d] > 0;
    for (int d = 0; d < n_devices; d++) {
        sum += explicit_split ? mp->tensor_split[d] : (float)free_bytes[d];
        splits[d] = sum;
    }
    for (int d = 0; d < n_devices; d++)
        splits[d] = sum > 0 ? splits[d] / sum : (float)(d + 1) / n_devices;
    int used = 0;
    for (int il = 0; il <= n_layer; il++) {
        dev[il] = -1;
        if (il < i_gpu_start || il - i_gpu_start >= act)
            continue;
        float pos = (float)(il - i_gpu_start) / act;
        int d = (int)(std::upper_bound(splits, splits + n_devices, pos) - splits);
        dev[il] = std::min(d, n_devices - 1);
        used |= 1 << dev[il];
    }
    return __builtin_popcount(used);
}

LLAMA_API void llama_model_plan(const llama_model_shape *shape, const llama_model_params *mp,
                                const llama_context_params *cp, int n_devices, const size_t *free_bytes,
                                size_t *need)
{
    std::vector<int> dev(shape->n_layer + 1);
    llama_model_assign_layers(shape, mp, n_devices, free_bytes, dev.data());
    for (int d = 0; d < n_devices; d++)
        need[d] = 0;
    for (int il = 0; il <= shape->n_layer; il++) {
        if (dev[il] < 0)
            continue;
        if (il == shape->n_layer) {
            need[dev[il]] += shape->output_bytes;
            continue;
        }
        need[dev[il]] += shape->layer_bytes + (size_t)cp->n_ctx * shape->kv_bytes_token;
    }
    for (int d = 0; d < n_devices; d++)
        if (need[d])
            need[d] += shape->compute_bytes;
}

/* ------------------------------------------------------------------ */

struct llama_model_loader {
    const llama_model_shape &shape;
};

struct llama_model {
    const llama_model_shape &shape;
    llama_model_params params;
    int n_devices = 0;
    std::vector<int> dev; /* per layer, n_layer = output */
    std::vector<ggml_backend_buffer_t> bufs;

    llama_model(const llama_model_shape &s, const llama_model_params &p) : shape(s), params(p) {}
    ~llama_model()
    {
        for (ggml_backend_buffer_t b : bufs)
            ggml_backend_buffer_free(b);
    }

    bool load_tensors(llama_model_loader &ml);
    int n_offloaded() const
    {
        int n = 0;
        for (int d : dev)
            n += d >= 0;
        return n;
    }
};

static void alloc_or_throw(std::vector<ggml_backend_buffer_t> &out, ggml_context *ctx, ggml_backend_buffer_type_t buft,
                           const char *who, const char *what, ggml_backend_buffer_usage usage)
{
    if (ctx->total == 0)
        return;
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
    if (!buf)
        throw std::runtime_error(std::string("unable to allocate ") + ggml_backend_buft_name(buft) + " buffer");
    if (usage != GGML_BACKEND_BUFFER_USAGE_ANY)
        ggml_backend_buffer_set_usage(buf, usage);
    out.push_back(buf);
    fprintf(stderr, "%s: %10s %s buffer size = %8.2f MiB\n", who, ggml_backend_buft_name(buf->buft), what, mib(buf->size));
}

NOINLINE bool llama_model::load_tensors(llama_model_loader &ml)
{
    std::vector<size_t> free_bytes(n_devices);
    for (int d = 0; d < n_devices; d++) {
        size_t total;
        ggml_backend_cuda_get_device_memory(d, &free_bytes[d], &total);
    }
    dev.assign(ml.shape.n_layer + 1, -1);
    llama_model_assign_layers(&ml.shape, &params, n_devices, free_bytes.data(), dev.data());

    int n_rep = 0;
    for (int il = 0; il < ml.shape.n_layer; il++)
        n_rep += dev[il] >= 0;
    fprintf(stderr, "load_tensors: offloading %d repeating layers to GPU\n", n_rep);
    if (dev[ml.shape.n_layer] >= 0)
        fprintf(stderr, "load_tensors: offloading output layer to GPU\n");
    fprintf(stderr, "load_tensors: offloaded %d/%d layers to GPU\n", n_offloaded(), ml.shape.n_layer + 1);

    std::vector<ggml_context *> dctx(n_devices);
    for (ggml_context *&c : dctx)
        c = ggml_init();
    ggml_context *host = ggml_init();
    ggml_new_tensor_bytes(host, ml.shape.embd_bytes);
    for (int il = 0; il <= ml.shape.n_layer; il++) {
        size_t bytes = il == ml.shape.n_layer ? ml.shape.output_bytes : ml.shape.layer_bytes;
        ggml_new_tensor_bytes(dev[il] >= 0 ? dctx[dev[il]] : host, bytes);
    }
    ggml_backend_buffer_type_t host_buft =
        params.use_mmap || n_devices == 0 ? ggml_backend_cpu_buffer_type() : ggml_backend_cuda_host_buffer_type();
    try {
        for (int d = 0; d < n_devices; d++)
            alloc_or_throw(bufs, dctx[d], ggml_backend_cuda_buffer_type(d), "load_tensors", "model", GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        alloc_or_throw(bufs, host, host_buft, "load_tensors", "model", GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    } catch (...) {
        for (ggml_context *c : dctx)
            ggml_free(c);
        ggml_free(host);
        throw;
    }
    for (ggml_context *c : dctx)
        ggml_free(c);
    ggml_free(host);
    size_t loaded = 0;
    for (ggml_backend_buffer_t b : bufs)
        loaded += b->size;
    example_pace_read(loaded);
    return true;
}

/* Returns 0, or -1 after printing llama.cpp's error line. */
/* Not static, unlike llama.cpp, so the frame keeps its name without DWARF. */
NOINLINE int llama_model_load(const char *path, llama_model &model)
{
    try {
        llama_model_loader ml{model.shape};
        fprintf(stderr, "llama_model_loader: loaded meta data from %s (%d layers)\n", path, model.shape.n_layer);
        example_pace_ms(20);
        model.load_tensors(ml);
    } catch (const std::exception &err) {
        fprintf(stderr, "llama_model_load: error loading model: %s\n", err.what());
        return -1;
    }
    return 0;
}

LLAMA_API llama_model *llama_model_load_from_file(const char *path, const llama_model_shape *shape,
                                                  llama_model_params mp)
{
    llama_model *model = new llama_model(*shape, mp);
    model->n_devices = std::min(ggml_backend_cuda_get_device_count(), LLAMA_MAX_DEVICES);
    for (int d = 0; d < model->n_devices; d++) {
        size_t free, total;
        ggml_backend_cuda_get_device_memory(d, &free, &total);
        fprintf(stderr, "llama_model_load_from_file: using device CUDA%d - %zu MiB free\n", d, free / MiB);
    }
    if (llama_model_load(path, *model) < 0) {
        fprintf(stderr, "llama_model_load_from_file: failed to load model\n");
        delete model;
        return nullptr;
    }
    return model;
}

LLAMA_API void llama_model_free(llama_model *model)
{
    delete model;
}

LLAMA_API int llama_model_n_offloaded(const llama_model *model)
{
    return model->n_offloaded();
}

/* ------------------------------------------------------------------ */

struct llama_kv_cache {
    uint32_t size;
    std::vector<ggml_backend_buffer_t> bufs;

    llama_kv_cache(const llama_model &model, uint32_t kv_size, bool offload);
    ~llama_kv_cache()
    {
        for (ggml_backend_buffer_t b : bufs)
            ggml_backend_buffer_free(b);
    }
};

NOINLINE llama_kv_cache::llama_kv_cache(const llama_model &model, uint32_t kv_size, bool offload) : size(kv_size)
{
    std::vector<ggml_context *> dctx(model.n_devices);
    for (ggml_context *&c : dctx)
        c = ggml_init();
    ggml_context *cpu = ggml_init();
    size_t per_layer = (size_t)kv_size * model.shape.kv_bytes_token;
    for (int il = 0; il < model.shape.n_layer; il++) {
        int d = offload ? model.dev[il] : -1;
        ggml_new_tensor_bytes(d >= 0 ? dctx[d] : cpu, per_layer);
    }
    try {
        for (int d = 0; d < model.n_devices; d++)
            alloc_or_throw(bufs, dctx[d], ggml_backend_cuda_buffer_type(d), "llama_kv_cache", "KV", GGML_BACKEND_BUFFER_USAGE_ANY);
        alloc_or_throw(bufs, cpu, ggml_backend_cpu_buffer_type(), "llama_kv_cache", "KV", GGML_BACKEND_BUFFER_USAGE_ANY);
    } catch (...) {
        for (ggml_backend_buffer_t b : bufs)
            ggml_backend_buffer_free(b);
        for (ggml_context *c : dctx)
            ggml_free(c);
        ggml_free(cpu);
        throw std::runtime_error("failed to allocate buffer for kv cache");
    }
    for (ggml_context *c : dctx)
        ggml_free(c);
    ggml_free(cpu);
    fprintf(stderr, "llama_kv_cache: size = %8.2f MiB (%6u cells, %3d layers)\n",
            mib(per_layer * model.shape.n_layer), kv_size, model.shape.n_layer);
}

struct llama_context {
    llama_model &model;
    llama_context_params cparams;
    std::vector<std::unique_ptr<llama_kv_cache>> memory; /* >1 only when growing */
    ggml_backend_sched_t sched = nullptr;
    ggml_cuda_pool_t pools[LLAMA_MAX_DEVICES] = {};
    uint32_t n_past = 0;

    llama_context(llama_model &m, const llama_context_params &p);
    ~llama_context()
    {
        for (ggml_cuda_pool_t p : pools)
            ggml_cuda_pool_destroy(p);
        ggml_backend_sched_free(sched);
    }
    uint32_t n_cells() const
    {
        uint32_t n = 0;
        for (const auto &kv : memory)
            n += kv->size;
        return n;
    }
    bool graph_reserve(uint32_t n_tokens);
    void graph_compute(uint32_t n_tokens);
    int decode(uint32_t n_tokens);
};

NOINLINE llama_context::llama_context(llama_model &m, const llama_context_params &p) : model(m), cparams(p)
{
    memory.push_back(std::make_unique<llama_kv_cache>(model, cparams.n_ctx, true));

    ggml_backend_buffer_type_t bufts[LLAMA_MAX_DEVICES + 1];
    int n = 0;
    for (int d = 0; d < model.n_devices; d++)
        bufts[n++] = ggml_backend_cuda_buffer_type(d);
    bufts[n++] = model.n_devices ? ggml_backend_cuda_host_buffer_type() : ggml_backend_cpu_buffer_type();
    sched = ggml_backend_sched_new(bufts, n);
    if (!graph_reserve(cparams.n_ubatch)) {
        /* A throwing constructor runs no destructor: free what was reserved
         * on the other GPUs here, or the retry would find it still held. */
        ggml_backend_sched_free(sched);
        sched = nullptr;
        throw std::runtime_error("failed to allocate compute pp buffers");
    }
    for (int i = 0; i < n; i++)
        if (ggml_backend_sched_get_buffer_size(sched, i))
            fprintf(stderr, "llama_context: %10s compute buffer size = %8.2f MiB\n",
                    ggml_backend_sched_get_buffer_name(sched, i), mib(ggml_backend_sched_get_buffer_size(sched, i)));
}

NOINLINE bool llama_context::graph_reserve(uint32_t n_tokens)
{
    size_t sizes[LLAMA_MAX_DEVICES + 1] = {0};
    int n = 0;
    for (int d = 0; d < model.n_devices; d++) {
        bool has_layers = std::find(model.dev.begin(), model.dev.end(), d) != model.dev.end();
        sizes[n++] = has_layers ? model.shape.compute_bytes : 0;
    }
    sizes[n++] = model.shape.host_compute_bytes;
    (void)n_tokens;
    if (!ggml_backend_sched_reserve(sched, sizes)) {
        fprintf(stderr, "graph_reserve: failed to allocate compute buffers\n");
        return false;
    }
    return true;
}

NOINLINE void llama_context::graph_compute(uint32_t n_tokens)
{
    for (int d = 0; d < model.n_devices; d++) {
        if (std::find(model.dev.begin(), model.dev.end(), d) == model.dev.end())
            continue;
        if (!pools[d])
            pools[d] = ggml_cuda_pool_new(d);
        ggml_backend_cuda_graph_compute(pools[d], model.shape.n_embd, model.shape.n_ff, n_tokens);
    }
}

NOINLINE int llama_context::decode(uint32_t n_tokens)
{
    if (n_past + n_tokens > n_cells()) {
        if (!cparams.kv_grow) {
            fprintf(stderr, "decode: failed to find a memory slot for batch of size %u\n", n_tokens);
            return 1;
        }
        while (n_past + n_tokens > n_cells()) {
            try {
                memory.push_back(std::make_unique<llama_kv_cache>(model, cparams.kv_grow, true));
            } catch (const std::exception &e) {
                fprintf(stderr, "decode: cannot grow the KV cache past %u cells: %s\n", n_cells(), e.what());
                fprintf(stderr, "decode: failed to find a memory slot for batch of size %u\n", n_tokens);
                return 1;
            }
        }
    }
    for (uint32_t done = 0; done < n_tokens; done += cparams.n_ubatch) {
        graph_compute(std::min(cparams.n_ubatch, n_tokens - done));
        example_pace_ms(2);
    }
    n_past += n_tokens;
    return 0;
}

LLAMA_API llama_context *llama_init_from_model(llama_model *model, llama_context_params cp)
{
    if (!cp.n_ubatch)
        cp.n_ubatch = 512;
    try {
        return new llama_context(*model, cp);
    } catch (const std::exception &err) {
        fprintf(stderr, "llama_init_from_model: failed to initialize the context: %s\n", err.what());
        return nullptr;
    }
}

LLAMA_API void llama_free(llama_context *ctx)
{
    delete ctx;
}

LLAMA_API int llama_decode(llama_context *ctx, uint32_t n_tokens)
{
    return ctx->decode(n_tokens);
}

LLAMA_API uint32_t llama_n_ctx(const llama_context *ctx)
{
    return ctx->n_cells();
}

LLAMA_API uint32_t llama_n_past(const llama_context *ctx)
{
    return ctx->n_past;
}
