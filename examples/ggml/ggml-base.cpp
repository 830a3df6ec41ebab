/* libggml-base.so: tensors and contexts (ggml.c), buffer types and buffers
 * (ggml-backend.cpp), the context and graph allocators (ggml-alloc.c).
 * Nothing here knows about CUDA: it calls the buffer type's alloc_buffer,
 * which is how weights, KV and compute buffers all end up in the same
 * ggml_backend_cuda_buffer_type_alloc_buffer frame.
 */
#include "ggml.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* --- ggml.c: contexts and tensors --- */

struct ggml_context {
    bool no_alloc;
    struct ggml_tensor *first, *last;
};

GGML_API struct ggml_context *ggml_init(struct ggml_init_params params)
{
    return new ggml_context{params.no_alloc, nullptr, nullptr};
}

GGML_API void ggml_free(struct ggml_context *ctx)
{
    if (!ctx)
        return;
    for (ggml_tensor *t = ctx->first, *next; t; t = next) {
        next = t->next;
        delete t;
    }
    delete ctx;
}

static ggml_tensor *new_tensor(ggml_context *ctx, enum ggml_type type, int64_t ne0, int64_t ne1,
                               ggml_tensor *view_src, size_t view_offs)
{
    ggml_tensor *t = new ggml_tensor{};
    t->type = type;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = t->ne[3] = 1;
    t->nb[0] = type == GGML_TYPE_F32 ? 4 : 1;
    for (int i = 1; i < 4; i++)
        t->nb[i] = t->nb[i - 1] * (size_t)t->ne[i - 1];
    t->view_src = view_src;
    t->view_offs = view_offs;
    if (ctx->last)
        ctx->last->next = t;
    else
        ctx->first = t;
    ctx->last = t;
    return t;
}

GGML_API struct ggml_tensor *ggml_new_tensor_1d(struct ggml_context *ctx, enum ggml_type type, int64_t ne0)
{
    return new_tensor(ctx, type, ne0, 1, nullptr, 0);
}

GGML_API struct ggml_tensor *ggml_new_tensor_2d(struct ggml_context *ctx, enum ggml_type type, int64_t ne0,
                                                int64_t ne1)
{
    return new_tensor(ctx, type, ne0, ne1, nullptr, 0);
}

GGML_API int64_t ggml_nrows(const struct ggml_tensor *tensor)
{
    return tensor->ne[1] * tensor->ne[2] * tensor->ne[3];
}

/* ggml names a view after its source: "cache_k_l0 (view)". */
GGML_API struct ggml_tensor *ggml_view_1d(struct ggml_context *ctx, struct ggml_tensor *a, int64_t ne0, size_t offset)
{
    ggml_tensor *t = new_tensor(ctx, a->type, ne0, 1, a->view_src ? a->view_src : a, a->view_offs + offset);
    ggml_format_name(t, "%s (view)", a->name);
    return t;
}

GGML_API struct ggml_tensor *ggml_set_name(struct ggml_tensor *tensor, const char *name)
{
    snprintf(tensor->name, sizeof tensor->name, "%s", name);
    return tensor;
}

GGML_API struct ggml_tensor *ggml_format_name(struct ggml_tensor *tensor, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tensor->name, sizeof tensor->name, fmt, ap);
    va_end(ap);
    return tensor;
}

GGML_API const char *ggml_get_name(const struct ggml_tensor *tensor)
{
    return tensor->name;
}

GGML_API size_t ggml_nbytes(const struct ggml_tensor *tensor)
{
    return (size_t)tensor->ne[3] * tensor->nb[3];
}

GGML_API void *ggml_get_data(const struct ggml_tensor *tensor)
{
    return tensor->data;
}

GGML_API struct ggml_tensor *ggml_get_first_tensor(const struct ggml_context *ctx)
{
    return ctx->first;
}

GGML_API struct ggml_tensor *ggml_get_next_tensor(const struct ggml_context *ctx, struct ggml_tensor *tensor)
{
    (void)ctx;
    return tensor->next;
}

/* --- ggml-backend.cpp: buffer types and buffers --- */

GGML_API const char *ggml_backend_buft_name(ggml_backend_buffer_type_t buft)
{
    return buft->iface.get_name(buft);
}

GGML_API ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size)
{
    return buft->iface.alloc_buffer(buft, size);
}

GGML_API size_t ggml_backend_buft_get_alignment(ggml_backend_buffer_type_t buft)
{
    return buft->iface.get_alignment(buft);
}

GGML_API bool ggml_backend_buft_is_host(ggml_backend_buffer_type_t buft)
{
    return buft->iface.is_host && buft->iface.is_host(buft);
}

GGML_API void ggml_backend_buffer_free(ggml_backend_buffer_t buffer)
{
    if (!buffer)
        return;
    if (buffer->free_buffer)
        buffer->free_buffer(buffer);
    delete buffer;
}

GGML_API void ggml_backend_buffer_set_usage(ggml_backend_buffer_t buffer, enum ggml_backend_buffer_usage usage)
{
    buffer->usage = usage;
}

GGML_API enum ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t buffer)
{
    return buffer->usage;
}

/* ggml answers a fake, aligned address for an empty buffer. */
GGML_API void *ggml_backend_buffer_get_base(ggml_backend_buffer_t buffer)
{
    return buffer->size ? buffer->base : (void *)(uintptr_t)ggml_backend_buft_get_alignment(buffer->buft);
}

GGML_API size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t buffer)
{
    return buffer->size;
}

GGML_API const char *ggml_backend_buffer_name(ggml_backend_buffer_t buffer)
{
    return ggml_backend_buft_name(buffer->buft);
}

GGML_API ggml_backend_buffer_type_t ggml_backend_buffer_get_type(ggml_backend_buffer_t buffer)
{
    return buffer->buft;
}

GGML_API bool ggml_backend_buffer_is_host(ggml_backend_buffer_t buffer)
{
    return ggml_backend_buft_is_host(buffer->buft);
}

/* ggml joins buffers into a multi-buffer only when a context exceeds its
 * buffer type's max size; none of the types here has one. */
GGML_API bool ggml_backend_buffer_is_multi_buffer(ggml_backend_buffer_t buffer)
{
    (void)buffer;
    return false;
}

GGML_API enum ggml_status ggml_backend_tensor_alloc(ggml_backend_buffer_t buffer, struct ggml_tensor *tensor, void *addr)
{
    char *base = (char *)buffer->base;
    if (tensor->buffer || tensor->data || (char *)addr < base || (char *)addr + ggml_nbytes(tensor) > base + buffer->size) {
        fprintf(stderr, "ggml_backend_tensor_alloc: tensor %s does not fit in buffer %s\n", tensor->name,
                ggml_backend_buffer_name(buffer));
        return GGML_STATUS_FAILED;
    }
    tensor->buffer = buffer;
    tensor->data = addr;
    return GGML_STATUS_SUCCESS;
}

GGML_API enum ggml_status ggml_backend_view_init(struct ggml_tensor *tensor)
{
    if (!tensor->view_src || !tensor->view_src->buffer || !tensor->view_src->data)
        return GGML_STATUS_FAILED;
    tensor->buffer = tensor->view_src->buffer;
    tensor->data = (char *)tensor->view_src->data + tensor->view_offs;
    return GGML_STATUS_SUCCESS;
}

/* --- CPU buffer types: host memory, invisible to CUDA --- */

static const char *cpu_name(ggml_backend_buffer_type_t) { return "CPU"; }
static const char *cpu_mapped_name(ggml_backend_buffer_type_t) { return "CPU_Mapped"; }
static size_t cpu_alignment(ggml_backend_buffer_type_t) { return 32; }   /* ggml's TENSOR_ALIGNMENT */
static bool cpu_is_host(ggml_backend_buffer_type_t) { return true; }

static void cpu_free(ggml_backend_buffer_t buf)
{
    munmap(buf->base, buf->size ? buf->size : 1);
}

/* Never touched and not reserved, so a 36 GiB "model" costs no RAM and no
 * commit charge, whatever the machine's overcommit policy (ggml mallocs
 * and, for a KV cache, clears it). */
static ggml_backend_buffer_t cpu_alloc(ggml_backend_buffer_type_t buft, size_t size)
{
    void *p = mmap(nullptr, size ? size : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size %zu\n", size);
        return nullptr;
    }
    return new ggml_backend_buffer{cpu_free, buft, p, size, GGML_BACKEND_BUFFER_USAGE_ANY};
}

GGML_API ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type(void)
{
    static ggml_backend_buffer_type cpu = {{cpu_name, cpu_alloc, cpu_alignment, cpu_is_host}, nullptr};
    return &cpu;
}

/* The CPU_Mapped type allocates nothing: its buffers only come from
 * ggml_backend_cpu_buffer_from_ptr. */
static ggml_backend_buffer_t cpu_mapped_alloc(ggml_backend_buffer_type_t, size_t)
{
    return nullptr;
}

GGML_API ggml_backend_buffer_t ggml_backend_cpu_buffer_from_ptr(void *ptr, size_t size)
{
    static ggml_backend_buffer_type mapped = {{cpu_mapped_name, cpu_mapped_alloc, cpu_alignment, cpu_is_host}, nullptr};
    return new ggml_backend_buffer{nullptr, &mapped, ptr, size, GGML_BACKEND_BUFFER_USAGE_ANY};
}

/* --- ggml-alloc.c: the context allocator --- */

static size_t align_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

/* ggml splits a context over several buffers only when it exceeds the
 * buffer type's max size; none has one here, so one buffer per context.
 * That is why a whole model's GPU share is a single cudaMalloc. */
static ggml_backend_buffer_t __attribute__((noinline))
alloc_tensor_range(struct ggml_context *ctx, ggml_backend_buffer_type_t buft, size_t size)
{
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(buft, size);
    if (!buf) {
        fprintf(stderr, "alloc_tensor_range: failed to allocate %s buffer of size %zu\n", ggml_backend_buft_name(buft),
                size);
        return nullptr;
    }
    /* ggml_tallocr: tensors one after the other at the type's alignment,
     * each placed through the exported ggml_backend_tensor_alloc; views
     * after their sources. */
    size_t align = ggml_backend_buft_get_alignment(buft), offset = 0;
    for (ggml_tensor *t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->data)
            continue;
        if (!t->view_src) {
            ggml_backend_tensor_alloc(buf, t, (char *)buf->base + offset);
            offset += align_up(ggml_nbytes(t), align);
        } else if (!t->buffer) {
            ggml_backend_view_init(t);
        }
    }
    return buf;
}

GGML_API ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(struct ggml_context *ctx,
                                                                       ggml_backend_buffer_type_t buft)
{
    size_t align = ggml_backend_buft_get_alignment(buft), size = 0;
    for (ggml_tensor *t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t))
        if (!t->data && !t->view_src)
            size += align_up(ggml_nbytes(t), align);
    if (size == 0)
        return nullptr;
    return alloc_tensor_range(ctx, buft, size);
}

/* --- ggml-alloc.c: the graph allocator --- */

struct ggml_gallocr {
    ggml_backend_buffer_type_t buft;
    ggml_backend_buffer_t buffer;
};

GGML_API ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft)
{
    return new ggml_gallocr{buft, nullptr};
}

/* Re-reserving with a bigger graph frees the old buffer first, then
 * allocates the new size: the same order as ggml. */
GGML_API bool ggml_gallocr_reserve_n(ggml_gallocr_t galloc, size_t graph_bytes)
{
    size_t cur = galloc->buffer ? galloc->buffer->size : 0;
    if (graph_bytes <= cur)
        return true;
    if (cur)
        fprintf(stderr, "ggml_gallocr_reserve_n: reallocating %s buffer from size %.02f MiB to %.02f MiB\n",
                ggml_backend_buft_name(galloc->buft), cur / 1024.0 / 1024.0, graph_bytes / 1024.0 / 1024.0);
    ggml_backend_buffer_free(galloc->buffer);
    galloc->buffer = ggml_backend_buft_alloc_buffer(galloc->buft, graph_bytes);
    if (!galloc->buffer) {
        fprintf(stderr, "ggml_gallocr_reserve_n: failed to allocate %s buffer of size %zu\n",
                ggml_backend_buft_name(galloc->buft), graph_bytes);
        return false;
    }
    ggml_backend_buffer_set_usage(galloc->buffer, GGML_BACKEND_BUFFER_USAGE_COMPUTE);
    return true;
}

/* Each evaluation places the graph's nodes in the reserved buffer, one
 * ggml_backend_tensor_alloc per node, reusing the memory of nodes no
 * longer needed (here: wrapping around). */
GGML_API bool ggml_gallocr_alloc_graph(ggml_gallocr_t galloc, struct ggml_context *graph)
{
    ggml_backend_buffer_t buf = galloc->buffer;
    if (!buf || !buf->size)
        return false;
    size_t align = ggml_backend_buft_get_alignment(galloc->buft), offset = 0;
    for (ggml_tensor *t = ggml_get_first_tensor(graph); t; t = ggml_get_next_tensor(graph, t)) {
        size_t n = ggml_nbytes(t);
        if (n > buf->size)
            return false;
        if (offset + n > buf->size)
            offset = 0;
        if (ggml_backend_tensor_alloc(buf, t, (char *)buf->base + offset) != GGML_STATUS_SUCCESS)
            return false;
        offset += align_up(n, align);
    }
    return true;
}

GGML_API size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc)
{
    return galloc->buffer ? galloc->buffer->size : 0;
}

GGML_API void ggml_gallocr_free(ggml_gallocr_t galloc)
{
    if (!galloc)
        return;
    ggml_backend_buffer_free(galloc->buffer);
    delete galloc;
}

/* --- ggml-backend.cpp: the scheduler --- */

struct ggml_backend_sched {
    int n;
    ggml_gallocr_t galloc[GGML_SCHED_MAX_BACKENDS];
};

GGML_API ggml_backend_sched_t ggml_backend_sched_new(ggml_backend_buffer_type_t *bufts, int n)
{
    ggml_backend_sched *s = new ggml_backend_sched{};
    s->n = n < GGML_SCHED_MAX_BACKENDS ? n : GGML_SCHED_MAX_BACKENDS;
    for (int i = 0; i < s->n; i++)
        s->galloc[i] = ggml_gallocr_new(bufts[i]);
    return s;
}

/* Backends in order, stopping at the first that cannot be reserved, so a
 * failure names one buffer. */
GGML_API bool ggml_backend_sched_reserve(ggml_backend_sched_t sched, const size_t *graph_bytes)
{
    for (int i = 0; i < sched->n; i++)
        if (graph_bytes[i] && !ggml_gallocr_reserve_n(sched->galloc[i], graph_bytes[i]))
            return false;
    return true;
}

GGML_API bool ggml_backend_sched_alloc_graph(ggml_backend_sched_t sched, struct ggml_context *const *graphs)
{
    for (int i = 0; i < sched->n; i++)
        if (graphs[i] && !ggml_gallocr_alloc_graph(sched->galloc[i], graphs[i]))
            return false;
    return true;
}

GGML_API size_t ggml_backend_sched_get_buffer_size(ggml_backend_sched_t sched, int i)
{
    return i < sched->n ? ggml_gallocr_get_buffer_size(sched->galloc[i]) : 0;
}

GGML_API const char *ggml_backend_sched_get_buffer_name(ggml_backend_sched_t sched, int i)
{
    return i < sched->n ? ggml_backend_buft_name(sched->galloc[i]->buft) : "";
}

GGML_API void ggml_backend_sched_free(ggml_backend_sched_t sched)
{
    if (!sched)
        return;
    for (int i = 0; i < sched->n; i++)
        ggml_gallocr_free(sched->galloc[i]);
    delete sched;
}
