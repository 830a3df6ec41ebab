/* llama-server: llama.cpp's HTTP server, as ollama (0.30 and later) starts
 * it to run a GGUF model: the parent picks the layers (-ngl) and the
 * context (-c), the server loads the model once and serves requests.
 *
 * A request here is -p prompt tokens and -n generated ones on a cleared
 * slot; the KV cache is sized once (-c) and a request longer than that is
 * refused without any allocation, as llama.cpp's server refuses it. The
 * server serves --requests N of them (default 1) and exits 0, as when its
 * parent unloads the model; --port is accepted and unused (nothing
 * listens).
 *
 * Field story 1 (`make demo`): ollama-serve starts
 *   llama-server -m llama-70b-q4_k_m -ngl 40 -c 8192
 * on a 24 GiB card: 39 blocks and the output layer on CUDA0, 41 blocks
 * and token_embd left in the mapped model file, nothing failing
 * (examples/README.md has the numbers).
 *
 * stdout, one line per request: request=N n_tokens=N status=ok|error
 */
#include "common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct server_args {
    int requests = 1;
};

static int server_arg(int argc, char **argv, int i, void *user)
{
    server_args *a = (server_args *)user;
    if (i + 1 >= argc)
        return 0;
    if (!strcmp(argv[i], "--requests"))
        a->requests = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--port"))
        return 0;
    return 2;
}

int main(int argc, char **argv)
{
    common_params p;
    server_args srv;
    if (common_params_parse(argc, argv, p, server_arg, &srv,
                            "  --requests N   requests to serve before exiting (default 1)\n"
                            "  --port N       accepted, unused\n"))
        return 1;
    llama_model *model;
    llama_context *ctx;
    if (!common_init_from_params(p, &model, &ctx)) {
        fprintf(stderr, "main: exiting due to model loading error\n");
        return 1;
    }
    fprintf(stderr, "main: server is listening on http://127.0.0.1:8080\n");
    int failed = 0;
    for (int r = 1; r <= srv.requests; r++) {
        uint32_t n = (uint32_t)(p.n_prompt + p.n_predict);
        llama_memory_clear(ctx);
        int bad = n > llama_n_ctx(ctx);
        if (bad) {
            fprintf(stderr, "srv  send_error: task id = %d, error: the request exceeds the available context size, "
                            "try increasing it\n", r);
        } else {
            bad = llama_decode(ctx, (uint32_t)p.n_prompt) != 0;
            for (int i = 0; !bad && i < p.n_predict; i++)
                bad = llama_decode(ctx, 1) != 0;
        }
        failed += bad;
        printf("request=%d n_tokens=%u status=%s\n", r, n, bad ? "error" : "ok");
        fflush(stdout);
    }
    fprintf(stderr, "main: served %d requests, %d failed; shutting down\n", srv.requests, failed);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
