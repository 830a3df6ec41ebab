/* `vramtrace serve`: the traces of a directory as Prometheus metrics, for
 * fleets that watch VRAM in Grafana rather than read reports.
 *
 *   vramtrace serve --metrics [ADDR:]PORT [--rules F] [--margin PCT] TRACE|DIR...
 *   vramtrace serve --once ... TRACE|DIR...      (one exposition on stdout)
 *
 * Every scrape gives the figures `report` gives for the traces as they
 * are, so a running server's trace (its chunks land every
 * VRAMTRACE_FLUSH_MS) shows up to its last complete chunk; what changed
 * since the last scrape is all it reads (pipeline/trace_cache.h: a trace
 * that grew is read on from its last complete chunk), and no trace is
 * ever written. The exposition is OpenMetrics text 1.0; label
 * values taken from a trace (process names, GPU names) are escaped and
 * bounded, since a trace is hostile input.
 *
 * The server binds to 127.0.0.1 unless an address is given: the metrics
 * name the processes of the machine and their command lines' programs. It
 * is one thread serving one connection at a time, each with a read and
 * write timeout, so a stuck client costs at most those seconds. SIGINT and
 * SIGTERM end it with status 0.
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "commands.h"
#include "report.h"
#include "trace_cache.h"

#define MAX_SAVED_OPTS 32
#define LABEL_MAX 128
#define REQUEST_MAX 8192
#define IO_TIMEOUT_S 5

typedef struct serve_conf {
    vt_saved_opts_t opts;
    char *const *paths;
    int npaths;
    vt_tcache_t cache;   /* the traces as the last scrape left them */
} serve_conf_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vramtrace serve --metrics [ADDR:]PORT [options] TRACE|DIR...\n"
            "       vramtrace serve --once [options] TRACE|DIR...\n"
            "\n"
            "Serves the traces as Prometheus metrics (OpenMetrics text) on\n"
            "http://ADDR:PORT/metrics, reading them again at every scrape. Per process:\n"
            "vramtrace_verdict (1 for the report's verdict), and for a ggml program\n"
            "vramtrace_model_host_bytes (weights, KV cache in host memory) and\n"
            "vramtrace_layers (on a GPU, total), vramtrace_kv_cache_cells and _streams.\n"
            "\n"
            "  --metrics [ADDR:]PORT  listen there; ADDR defaults to 127.0.0.1\n"
            "                         (give 0.0.0.0 or [::] to be reachable from other\n"
            "                         machines); PORT 0 picks a free port\n"
            "  --once                 print the metrics once on stdout and exit\n"
            "  --margin PCT           the headroom margin, as for report (default 15)\n"
            "  --rules FILE           tagging rules, as for report\n"
            "\n"
            "Exit status: 0 after SIGINT/SIGTERM or --once, 2 bad usage, or with\n"
            "--once, traces that cannot be read.\n");
}

/* OpenMetrics label values escape backslash, double quote and newline; we
 * also drop other control characters and cut at LABEL_MAX bytes, so a
 * trace cannot forge lines or inflate a scrape. */
static void label_value(FILE *o, const char *s)
{
    size_t n = 0;
    for (; s && *s && n < LABEL_MAX; s++, n++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '\\' || ch == '"')
            fprintf(o, "\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", o);
        else if (ch >= 0x20 && ch != 0x7f)
            fputc(ch, o);
    }
}

static void proc_labels(FILE *o, const vt_proc_t *p)
{
    fprintf(o, "pid=\"%llu\",process=\"", (unsigned long long)p->pid);
    label_value(o, p->exe ? vt_base(p->exe) : "");
    fputc('"', o);
}

static void dev_labels(FILE *o, const vt_proc_t *p, const vt_dev_t *d)
{
    char uuid[48] = "";
    if (d->have_info && vt_uuid_known(d->uuid))
        vt_uuid_str(d->uuid, uuid);
    proc_labels(o, p);
    fprintf(o, ",gpu=\"%d\",gpu_uuid=\"%s\"", d->ordinal, uuid);
}

/* The families, in exposition order: three counts of the whole directory,
 * then the per-trace ones (a counter's samples get OpenMetrics' _total
 * suffix). */
enum {
    F_UP,
    F_PROCESSES,
    F_IDLE,
    F_READ_TRACES,
    F_READ_BYTES,
    F_DEVICE,   /* the nine of dev_families, from here */
    F_HOST_PINNED = F_DEVICE + 9,
    F_MANAGED,
    F_SPILLS,
    F_VERDICT,
    F_MODEL_HOST,
    F_LAYERS,
    F_MODELS,
    F_KV_CELLS,
    F_KV_STREAMS,
    F_EVENTS,
    F_DROPPED,
    F_PARTIAL,
    F_SHIM_LIBRARY,
    F_ENDED,
    F_COUNT
};

typedef uint64_t (*dev_value_fn)(const vt_dev_t *d, int tag, int *have);

static uint64_t live_by_tag(const vt_dev_t *d, int tag, int *have) { (void)have; return d->mem.by_tag[tag]; }
static uint64_t peak_by_tag(const vt_dev_t *d, int tag, int *have) { (void)have; return d->mem.peak_by_tag[tag]; }
static uint64_t total(const vt_dev_t *d, int tag, int *have) { (void)tag; *have = d->total > 0; return d->total; }
static uint64_t reserve(const vt_dev_t *d, int tag, int *have) { (void)tag; *have = d->have_info; return vt_dev_reserve(d); }
static uint64_t untracked(const vt_dev_t *d, int tag, int *have) { (void)tag; *have = d->have_free; return vt_dev_untracked(d); }
static uint64_t last_free(const vt_dev_t *d, int tag, int *have) { (void)tag; *have = d->have_free; return d->last_free; }
static uint64_t min_free(const vt_dev_t *d, int tag, int *have) { (void)tag; *have = d->have_min; return d->min_free; }
static uint64_t failures(const vt_dev_t *d, int tag, int *have) { (void)tag; (void)have; return d->failures; }
static uint64_t below_margin(const vt_dev_t *d, int tag, int *have) { (void)tag; (void)have; return d->below_margin.valid; }

typedef struct family {
    const char *name, *type, *help;
} family_t;

/* The per process-device families: one sample per process-device, or per
 * tag of it. */
typedef struct dev_family {
    dev_value_fn value;
    int per_tag;
} dev_family_t;

static const family_t families[F_COUNT] = {
    [F_UP] = { "vramtrace_up", "gauge", "1 when every trace could be read at this scrape (0: one was left out or is damaged)" },
    [F_PROCESSES] = { "vramtrace_processes", "gauge", "traced processes (one trace each)" },
    [F_IDLE] = { "vramtrace_idle_processes", "gauge",
                 "traced processes that ended having allocated nothing (such as GPU probes); no series of their own" },
    [F_READ_TRACES] = { "vramtrace_scrape_read_traces", "gauge",
                         "traces read at this scrape: the new and the changed (a trace unchanged since the last scrape "
                         "is not opened)" },
    [F_READ_BYTES] = { "vramtrace_scrape_read_bytes", "gauge", "the bytes of the traces read at this scrape" },
    [F_DEVICE + 0] = { "vramtrace_device_bytes", "gauge", "device memory live now, by tag" },
    [F_DEVICE + 1] = { "vramtrace_device_peak_bytes", "gauge", "device memory at the process's peak on this GPU, by tag" },
    [F_DEVICE + 2] = { "vramtrace_device_total_bytes", "gauge", "the card's memory as the driver reported it" },
    [F_DEVICE + 3] = { "vramtrace_device_free_bytes", "gauge", "free memory at the driver's last report in the trace" },
    [F_DEVICE + 4] = { "vramtrace_device_min_free_bytes", "gauge", "the least free memory seen or estimated" },
    [F_DEVICE + 5] = { "vramtrace_context_reserve_bytes", "gauge", "memory in use before the process's first allocation" },
    [F_DEVICE + 6] = { "vramtrace_untracked_bytes", "gauge",
                       "memory in use by nobody traced (other processes, libraries' own)" },
    [F_DEVICE + 7] = { "vramtrace_below_margin", "gauge", "1 once free memory went below the margin" },
    [F_DEVICE + 8] = { "vramtrace_alloc_failures", "counter", "device allocations failed for lack of memory" },
    [F_HOST_PINNED] = { "vramtrace_host_pinned_bytes", "gauge", "pinned host memory live now, by tag" },
    [F_MANAGED] = { "vramtrace_managed_bytes", "gauge", "managed (unified) memory live now, by tag" },
    [F_SPILLS] = { "vramtrace_spills", "counter",
                   "spill events (oom, host_fallback, managed_oversubscription, over_capacity, graph_launch) of a "
                   "process the report says spilled or ran out of memory; 0 for one it does not (a near spill's "
                   "failures are vramtrace_alloc_failures)" },
    [F_VERDICT] = { "vramtrace_verdict", "gauge",
                    "1 for the process's verdict as the report gives it (spill, near_spill, failed, partial_offload, "
                    "cpu_only, no_spill, no_gpu_memory), 0 for the others" },
    [F_MODEL_HOST] = { "vramtrace_model_host_bytes", "gauge",
                       "a ggml program's model in host memory (pinned, mapped or pageable) at the moment the report "
                       "pictures (its latest load with layers in host memory, else its fullest): weights = the layers' (blocks and output layer; not the token embeddings "
                       "llama.cpp keeps there by design), kv = the KV cache" },
    [F_LAYERS] = { "vramtrace_layers", "gauge",
                   "a ggml program's layers as llama.cpp counts them (blocks + the output layer): on a GPU, in "
                   "total, the blocks on a GPU whose experts are in host memory (llama-server's --cpu-moe, "
                   "--n-cpu-moe), those whose KV cache is (--no-kv-offload), the blocks in host memory by an override "
                   "(-ot: their KV cache on a GPU), and the blocks on a GPU with part of their other weights in host "
                   "memory (an override of part of a block, or --fit's)" },
    [F_KV_CELLS] = { "vramtrace_kv_cache_cells", "gauge",
                     "a ggml program's KV cache cells, llama.cpp's \"N cells\": its context's tokens, each "
                     "sequence's where vramtrace_kv_cache_streams is over 1, at the moment the report pictures; "
                     "absent where the trace does not say" },
    [F_KV_STREAMS] = { "vramtrace_kv_cache_streams", "gauge",
                       "a ggml program's KV cache streams: 1, one cache every sequence shares; N, one per "
                       "sequence (llama-server's -np N without --kv-unified), of vramtrace_kv_cache_cells each; "
                       "absent where the trace does not say" },
    [F_MODELS] = { "vramtrace_models_at_once", "gauge",
                   "a ggml program's models loaded at once (a draft model beside its target: 2); the layer and "
                   "host-memory figures are of the one with the most layers in host memory" },
    [F_EVENTS] = { "vramtrace_events", "counter", "events read from the trace" },
    [F_DROPPED] = { "vramtrace_dropped_events", "counter",
                    "events the shim counted as lost (ring full, signal handler, call not returned, not written)" },
    [F_PARTIAL] = { "vramtrace_trace_partial", "gauge",
                    "1 while the trace ends in a chunk still being written (a live process) or cut short" },
    [F_SHIM_LIBRARY] = { "vramtrace_shim_library_missing", "gauge",
                         "1 when the shim ran without this library (libzstd.so.1: the trace is uncompressed; "
                         "libunwind.so.8: glibc's backtrace() took the frames the shim's unwinder could not follow)" },
    [F_ENDED] = { "vramtrace_process_ended", "gauge", "1 once the trace holds the process's end record" },
};

static const dev_family_t dev_families[9] = {
    { live_by_tag, 1 }, { peak_by_tag, 1 }, { total, 0 },     { last_free, 0 },    { min_free, 0 },
    { reserve, 0 },     { untracked, 0 },   { below_margin, 0 }, { failures, 0 },
};

static void family(FILE *o, int f)
{
    fprintf(o, "# TYPE %s %s\n# HELP %s %s\n", families[f].name, families[f].type, families[f].name, families[f].help);
}

/* The sample name of family f. */
static const char *sample_name(char buf[96], int f)
{
    snprintf(buf, 96, "%s%s", families[f].name, strcmp(families[f].type, "counter") ? "" : "_total");
    return buf;
}

static void dev_samples(FILE *o, const vt_proc_t *p, const vt_rules_t *rules, int f)
{
    char sample[96];
    const dev_family_t *df = &dev_families[f - F_DEVICE];
    sample_name(sample, f);
    for (int k = 0; k < p->ndevs; k++) {
        const vt_dev_t *d = &p->devs[k];
        int ntags = df->per_tag ? vt_rules_tag_count(rules) : 1;
        for (int t = 0; t < ntags; t++) {
            int have = 1;
            uint64_t v = df->value(d, df->per_tag ? t : -1, &have);
            if (!have)
                continue;
            fprintf(o, "%s{", sample);
            dev_labels(o, p, d);
            if (df->per_tag) {
                fputs(",tag=\"", o);
                label_value(o, vt_rules_tag_name(rules, t));
                fputc('"', o);
            }
            fprintf(o, "} %llu\n", (unsigned long long)v);
        }
    }
}

static void host_samples(FILE *o, const vt_proc_t *p, const vt_rules_t *rules, int f)
{
    const vt_tagged_peak_t *tp = f == F_MANAGED ? &p->managed : &p->host;
    for (int t = 0; t < vt_rules_tag_count(rules); t++) {
        fprintf(o, "%s{", families[f].name);
        proc_labels(o, p);
        fputs(",tag=\"", o);
        label_value(o, vt_rules_tag_name(rules, t));
        fprintf(o, "\"} %llu\n", (unsigned long long)tp->by_tag[t]);
    }
}

/* The samples of one process with series (has_series), each family's into
 * its own stream: f[F_DEVICE..F_ENDED]. */
static void trace_samples(FILE *const *f, const vt_report_input_t *in)
{
    const vt_proc_t *p = vt_model_proc(in->model);
    const vt_rules_t *rules = vt_model_rules(in->model);
    for (int k = F_DEVICE; k < F_HOST_PINNED; k++)
        dev_samples(f[k], p, rules, k);
    host_samples(f[F_HOST_PINNED], p, rules, F_HOST_PINNED);
    host_samples(f[F_MANAGED], p, rules, F_MANAGED);

    const char *v = vt_proc_verdict(p, 0);
    int spilled = !strcmp(v, "spill") || !strcmp(v, "failed");
    for (int k = 0; k < VT_SPILL_KINDS; k++) {
        fputs("vramtrace_spills_total{", f[F_SPILLS]);
        proc_labels(f[F_SPILLS], p);
        fprintf(f[F_SPILLS], ",kind=\"%s\"} %llu\n", vt_spill_kind_name(k),
                (unsigned long long)(spilled ? p->spill_count[k] : 0));
    }
    /* The report's verdict, one sample per key, 1 for the process's
     * (vt_proc_verdict as far as the trace goes: a live one is not
     * "incomplete"), so an alert reads one series and a change of verdict
     * flips values rather than making and ending series. */
    static const char *const verdicts[] = { "spill",    "near_spill", "failed",       "partial_offload",
                                            "cpu_only", "no_spill",   "no_gpu_memory" };
    for (size_t k = 0; k < sizeof verdicts / sizeof verdicts[0]; k++) {
        fputs("vramtrace_verdict{", f[F_VERDICT]);
        proc_labels(f[F_VERDICT], p);
        fprintf(f[F_VERDICT], ",verdict=\"%s\"} %d\n", verdicts[k], !strcmp(v, verdicts[k]));
    }
    /* Where a ggml program's model ran (its GGML_* records; none without
     * them): what is in host memory at its fullest moment, and its layers. */
    const vt_placement_t *pl = &p->placement;
    if (pl->known) {
        fputs("vramtrace_model_host_bytes{", f[F_MODEL_HOST]);
        proc_labels(f[F_MODEL_HOST], p);
        fprintf(f[F_MODEL_HOST], ",content=\"weights\"} %llu\n", (unsigned long long)pl->layer_weights_host);
        fputs("vramtrace_model_host_bytes{", f[F_MODEL_HOST]);
        proc_labels(f[F_MODEL_HOST], p);
        fprintf(f[F_MODEL_HOST], ",content=\"kv\"} %llu\n", (unsigned long long)vt_place_host(&pl->kv));
    }
    if (pl->known && pl->layers_known) {
        const struct { const char *where; uint32_t n; } layers[] = {
            { "gpu", pl->layers_gpu }, { "total", pl->layers_total }, { "gpu_experts_in_host", pl->expert_blocks_host },
            { "gpu_kv_in_host", pl->kv_blocks_host }, { "host_by_override", pl->override_blocks },
            { "gpu_part_in_host", pl->part_blocks_host },
        };
        for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
            fputs("vramtrace_layers{", f[F_LAYERS]);
            proc_labels(f[F_LAYERS], p);
            fprintf(f[F_LAYERS], ",where=\"%s\"} %u\n", layers[i].where, layers[i].n);
        }
        if (pl->kv_cells) {
            fputs("vramtrace_kv_cache_cells{", f[F_KV_CELLS]);
            proc_labels(f[F_KV_CELLS], p);
            fprintf(f[F_KV_CELLS], "} %u\n", pl->kv_cells);
            if (pl->kv_streams) {
                fputs("vramtrace_kv_cache_streams{", f[F_KV_STREAMS]);
                proc_labels(f[F_KV_STREAMS], p);
                fprintf(f[F_KV_STREAMS], "} %u\n", pl->kv_streams);
            }
        }
        fputs("vramtrace_models_at_once{", f[F_MODELS]);
        proc_labels(f[F_MODELS], p);
        fprintf(f[F_MODELS], "} %u\n", pl->models_at_once);
    }
    fputs("vramtrace_events_total{", f[F_EVENTS]);
    proc_labels(f[F_EVENTS], p);
    fprintf(f[F_EVENTS], "} %llu\n", (unsigned long long)p->events.total);
    fputs("vramtrace_dropped_events_total{", f[F_DROPPED]);
    proc_labels(f[F_DROPPED], p);
    fprintf(f[F_DROPPED], "} %llu\n", (unsigned long long)p->events.dropped);
    fputs("vramtrace_trace_partial{", f[F_PARTIAL]);
    proc_labels(f[F_PARTIAL], p);
    fprintf(f[F_PARTIAL], "} %d\n", in->truncated);
    /* A container without these libraries is still traced (trace_format.h,
     * vt_degraded): the fleet sees which hosts run that way. */
    static const struct {
        uint64_t bit;
        const char *library;
    } missing[] = { { VT_DEGRADED_NO_ZSTD, "libzstd.so.1" }, { VT_DEGRADED_NO_LIBUNWIND, "libunwind.so.8" } };
    for (size_t k = 0; k < sizeof missing / sizeof missing[0]; k++) {
        fputs("vramtrace_shim_library_missing{", f[F_SHIM_LIBRARY]);
        proc_labels(f[F_SHIM_LIBRARY], p);
        fprintf(f[F_SHIM_LIBRARY], ",library=\"%s\"} %d\n", missing[k].library, (p->degraded & missing[k].bit) != 0);
    }
    fputs("vramtrace_process_ended{", f[F_ENDED]);
    proc_labels(f[F_ENDED], p);
    fprintf(f[F_ENDED], "} %d\n", p->ended);
}

/* What a scrape keeps of a trace (trace_cache.h): its samples, family by
 * family. A process that ended having allocated nothing (a GPU probe:
 * ollama's discovery starts one per library, and a server's directory
 * gathers them) is counted in vramtrace_idle_processes and its samples are
 * left out (vt_tcache_idle), so probes do not grow the series a fleet
 * stores. */
typedef struct summary {
    char *text[F_COUNT];
    size_t len[F_COUNT];
} summary_t;

static void summary_free(void *v)
{
    summary_t *s = v;
    if (!s)
        return;
    for (int k = 0; k < F_COUNT; k++)
        free(s->text[k]);
    free(s);
}

static void *summarize(void *ctx, const vt_report_t *r, int i)
{
    (void)ctx;
    summary_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    FILE *f[F_COUNT] = { 0 };
    int ok = 1;
    for (int k = F_DEVICE; k < F_COUNT && ok; k++)
        ok = (f[k] = open_memstream(&s->text[k], &s->len[k])) != NULL;
    if (ok)
        trace_samples(f, &r->in[i]);
    for (int k = F_DEVICE; k < F_COUNT; k++)
        if (f[k])
            fclose(f[k]);
    if (!ok) {
        summary_free(s);
        return NULL;
    }
    return s;
}

static vt_report_t *fresh_report(void *ctx)
{
    const serve_conf_t *conf = ctx;
    vt_report_t *r = vt_report_new();
    if (!r)
        return NULL;
    r->opts.quiet = 1;
    r->keep_going = 1;
    if (vt_saved_opts_apply(r, "serve", &conf->opts)) {
        vt_report_free(r);
        return NULL;
    }
    return r;
}

/* A scrape: the traces that changed since the last are read (trace_cache.h),
 * and the exposition written into a malloc'd buffer from what is kept of
 * each. Families are in a fixed order and samples in trace order, so two
 * scrapes of unchanged traces are equal, and equal to a fresh read's. A
 * listing that fails, or traces none of which could be read, still answer:
 * vramtrace_up 0, the reason on stderr. @return 0, or VT_EXIT_BAD_INPUT
 * when a trace could not be read. */
static int scrape(serve_conf_t *conf, char **text, size_t *len)
{
    FILE *o = open_memstream(text, len);
    if (!o)
        return VT_EXIT_BAD_INPUT;
    vt_tcache_t *c = &conf->cache;
    int rc = vt_tcache_scan(c, conf->paths, conf->npaths) ? VT_EXIT_BAD_INPUT : 0;
    int good = 0, bad = 0, idle = 0;
    /* An entry is idle or not for the whole scrape: a probe's pid may go
     * while the exposition is written. */
    unsigned char *quiet = calloc((size_t)(c->n ? c->n : 1), 1);
    if (!quiet)
        rc = VT_EXIT_BAD_INPUT;
    for (int i = 0; !rc && i < c->n; i++) {
        bad += !c->e[i].summary;
        good += c->e[i].summary != NULL;
        idle += quiet[i] = (unsigned char)vt_tcache_idle(&c->e[i]);
    }
    if (!rc && good) {
        family(o, F_UP);
        fprintf(o, "vramtrace_up %d\n", !bad);
        family(o, F_PROCESSES);
        fprintf(o, "vramtrace_processes %d\n", good);
        family(o, F_IDLE);
        fprintf(o, "vramtrace_idle_processes %d\n", idle);
        family(o, F_READ_TRACES);
        fprintf(o, "vramtrace_scrape_read_traces %d\n", c->reads);
        family(o, F_READ_BYTES);
        fprintf(o, "vramtrace_scrape_read_bytes %llu\n", (unsigned long long)c->bytes_read);
        for (int k = F_DEVICE; k < F_COUNT; k++) {
            family(o, k);
            for (int i = 0; i < c->n; i++) {
                const summary_t *s = c->e[i].summary;
                if (s && !quiet[i] && s->len[k])
                    fwrite(s->text[k], 1, s->len[k], o);
            }
        }
        fputs("# EOF\n", o);
        if (bad)
            rc = VT_EXIT_BAD_INPUT;   /* said on stderr; the readable ones are served */
    } else {
        fprintf(o, "# TYPE vramtrace_up gauge\n# HELP vramtrace_up 1 when every trace could be read at this scrape\n");
        fputs("vramtrace_up 0\n# EOF\n", o);
        rc = VT_EXIT_BAD_INPUT;
    }
    free(quiet);
    fclose(o);
    return rc;
}

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* "PORT", ":PORT", "ADDR:PORT" or "[V6ADDR]:PORT"; ADDR defaults to the
 * loopback. @return the listening socket, or -1 after printing why. */
static int listen_on(const char *spec)
{
    char host[256] = "127.0.0.1", port[16];
    const char *colon = strrchr(spec, ':');
    const char *p = colon ? colon + 1 : spec;
    if (colon && colon != spec) {
        const char *h = spec;
        size_t n = (size_t)(colon - spec);
        if (h[0] == '[' && n >= 2 && h[n - 1] == ']') {
            h++;
            n -= 2;
        }
        if (n == 0 || n >= sizeof host) {
            fprintf(stderr, "vramtrace: serve: --metrics: bad address in '%s'\n", spec);
            return -1;
        }
        memcpy(host, h, n);
        host[n] = 0;
    }
    char *end;
    long pn = strtol(p, &end, 10);
    if (!*p || *end || pn < 0 || pn > 65535) {
        fprintf(stderr, "vramtrace: serve: --metrics wants [ADDR:]PORT with PORT 0..65535, got '%s'\n", spec);
        return -1;
    }
    snprintf(port, sizeof port, "%ld", pn);
    struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM }, *ai;
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai) {
        fprintf(stderr, "vramtrace: serve: %s: %s\n", host, gai_strerror(gai));
        return -1;
    }
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 16)) {
        fprintf(stderr, "vramtrace: serve: cannot listen on %s:%s: %s\n", host, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char nhost[NI_MAXHOST] = "?", nport[NI_MAXSERV] = "?";
    if (!getsockname(fd, (struct sockaddr *)&ss, &sl))
        getnameinfo((struct sockaddr *)&ss, sl, nhost, sizeof nhost, nport, sizeof nport, NI_NUMERICHOST | NI_NUMERICSERV);
    /* Tests and scripts read the port of PORT 0 from this line. */
    fprintf(stderr, "vramtrace: serving metrics on http://%s%s%s:%s/metrics\n", strchr(nhost, ':') ? "[" : "", nhost,
            strchr(nhost, ':') ? "]" : "", nport);
    return fd;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void respond(int fd, const char *status, const char *type, const char *body, size_t len)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", status,
                     type, len);
    if (write_all(fd, head, (size_t)n) == 0)
        write_all(fd, body, len);
}

/* Reads the request head (up to the blank line) within the timeout. */
static int read_request(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = recv(fd, buf + n, cap - 1 - n, 0);
        if (r < 0 && errno == EINTR && !stop_requested)
            continue;
        if (r <= 0)
            return -1;
        n += (size_t)r;
        buf[n] = 0;
        if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
            return 0;
    }
    return -1;
}

static void serve_one(int cfd, serve_conf_t *conf)
{
    struct timeval tv = { .tv_sec = IO_TIMEOUT_S };
    setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    char req[REQUEST_MAX];
    if (read_request(cfd, req, sizeof req)) {
        static const char msg[] = "request head too long or incomplete\n";
        respond(cfd, "400 Bad Request", "text/plain; charset=utf-8", msg, sizeof msg - 1);
        return;
    }
    int get = !strncmp(req, "GET ", 4), head = !strncmp(req, "HEAD ", 5);
    const char *path = req + (get ? 4 : head ? 5 : 0);
    if (!get && !head) {
        static const char msg[] = "only GET\n";
        respond(cfd, "405 Method Not Allowed", "text/plain; charset=utf-8", msg, sizeof msg - 1);
        return;
    }
    if (!strncmp(path, "/metrics ", 9) || !strncmp(path, "/metrics?", 9)) {
        char *text = NULL;
        size_t len = 0;
        scrape(conf, &text, &len);
        respond(cfd, "200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", head ? "" : text,
                head ? 0 : len);
        free(text);
    } else if (!strncmp(path, "/ ", 2)) {
        static const char page[] = "vramtrace metrics exporter: GET /metrics\n";
        respond(cfd, "200 OK", "text/plain; charset=utf-8", page, sizeof page - 1);
    } else {
        static const char msg[] = "not found: the metrics are at /metrics\n";
        respond(cfd, "404 Not Found", "text/plain; charset=utf-8", msg, sizeof msg - 1);
    }
}

static int serve(int lfd, serve_conf_t *conf)
{
    struct sigaction sa = { .sa_handler = on_stop };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    while (!stop_requested) {
        struct pollfd pfd = { .fd = lfd, .events = POLLIN };
        if (poll(&pfd, 1, 1000) <= 0)
            continue;
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0)
            continue;
        serve_one(cfd, conf);
        close(cfd);
    }
    close(lfd);
    return VT_EXIT_OK;
}

int vt_cmd_serve(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "metrics", required_argument, NULL, 'm' },
        { "once", no_argument, NULL, 'o' },
        { "margin", required_argument, NULL, VT_OPT_MARGIN },
        { "rules", required_argument, NULL, VT_OPT_RULES },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    serve_conf_t conf = { 0 };
    const char *listen_spec = NULL;
    int once = 0, c;
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            listen_spec = optarg;
            break;
        case 'o':
            once = 1;
            break;
        case VT_OPT_MARGIN:
        case VT_OPT_RULES:
            if (vt_saved_opts_add(&conf.opts, MAX_SAVED_OPTS, c, optarg) != 0) {
                fprintf(stderr, "vramtrace: serve: more than %d --margin/--rules options\n", MAX_SAVED_OPTS);
                return VT_EXIT_BAD_INPUT;
            }
            break;
        case 'h':
            usage(stdout);
            return VT_EXIT_OK;
        default:
            return vt_usage_error("serve", NULL);
        }
    }
    if (optind >= argc || !once == !listen_spec)
        return vt_usage_error("serve", optind < argc ? "give exactly one of --metrics and --once" : "no TRACE or DIR given");
    conf.paths = argv + optind;
    conf.npaths = argc - optind;
    conf.cache = (vt_tcache_t){ .summarize = summarize, .drop = summary_free, .fresh = fresh_report, .ctx = &conf };
    if (once) {
        char *text = NULL;
        size_t len = 0;
        int rc = scrape(&conf, &text, &len);
        if (text)
            fwrite(text, 1, len, stdout);
        free(text);
        vt_tcache_clear(&conf.cache);
        return rc;
    }
    /* Bad --rules or --margin fail now, not at the first scrape. */
    vt_report_t *check = vt_report_new();
    int rc = check ? vt_saved_opts_apply(check, "serve", &conf.opts) : VT_EXIT_BAD_INPUT;
    vt_report_free(check);
    if (rc)
        return rc;
    int lfd = listen_on(listen_spec);
    rc = lfd < 0 ? VT_EXIT_BAD_INPUT : serve(lfd, &conf);
    vt_tcache_clear(&conf.cache);
    return rc;
}
