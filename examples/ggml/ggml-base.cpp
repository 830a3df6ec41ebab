/* libggml-base.so: buffer types, the context allocator and the graph
 * allocator, shaped like ggml-backend.cpp and ggml-alloc.c. Nothing here
 * knows about CUDA: it calls the buffer type's alloc_buffer, which is how
 * weights, KV and compute buffers all end up in the same
 * ggml_backend_cuda_buffer_type_alloc_buffer frame.
 */
#include "ggml.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

GGML_API struct ggml_context *ggml_init(void)
{
    return new ggml_context{0, 0};
}

GGML_API void ggml_free(struct ggml_context *ctx)
{
    delete ctx;
}

/* ggml aligns every tensor in a buffer to the buffer type's alignment
 * (128 bytes for CUDA); the example sizes are already multiples of it. */
GGML_API void ggml_new_tensor_bytes(struct ggml_context *ctx, size_t nbytes)
{
    ctx->n_tensors++;
    ctx->total += (nbytes + 127) & ~(size_t)127;
}

GGML_API const char *ggml_backend_buft_name(ggml_backend_buffer_type_t buft)
{
    return buft->iface.get_name(buft);
}

GGML_API ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size)
{
    return buft->iface.alloc_buffer(buft, size);
}

GGML_API void ggml_backend_buffer_free(ggml_backend_buffer_t buf)
{
    if (buf)
        buf->free_buffer(buf);
}

GGML_API void ggml_backend_buffer_set_usage(ggml_backend_buffer_t buf, enum ggml_backend_buffer_usage usage)
{
    buf->usage = usage;
}

GGML_API enum ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t buf)
{
    return buf->usage;
}

/* ggml answers a fake, aligned address for an empty buffer. */
GGML_API void *ggml_backend_buffer_get_base(ggml_backend_buffer_t buf)
{
    return buf->size ? buf->base : (void *)(uintptr_t)128;
}

GGML_API size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t buf)
{
    return buf->size;
}

GGML_API const char *ggml_backend_buffer_name(ggml_backend_buffer_t buf)
{
    return ggml_backend_buft_name(buf->buft);
}

/* --- CPU buffer type: plain host memory, invisible to vramtrace --- */

static const char *cpu_name(ggml_backend_buffer_type_t) { return "CPU"; }

static void cpu_free(ggml_backend_buffer_t buf)
{
    munmap(buf->base, buf->size ? buf->size : 1);
    delete buf;
}

/* Never touched and not reserved, so a 36 GiB "model" costs no RAM and no
 * commit charge, whatever the machine's overcommit policy. */
static ggml_backend_buffer_t cpu_alloc(ggml_backend_buffer_type_t buft, size_t size)
{
    void *p = mmap(nullptr, size ? size : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size %zu\n", size);
        return nullptr;
    }
    return new ggml_backend_buffer{buft, p, size, cpu_free};
}

GGML_API ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type(void)
{
    static ggml_backend_buffer_type cpu = {{cpu_name, cpu_alloc}, nullptr};
    return &cpu;
}

/* --- ggml-alloc.c --- */

/* ggml splits a context over several buffers only when it exceeds the
 * buffer type's max size; CUDA's is SIZE_MAX, so one buffer per context.
 * That is why a whole model's GPU share is a single cudaMalloc. */
static ggml_backend_buffer_t __attribute__((noinline))
alloc_tensor_range(struct ggml_context *ctx, ggml_backend_buffer_type_t buft, size_t size)
{
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(buft, size);
    if (!buf)
        fprintf(stderr, "alloc_tensor_range: failed to allocate %s buffer of size %zu\n",
                ggml_backend_buft_name(buft), size);
    (void)ctx;
    return buf;
}

GGML_API ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(struct ggml_context *ctx,
                                                                       ggml_backend_buffer_type_t buft)
{
    if (ctx->total == 0)
        return nullptr;
    return alloc_tensor_range(ctx, buft, ctx->total);
}

struct ggml_gallocr {
    ggml_backend_buffer_type_t buft;
    ggml_backend_buffer_t buffer;
};

GGML_API ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft)
{
    return new ggml_gallocr{buft, nullptr};
}

/* Re-reserving with a bigger graph frees the old buffer first, then
 * allocates the new size: the same order as ggml. Returns 0 on failure. */
GGML_API int ggml_gallocr_reserve_n(ggml_gallocr_t galloc, size_t graph_bytes)
{
    size_t cur = galloc->buffer ? galloc->buffer->size : 0;
    if (graph_bytes <= cur)
        return 1;
    if (cur)
        fprintf(stderr, "ggml_gallocr_reserve_n: reallocating %s buffer from size %.02f MiB to %.02f MiB\n",
                ggml_backend_buft_name(galloc->buft), cur / 1024.0 / 1024.0, graph_bytes / 1024.0 / 1024.0);
    ggml_backend_buffer_free(galloc->buffer);
    galloc->buffer = ggml_backend_buft_alloc_buffer(galloc->buft, graph_bytes);
    if (!galloc->buffer) {
        fprintf(stderr, "ggml_gallocr_reserve_n: failed to allocate %s buffer of size %zu\n",
                ggml_backend_buft_name(galloc->buft), graph_bytes);
        return 0;
    }
    ggml_backend_buffer_set_usage(galloc->buffer, GGML_BACKEND_BUFFER_USAGE_COMPUTE);
    return 1;
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
 * failure names one buffer. Returns 1 on success. */
GGML_API int ggml_backend_sched_reserve(ggml_backend_sched_t sched, const size_t *graph_bytes)
{
    for (int i = 0; i < sched->n; i++)
        if (graph_bytes[i] && !ggml_gallocr_reserve_n(sched->galloc[i], graph_bytes[i]))
            return 0;
    return 1;
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
