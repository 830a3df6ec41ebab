/* verdict.c: the findings every view prints, decided once, below the
 * output room: a process's verdict and what fails the --fail-on-spill gate,
 * whether it ran on the CPU, its pinned offload, whether it is a probe that
 * allocated nothing, and the options of its command line that place layers
 * (findings.c has the rest: the tipping event, more VRAM needed, headroom
 * and the margin). The text, JSON and HTML reports, `top`, `serve`, `diff`
 * and the exit status read them from here (contracts in report.h), so no
 * two views can disagree on them. */
#include "report.h"

#include <errno.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

int vt_proc_allocated_nothing(const vt_proc_t *p)
{
    return !p->events.allocs && !p->events.failed && !p->events.frees;
}

int vt_pid_gone(uint64_t pid, const char *hostname)
{
    char host[256];
    if (!pid || pid > INT32_MAX || !hostname || gethostname(host, sizeof host))
        return 0;
    host[sizeof host - 1] = 0;
    /* kill(pid, 0) sends nothing: it only asks whether the pid exists. */
    return !strcmp(host, hostname) && kill((pid_t)pid, 0) && errno == ESRCH;
}

int vt_proc_gone(const vt_proc_t *p)
{
    return !p->ended && vt_pid_gone(p->pid, p->hostname);
}

int vt_report_input_idle(const vt_report_input_t *in)
{
    const vt_proc_t *p = vt_model_proc(in->model);
    /* A model run on the CPU allocated nothing through CUDA but is no
     * probe: it is what the user asks about. */
    return (p->ended || vt_proc_gone(p)) && !in->truncated && !in->damaged && vt_proc_allocated_nothing(p) &&
           !p->placement.known;
}

int vt_proc_ran_on_cpu(const vt_proc_t *p)
{
    const vt_placement_t *pl = &p->placement;
    return pl->known && pl->layers_known && !pl->layers_gpu && !pl->weights.gpu && !pl->kv.gpu && !p->events.allocs &&
           !p->events.failed;
}

int vt_proc_pinned_offload(const vt_proc_t *p)
{
    return !p->placement.known && !p->ggml.marks && !p->host_weights_ggml_rule && !p->tip.valid &&
           p->host.by_tag[VT_TAG_WEIGHTS] > 0 &&
           !(p->fallback_tags & (1u << VT_TAG_WEIGHTS)) && p->host_weights_after < 0;
}

int vt_proc_placement_unseen(const vt_proc_t *p)
{
    if (p->placement.layers_known || strcmp(vt_proc_verdict(p, 0), "no_spill"))
        return 0;
    for (int i = 0; i < p->ndevs; i++)
        if (p->devs[i].mem.peak_by_tag[VT_TAG_WEIGHTS])
            return 1;
    return 0;
}

const char *vt_proc_verdict(const vt_proc_t *p, int whole)
{
    if (whole && p->truncated)
        return "incomplete";
    if (!p->tip.valid) {
        if (vt_proc_ran_on_cpu(p))
            return "cpu_only";
        if (p->placement.offloaded || vt_proc_pinned_offload(p))
            return "partial_offload";
        return !p->events.allocs && !p->events.failed ? "no_gpu_memory" : "no_spill";
    }
    /* Only OOMs, each retried successfully (graph launches: launched again
     * with success): nothing left VRAM. */
    uint64_t failures = 0, recovered = 0;
    for (int i = 0; i < p->ndevs; i++) {
        failures += p->devs[i].failures;
        recovered += p->devs[i].retry_recovered;
    }
    int other = 0;
    for (int k = 0; k < VT_SPILL_KINDS; k++)
        other |= k != VT_SPILL_OOM && k != VT_SPILL_GRAPH_LAUNCH && p->spill_count[k];
    /* A graph launch that found no memory is recovered when a launch
     * succeeded after it (the shim records the first success after a
     * failure); unrecovered, no fallback is known: out of memory. */
    int relaunched = p->events.graph_launch_recovered >= p->spill_count[VT_SPILL_GRAPH_LAUNCH];
    if (!other && recovered >= failures && relaunched)
        return p->placement.offloaded ? "partial_offload" : "near_spill";
    if (p->tip_kind == VT_SPILL_GRAPH_LAUNCH && !other)
        return "failed";
    /* A failure after which the process allocated nothing: it gave up (a
     * loader without a back-off); nothing ran from host memory. */
    if (p->tip_kind == VT_SPILL_OOM && !other && !p->allocs_after_tip)
        return "failed";
    return "spill";
}

/* Worst first: the order in which several processes' verdicts are one
 * run's (diff's heading, top's line). */
static const struct {
    const char *key, *words, *lower;
} verdicts[] = {
    { "spill", "SPILL", "spill" },
    { "failed", "OUT OF MEMORY", "out of memory" },
    { "near_spill", "NEAR SPILL", "near spill" },
    { "partial_offload", "PARTIAL OFFLOAD", "partial offload" },
    { "cpu_only", "RAN ON THE CPU", "ran on the CPU" },
    { "incomplete", "INCOMPLETE TRACE", "incomplete trace" },
    { "no_spill", "NO SPILL", "no spill" },
    { "no_gpu_memory", "NO GPU MEMORY USED", "no GPU memory used" },
};
#define NVERDICTS (sizeof verdicts / sizeof verdicts[0])

const char *vt_verdict_words(const char *key)
{
    for (size_t i = 0; i < NVERDICTS; i++)
        if (!strcmp(key, verdicts[i].key))
            return verdicts[i].words;
    return key;
}

const char *vt_verdict_lower(const char *key)
{
    for (size_t i = 0; i < NVERDICTS; i++)
        if (!strcmp(key, verdicts[i].key))
            return verdicts[i].lower;
    return key;
}

int vt_verdict_rank(const char *key)
{
    for (size_t i = 0; i < NVERDICTS; i++)
        if (!strcmp(key, verdicts[i].key))
            return (int)i;
    return (int)NVERDICTS;
}

int vt_verdict_alarming(const char *key)
{
    return vt_verdict_rank(key) < vt_verdict_rank("incomplete");
}

int vt_proc_fails_gate(const vt_proc_t *p, int accept_offload)
{
    const char *v = vt_proc_verdict(p, 0);
    if (!strcmp(v, "partial_offload") || !strcmp(v, "cpu_only"))
        return !accept_offload || p->tip.valid;
    return p->tip.valid;
}

/* The options of llama.cpp's (and llama-server's) command line that decide
 * where layers and the KV cache go, or how large the KV cache is (its
 * context over -np sequences, its type: ollama starts llama-server with
 * -c, -np and --cache-type-k/-v and leaves -ngl to --fit), quoted as
 * given (common/arg.cpp's names). */
size_t vt_proc_layer_args(const vt_proc_t *p, const char **out, size_t cap)
{
    static const char *const with_value[] = { "-ngl", "--n-gpu-layers", "--gpu-layers", "-c", "--ctx-size",
                                              "-np", "--parallel", "-ctk", "--cache-type-k", "-ctv", "--cache-type-v",
                                              "-fit", "--fit", "-fitt", "--fit-target", "-fitc", "--fit-ctx",
                                              "-sm", "--split-mode", "-ts", "--tensor-split",
                                              "-mg", "--main-gpu", "-dev", "--device", "-ot", "--override-tensor",
                                              "-ncmoe", "--n-cpu-moe", "-ncffn", "--n-cpu-ffn", "--load-mode", "-ngld", "--n-gpu-layers-draft" };
    static const char *const flags[] = { "-nkvo", "--no-kv-offload", "-kvo",  "--kv-offload",
                                         "--no-mmap", "--mlock", "-cmoe", "--cpu-moe" };
    size_t n = 0;
    for (uint32_t i = 1; i < p->argc && n < cap; i++) {
        const char *a = p->argv[i];
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++) {
            size_t len = strlen(with_value[k]);
            if (strncmp(a, with_value[k], len) || (a[len] && a[len] != '='))
                continue;
            out[n++] = a;
            if (!a[len] && i + 1 < p->argc && n < cap)
                out[n++] = p->argv[++i];
            goto next;
        }
        for (size_t k = 0; k < sizeof flags / sizeof *flags; k++)
            if (!strcmp(a, flags[k])) {
                out[n++] = a;
                break;
            }
    next:;
    }
    return n;
}

size_t vt_proc_layer_env(const vt_proc_t *p, const char **out, size_t cap)
{
    size_t n = 0;
    for (uint32_t i = 0; i < p->envc && n < cap; i++)
        if (!strncmp(p->env[i], "LLAMA_ARG_", 10))
            out[n++] = p->env[i];
    return n;
}

/* vt_proc_option, saying where its value came from (VT_FROM_*). */
static const char *option_from(const vt_proc_t *p, const char *const *names, size_t nnames, const char *env, int *from)
{
    int from_env;
    const char *v = vt_proc_option(p, names, nnames, env, &from_env);
    *from = !v ? VT_FROM_DEFAULT : from_env ? VT_FROM_ENV : VT_FROM_ARGV;
    return v;
}

/* --n-cpu-moe 0 adds no override (common.h's llm_add_n_cpu_ffn_overrides
 * loops N times); anything but a positive number adds none we can name. */
static int positive(const char *v)
{
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    return v && end != v && !*end && n > 0;
}

/* -ts "3,1" or "0,0": only a nonzero share is a split set by the user
 * (common/fit.cpp checks each against 0). */
static int nonzero_split(const char *v)
{
    for (; v && *v; v++)
        if (*v >= '1' && *v <= '9')
            return 1;
    return 0;
}

/* Overrides add up, the environment's and the command line's alike
 * (common/arg.cpp pushes each onto tensor_buft_overrides): any one makes
 * --fit leave the split as given. The command line's is named first. */
static void fit_overrides(const vt_proc_t *p, vt_llama_fit_t *out)
{
    static const char *const ot[] = { "-ot", "--override-tensor" }, *const cmoe[] = { "-cmoe", "--cpu-moe" },
                             *const ncmoe[] = { "-ncmoe", "--n-cpu-moe" }, *const ncffn[] = { "-ncffn", "--n-cpu-ffn" },
                             *const ts[] = { "-ts", "--tensor-split" }, *const sm[] = { "-sm", "--split-mode" };
    const char *name = NULL, *v;
    if ((v = vt_proc_arg_value(p, ot, 2, &name)) && *v)
        out->override = name, out->override_value = v;
    else if ((name = vt_proc_arg_flag(p, cmoe, 2)))
        out->override = name;
    else if (positive(v = vt_proc_arg_value(p, ncmoe, 2, &name)) || positive(v = vt_proc_arg_value(p, ncffn, 2, &name)))
        out->override = name, out->override_value = v;
    if (out->override) {
        out->override_from = VT_FROM_ARGV;
    } else {
        out->override_from = VT_FROM_ENV;
        if ((v = vt_proc_env_value(p, "LLAMA_ARG_OVERRIDE_TENSOR")) && *v)
            out->override = "LLAMA_ARG_OVERRIDE_TENSOR", out->override_value = v;
        else if (vt_llama_truthy(vt_proc_env_value(p, "LLAMA_ARG_CPU_MOE")))
            out->override = "LLAMA_ARG_CPU_MOE", out->override_value = vt_proc_env_value(p, "LLAMA_ARG_CPU_MOE");
        else if (positive(v = vt_proc_env_value(p, "LLAMA_ARG_N_CPU_MOE")))
            out->override = "LLAMA_ARG_N_CPU_MOE", out->override_value = v;
        else if (positive(v = vt_proc_env_value(p, "LLAMA_ARG_N_CPU_FFN")))
            out->override = "LLAMA_ARG_N_CPU_FFN", out->override_value = v;
        else
            out->override_from = VT_FROM_DEFAULT;
    }
    /* The command line's -ts or -sm replaces the environment's. */
    const char *tsv = vt_proc_arg_value(p, ts, 2, &name);
    if (tsv) {
        if (nonzero_split(tsv))
            out->split = name, out->split_value = tsv, out->split_from = VT_FROM_ARGV;
    } else if (nonzero_split(tsv = vt_proc_env_value(p, "LLAMA_ARG_TENSOR_SPLIT"))) {
        out->split = "LLAMA_ARG_TENSOR_SPLIT", out->split_value = tsv, out->split_from = VT_FROM_ENV;
    }
    const char *smv = vt_proc_arg_value(p, sm, 2, &name);
    if (!out->split && smv && !strcmp(smv, "row"))
        out->split = name, out->split_value = smv, out->split_from = VT_FROM_ARGV;
    else if (!out->split && !smv && (smv = vt_proc_env_value(p, "LLAMA_ARG_SPLIT_MODE")) && !strcmp(smv, "row"))
        out->split = "LLAMA_ARG_SPLIT_MODE", out->split_value = smv, out->split_from = VT_FROM_ENV;
}

void vt_proc_llama_fit(const vt_proc_t *p, vt_llama_fit_t *out)
{
    memset(out, 0, sizeof *out);
    out->ran = p->llama_fit.queries > 0;
    /* common/arg.cpp: the environment first, then the command line over it. */
    static const char *const ngl[] = { "-ngl", "--gpu-layers", "--n-gpu-layers" };
    static const char *const fitt[] = { "-fitt", "--fit-target" };
    const char *n = option_from(p, ngl, 3, "LLAMA_ARG_N_GPU_LAYERS", &out->ngl_from);
    /* auto (and -1, its number) is the default --fit sets. */
    if (n && strcmp(n, "auto") && strcmp(n, "-1"))
        out->ngl = n;
    else
        out->ngl_from = VT_FROM_DEFAULT;
    const char *t = out->target = option_from(p, fitt, 2, "LLAMA_ARG_FIT_TARGET", &out->target_from);
    /* One number is every device's margin, in MiB; a list (MiB0,MiB1,...)
     * is quoted as given. llama.cpp's default: 1024 MiB each. */
    if (!t) {
        out->target_bytes = 1024ull << 20;
    } else {
        char *end;
        errno = 0;
        unsigned long long mib = strtoull(t, &end, 10);
        if (end != t && !*end && t[0] != '-' && !errno && mib < (1ull << 40))
            out->target_bytes = (uint64_t)mib << 20;
    }
    out->env_recorded = p->env_recorded;
    fit_overrides(p, out);
    static const char *const ctx[] = { "-c", "--ctx-size" }, *const fitc[] = { "-fitc", "--fit-ctx" };
    out->ctx = option_from(p, ctx, 2, "LLAMA_ARG_CTX_SIZE", &out->ctx_from);
    out->fit_ctx = option_from(p, fitc, 2, "LLAMA_ARG_FIT_CTX", &out->fit_ctx_from);
}

int vt_proc_fit_chose(const vt_proc_t *p)
{
    vt_llama_fit_t fit;
    vt_proc_llama_fit(p, &fit);
    return fit.ran && !fit.ngl && !fit.override && !fit.split && fit.env_recorded;
}
