/* llama-cli: load a model, process a prompt, generate a few tokens, exit.
 * Shaped like llama.cpp's llama-cli / ollama's runner; the field stories
 * it reproduces are flags away (exact numbers: examples/README.md).
 *
 * Story 1 (the default): Llama 3.3 70B Q4_K_M, -ngl 99, 8K context, mmap
 * off, on a 24 GiB card. All 81 layers need 36820 MiB of weights; the
 * CUDA0 model buffer fails, the runner backs off to -ngl 47 and the other
 * 33 layers plus the output layer land in pinned CUDA_Host memory. Nothing
 * crashes: it just runs at a fraction of the speed.
 *
 *   VTSIM_DEVICES=24GiB llama-cli
 *
 * Story 3: another process holds 3 GiB (gpu-hog); qwen2.5-32b, which
 * fits an empty card, loses a layer and its output layer to the CPU.
 * Story 5: GGML_CUDA_ENABLE_UNIFIED_MEMORY=1: the same 70B loads "fully"
 * into managed memory, 16340 MiB more than the card holds.
 * Story 8: -m qwen3-32b-q8_0 -ts 24,12 on a 24 GiB + 12 GiB pair: the
 * 12 GiB card runs out first.
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
