/* `vramtrace top`: what the traced processes hold now, refreshed in place,
 * for the engineer who would otherwise watch nvidia-smi.
 *
 *   vramtrace top [--interval SECONDS] [--once] TRACE|DIR...
 *
 * Every refresh reads the traces that changed exactly as `report` does
 * (chunks land every VRAMTRACE_FLUSH_MS), so the figures are the report's:
 * per GPU and process, the bytes live by tag, the driver's last free figure
 * against the margin, the layers a ggml program put on a GPU, failed
 * requests and the report's verdict. A trace unchanged since the last
 * frame is not read again, and one that grew is read on from its last
 * complete chunk (pipeline/trace_cache.h), so a frame of a directory
 * where little moves costs a stat per trace and the new bytes. The traces are
 * never written. On a terminal the screen is redrawn in place and `q`
 * quits (the terminal is put back as it was on every exit path); --once
 * prints one frame and exits, for scripts. Strings from the
 * traces are printed with control characters replaced, so a hostile trace
 * cannot drive the terminal.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "report.h"
#include "sizes.h"
#include "trace_cache.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vramtrace top [--interval SECONDS] [--once] [--margin PCT] [--rules FILE]\n"
            "                     TRACE|DIR...\n"
            "\n"
            "Shows what the traced processes hold now, per GPU and process: bytes live by\n"
            "tag, free memory against the margin, LAYERS (a ggml program's layers on a\n"
            "GPU / all, - when its trace does not name them), failed requests and the\n"
            "verdict (SPILL, NEAR SPILL, OUT OF MEMORY, PARTIAL OFFLOAD, RAN ON THE CPU),\n"
            "refreshed every --interval seconds (default 1) from the traces as they are\n"
            "written. q quits. --once prints one frame and exits.\n"
            "\n"
            "Exit status: 0, or 2 for bad usage or traces that cannot be read with --once.\n");
}

/* A string from a trace, at most `width` columns, control bytes as '?'. */
static void put_safe(FILE *o, const char *s, int width)
{
    for (int n = 0; s && *s && n < width; s++, n++)
        fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, o);
}

/* The PID and PROCESS columns. */
static void row_start(FILE *o, const vt_proc_t *p)
{
    const char *name = p->exe ? vt_base(p->exe) : "?";
    fprintf(o, "%-7llu ", (unsigned long long)p->pid);
    put_safe(o, name, 18);
    int pad = 18 - (int)strlen(name);
    fprintf(o, "%*s", pad > 0 ? pad : 0, "");
}

/* The LAYERS column: layers on a GPU / all, as llama.cpp counts them. */
static const char *layers(char buf[24], const vt_proc_t *p)
{
    const vt_placement_t *pl = &p->placement;
    if (!pl->known || !pl->layers_known)
        return "-";
    snprintf(buf, 24, "%u/%u", pl->layers_gpu, pl->layers_total);
    return buf;
}

/* What a ggml program keeps in host memory, and the offload estimate
 * (the report's placement lines, in one or two). */
static void placement_lines(FILE *o, const vt_proc_t *p)
{
    const vt_placement_t *pl = &p->placement;
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF];
    if (!pl->known || !pl->offloaded)
        return;
    uint64_t kv_host = vt_place_host(&pl->kv);
    fprintf(o, "pid %llu: in host memory: ", (unsigned long long)p->pid);
    if (pl->layers_known && pl->layers_total > pl->layers_gpu)
        fprintf(o, "%u of %u layers (%s of weights)", pl->layers_total - pl->layers_gpu, pl->layers_total,
                vt_fmt_bytes(a, pl->layer_weights_host));
    else if (pl->layer_weights_host)
        fprintf(o, "%s of layer weights", vt_fmt_bytes(a, pl->layer_weights_host));
    if (pl->expert_blocks_host)
        fprintf(o, " (the experts of %u block%s on the GPU)", pl->expert_blocks_host,
                pl->expert_blocks_host == 1 ? "" : "s");
    if (kv_host)
        fprintf(o, "%s%s of KV cache", pl->layer_weights_host ? ", " : "", vt_fmt_bytes(b, kv_host));
    if (pl->part_blocks_host)
        fprintf(o, " (part of the weights of %u block%s on the GPU)", pl->part_blocks_host,
                pl->part_blocks_host == 1 ? "" : "s");
    if (pl->override_blocks)
        fprintf(o, " (%u block%s there by an override, %s)", pl->override_blocks, pl->override_blocks == 1 ? "" : "s",
                vt_proc_fit_chose(p) ? "set by --fit" : "-ot");
    if (pl->kv_blocks_host)
        fprintf(o, " (%s of it for %u block%s on the GPU)", vt_fmt_bytes(a, pl->kv_host_of_gpu_blocks),
                pl->kv_blocks_host, pl->kv_blocks_host == 1 ? "" : "s");
    fputc('\n', o);
    const typeof(pl->advice) *ad = &pl->advice;
    if (ad->known && ad->of_override)
        fprintf(o, "pid %llu: estimate: the host-memory weights of %u of the %u blocks an override (%s) keeps there "
                   "fit on GPU %d\n",
                (unsigned long long)p->pid, ad->override_blocks_fit, ad->override_n,
                vt_proc_fit_chose(p) ? "set by --fit" : "-ot", ad->device);
    else if (ad->known && ad->of_kv)
        fprintf(o, "pid %llu: estimate: that KV cache %s on GPU %d (%s)\n", (unsigned long long)p->pid,
                ad->kv_fits ? "fits" : "does not fit", ad->device,
                ad->kv_fits ? "without --no-kv-offload" : "llama.cpp moves all of it or none");
    else if (ad->known && ad->of_experts)
        fprintf(o, "pid %llu: estimate: the experts of %u of those %u blocks fit on GPU %d (--n-cpu-moe %u)\n",
                (unsigned long long)p->pid, ad->expert_blocks_fit, pl->expert_blocks_host, ad->device,
                pl->blocks - ad->expert_blocks_fit);
    else if (ad->known && pl->layers_gpu < pl->layers_total)
        fprintf(o, "pid %llu: estimate: %u of %u layers fit on GPU %d (-ngl %u)\n", (unsigned long long)p->pid,
                ad->gpu_layers, pl->layers_total, ad->device, ad->gpu_layers);
}

/* The rows of one process: one per GPU it used, or one without a GPU. */
static void rows(FILE *o, const vt_proc_t *p)
{
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF], c[VT_SIZE_BUF], l[24];
    /* What END says, and a process without one that is no longer there
     * (killed, a raw exit) is gone, not live. */
    const char *state = p->ended ? (p->end_how == VT_END_ABORT ? "aborted" : "ended")
                                 : vt_proc_gone(p) ? "gone" : "live";
    for (int k = 0; k < p->ndevs; k++) {
        const vt_dev_t *d = &p->devs[k];
        row_start(o, p);
        fprintf(o, " %4d", d->ordinal);
        for (int t = 0; t < VT_TAG_BUILTIN_COUNT; t++)
            fprintf(o, " %9s", vt_fmt_bytes(a, d->mem.by_tag[t]));
        fprintf(o, " %9s %9s %6s %6s\n", vt_fmt_bytes(b, d->mem.tracked),
                d->have_free ? vt_fmt_bytes(c, vt_dev_free_now(d)) : "?", layers(l, p), state);
    }
    /* A process that saw no GPU still gets a row, so the rows add up
     * to the header's count: a ggml program that ran on the CPU (its
     * layers), or one that has allocated nothing yet and not ended (a
     * probe still running). */
    if (!p->ndevs) {
        row_start(o, p);
        fprintf(o, " %4s", "-");
        for (int t = 0; t < VT_TAG_BUILTIN_COUNT + 2; t++)
            fprintf(o, " %9s", "-");
        fprintf(o, " %6s %6s\n", layers(l, p), state);
    }
}

/* The lines under the table for one process: each GPU's card, margin and
 * failures, then what went wrong. */
static void lines(FILE *o, const vt_proc_t *p, double margin_pct)
{
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF], c[VT_SIZE_BUF];
    for (int k = 0; k < p->ndevs; k++) {
        const vt_dev_t *d = &p->devs[k];
        if (!d->total)
            continue;
        uint64_t margin = vt_margin_bytes(margin_pct, d->total);
        fprintf(o, "pid %llu GPU %d (", (unsigned long long)p->pid, d->ordinal);
        put_safe(o, d->name, 40);
        fprintf(o, "): %s total, ", vt_fmt_bytes(a, d->total));
        if (d->have_free)
            fprintf(o, "about %s free, %s the %g%% margin (%s)", vt_fmt_bytes(b, vt_dev_free_now(d)),
                    vt_dev_free_now(d) < margin ? "BELOW" : "above", margin_pct, vt_fmt_bytes(c, margin));
        else
            fprintf(o, "free unknown");
        fprintf(o, "; %llu request%s", (unsigned long long)d->failures, d->failures == 1 ? "" : "s");
        if (d->graph_launch_oom)
            fprintf(o, " and %llu graph launch%s", (unsigned long long)d->graph_launch_oom,
                    d->graph_launch_oom == 1 ? "" : "es");
        fprintf(o, " failed for lack of memory\n");
    }
    /* The report's verdict (a live trace's, as far as it goes). */
    const char *key = vt_proc_verdict(p, 0);
    const char *words = vt_verdict_alarming(key) ? vt_verdict_words(key) : NULL;
    if (words) {
        fprintf(o, "pid %llu: %s", (unsigned long long)p->pid, words);
        if (p->tip.valid)
            fprintf(o, " (first: %s, %s)",
                    vt_spill_what((char[200]){ 0 }, 200, p->tip_kind, p->tip.api, p->tip.bytes, NULL),
                    vt_spill_kind_name(p->tip_kind));
        fputc('\n', o);
    }
    placement_lines(o, p);
    if (p->events.dropped)
        fprintf(o, "pid %llu: %llu events dropped by the shim: figures are lower bounds\n",
                (unsigned long long)p->pid, (unsigned long long)p->events.dropped);
    /* A container without these still traces (report: the NOTE line). */
    int nozstd = (p->degraded & VT_DEGRADED_NO_ZSTD) != 0, nounwind = (p->degraded & VT_DEGRADED_NO_LIBUNWIND) != 0;
    if (nozstd || nounwind)
        fprintf(o, "pid %llu: traced without %s%s%s\n", (unsigned long long)p->pid, nozstd ? "libzstd.so.1" : "",
                nozstd && nounwind ? " and " : "", nounwind ? "libunwind.so.8" : "");
}

/* What a frame keeps of a trace until it changes (trace_cache.h): its
 * rows and its lines, written when it was read. */
typedef struct summary {
    char *rows, *lines;
    size_t nrows, nlines;
} summary_t;

static void summary_free(void *v)
{
    summary_t *s = v;
    if (s) {
        free(s->rows);
        free(s->lines);
        free(s);
    }
}

static void *summarize(void *ctx, const vt_report_t *r, int i)
{
    (void)ctx;
    const vt_proc_t *p = vt_model_proc(r->in[i].model);
    summary_t *s = calloc(1, sizeof *s);
    FILE *fr = s ? open_memstream(&s->rows, &s->nrows) : NULL;
    FILE *fl = fr ? open_memstream(&s->lines, &s->nlines) : NULL;
    if (fl) {
        rows(fr, p);
        lines(fl, p, r->opts.margin_pct);
    }
    if (fr)
        fclose(fr);
    if (fl)
        fclose(fl);
    if (!fl) {
        summary_free(s);
        return NULL;
    }
    return s;
}

/* The frame: every process's rows, those that ended having allocated
 * nothing (GPU probes, vt_tcache_idle) counted in one line, then each
 * process's lines. */
static void frame(FILE *o, const vt_tcache_t *c, const unsigned char *idle, int good)
{
    time_t now = time(NULL);
    char when[32];
    strftime(when, sizeof when, "%H:%M:%S", localtime(&now));
    fprintf(o, "vramtrace top  %s  %d process%s  (q quits)\n\n", when, good, good == 1 ? "" : "es");
    fprintf(o, "%-7s %-18s %4s %9s %9s %9s %9s %9s %9s %6s %6s\n", "PID", "PROCESS", "GPU", "WEIGHTS", "KV", "SCRATCH",
            "UNKNOWN", "LIVE", "FREE~", "LAYERS", "STATE");
    int nidle = 0;
    for (int i = 0; i < c->n; i++) {
        const summary_t *s = c->e[i].summary;
        nidle += idle[i];
        if (s && !idle[i])
            fwrite(s->rows, 1, s->nrows, o);
    }
    if (nidle)
        fprintf(o, "(not shown: %d ended process%s that allocated nothing, such as GPU probes)\n", nidle,
                nidle == 1 ? "" : "es");
    fputc('\n', o);
    for (int i = 0; i < c->n; i++) {
        const summary_t *s = c->e[i].summary;
        if (s && !idle[i])
            fwrite(s->lines, 1, s->nlines, o);
    }
}

/* --margin and --rules as given, applied to each frame's fresh report. */
#define TOP_SAVED_OPTS_MAX 16
typedef struct top_conf {
    char *const *paths;
    int npaths;
    vt_saved_opts_t opts;
    vt_tcache_t cache;   /* the traces as the last frame left them */
} top_conf_t;

/* A report with the command's options applied. @return 0, or
 * VT_EXIT_BAD_INPUT with *out NULL when out of memory or an option is bad
 * (said on stderr). */
static int new_report(const top_conf_t *conf, vt_report_t **out)
{
    vt_report_t *r = vt_report_new();
    int rc = r ? vt_saved_opts_apply(r, "top", &conf->opts) : VT_EXIT_BAD_INPUT;
    if (rc) {
        vt_report_free(r);
        r = NULL;
    }
    *out = r;
    return rc;
}

static vt_report_t *fresh_report(void *ctx)
{
    vt_report_t *r;
    if (new_report(ctx, &r))
        return NULL;
    r->opts.quiet = 1;
    r->keep_going = 1;
    return r;
}

/* One frame into a malloc'd buffer: the traces that changed since the
 * last frame are read (trace_cache.h), the others shown as they were.
 * @return 0, or VT_EXIT_BAD_INPUT when no trace could be read. */
static int render(top_conf_t *conf, char **text, size_t *len)
{
    FILE *o = open_memstream(text, len);
    if (!o)
        return VT_EXIT_BAD_INPUT;
    vt_tcache_t *c = &conf->cache;
    int rc = vt_tcache_scan(c, conf->paths, conf->npaths) ? VT_EXIT_BAD_INPUT : 0;
    unsigned char *idle = rc ? NULL : calloc((size_t)(c->n ? c->n : 1), 1);
    int good = 0;
    for (int i = 0; idle && i < c->n; i++) {
        good += c->e[i].summary != NULL;
        idle[i] = (unsigned char)vt_tcache_idle(&c->e[i]);
    }
    if (good)
        frame(o, c, idle, good);
    else {
        fprintf(o, "vramtrace top: the traces cannot be read (see above); retrying\n");
        rc = VT_EXIT_BAD_INPUT;
    }
    free(idle);
    fclose(o);
    return rc;
}

static struct termios saved_tty;
static int tty_raw;
static volatile sig_atomic_t stop_requested;

static void restore_tty(void)
{
    if (tty_raw) {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_tty);
        fputs("\033[?25h", stdout);   /* the cursor back */
        fflush(stdout);
        tty_raw = 0;
    }
}

static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

int vt_cmd_top(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "interval", required_argument, NULL, 'i' },
        { "once", no_argument, NULL, 'o' },
        { "margin", required_argument, NULL, VT_OPT_MARGIN },
        { "rules", required_argument, NULL, VT_OPT_RULES },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    top_conf_t conf = { 0 };
    double interval = 1;
    int once = 0, c;
    char *end;
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'i':
            errno = 0;
            interval = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(interval >= 0.1 && interval <= 3600)) {
                fprintf(stderr, "vramtrace: top: --interval wants seconds from 0.1 to 3600, got '%s'\n", optarg);
                return VT_EXIT_BAD_INPUT;
            }
            break;
        case 'o':
            once = 1;
            break;
        case VT_OPT_MARGIN:
        case VT_OPT_RULES:
            if (vt_saved_opts_add(&conf.opts, TOP_SAVED_OPTS_MAX, c, optarg) != 0) {
                fprintf(stderr, "vramtrace: top: too many --margin/--rules options\n");
                return VT_EXIT_BAD_INPUT;
            }
            break;
        case 'h':
            usage(stdout);
            return VT_EXIT_OK;
        default:
            return vt_usage_error("top", NULL);
        }
    }
    if (optind >= argc)
        return vt_usage_error("top", "no TRACE or DIR given");
    conf.paths = argv + optind;
    conf.npaths = argc - optind;
    conf.cache = (vt_tcache_t){ .summarize = summarize, .drop = summary_free, .fresh = fresh_report, .ctx = &conf };
    vt_report_t *check;
    if (new_report(&conf, &check))   /* a bad option fails now, not at every frame */
        return VT_EXIT_BAD_INPUT;
    vt_report_free(check);
    char *text = NULL;
    size_t len = 0;
    if (once) {
        int rc = render(&conf, &text, &len);
        /* Once, there is no retry to announce: the reader said why on
         * stderr, and the status says it failed. */
        if (!rc)
            fwrite(text, 1, len, stdout);
        free(text);
        vt_tcache_clear(&conf.cache);
        return rc;
    }
    struct sigaction sa = { .sa_handler = on_stop };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int interactive = isatty(STDIN_FILENO);
    if (interactive && tcgetattr(STDIN_FILENO, &saved_tty) == 0) {
        struct termios raw = saved_tty;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0) {
            tty_raw = 1;
            atexit(restore_tty);
            fputs("\033[?25l", stdout);   /* no cursor blinking over the table */
        }
    }
    while (!stop_requested) {
        render(&conf, &text, &len);
        /* Home and clear, then the frame: one write, no flicker of a
         * half-drawn table. */
        fputs("\033[H\033[2J", stdout);
        fwrite(text, 1, len, stdout);
        fflush(stdout);
        free(text);
        text = NULL;
        struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
        int waited = 0, wait_ms = (int)(interval * 1000);
        while (!stop_requested && waited < wait_ms) {
            int step = wait_ms - waited < 100 ? wait_ms - waited : 100;
            if (interactive && poll(&pfd, 1, step) > 0) {
                char ch;
                if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q'))
                    stop_requested = 1;
            } else if (!interactive) {
                struct timespec ts = { 0, (long)step * 1000000L };
                nanosleep(&ts, NULL);
            }
            waited += step;
        }
    }
    restore_tty();
    vt_tcache_clear(&conf.cache);
    return VT_EXIT_OK;
}
