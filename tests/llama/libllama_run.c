/* libllama_run: a model loaded the way llama-server loads one, through
 * libllama's C API, with the tensor buffer overrides its --cpu-moe and
 * --n-cpu-moe N make (common/common.h: the experts' tensors of every block,
 * or of the first N, in the CPU's buffer type), which node-llama-cpp's
 * addon cannot ask for. It runs node-llama-cpp's prebuilt libllama and
 * ggml, unmodified, and is built against the headers of that release's own
 * source (63-llama-real.t).
 *
 * usage: libllama_run NODE_MODULES MODEL [-ngl N] [-c N] [--cpu-moe]
 *                     [--n-cpu-moe N] [--no-mmap] [-nkvo] [-ctk T] [-ctv T]
 *                     [-sm none|layer|row] [-mg N] [-ot PATTERN=CPU]
 *                     [--fit on|off] [-fitt MiB] [-fitc N] [-np N] [-kvu] [--eval]
 *   NODE_MODULES  where node-llama-cpp's CUDA package is (its backends load
 *                 from its binaries' directory: ggml_backend_load_all_from_path)
 *   options       llama-server's, with its defaults but -c 512 without
 *                 --fit (the report quotes them as a server's command line)
 * --fit on is llama-server's default (common/common.cpp), off here: before the
 * load, common_fit_params (common/fit.h) measures the model with no_alloc
 * probes and sets what was left at its default (-ngl, and the context
 * where no -c is given) to leave -fitt MiB (default 1024) free on each device. It is a C++ function of
 * libllama-common, found by its mangled name so the runner stays C; a
 * release without it exits 4.
 * Loads, makes a context and, with --eval, evaluates 32 tokens once
 * (ggml's mixture-of-experts kernels ask for the card's opt-in shared
 * memory per block, which the simulated GPU reports as an sm_89 card's);
 * llama.cpp's log to stderr. Exit 0, or 3 when the load, the context or
 * the evaluation fails.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "llama.h"

/* llama.cpp's LLM_FFN_EXPS_REGEX (common/common.h, v0.5.0). */
#define EXPERTS "\\.ffn_(up|down|gate|gate_up)_(ch|)exps"
#define MAX_BLOCKS 64

static void log_line(enum ggml_log_level level, const char *text, void *user)
{
    (void)level, (void)user;
    fputs(text, stderr);
}

#define BINS "/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda"

/* llama-server's -ctk / -ctv names (common/arg.cpp's kv_cache_types). */
static int cache_type(const char *name, enum ggml_type *type)
{
    static const struct { const char *name; enum ggml_type type; } types[] = {
        { "f32", GGML_TYPE_F32 },   { "f16", GGML_TYPE_F16 },   { "bf16", GGML_TYPE_BF16 },
        { "q8_0", GGML_TYPE_Q8_0 }, { "q4_0", GGML_TYPE_Q4_0 }, { "q4_1", GGML_TYPE_Q4_1 },
        { "q5_0", GGML_TYPE_Q5_0 }, { "q5_1", GGML_TYPE_Q5_1 },
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(name, types[i].name))
            return *type = types[i].type, 1;
    return 0;
}

static int split_mode(const char *name, enum llama_split_mode *mode)
{
    if (!strcmp(name, "none"))
        return *mode = LLAMA_SPLIT_MODE_NONE, 1;
    if (!strcmp(name, "layer"))
        return *mode = LLAMA_SPLIT_MODE_LAYER, 1;
    if (!strcmp(name, "row"))
        return *mode = LLAMA_SPLIT_MODE_ROW, 1;
    return 0;
}

/* common_fit_params's signature in v0.5.0 (common/fit.h); the extra
 * model (a draft) is never given. */
typedef int fit_params_fn(const char *path_model, struct llama_model_params *, struct llama_context_params *,
                          float *tensor_split, struct llama_model_tensor_buft_override *, size_t *margins,
                          uint32_t n_ctx_min, const void *extra, enum ggml_log_level);
#define FIT_PARAMS_SYMBOL \
    "_Z17common_fit_paramsPKcP18llama_model_paramsP20llama_context_paramsPfP32llama_model_tensor_buft_overridePmjPK22common_fit_extra_model14ggml_log_level"

int main(int argc, char **argv)
{
    int gpu_layers = -1, context = 512, cpu_moe = -1, mmap = 1, eval = 0, kv_offload = 1;
    enum ggml_type type_k = GGML_TYPE_F16, type_v = GGML_TYPE_F16;
    enum llama_split_mode split = LLAMA_SPLIT_MODE_LAYER;
    int main_gpu = 0, fit = 0, fit_target_mib = 1024, fit_min_ctx = 4096, context_given = 0;
    int sequences = 1, kv_unified = 0;   /* llama-server's -np N and --kv-unified (common.h's defaults) */
    const char *to_cpu = NULL;   /* -ot PATTERN=CPU: the one target the runner knows */
    /* llama-server's environment, which its command line overrides
     * (common/arg.cpp: LLAMA_ARG_N_GPU_LAYERS, LLAMA_ARG_FIT_TARGET). */
    if (getenv("LLAMA_ARG_N_GPU_LAYERS"))
        gpu_layers = atoi(getenv("LLAMA_ARG_N_GPU_LAYERS"));
    if (getenv("LLAMA_ARG_FIT_TARGET"))
        fit_target_mib = atoi(getenv("LLAMA_ARG_FIT_TARGET"));
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "-ngl"))
            gpu_layers = atoi(v), i++;
        else if (!strcmp(a, "-c"))
            context = atoi(v), context_given = 1, i++;
        else if (!strcmp(a, "--cpu-moe"))
            cpu_moe = 0;
        else if (!strcmp(a, "--n-cpu-moe"))
            cpu_moe = atoi(v), i++;
        else if (!strcmp(a, "--no-mmap"))
            mmap = 0;
        else if (!strcmp(a, "-nkvo") || !strcmp(a, "--no-kv-offload"))
            kv_offload = 0;
        else if (!strcmp(a, "-ctk") && cache_type(v, &type_k))
            i++;
        else if (!strcmp(a, "-ctv") && cache_type(v, &type_v))
            i++;
        else if (!strcmp(a, "-sm") && split_mode(v, &split))
            i++;
        else if (!strcmp(a, "-mg"))
            main_gpu = atoi(v), i++;
        else if (!strcmp(a, "-ot") && strlen(v) > 4 && !strcmp(v + strlen(v) - 4, "=CPU"))
            to_cpu = v, i++;
        else if (!strcmp(a, "--fit") && (!strcmp(v, "on") || !strcmp(v, "off")))
            fit = !strcmp(v, "on"), i++;
        else if (!strcmp(a, "-fitt"))
            fit_target_mib = atoi(v), i++;
        else if (!strcmp(a, "-fitc"))
            fit_min_ctx = atoi(v), i++;
        else if (!strcmp(a, "-np") && atoi(v) > 0)
            sequences = atoi(v), i++;
        else if (!strcmp(a, "-kvu") || !strcmp(a, "--kv-unified"))
            kv_unified = 1;
        else if (!strcmp(a, "--eval"))
            eval = 1;
        else
            argc = 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: libllama_run NODE_MODULES MODEL [-ngl N] [-c N] [--cpu-moe] [--n-cpu-moe N] "
                        "[--no-mmap] [-nkvo] [-ctk T] [-ctv T] [-sm none|layer|row] [-mg N] [-ot PATTERN=CPU] [--fit on|off] [-fitt MiB] [-fitc N] [-np N] [-kvu] [--eval]\n");
        return 2;
    }
    char bins[4096];
    snprintf(bins, sizeof bins, "%s" BINS, argv[1]);
    llama_log_set(log_line, NULL);
    ggml_backend_load_all_from_path(bins);
    llama_backend_init();
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!cpu) {
        fprintf(stderr, "libllama_run: no CPU backend in %s\n", bins);
        return 2;
    }
    static char patterns[MAX_BLOCKS][64];
    struct llama_model_tensor_buft_override overrides[MAX_BLOCKS + 1] = { { 0 } };
    int n = 0;
    if (cpu_moe == 0) {
        overrides[n++] = (struct llama_model_tensor_buft_override){ EXPERTS, ggml_backend_dev_buffer_type(cpu) };
    } else {
        for (; n < cpu_moe && n < MAX_BLOCKS; n++) {
            snprintf(patterns[n], sizeof patterns[n], "blk\\.%d%s", n, EXPERTS);
            overrides[n] = (struct llama_model_tensor_buft_override){ patterns[n], ggml_backend_dev_buffer_type(cpu) };
        }
    }
    static char ot_pattern[256];
    if (to_cpu && n < MAX_BLOCKS) {
        snprintf(ot_pattern, sizeof ot_pattern, "%.*s", (int)(strlen(to_cpu) - 4), to_cpu);
        overrides[n++] = (struct llama_model_tensor_buft_override){ ot_pattern, ggml_backend_dev_buffer_type(cpu) };
    }
    /* llama-server's context (common/arg.cpp): 0, the model's trained
     * one, unless -c says; --fit shrinks that as far as -fitc, but not a
     * -c given, 0 included. The runner's own default without --fit: 512. */
    if (fit && !context_given)
        context = 0;
    else if (fit && context == 0)
        fit_min_ctx = -1;   /* UINT32_MAX: the trained context whole */
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = gpu_layers;
    mp.split_mode = split;
    mp.main_gpu = main_gpu;
    mp.load_mode = mmap ? LLAMA_LOAD_MODE_MMAP : LLAMA_LOAD_MODE_NONE;
    mp.tensor_buft_overrides = n ? overrides : NULL;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)context;
    cp.n_batch = cp.n_ubatch = 512;
    cp.offload_kqv = kv_offload;
    cp.n_seq_max = (uint32_t)sequences;
    cp.kv_unified = kv_unified;
    cp.type_k = type_k, cp.type_v = type_v;
    if (fit) {
        char common[4200];
        snprintf(common, sizeof common, "%s/libllama-common.so", bins);
        void *lib = dlopen(common, RTLD_NOW);
        fit_params_fn *fit_params = lib ? (fit_params_fn *)dlsym(lib, FIT_PARAMS_SYMBOL) : NULL;
        if (!fit_params) {
            fprintf(stderr, "libllama_run: no common_fit_params in %s\n", common);
            return 4;
        }
        /* llama-server's buffers: writable, one entry per device and override. */
        static float tensor_split[256];
        static struct llama_model_tensor_buft_override fitted[4096];
        static size_t margins[256];
        if (llama_max_devices() > 256 || llama_max_tensor_buft_overrides() > 4096) {
            fprintf(stderr, "libllama_run: --fit on at most 256 devices\n");
            return 2;
        }
        for (size_t d = 0; d < llama_max_devices(); d++)
            margins[d] = (size_t)fit_target_mib << 20;
        int status = fit_params(argv[2], &mp, &cp, tensor_split, fitted, margins, (uint32_t)fit_min_ctx, NULL,
                                GGML_LOG_LEVEL_ERROR);
        printf("fit %d: -ngl %d -c %u\n", status, mp.n_gpu_layers, cp.n_ctx);
        for (const struct llama_model_tensor_buft_override *o = mp.tensor_buft_overrides; o && o->pattern; o++)
            printf("fit -ot %s=%s\n", o->pattern, ggml_backend_buft_name(o->buft));
    }
    struct llama_model *model = llama_model_load_from_file(argv[2], mp);
    if (!model) {
        printf("failed: load\n");
        return 3;
    }
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        printf("failed: context\n");
        llama_model_free(model);
        return 3;
    }
    int rc = 0;
    if (eval) {
        llama_token prompt[32];
        for (int i = 0; i < 32; i++)
            prompt[i] = 3 + i;
        rc = llama_decode(ctx, llama_batch_get_one(prompt, 32));
        printf("decode %d\n", rc);
    }
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc ? 3 : 0;
}
