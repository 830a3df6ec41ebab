/* libllama.so: see llama.h. The allocation order, the buffer types, the
 * tensor names and the error paths follow llama.cpp (llama-model.cpp,
 * llama-model-loader.cpp, llama-kv-cache.cpp, llama-context.cpp):
 *
 *   llama_model::load_tensors   a ggml context per buffer type, tensors in
 *                               llama.cpp's order and names; then one buffer
 *                               per context, host types first: CPU_Mapped
 *                               over the mapped model file (mmap on) or
 *                               CUDA_Host (mmap off) for token_embd and the
 *                               layers left on the CPU, CUDA<d> for the
 *                               layers on each GPU, each marked WEIGHTS.
 *                               "unable to allocate CUDA0 buffer" fails the
 *                               load: llama.cpp does not retry.
 *   llama_model_loader::load_all_data  places each weight of the mapped
 *                               buffer at its offset in the file
 *                               (ggml_backend_tensor_alloc).
 *   llama_kv_cache::llama_kv_cache  cache_k_lN / cache_v_lN per layer, on
 *                               its layer's GPU, else in a CPU buffer.
 *   llama_context::graph_reserve    a compute buffer per GPU (+ CUDA_Host).
 *   llama_context::decode       graph nodes placed in the compute buffers,
 *                               kernel temporaries from the device pool.
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
#include <sys/mman.h>
#include <unistd.h>
#include <unordered_map>
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
    int ngl = mp->n_gpu_layers < 0 ? n_layer + 1 : mp->n_gpu_layers;
    int i_gpu_start = std::max(n_layer + 1 - ngl, 0);
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

LLAMA_API int llama_params_fit(const llama_model_shape *shape, llama_model_params *mp, const llama_context_params *cp,
                               size_t margin)
{
    if (mp->n_gpu_layers >= 0)
        return -1;
    int n_dev = std::min(ggml_backend_cuda_get_device_count(), LLAMA_MAX_DEVICES);
    if (n_dev == 0)
        return -1;
    size_t free_bytes[LLAMA_MAX_DEVICES], total, need[LLAMA_MAX_DEVICES];
    for (int d = 0; d < n_dev; d++)
        ggml_backend_cuda_get_device_memory(d, &free_bytes[d], &total);
    llama_model_params try_mp = *mp;
    for (int ngl = shape->n_layer + 1; ngl >= 0; ngl--) {
        try_mp.n_gpu_layers = ngl;
        llama_model_plan(shape, &try_mp, cp, n_dev, free_bytes, need);
        bool fits = true;
        for (int d = 0; d < n_dev; d++)
            fits &= need[d] + margin <= free_bytes[d];
        if (!fits)
            continue;
        for (int d = 0; d < n_dev; d++)
            fprintf(stderr, "llama_params_fit: CUDA%d: %zu MiB free, %zu MiB projected with %d layers, %zu MiB target margin\n",
                    d, free_bytes[d] / MiB, need[d] / MiB, ngl, margin / MiB);
        if (ngl <= shape->n_layer)
            fprintf(stderr, "llama_params_fit: the model does not fit: setting n_gpu_layers to %d\n", ngl);
        mp->n_gpu_layers = ngl;
        return ngl;
    }
    return -1;
}

/* ------------------------------------------------------------------ */

/* The model file as llama.cpp maps it: a sparse in-memory file of the
 * model's size (shown as /memfd:NAME in the process's maps), mapped
 * read-only and never read, so a 39 GiB model costs no memory. */
struct llama_mmap {
    void *addr = nullptr;
    size_t size = 0;

    llama_mmap(const char *name, size_t file_size) : size(file_size)
    {
        int fd = memfd_create(name, MFD_CLOEXEC);
        if (fd >= 0 && ftruncate(fd, (off_t)file_size) == 0)
            addr = mmap(nullptr, file_size, PROT_READ, MAP_SHARED | MAP_NORESERVE, fd, 0);
        else
            addr = mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (fd >= 0)
            close(fd);
        if (addr == MAP_FAILED)
            throw std::runtime_error("mmap failed");
    }
    ~llama_mmap() { munmap(addr, size); }
};

/* One weight tensor of the GGUF file: its name, size and offset. */
struct llama_tensor_weight {
    std::string name;
    size_t nbytes, offs;
    int layer;   /* block, n_layer for the output layer, -1 for token_embd */
};

/* The GGUF header (metadata, vocabulary) before the first tensor's data. */
static const size_t GGUF_DATA_OFFSET = 8 * MiB;

struct llama_model_loader {
    const llama_model_shape &shape;
    bool use_mmap;
    std::vector<llama_tensor_weight> weights;   /* in file order */
    std::unordered_map<std::string, size_t> weights_map;
    std::unique_ptr<llama_mmap> mapping;
    size_t file_size = GGUF_DATA_OFFSET;

    llama_model_loader(const llama_model_shape &s, bool mmap_on);
    void add(const std::string &name, size_t nbytes, int layer)
    {
        weights_map[name] = weights.size();
        weights.push_back({name, nbytes, file_size, layer});
        file_size += (nbytes + 31) / 32 * 32;   /* GGUF's default alignment */
    }
    const llama_tensor_weight &weight(const ggml_tensor *t) const
    {
        auto it = weights_map.find(ggml_get_name(t));
        if (it == weights_map.end())
            throw std::runtime_error(std::string("tensor not found: ") + ggml_get_name(t));
        return weights[it->second];
    }
    void load_all_data(ggml_context *ctx, ggml_backend_buffer_t buf_mmap);
};

/* A block's nine tensors, their sizes in the proportions of a llama block
 * (grouped-query attention: K and V an eighth of Q), adding up to the
 * shape's layer_bytes exactly. */
static void add_block(llama_model_loader &ml, int il)
{
    static const char *const mats[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_down", "ffn_up"};
    const llama_model_shape &s = ml.shape;
    double e = s.n_embd, f = s.n_ff;
    double w[] = {e * e, e * e / 8, e * e / 8, e * e, e * f, e * f, e * f};
    size_t norm = (size_t)s.n_embd * 4;
    char name[GGML_MAX_NAME];
    if (s.layer_bytes < 2 * norm + 7 * 128) {
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", il);
        ml.add(name, s.layer_bytes, il);
        return;
    }
    size_t rest = s.layer_bytes - 2 * norm, left = rest;
    double wsum = 0;
    for (double x : w)
        wsum += x;
    snprintf(name, sizeof name, "blk.%d.attn_norm.weight", il);
    ml.add(name, norm, il);
    for (int i = 0; i < 7; i++) {
        size_t n = i < 6 ? (size_t)((double)rest * w[i] / wsum) / 128 * 128 : left;
        left -= n;
        snprintf(name, sizeof name, "blk.%d.%s.weight", il, mats[i]);
        ml.add(name, n, il);
        if (i == 3) {
            snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", il);
            ml.add(name, norm, il);
        }
    }
}

llama_model_loader::llama_model_loader(const llama_model_shape &s, bool mmap_on) : shape(s), use_mmap(mmap_on)
{
    add("token_embd.weight", s.embd_bytes, -1);
    for (int il = 0; il < s.n_layer; il++)
        add_block(*this, il);
    size_t norm = std::min((size_t)s.n_embd * 4, s.output_bytes);
    add("output_norm.weight", norm, s.n_layer);
    add("output.weight", s.output_bytes - norm, s.n_layer);
    if (use_mmap)
        mapping = std::make_unique<llama_mmap>(s.name, file_size);
}

/* Weights in the mapped buffer get their address in the file; the others
 * would be read (or copied from the mapping) into their buffers. */
NOINLINE void llama_model_loader::load_all_data(ggml_context *ctx, ggml_backend_buffer_t buf_mmap)
{
    for (ggml_tensor *t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        const llama_tensor_weight &w = weight(t);
        if (buf_mmap && !ggml_get_data(t) &&
            ggml_backend_tensor_alloc(buf_mmap, t, (char *)mapping->addr + w.offs) != GGML_STATUS_SUCCESS)
            throw std::runtime_error(std::string("cannot place ") + ggml_get_name(t));
    }
}

struct llama_model {
    const llama_model_shape &shape;
    llama_model_params params;
    int n_devices = 0;
    std::vector<int> dev; /* per layer, n_layer = output */
    std::vector<ggml_backend_buffer_t> bufs;
    std::unique_ptr<llama_mmap> mapping;

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

/* Buffer types as llama.cpp orders its contexts: host first. */
struct buft_ctx {
    ggml_backend_buffer_type_t buft;
    ggml_context *ctx;
};

static ggml_context *no_alloc_ctx(void)
{
    return ggml_init({0, nullptr, true});
}

static void free_ctxs(std::vector<buft_ctx> &v)
{
    for (buft_ctx &c : v)
        ggml_free(c.ctx);
}

NOINLINE bool llama_model::load_tensors(llama_model_loader &ml)
{
    std::vector<size_t> free_bytes(n_devices);
    for (int d = 0; d < n_devices; d++) {
        size_t total;
        ggml_backend_cuda_get_device_memory(d, &free_bytes[d], &total);
    }
    int n_layer = ml.shape.n_layer;
    dev.assign(n_layer + 1, -1);
    llama_model_assign_layers(&ml.shape, &params, n_devices, free_bytes.data(), dev.data());

    /* mmap on: the CPU side stays in the file (CPU_Mapped) instead of
     * the pinned host type a GPU build prefers. */
    bool mapped = params.use_mmap;
    ggml_backend_buffer_type_t host_buft =
        mapped || n_devices == 0 ? ggml_backend_cpu_buffer_type() : ggml_backend_cuda_host_buffer_type();
    std::vector<buft_ctx> ctxs;
    ctxs.push_back({host_buft, no_alloc_ctx()});
    for (int d = 0; d < n_devices; d++)
        ctxs.push_back({ggml_backend_cuda_buffer_type(d), no_alloc_ctx()});
    auto ctx_of = [&](int il) { return il >= 0 && il <= n_layer && dev[il] >= 0 ? ctxs[1 + dev[il]].ctx : ctxs[0].ctx; };
    /* llama.cpp creates the input and output layers' tensors first. */
    size_t n_host = 0;
    auto create = [&](const llama_tensor_weight &w) {
        ggml_context *c = ctx_of(w.layer);
        ggml_set_name(ggml_new_tensor_1d(c, GGML_TYPE_I8, (int64_t)w.nbytes), w.name.c_str());
        n_host += c == ctxs[0].ctx;
    };
    for (const llama_tensor_weight &w : ml.weights)
        if (w.layer < 0 || w.layer == n_layer)
            create(w);
    for (const llama_tensor_weight &w : ml.weights)
        if (w.layer >= 0 && w.layer < n_layer)
            create(w);
    if (mapped && n_devices > 0 && n_host)
        fprintf(stderr, "done_getting_tensors: tensor '%s' (and %zu others) cannot be used with preferred buffer type "
                        "CUDA_Host, using CPU instead\n", ml.weights[0].name.c_str(), n_host - 1);

    ggml_backend_buffer_t buf_mmap = nullptr;
    try {
        for (buft_ctx &c : ctxs) {
            ggml_tensor *first = ggml_get_first_tensor(c.ctx);
            if (!first)
                continue;
            ggml_backend_buffer_t buf;
            if (mapped && c.buft == ggml_backend_cpu_buffer_type()) {
                /* Only the range of the file holding this context's tensors. */
                size_t lo = SIZE_MAX, hi = 0;
                for (ggml_tensor *t = first; t; t = ggml_get_next_tensor(c.ctx, t)) {
                    const llama_tensor_weight &w = ml.weight(t);
                    lo = std::min(lo, w.offs);
                    hi = std::max(hi, w.offs + w.nbytes);
                }
                buf = ggml_backend_cpu_buffer_from_ptr((char *)ml.mapping->addr + lo, hi - lo);
                buf_mmap = buf;
            } else {
                buf = ggml_backend_alloc_ctx_tensors_from_buft(c.ctx, c.buft);
            }
            if (!buf)
                throw std::runtime_error(std::string("unable to allocate ") + ggml_backend_buft_name(c.buft) + " buffer");
            bufs.push_back(buf);
            /* ggml's scheduler prefers the backend that holds an op's weights. */
            ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        }
    } catch (...) {
        free_ctxs(ctxs);
        throw;
    }

    int n_rep = 0;
    for (int il = 0; il < n_layer; il++)
        n_rep += dev[il] >= 0;
    if (dev[n_layer] >= 0)
        fprintf(stderr, "load_tensors: offloading output layer to GPU\n");
    fprintf(stderr, "load_tensors: offloading %d repeating layers to GPU\n", n_rep);
    fprintf(stderr, "load_tensors: offloaded %d/%d layers to GPU\n", n_offloaded(), n_layer + 1);
    size_t loaded = 0;
    for (ggml_backend_buffer_t b : bufs) {
        fprintf(stderr, "load_tensors: %12s model buffer size = %8.2f MiB\n", ggml_backend_buffer_name(b),
                mib(ggml_backend_buffer_get_size(b)));
        if (b != buf_mmap)
            loaded += ggml_backend_buffer_get_size(b);
    }
    try {
        for (buft_ctx &c : ctxs)
            ml.load_all_data(c.ctx, c.buft == ggml_backend_cpu_buffer_type() ? buf_mmap : nullptr);
    } catch (...) {
        free_ctxs(ctxs);
        throw;
    }
    free_ctxs(ctxs);
    mapping = std::move(ml.mapping);
    example_pace_read(loaded);
    return true;
}

/* Returns 0, or -1 after printing llama.cpp's error line. */
/* Not static, unlike llama.cpp, so the frame keeps its name without DWARF. */
NOINLINE int llama_model_load(const char *path, llama_model &model)
{
    try {
        llama_model_loader ml(model.shape, model.params.use_mmap);
        fprintf(stderr, "llama_model_loader: loaded meta data from %s (%d layers, %.2f GiB)\n", path,
                model.shape.n_layer, ml.file_size / 1024.0 / 1024.0 / 1024.0);
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
    std::vector<buft_ctx> ctxs;
    ctxs.push_back({ggml_backend_cpu_buffer_type(), no_alloc_ctx()});
    for (int d = 0; d < model.n_devices; d++)
        ctxs.push_back({ggml_backend_cuda_buffer_type(d), no_alloc_ctx()});
    /* [bytes a cell, cells], as llama.cpp's [n_embd_gqa, kv_size, n_stream] */
    size_t cell = model.shape.kv_bytes_token;
    for (int il = 0; il < model.shape.n_layer; il++) {
        int d = offload ? model.dev[il] : -1;
        ggml_context *c = ctxs[d >= 0 ? 1 + d : 0].ctx;
        ggml_tensor *k = ggml_format_name(ggml_new_tensor_2d(c, GGML_TYPE_I8, (int64_t)(cell / 2), kv_size), "cache_k_l%d", il);
        ggml_tensor *v = ggml_format_name(ggml_new_tensor_2d(c, GGML_TYPE_I8, (int64_t)(cell - cell / 2), kv_size),
                                          "cache_v_l%d", il);
        /* the per-stream views llama.cpp keeps of each */
        ggml_view_1d(c, k, k->ne[0] * k->ne[1], 0);
        ggml_view_1d(c, v, v->ne[0] * v->ne[1], 0);
    }
    for (buft_ctx &c : ctxs) {
        if (!ggml_get_first_tensor(c.ctx))
            continue;
        ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(c.ctx, c.buft);
        if (!buf) {
            for (ggml_backend_buffer_t b : bufs)
                ggml_backend_buffer_free(b);
            free_ctxs(ctxs);
            throw std::runtime_error("failed to allocate buffer for kv cache");
        }
        bufs.push_back(buf);
        fprintf(stderr, "llama_kv_cache: %10s KV buffer size = %8.2f MiB\n", ggml_backend_buffer_name(buf),
                mib(ggml_backend_buffer_get_size(buf)));
    }
    free_ctxs(ctxs);
    fprintf(stderr, "llama_kv_cache: size = %8.2f MiB (%6u cells, %3d layers)\n",
            mib((size_t)kv_size * cell * model.shape.n_layer), kv_size, model.shape.n_layer);
}

struct llama_context {
    llama_model &model;
    llama_context_params cparams;
    std::vector<std::unique_ptr<llama_kv_cache>> memory; /* >1 only when growing */
    ggml_backend_sched_t sched = nullptr;
    int n_backends = 0;
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
    bool has_layers(int d) const { return std::find(model.dev.begin(), model.dev.end(), d) != model.dev.end(); }
    bool graph_reserve(uint32_t n_tokens);
    void graph_compute(uint32_t n_tokens);
    int decode(uint32_t n_tokens);
};

NOINLINE llama_context::llama_context(llama_model &m, const llama_context_params &p) : model(m), cparams(p)
{
    memory.push_back(std::make_unique<llama_kv_cache>(model, cparams.n_ctx, true));

    ggml_backend_buffer_type_t bufts[LLAMA_MAX_DEVICES + 1];
    for (int d = 0; d < model.n_devices; d++)
        bufts[n_backends++] = ggml_backend_cuda_buffer_type(d);
    bufts[n_backends++] = model.n_devices ? ggml_backend_cuda_host_buffer_type() : ggml_backend_cpu_buffer_type();
    sched = ggml_backend_sched_new(bufts, n_backends);
    if (!graph_reserve(cparams.n_ubatch)) {
        /* A throwing constructor runs no destructor: free what was reserved
         * on the other GPUs here. */
        ggml_backend_sched_free(sched);
        sched = nullptr;
        throw std::runtime_error("failed to allocate compute pp buffers");
    }
    for (int i = 0; i < n_backends; i++)
        if (ggml_backend_sched_get_buffer_size(sched, i))
            fprintf(stderr, "sched_reserve: %10s compute buffer size = %8.2f MiB\n",
                    ggml_backend_sched_get_buffer_name(sched, i), mib(ggml_backend_sched_get_buffer_size(sched, i)));
}

NOINLINE bool llama_context::graph_reserve(uint32_t n_tokens)
{
    size_t sizes[LLAMA_MAX_DEVICES + 1] = {0};
    int n = 0;
    for (int d = 0; d < model.n_devices; d++)
        sizes[n++] = has_layers(d) ? model.shape.compute_bytes : 0;
    sizes[n++] = model.shape.host_compute_bytes;
    (void)n_tokens;
    if (!ggml_backend_sched_reserve(sched, sizes)) {
        fprintf(stderr, "graph_reserve: failed to allocate compute buffers\n");
        return false;
    }
    return true;
}

/* The graph's nodes on each backend: the input, then each layer's
 * attention and FFN outputs (n_embd floats per token), placed by the
 * scheduler in that backend's compute buffer. */
NOINLINE void llama_context::graph_compute(uint32_t n_tokens)
{
    ggml_context *graphs[LLAMA_MAX_DEVICES + 1] = {};
    int64_t act = (int64_t)model.shape.n_embd * n_tokens;
    for (int i = 0; i < n_backends; i++)
        if (ggml_backend_sched_get_buffer_size(sched, i))
            graphs[i] = no_alloc_ctx();
    if (graphs[n_backends - 1])
        ggml_set_name(ggml_new_tensor_1d(graphs[n_backends - 1], GGML_TYPE_F32, act), "inp_embd");
    for (int il = 0; il < model.shape.n_layer; il++) {
        int b = model.dev[il] >= 0 ? model.dev[il] : n_backends - 1;
        if (!graphs[b])
            continue;
        ggml_format_name(ggml_new_tensor_1d(graphs[b], GGML_TYPE_F32, act), "attn_out-%d", il);
        ggml_format_name(ggml_new_tensor_1d(graphs[b], GGML_TYPE_F32, act), "ffn_out-%d", il);
    }
    if (!ggml_backend_sched_alloc_graph(sched, graphs))
        fprintf(stderr, "graph_compute: failed to allocate the graph\n");
    for (ggml_context *g : graphs)
        ggml_free(g);
    for (int d = 0; d < model.n_devices; d++) {
        if (!has_layers(d))
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

LLAMA_API void llama_memory_clear(llama_context *ctx)
{
    ctx->n_past = 0;
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
