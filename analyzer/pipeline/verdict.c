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
                                              "-mg", "--main-gpu", "-ot", "--override-tensor",
                                              "-ncmoe", "--n-cpu-moe", "--load-mode", "-ngld", "--n-gpu-layers-draft" };
    static const char *const flags[] = { "-nkvo", "--no-kv-offload", "--no-mmap", "--mlock", "-cmoe", "--cpu-moe" };
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
