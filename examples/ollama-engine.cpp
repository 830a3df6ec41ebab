/* ollama-engine: ollama's Go engine (ml/backend/ggml, used for most current
 * models) shaped as a native program. Go calls ggml through cgo: every
 * buffer, weights, KV cache and compute alike, is allocated from one
 * generic cgo trampoline, and an unwinder stops there (the Go side, built
 * with -ldflags "-s -w", has no names anyway). No native frame says what a
 * buffer holds; the only statement is ollama's own
 * ggml_backend_buffer_set_usage(b, GGML_BACKEND_BUFFER_USAGE_WEIGHTS) on
 * its weights buffers, and ggml's graph allocator marking its compute
 * buffers USAGE_COMPUTE.
 *
 * Exact numbers (VTSIM_DEVICES=24GiB): CUDA0 weights 4096 MiB, CUDA_Host
 * weights 512 MiB (pinned), CUDA0 KV cache 1024 MiB (usage never set),
 * CUDA0 compute 256 MiB, CUDA_Host compute 32 MiB.
 *
 * stdout: "weights usage=1 kv usage=0 compute=256 MiB", the usages read back
 * through ggml_backend_buffer_get_usage (what the program sees must not
 * change under the shim).
 */
#include "ggml/ggml.h"

#include <stdio.h>

/* cgo's shape: one call gate taking a function and a packed argument
 * frame, the way runtime.asmcgocall hands _cgo_*_Cfunc_* their arguments. */
struct cgo_frame {
    ggml_context *ctx;
    ggml_backend_buffer_type_t buft;
    ggml_backend_buffer_t buf;
    ggml_backend_sched_t sched;
    const size_t *graph_bytes;
    int result;
};

extern "C" __attribute__((noinline)) void cgo_call(void (*fn)(cgo_frame *), cgo_frame *f)
{
    fn(f);
    __asm__ volatile("" ::: "memory");  /* keep this frame on the stack */
}

static __attribute__((noinline)) void cfunc_alloc_ctx_tensors(cgo_frame *f)
{
    f->buf = ggml_backend_alloc_ctx_tensors_from_buft(f->ctx, f->buft);
}

static __attribute__((noinline)) void cfunc_set_usage_weights(cgo_frame *f)
{
    ggml_backend_buffer_set_usage(f->buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
}

static __attribute__((noinline)) void cfunc_sched_reserve(cgo_frame *f)
{
    f->result = ggml_backend_sched_reserve(f->sched, f->graph_bytes);
}

/* One tensor per buffer, unnamed: the Go engine's names never reach a
 * frame, and the story is what the marks alone say. */
static ggml_backend_buffer_t alloc_buffer(ggml_backend_buffer_type_t buft, size_t bytes, int weights)
{
    cgo_frame f = {};
    f.ctx = ggml_init({0, nullptr, true});
    ggml_new_tensor_1d(f.ctx, GGML_TYPE_I8, (int64_t)bytes);
    f.buft = buft;
    cgo_call(cfunc_alloc_ctx_tensors, &f);
    if (f.buf && weights)
        cgo_call(cfunc_set_usage_weights, &f);
    ggml_free(f.ctx);
    return f.buf;
}

int main(void)
{
    ggml_backend_buffer_t weights = alloc_buffer(ggml_backend_cuda_buffer_type(0), 4096 * MiB, 1);
    ggml_backend_buffer_t host_weights = alloc_buffer(ggml_backend_cuda_host_buffer_type(), 512 * MiB, 1);
    ggml_backend_buffer_t kv = alloc_buffer(ggml_backend_cuda_buffer_type(0), 1024 * MiB, 0);
    if (!weights || !host_weights || !kv) {
        fprintf(stderr, "ollama-engine: allocation failed\n");
        return 1;
    }
    ggml_backend_buffer_type_t bufts[2] = { ggml_backend_cuda_buffer_type(0), ggml_backend_cuda_host_buffer_type() };
    const size_t graph_bytes[2] = { 256 * MiB, 32 * MiB };
    cgo_frame f = {};
    f.sched = ggml_backend_sched_new(bufts, 2);
    f.graph_bytes = graph_bytes;
    cgo_call(cfunc_sched_reserve, &f);
    if (!f.result) {
        fprintf(stderr, "ollama-engine: compute reserve failed\n");
        return 1;
    }
    printf("weights usage=%d kv usage=%d compute=%zu MiB\n", (int)ggml_backend_buffer_get_usage(weights),
           (int)ggml_backend_buffer_get_usage(kv), ggml_backend_sched_get_buffer_size(f.sched, 0) / MiB);
    ggml_backend_sched_free(f.sched);
    ggml_backend_buffer_free(kv);
    ggml_backend_buffer_free(host_weights);
    ggml_backend_buffer_free(weights);
    return 0;
}
