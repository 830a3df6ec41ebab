/* See common.h. */
#include "common.h"

#include "../ggml/ggml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(const char *argv0, const char *extra)
{
    fprintf(stderr,
            "usage: %s [options]\n"
            "  -m NAME              model shape (default llama-70b-q4_k_m); --list-models\n"
            "  -ngl, --n-gpu-layers N  layers to offload, the output layer first (default: all, or what --fit finds)\n"
            "  -c, --ctx-size N     KV cells (default 8192)\n"
            "  -ub, --ubatch-size N tokens per decode step (default 512)\n"
            "  -ts, --tensor-split A,B,...  share of layers per GPU (default: free memory)\n"
            "  --mmap / --no-mmap   CPU layers in the mapped model file / pinned CUDA_Host (default --mmap)\n"
            "  -fit, --fit on|off   with -ngl not given, offload only what fits (default on)\n"
            "  -fitt, --fit-target MiB  what --fit leaves free on each GPU (default 1024)\n"
            "  -p N, -n N           prompt tokens to process (512), tokens to generate (16)\n"
            "  --n-layer N --layer-mib M --output-mib M --embd-mib M --kv-bytes B --compute-mib M\n"
            "                       override the shape, e.g. to reproduce a spill on a bigger real GPU\n"
            "%s",
            argv0, extra ? extra : "");
}

static bool parse_split(const char *s, float *out)
{
    for (int d = 0; d < LLAMA_MAX_DEVICES; d++)
        out[d] = 0;
    for (int d = 0; d < LLAMA_MAX_DEVICES && *s; d++) {
        char *end;
        out[d] = strtof(s, &end);
        if (end == s || out[d] < 0)
            return false;
        s = *end == ',' ? end + 1 : end;
    }
    return *s == 0;
}

int common_params_parse(int argc, char **argv, common_params &p, common_extra_arg extra, void *user,
                        const char *usage_extra)
{
    p.shape = *llama_model_shape_find("llama-70b-q4_k_m");
    p.mparams = {};
    p.mparams.n_gpu_layers = -1;
    p.mparams.use_mmap = true;
    p.cparams = {8192, 512, 0};
    p.fit = true;
    p.fit_margin = 1024 * MiB;
    p.n_prompt = 512;
    p.n_predict = 16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        auto is = [a](const char *x, const char *y) { return !strcmp(a, x) || (y && !strcmp(a, y)); };
        if (is("-h", "--help")) {
            usage(argv[0], usage_extra);
            exit(0);
        } else if (is("--list-models", nullptr)) {
            llama_model_shape_list();
            exit(0);
        } else if (is("--mmap", nullptr)) {
            p.mparams.use_mmap = true;
        } else if (is("--no-mmap", nullptr)) {
            p.mparams.use_mmap = false;
        } else if (!v) {
            int n = extra ? extra(argc, argv, i, user) : 0;
            if (!n)
                goto bad;
            i += n - 1;
        } else if (is("-m", "--model")) {
            const llama_model_shape *s = llama_model_shape_find(v);
            if (!s) {
                fprintf(stderr, "%s: unknown model '%s'; known:\n", argv[0], v);
                llama_model_shape_list();
                return 1;
            }
            p.shape = *s;
            i++;
        } else if (is("-ngl", "--n-gpu-layers")) {
            p.mparams.n_gpu_layers = atoi(v), i++;
        } else if (is("-c", "--ctx-size")) {
            p.cparams.n_ctx = (uint32_t)strtoul(v, nullptr, 10), i++;
        } else if (is("-ub", "--ubatch-size")) {
            p.cparams.n_ubatch = (uint32_t)strtoul(v, nullptr, 10), i++;
        } else if (is("-ts", "--tensor-split")) {
            if (!parse_split(v, p.mparams.tensor_split))
                goto bad;
            i++;
        } else if (is("-fit", "--fit")) {
            p.fit = !strcmp(v, "on");
            i++;
        } else if (is("-fitt", "--fit-target")) {
            p.fit_margin = strtoull(v, nullptr, 10) * MiB, i++;
        } else if (is("-p", "--n-prompt")) {
            p.n_prompt = atoi(v), i++;
        } else if (is("-n", "--n-predict")) {
            p.n_predict = atoi(v), i++;
        } else if (is("--n-layer", nullptr)) {
            p.shape.n_layer = atoi(v), i++;
        } else if (is("--layer-mib", nullptr)) {
            p.shape.layer_bytes = strtoull(v, nullptr, 10) * MiB, i++;
        } else if (is("--output-mib", nullptr)) {
            p.shape.output_bytes = strtoull(v, nullptr, 10) * MiB, i++;
        } else if (is("--embd-mib", nullptr)) {
            p.shape.embd_bytes = strtoull(v, nullptr, 10) * MiB, i++;
        } else if (is("--kv-bytes", nullptr)) {
            p.shape.kv_bytes_token = strtoull(v, nullptr, 10), i++;
        } else if (is("--compute-mib", nullptr)) {
            p.shape.compute_bytes = strtoull(v, nullptr, 10) * MiB, i++;
        } else {
            int n = extra ? extra(argc, argv, i, user) : 0;
            if (!n)
                goto bad;
            i += n - 1;
        }
        continue;
    bad:
        fprintf(stderr, "%s: bad argument '%s'\n", argv[0], a);
        usage(argv[0], usage_extra);
        return 1;
    }
    if (p.shape.n_layer <= 0 || p.cparams.n_ctx == 0 || p.cparams.n_ubatch == 0) {
        fprintf(stderr, "%s: --n-layer, -c and -ub must be positive\n", argv[0]);
        return 1;
    }
    return 0;
}

bool common_init_from_params(common_params &p, llama_model **model, llama_context **ctx)
{
    *model = nullptr;
    *ctx = nullptr;
    if (p.fit)
        llama_params_fit(&p.shape, &p.mparams, &p.cparams, p.fit_margin);
    if (p.mparams.n_gpu_layers < 0)
        p.mparams.n_gpu_layers = p.shape.n_layer + 1;
    *model = llama_model_load_from_file(p.shape.name, &p.shape, p.mparams);
    if (!*model)
        return false;
    *ctx = llama_init_from_model(*model, p.cparams);
    if (*ctx)
        return true;
    llama_model_free(*model);
    *model = nullptr;
    return false;
}
