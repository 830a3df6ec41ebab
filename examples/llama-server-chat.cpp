/* llama-server-chat: one chat conversation against a server whose KV cache
 * grows with the conversation instead of being sized up front.
 *
 * llama.cpp itself never does this: it allocates -c cells once and
 * refuses a longer conversation without allocating (llama-server). The
 * growth copies runtimes whose cache grows with each turn (Hugging Face
 * transformers' default DynamicCache appends every token's keys and
 * values); here in 1024-cell blocks, each a new llama_kv_cache, so the
 * failure is a KV allocation from decode.
 *
 * Field story 2: "it was fine for the first few messages, then every
 * request failed." The model fits and the first 2K tokens are served from
 * the KV cache allocated at start; each time the conversation outgrows its
 * cells the server constructs another 1024-cell llama_kv_cache (800 MiB for
 * a 13B model) on the GPU. On a 12 GiB card the request that would take
 * the conversation to 6000 tokens needs a sixth block and fails.
 *
 *   VTSIM_DEVICES=12GiB llama-server-chat
 *     -m llama-13b-q4_k_m --mmap -c 2048 --kv-grow 1024 --turns 8 --turn-tokens 1000
 *
 * Exact numbers (12 GiB card, 448 MiB context reserve, 11840 MiB free):
 *   CUDA0 model 7400 MiB (41/41 layers), CUDA0 KV 1600 MiB (2048 cells),
 *   CUDA0 compute 300 MiB, CUDA_Host compute 26 MiB (pinned),
 *   VMM pool 8 MiB mapped by the first request;
 *   requests 1..5 succeed (KV grows to 3072, 4096, 5120 cells, 800 MiB each),
 *   request 6 (5000 -> 6000 tokens) fails: cudaMalloc of 800 MiB
 *   (838860800 bytes) with 132 MiB free. The server stays up: exit 0.
 *
 * With --stdin the server takes one request per line (its token count)
 * until end of input, and keeps serving after a failed request. Field
 * story 3 uses it: request 1 (1000 tokens) is served, then gpu-hog takes
 * 2048 MiB (a browser opening a WebGL tab), request 2 (2000 tokens) still
 * fits the 2048 cells, request 3 needs 800 MiB more KV with 36 MiB free
 * and fails. Without gpu-hog it would have succeeded; in the report the
 * 2048 MiB and gpu-hog's own 448 MiB context are untracked (another
 * process: 2.44 GiB), not the server's.
 *
 * stdout, one line per request:  request=N n_past=N n_ctx=N status=ok|error
 */
#include "common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct chat_args {
    uint32_t kv_grow = 1024;
    int turns = 8;
    uint32_t turn_tokens = 1000;
    bool from_stdin = false;
};

static int chat_arg(int argc, char **argv, int i, void *user)
{
    chat_args *a = (chat_args *)user;
    if (!strcmp(argv[i], "--stdin")) {
        a->from_stdin = true;
        return 1;
    }
    if (i + 1 >= argc)
        return 0;
    if (!strcmp(argv[i], "--kv-grow"))
        a->kv_grow = (uint32_t)strtoul(argv[i + 1], nullptr, 10);
    else if (!strcmp(argv[i], "--turns"))
        a->turns = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--turn-tokens"))
        a->turn_tokens = (uint32_t)strtoul(argv[i + 1], nullptr, 10);
    else
        return 0;
    return 2;
}

int main(int argc, char **argv)
{
    /* Server defaults differ from llama-cli's: mmap on, 2K cells to start. */
    const char *defaults[] = {"-m", "llama-13b-q4_k_m", "--mmap", "-c", "2048"};
    int n_def = sizeof defaults / sizeof defaults[0];
    char **args = (char **)calloc((size_t)(argc + n_def + 1), sizeof(char *));
    args[0] = argv[0];
    for (int i = 0; i < n_def; i++)
        args[1 + i] = (char *)defaults[i];
    for (int i = 1; i < argc; i++)
        args[n_def + i] = argv[i];

    common_params p;
    chat_args chat;
    if (common_params_parse(argc + n_def, args, p, chat_arg, &chat,
                            "  --kv-grow N --turns N --turn-tokens N   (defaults 1024, 8, 1000)\n"
                            "  --stdin   one request per line of stdin (its token count) until EOF\n"))
        return 1;
    p.cparams.kv_grow = chat.kv_grow;
    llama_model *model;
    llama_context *ctx;
    if (!common_init_from_params(p, &model, &ctx)) {
        fprintf(stderr, "main: exiting due to model loading error\n");
        return 1;
    }
    fprintf(stderr, "main: server is listening on http://127.0.0.1:8080\n");
    int failed = 0;
    char line[64];
    for (int t = 1; chat.from_stdin || (t <= chat.turns && !failed); t++) {
        uint32_t n = chat.turn_tokens;
        if (chat.from_stdin) {
            if (!fgets(line, sizeof line, stdin))
                break;
            n = (uint32_t)strtoul(line, nullptr, 10);
        }
        fprintf(stderr, "slot update_slots: id  0 | task %d | new prompt, n_past = %u, n_tokens = %u\n", t,
                llama_n_past(ctx), n);
        failed = llama_decode(ctx, n) != 0;
        if (failed)
            fprintf(stderr, "srv  send_error: task id = %d, error: Input prompt is too big compared to KV size. Please try increasing KV size.\n", t);
        printf("request=%d n_past=%u n_ctx=%u status=%s\n", t, llama_n_past(ctx), llama_n_ctx(ctx),
               failed ? "error" : "ok");
        fflush(stdout);
    }
    llama_free(ctx);
    llama_model_free(model);
    free(args);
    return 0;
}
