/* ggmlhooks: the cost of the shim's ggml hooks (preload/ggml_buffers.c) on
 * the real libggml-base.so, for row 7 of `make bench` (ggml-hooks.sh builds
 * and runs it). Each round is what llama.cpp does per buffer: a context of
 * T named tensors (blk.N.attn_q.weight), the tensors allocated in a CPU
 * buffer (ggml_backend_alloc_ctx_tensors_from_buft), the buffer marked
 * WEIGHTS, then freed. Traced, that is a GGML_BUFFER, T GGML_TENSOR, one
 * mark and a GGML_FREE record.
 *
 *   ggmlhooks T ROUNDS BATCHES
 * Runs BATCHES batches of ROUNDS rounds, sleeping 20 ms after each so the
 * trace writer empties the hooks' queue (4,096 records) and no record is
 * lost to the timing; prints the fastest batch's "ns_per_round N".
 *
 * ggml's declarations are written here, not taken from its headers: only
 * the few calls a loader makes, with ggml's C ABI. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct ggml_init_params {
    size_t mem_size;
    void *mem_buffer;
    bool no_alloc;
};
void *ggml_init(struct ggml_init_params params);
void ggml_free(void *ctx);
void *ggml_new_tensor_1d(void *ctx, int type, long ne0);
void *ggml_set_name(void *tensor, const char *name);
void *ggml_backend_cpu_buffer_type(void);
void *ggml_backend_alloc_ctx_tensors_from_buft(void *ctx, void *buft);
void ggml_backend_buffer_set_usage(void *buffer, int usage);
void ggml_backend_buffer_free(void *buffer);

#define GGML_TYPE_F32 0
#define USAGE_WEIGHTS 1

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int one_round(int tensors)
{
    struct ggml_init_params params = { (size_t)tensors * 512 + 4096, NULL, true };
    void *ctx = ggml_init(params);
    if (!ctx)
        return -1;
    char name[64];
    for (int i = 0; i < tensors; i++) {
        void *t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1024);
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", i);
        ggml_set_name(t, name);
    }
    void *buffer = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_cpu_buffer_type());
    if (!buffer)
        return -1;
    ggml_backend_buffer_set_usage(buffer, USAGE_WEIGHTS);
    ggml_backend_buffer_free(buffer);
    ggml_free(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4 || atoi(argv[1]) < 1 || atoi(argv[2]) < 1 || atoi(argv[3]) < 1) {
        fprintf(stderr, "usage: ggmlhooks TENSORS ROUNDS BATCHES (each >= 1)\n");
        return 2;
    }
    int tensors = atoi(argv[1]), rounds = atoi(argv[2]), batches = atoi(argv[3]);
    double best = 1e300;
    struct timespec drain = { 0, 20 * 1000 * 1000 };
    for (int b = 0; b < batches; b++) {
        double t0 = now_ns();
        for (int r = 0; r < rounds; r++)
            if (one_round(tensors)) {
                fprintf(stderr, "ggmlhooks: ggml refused a context or buffer\n");
                return 1;
            }
        double per = (now_ns() - t0) / rounds;
        if (per < best)
            best = per;
        nanosleep(&drain, NULL);
    }
    printf("ns_per_round %.0f\n", best);
    return 0;
}
