/* `vramtrace serve`: the traces of a directory as Prometheus metrics, for
 * fleets that watch VRAM in Grafana rather than read reports.
 *
 *   vramtrace serve --metrics [ADDR:]PORT [--rules F] [--margin PCT] TRACE|DIR...
 *   vramtrace serve --once ... TRACE|DIR...      (one exposition on stdout)
 *
 * Every scrape reads the traces again, exactly as `report` does, so a
 * running server's trace (its chunks land every VRAMTRACE_FLUSH_MS) shows
 * up to its last complete chunk; nothing is cached between scrapes and no
 * trace is ever written. The exposition is OpenMetrics text 1.0; label
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

#define MAX_SAVED_OPTS 32
#define LABEL_MAX 128
#define REQUEST_MAX 8192
#define IO_TIMEOUT_S 5

typedef struct serve_conf {
    vt_saved_opts_t opts;
    char *const *paths;
    int npaths;
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
            "vramtrace_layers (on a GPU, total).\n"
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

static void family(FILE *o, const char *name, const char *type, const char *help)
{
    fprintf(o, "# TYPE %s %s\n# HELP %s %s\n", name, type, name, help);
}

/* A process that ended having allocated nothing (a GPU probe: ollama's
 * discovery starts one per library, and a server's directory gathers
 * them) is counted in vramtrace_idle_processes and gets no series of its
 * own, so probes do not grow the series a fleet stores. A ggml program
 * that ran on the CPU allocated nothing either: it keeps its series, its
 * verdict being the news. */
static int has_series(const vt_report_input_t *in)
{
    return !vt_report_input_idle(in) || vt_proc_ran_on_cpu(vt_model_proc(in->model));
}

/* One sample per process-device, or per tag of it (tags != NULL). */
typedef uint64_t (*dev_value_fn)(const vt_dev_t *d, int tag, int *have);

static void dev_samples(FILE *o, const vt_report_t *r, const char *sample, dev_value_fn value, int per_tag)
{
    for (int i = 0; i < r->nin; i++) {
        if (!has_series(&r->in[i]))
            continue;
        const vt_proc_t *p = vt_model_proc(r->in[i].model);
        const vt_rules_t *rules = vt_model_rules(r->in[i].model);
        for (int k = 0; k < p->ndevs; k++) {
            const vt_dev_t *d = &p->devs[k];
            int ntags = per_tag ? vt_rules_tag_count(rules) : 1;
            for (int t = 0; t < ntags; t++) {
                int have = 1;
                uint64_t v = value(d, per_tag ? t : -1, &have);
                if (!have)
                    continue;
                fprintf(o, "%s{", sample);
                dev_labels(o, p, d);
                if (per_tag) {
                    fputs(",tag=\"", o);
                    label_value(o, vt_rules_tag_name(rules, t));
                    fputc('"', o);
                }
                fprintf(o, "} %llu\n", (unsigned long long)v);
            }
        }
    }
}

static uint64_t live_by_tag(const vt_dev_t *d, int tag, int *have) { (void)have; return d->mem.by_tag[tag]; }
static uint64_t peak_by_tag(const vt_dev_t *d, int tag, int *have) { (void)have; return d->mem.peak_by_tag[tag]; }
static uint64_t total(const vt_dev_t *d, int tag, int *have) { (void)tag; *have = d->total > 0; return d->total; }
static uint64_t reserve(const vt_dev_t *d, int tag, int *have) { (void)tag; *have = d->have_info; return vt_dev_reserve(d); }
static uint64_t untracked(const vt_dev_t *d, int tag, int *have) { (void)tag; *have = d->have_free; return vt_dev_untracked(d); }
static uint64_t last_free(const vt_dev_t *d, int tag, int *have) { (void)tag; *have = d->have_free; return d->last_free; }
static uint64_t min_free(const vt_dev_t *d, int tag, int *have) { (void)tag; *have = d->have_min; return d->min_free; }
static uint64_t failures(const vt_dev_t *d, int tag, int *have) { (void)tag; (void)have; return d->failures; }
static uint64_t below_margin(const vt_dev_t *d, int tag, int *have) { (void)tag; (void)have; return d->below_margin.valid; }

/* The per process-device families, in exposition order (a counter's
 * samples get OpenMetrics' _total suffix). */
typedef struct dev_family {
    const char *name, *type, *help;
    dev_value_fn value;
    int per_tag;
} dev_family_t;

static const dev_family_t dev_families[] = {
    { "vramtrace_device_bytes", "gauge", "device memory live now, by tag", live_by_tag, 1 },
    { "vramtrace_device_peak_bytes", "gauge", "device memory at the process's peak on this GPU, by tag", peak_by_tag, 1 },
    { "vramtrace_device_total_bytes", "gauge", "the card's memory as the driver reported it", total, 0 },
    { "vramtrace_device_free_bytes", "gauge", "free memory at the driver's last report in the trace", last_free, 0 },
    { "vramtrace_device_min_free_bytes", "gauge", "the least free memory seen or estimated", min_free, 0 },
    { "vramtrace_context_reserve_bytes", "gauge", "memory in use before the process's first allocation", reserve, 0 },
    { "vramtrace_untracked_bytes", "gauge", "memory in use by nobody traced (other processes, libraries' own)",
      untracked, 0 },
    { "vramtrace_below_margin", "gauge", "1 once free memory went below the margin", below_margin, 0 },
    { "vramtrace_alloc_failures", "counter", "failed device allocations", failures, 0 },
};

static void proc_counter(FILE *o, const vt_report_t *r, const char *sample, size_t offset)
{
    for (int i = 0; i < r->nin; i++) {
        if (!has_series(&r->in[i]))
            continue;
        const vt_proc_t *p = vt_model_proc(r->in[i].model);
        fprintf(o, "%s{", sample);
        proc_labels(o, p);
        fprintf(o, "} %llu\n", (unsigned long long)*(const uint64_t *)((const char *)p + offset));
    }
}

static void host_samples(FILE *o, const vt_report_t *r, const char *sample, int managed)
{
    for (int i = 0; i < r->nin; i++) {
        if (!has_series(&r->in[i]))
            continue;
        const vt_proc_t *p = vt_model_proc(r->in[i].model);
        const vt_rules_t *rules = vt_model_rules(r->in[i].model);
        const vt_tagged_peak_t *tp = managed ? &p->managed : &p->host;
        for (int t = 0; t < vt_rules_tag_count(rules); t++) {
            fprintf(o, "%s{", sample);
            proc_labels(o, p);
            fputs(",tag=\"", o);
            label_value(o, vt_rules_tag_name(rules, t));
            fprintf(o, "\"} %llu\n", (unsigned long long)tp->by_tag[t]);
        }
    }
}

/* The exposition of a loaded report. Families are in a fixed order and
 * samples in trace order, so two scrapes of unchanged traces are equal. */
static void exposition(FILE *o, const vt_report_t *r)
{
    family(o, "vramtrace_up", "gauge", "1 when every trace could be read at this scrape (0: one was left out or is damaged)");
    fprintf(o, "vramtrace_up %d\n", !r->nbad);
    family(o, "vramtrace_processes", "gauge", "traced processes (one trace each)");
    fprintf(o, "vramtrace_processes %d\n", r->nin);
    int idle = 0;
    for (int i = 0; i < r->nin; i++)
        idle += !has_series(&r->in[i]);
    family(o, "vramtrace_idle_processes", "gauge",
           "traced processes that ended having allocated nothing (such as GPU probes); no series of their own");
    fprintf(o, "vramtrace_idle_processes %d\n", idle);

    for (size_t i = 0; i < sizeof dev_families / sizeof dev_families[0]; i++) {
        const dev_family_t *f = &dev_families[i];
        char sample[96];
        snprintf(sample, sizeof sample, "%s%s", f->name, strcmp(f->type, "counter") ? "" : "_total");
        family(o, f->name, f->type, f->help);
        dev_samples(o, r, sample, f->value, f->per_tag);
    }

    family(o, "vramtrace_host_pinned_bytes", "gauge", "pinned host memory live now, by tag");
    host_samples(o, r, "vramtrace_host_pinned_bytes", 0);
    family(o, "vramtrace_managed_bytes", "gauge", "managed (unified) memory live now, by tag");
    host_samples(o, r, "vramtrace_managed_bytes", 1);

    family(o, "vramtrace_spills", "counter",
           "spill events (oom, host_fallback, managed_oversubscription, over_capacity) of a process the report "
           "says spilled or ran out of memory; 0 for one it does not (a near spill's failures are "
           "vramtrace_alloc_failures)");
    for (int i = 0; i < r->nin; i++) {
        if (!has_series(&r->in[i]))
            continue;
        const vt_proc_t *p = vt_model_proc(r->in[i].model);
        const char *v = vt_proc_verdict(p, 0);
        int spilled = !strcmp(v, "spill") || !strcmp(v, "failed");
        for (int k = 0; k < VT_SPILL_KINDS; k++) {
            fputs("vramtrace_spills_total{", o);
            proc_labels(o, p);
            fprintf(o, ",kind=\"%s\"} %llu\n", vt_spill_kind_name(k),
                    (unsigned long long)(spilled ? p->spill_count[k] : 0));
        }
    }
    /* The report's verdict, one sample per key, 1 for the process's
     * (vt_proc_verdict as far as the trace goes: a live one is not
     * "incomplete"), so an alert reads one series and a change of verdict
     * flips values rather than making and ending series. */
    static const char *const verdicts[] = { "spill",    "near_spill", "failed",       "partial_offload",
                                            "cpu_only", "no_spill",   "no_gpu_memory" };
    family(o, "vramtrace_verdict", "gauge",
           "1 for the process's verdict as the report gives it (spill, near_spill, failed, partial_offload, "
           "cpu_only, no_spill, no_gpu_memory), 0 for the others");
    for (int i = 0; i < r->nin; i++) {
        if (!has_series(&r->in[i]))
            continue;
        const vt_proc_t *p = vt_model_proc(r->in[i].model);
        const char *v = vt_proc_verdict(p, 0);
        for (size_t k = 0; k < sizeof verdicts / sizeof verdicts[0]; k++) {
            fputs("vramtrace_verdict{", o);
            proc_labels(o, p);
            fprintf(o, ",verdict=\"%s\"} %d\n", verdicts[k], !strcmp(v, verdicts[k]));
        }
    }
    /* Where a ggml program's model ran (its GGML_* records; none without
     * them): what is in host memory at its fullest moment, and its layers. */
    family(o, "vramtrace_model_host_bytes", "gauge",
           "a ggml program's model in host memory (pinned, mapped or pageable) when the most weights and KV cache "
           "were live: weights = the layers' (blocks and output layer; not the token embeddings llama.cpp keeps "
           "there by design), kv = the KV cache");
    for (int i = 0; i < r->nin; i++) {
        if (!has_series(&r->in[i]))
            continue;
        const vt_proc_t *p = vt_model_proc(r->in[i].model);
        const vt_placement_t *pl = &p->placement;
        if (!pl->known)
            continue;
        fputs("vramtrace_model_host_bytes{", o);
        proc_labels(o, p);
        fprintf(o, ",content=\"weights\"} %llu\n", (unsigned long long)pl->layer_weights_host);
        fputs("vramtrace_model_host_bytes{", o);
        proc_labels(o, p);
        fprintf(o, ",content=\"kv\"} %llu\n", (unsigned long long)vt_place_host(&pl->kv));
    }
    family(o, "vramtrace_layers", "gauge",
           "a ggml program's layers as llama.cpp counts them (blocks + the output layer): on a GPU, and in total");
    for (int i = 0; i < r->nin; i++) {
        if (!has_series(&r->in[i]))
            continue;
        const vt_proc_t *p = vt_model_proc(r->in[i].model);
        const vt_placement_t *pl = &p->placement;
        if (!pl->known || !pl->layers_known)
            continue;
        fputs("vramtrace_layers{", o);
        proc_labels(o, p);
        fprintf(o, ",where=\"gpu\"} %u\n", pl->layers_gpu);
        fputs("vramtrace_layers{", o);
        proc_labels(o, p);
        fprintf(o, ",where=\"total\"} %u\n", pl->layers_total);
    }
    family(o, "vramtrace_events", "counter", "events read from the trace");
    proc_counter(o, r, "vramtrace_events_total", offsetof(vt_proc_t, events.total));
    family(o, "vramtrace_dropped_events", "counter",
           "events the shim counted as lost (ring full, signal handler, call not returned, not written)");
    proc_counter(o, r, "vramtrace_dropped_events_total", offsetof(vt_proc_t, events.dropped));
    family(o, "vramtrace_trace_partial", "gauge",
           "1 while the trace ends in a chunk still being written (a live process) or cut short");
    for (int i = 0; i < r->nin; i++) {
        if (!has_series(&r->in[i]))
            continue;
        fputs("vramtrace_trace_partial{", o);
        proc_labels(o, vt_model_proc(r->in[i].model));
        fprintf(o, "} %d\n", r->in[i].truncated);
    }
    /* A container without these libraries is still traced (trace_format.h,
     * vt_degraded): the fleet sees which hosts run that way. */
    static const struct {
        uint64_t bit;
        const char *library;
    } missing[] = { { VT_DEGRADED_NO_ZSTD, "libzstd.so.1" }, { VT_DEGRADED_NO_LIBUNWIND, "libunwind.so.8" } };
    family(o, "vramtrace_shim_library_missing", "gauge",
           "1 when the shim ran without this library (libzstd.so.1: the trace is uncompressed; libunwind.so.8: "
           "glibc's backtrace() took the frames the shim's unwinder could not follow)");
    for (int i = 0; i < r->nin; i++) {
        if (!has_series(&r->in[i]))
            continue;
        const vt_proc_t *p = vt_model_proc(r->in[i].model);
        for (size_t k = 0; k < sizeof missing / sizeof missing[0]; k++) {
            fputs("vramtrace_shim_library_missing{", o);
            proc_labels(o, p);
            fprintf(o, ",library=\"%s\"} %d\n", missing[k].library, (p->degraded & missing[k].bit) != 0);
        }
    }
    family(o, "vramtrace_process_ended", "gauge", "1 once the trace holds the process's end record");
    for (int i = 0; i < r->nin; i++) {
        if (!has_series(&r->in[i]))
            continue;
        const vt_proc_t *p = vt_model_proc(r->in[i].model);
        fputs("vramtrace_process_ended{", o);
        proc_labels(o, p);
        fprintf(o, "} %d\n", p->ended);
    }
    fputs("# EOF\n", o);
}

/* Reads the traces afresh and writes the exposition into a malloc'd
 * buffer. A load that fails still answers: vramtrace_up 0, the reason on
 * stderr. @return 0, or VT_EXIT_BAD_INPUT when the traces could not be read. */
static int scrape(const serve_conf_t *conf, char **text, size_t *len)
{
    FILE *o = open_memstream(text, len);
    if (!o)
        return VT_EXIT_BAD_INPUT;
    int rc = VT_EXIT_BAD_INPUT;
    vt_report_t *r = vt_report_new();
    if (r) {
        r->opts.quiet = 1;
        r->keep_going = 1;
        rc = vt_saved_opts_apply(r, "serve", &conf->opts);
        if (!rc)
            rc = vt_report_load(r, conf->paths, conf->npaths);
    }
    if (rc == 0) {
        exposition(o, r);
        if (r->nbad)
            rc = VT_EXIT_BAD_INPUT;   /* said on stderr; the readable ones are served */
    } else {
        family(o, "vramtrace_up", "gauge", "1 when every trace could be read at this scrape");
        fputs("vramtrace_up 0\n# EOF\n", o);
    }
    vt_report_free(r);
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

static void serve_one(int cfd, const serve_conf_t *conf)
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

static int serve(int lfd, const serve_conf_t *conf)
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
    if (once) {
        char *text = NULL;
        size_t len = 0;
        int rc = scrape(&conf, &text, &len);
        if (text)
            fwrite(text, 1, len, stdout);
        free(text);
        return rc;
    }
    /* Bad --rules or --margin fail now, not at the first scrape. */
    vt_report_t *check = vt_report_new();
    int rc = check ? vt_saved_opts_apply(check, "serve", &conf.opts) : VT_EXIT_BAD_INPUT;
    vt_report_free(check);
    if (rc)
        return rc;
    int lfd = listen_on(listen_spec);
    return lfd < 0 ? VT_EXIT_BAD_INPUT : serve(lfd, &conf);
}
