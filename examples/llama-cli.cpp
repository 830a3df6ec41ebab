/* llama-cli: load a model, process a prompt, generate a few tokens, exit.
 * Shaped like llama.cpp's llama-cli: -ngl and --fit as llama.cpp has them
 * (an -ngl not given is fitted to the free memory before anything is
 * allocated; an -ngl given is used as it is), mmap on by default, and a
 * buffer that cannot be allocated fails the load. The field stories it
 * reproduces are flags away (exact numbers: examples/README.md):
 *
 * Story 1b: -m llama-70b-q4_k_m -ngl 99 -c 8192 --no-mmap on a 24 GiB
 * card: the 36820 MiB CUDA0 model buffer fails, the load fails, exit 1.
 * Story 1c: the same on a 37 GiB card with mmap: the weights fit, the
 * 2560 MiB KV cache does not, the context fails, exit 1.
 * Story 3b: another process holds 3 GiB before the load; --fit offloads
 * fewer layers of qwen2.5-32b than an empty card would take.
 * Story 5: GGML_CUDA_ENABLE_UNIFIED_MEMORY=1 -ngl 99: the 70B loads "fully"
 * into managed memory, 40468 MiB on a 24576 MiB card: with the device's
 * own 16 MiB, 15.54 GiB past the card's total (the report's "More VRAM
 * needed", docs/stories.md).
 * Story 8: -m qwen3-32b-q8_0 -ts 24,12 on a 24 GiB + 12 GiB pair: --fit
 * stops where the 12 GiB card is full.
 *
 * Output on stdout, one line, for scripts and tests:
 *   offloaded=N/M ngl=N n_past=N
 */
#include "common/common.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    common_params p;
    if (common_params_parse(argc, argv, p, nullptr, nullptr, nullptr))
        return 1;
    llama_model *model;
    llama_context *ctx;
    if (!common_init_from_params(p, &model, &ctx)) {
        fprintf(stderr, "main: error: unable to load model\n");
        return 1;
    }
    int rc = 0;
    if (llama_decode(ctx, (uint32_t)p.n_prompt)) {
        fprintf(stderr, "main: failed to eval prompt\n");
        rc = 1;
    }
    for (int i = 0; !rc && i < p.n_predict; i++)
        if (llama_decode(ctx, 1)) {
            fprintf(stderr, "main: failed to eval token %d\n", i);
            rc = 1;
        }
    printf("offloaded=%d/%d ngl=%d n_past=%u\n", llama_model_n_offloaded(model), p.shape.n_layer + 1,
           p.mparams.n_gpu_layers, llama_n_past(ctx));
    llama_free(ctx);
    llama_model_free(model);
    return rc;
}
