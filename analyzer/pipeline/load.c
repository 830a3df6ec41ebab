/* load.c: every trace of a report read and fed to its model in one merged
 * time order (so the per-GPU view sees every process on one timeline), with
 * a lookahead that lets the model prefetch what each event needs; the
 * report's options shared by every trace-reading command (report.h).
 * A trace cut short (VT_E_TRUNCATED) is read up to its last complete chunk;
 * among several traces a bad one costs only its own section (keep_going).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "errors.h"
#include "report_series.h"
#include "report.h"
#include "sizes.h"
#include "sort.h"

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

/* Name order, the ".vtrace" ending left out: a process's trace comes
 * before the ones the shim numbered after it for the same pid
 * (prog.PID.vtrace, then prog.PID.1.vtrace: the image an exec started, or
 * a pid reused), where plain name order put them first. */
static int cmp_trace_name(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    size_t nx = strlen(x), ny = strlen(y), k = strlen(".vtrace");
    nx -= has_suffix(x, ".vtrace") ? k : 0;
    ny -= has_suffix(y, ".vtrace") ? k : 0;
    int c = strncmp(x, y, nx < ny ? nx : ny);
    return c ? c : (nx > ny) - (nx < ny);
}

/* Appends path, or every *.vtrace of a directory in name order (those
 * marked in *from_dir, as path itself is when found_in_dir). */
static int add_path(char ***paths, unsigned char **from_dir, int *n, const char *path, int found_in_dir)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "vramtrace: %s: %s\n", path, strerror(errno));
        return VT_E_IO;
    }
    char **list = NULL;
    int nl = 0;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) {
            fprintf(stderr, "vramtrace: %s: %s\n", path, strerror(errno));
            return VT_E_IO;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.' || !has_suffix(e->d_name, ".vtrace"))
                continue;
            char **nlst = realloc(list, (size_t)(nl + 1) * sizeof *nlst);
            if (!nlst || asprintf(&nlst[nl], "%s/%s", path, e->d_name) < 0) {
                closedir(d);
                free(nlst ? nlst : list);
                return VT_E_NOMEM;
            }
            list = nlst;
            nl++;
        }
        closedir(d);
        if (!nl) {
            fprintf(stderr, "vramtrace: %s: no trace files (*.vtrace) in this directory\n", path);
            return VT_E_IO;
        }
        vt_sort(list, (size_t)nl, sizeof *list, cmp_trace_name);
    } else {
        list = malloc(sizeof *list);
        if (!list || !(list[0] = strdup(path))) {
            free(list);
            return VT_E_NOMEM;
        }
        nl = 1;
    }
    char **all = realloc(*paths, (size_t)(*n + nl) * sizeof *all);
    unsigned char *dir = all ? realloc(*from_dir, (size_t)(*n + nl)) : NULL;
    if (all)
        *paths = all;
    if (!dir) {
        for (int k = 0; k < nl; k++)
            free(list[k]);
        free(list);
        return VT_E_NOMEM;
    }
    *from_dir = dir;
    memset(dir + *n, S_ISDIR(st.st_mode) || found_in_dir, (size_t)nl);
    memcpy(all + *n, list, (size_t)nl * sizeof *list);
    *n += nl;
    free(list);
    return 0;
}

/* The event just written at q[k] joins the lookahead: its first prefetch
 * stage starts now (advance() runs the later ones). */
static void queued(vt_report_input_t *in, unsigned k)
{
    in->qkind[k] = VT_REC_EVENT;
    in->qcookie[k] = vt_model_prefetch(in->model, &in->q[k], 0, 0);
}

/* The record just written at qrec[k] (a STACK, or a FRAME with its name
 * copied) joins the lookahead behind the events before it: no prefetch
 * stages (cookie 0), but a STACK's parent node and memo start loading. */
static void queued_record(vt_report_input_t *in, unsigned k)
{
    in->qkind[k] = in->qrec[k].type;
    in->qcookie[k] = 0;
    if (in->qrec[k].type == VT_REC_STACK)
        vt_model_prefetch_node(in->model, &in->qrec[k].u.stack);
    in->qn++;
}

/* vt_model_feed of a record of in. @return 0, or VT_EXIT_BAD_INPUT after
 * saying so. */
static int feed_record(vt_report_input_t *in, const vt_record_t *rec)
{
    if (!vt_model_feed(in->model, rec))
        return 0;
    fprintf(stderr, "vramtrace: %s: out of memory\n", in->path);
    return VT_EXIT_BAD_INPUT;
}

/* Queues a STACK or FRAME record behind the events in in's lookahead, so
 * reading goes on past it (a trace that defines each stack just before
 * its first use would otherwise drain the lookahead at every new stack).
 * The reader's strings do not outlive its next call: a FRAME's name is
 * copied. @return 0, or -1 (not queued: the caller holds it instead). */
static int queue_record(vt_report_input_t *in, const vt_record_t *rec)
{
    unsigned k = (in->qhead + in->qn) & (VT_LOOKAHEAD - 1);
    size_t len = rec->type == VT_REC_FRAME ? rec->u.frame.function.len : 0;
    if (len > in->qname_cap[k]) {
        char *b = realloc(in->qname[k], len);
        if (!b)
            return -1;
        in->qname[k] = b;
        in->qname_cap[k] = len;
    }
    in->qrec[k] = *rec;
    if (rec->type == VT_REC_FRAME) {
        if (len)
            memcpy(in->qname[k], rec->u.frame.function.data, len);
        in->qrec[k].u.frame.function.data = len ? in->qname[k] : "";
    }
    queued_record(in, k);
    return 0;
}

/* Fills input in's lookahead: reads records until it holds VT_LOOKAHEAD
 * events, a non-event record is held (report.h) or the input ends.
 * Non-event records met with no event queued go to the model at once:
 * they precede, in file order, the events that need them.
 * @return 0, or VT_EXIT_BAD_INPUT after printing. */
static int fill(vt_report_input_t *in)
{
    while (!in->done && !in->held && in->qn < VT_LOOKAHEAD) {
        /* Most records are events the reader can decode in bulk, straight
         * into the queue's free run. */
        unsigned tail = (in->qhead + in->qn) & (VT_LOOKAHEAD - 1);
        unsigned room = VT_LOOKAHEAD - in->qn, run = VT_LOOKAHEAD - tail;
        size_t got = vt_reader_events(in->reader, &in->q[tail], room < run ? room : run);
        if (got) {
            for (unsigned k = tail; k < tail + (unsigned)got; k++)
                queued(in, k);
            in->qn += (unsigned)got;
            continue;
        }
        /* The nodes a trace defines before a new stack's first event,
         * without vt_reader_next's per-record costs (~170 instructions a
         * node), queued behind the events they precede. */
        if (in->qn && vt_reader_stack(in->reader, &in->qrec[tail].u.stack)) {
            in->qrec[tail].type = VT_REC_STACK;
            queued_record(in, tail);
            continue;
        }
        vt_record_t rec;
        /* The reader copies its whole error state on failure; zeroing 784
         * bytes per record was 3% of a report. */
        vt_error_t err;
        int rc = vt_reader_next(in->reader, &rec, &err);
        if (rc == 1) {
            if (rec.type == VT_REC_EVENT) {
                unsigned k = (in->qhead + in->qn++) & (VT_LOOKAHEAD - 1);
                in->q[k] = rec.u.event;
                queued(in, k);
                continue;
            }
            if (in->qn && (rec.type == VT_REC_STACK || rec.type == VT_REC_FRAME) && !queue_record(in, &rec))
                continue;
            if (in->qn) {
                /* Its strings stay valid: the reader is not called again
                 * until it has been fed. */
                in->held = 1;
                in->held_rec = rec;
                return 0;
            }
            if (feed_record(in, &rec))
                return VT_EXIT_BAD_INPUT;
            continue;
        }
        in->done = 1;
        if (rc == 0)
            return 0;
        snprintf(err.path, sizeof err.path, "%s", in->path);
        if (rc == VT_E_TRUNCATED) {
            in->truncated = 1;
            in->stop_offset = err.offset;
            snprintf(in->stop_reason, sizeof in->stop_reason, "%s", err.detail[0] ? err.detail : vt_error_message(rc));
            return 0;
        }
        vt_error_print(&err);
        if (in->tolerant) {
            in->damaged = 1;
            in->stop_offset = err.offset;
            snprintf(in->stop_reason, sizeof in->stop_reason, "%s: %.200s", vt_error_message(rc), err.detail);
            return 0;
        }
        return VT_EXIT_BAD_INPUT;
    }
    return 0;
}

/* Drops the event just fed from in's lookahead, feeds a held record once
 * nothing is queued before it, and reads on when half the queue is gone.
 * The events 8 and 3 places from the head get the later prefetch stages:
 * far enough ahead to hide a cache miss, near enough that the line is
 * still there when it is fed. */
static int advance(vt_report_input_t *in)
{
    in->qhead = (in->qhead + 1) & (VT_LOOKAHEAD - 1);
    in->qn--;
    while (in->qn && in->qkind[in->qhead] != VT_REC_EVENT) {
        if (feed_record(in, &in->qrec[in->qhead]))
            return VT_EXIT_BAD_INPUT;
        in->qhead = (in->qhead + 1) & (VT_LOOKAHEAD - 1);
        in->qn--;
    }
    if (!in->qn && in->held) {
        in->held = 0;
        if (feed_record(in, &in->held_rec))
            return VT_EXIT_BAD_INPUT;
    }
    /* Refilled by halves, so the reader decodes several events a call. */
    int rc = in->qn <= VT_LOOKAHEAD / 2 ? fill(in) : 0;
    /* A cookie of 0 (a record, or an event with nothing to load) ends an
     * entry's stages. */
    if (in->qn > 8) {
        unsigned k = (in->qhead + 8) & (VT_LOOKAHEAD - 1);
        if (in->qcookie[k])
            in->qcookie[k] = vt_model_prefetch(in->model, &in->q[k], 1, in->qcookie[k]);
    }
    if (in->qn > 3) {
        unsigned k = (in->qhead + 3) & (VT_LOOKAHEAD - 1);
        if (in->qcookie[k])
            vt_model_prefetch(in->model, &in->q[k], 2, in->qcookie[k]);
    }
    return rc;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void progress(const vt_report_t *r, double start, int *shown)
{
    uint64_t done = 0, total = 0;
    for (int i = 0; i < r->nin; i++) {
        done += r->in[i].done ? vt_reader_file_size(r->in[i].reader) : vt_reader_offset(r->in[i].reader);
        total += vt_reader_file_size(r->in[i].reader);
    }
    fprintf(stderr, "\rvramtrace: reading %d trace%s: %3.0f%% (%.0f MiB) %.0f s ", r->nin, r->nin == 1 ? "" : "s",
            total ? 100.0 * (double)done / (double)total : 100.0, (double)done / (1024.0 * 1024.0), now_s() - start);
    *shown = 1;
}

/* The inputs with an event queued, as a binary heap on their first
 * event's time then their index: the top is the input whose event comes
 * next in the merged order (the earliest; among equal times the first
 * input). Picking it by a scan over every input made reading N traces
 * cost N steps an event: 1,000 traces of 2,000 events read together took
 * 36x the time of 100. */
static int merged_before(const vt_report_t *r, int a, int b)
{
    uint64_t ta = r->in[a].q[r->in[a].qhead].time_ns, tb = r->in[b].q[r->in[b].qhead].time_ns;
    return ta < tb || (ta == tb && a < b);
}

static void merged_down(const vt_report_t *r, int *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l < n && merged_before(r, h[l], h[m]))
            m = l;
        if (l + 1 < n && merged_before(r, h[l + 1], h[m]))
            m = l + 1;
        if (m == i)
            return;
        int t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static int feed_merged(vt_report_t *r)
{
    int rc = 0;
    for (int i = 0; i < r->nin && !rc; i++)
        rc = fill(&r->in[i]);
    int *heap = NULL, nheap = 0;
    if (!rc && r->nin > 1) {
        heap = malloc((size_t)r->nin * sizeof *heap);
        if (!heap) {
            fprintf(stderr, "vramtrace: out of memory\n");
            return VT_EXIT_BAD_INPUT;
        }
        for (int i = 0; i < r->nin; i++)
            if (r->in[i].qn)
                heap[nheap++] = i;
        for (int i = nheap / 2 - 1; i >= 0; i--)
            merged_down(r, heap, nheap, i);
    }
    int tty = isatty(2), shown = 0;
    double start = now_s(), last = start;
    uint64_t n = 0;
    /* Fixed for the whole read: loaded once, not after every event's calls. */
    vt_series_set_t *const series = r->series;
    const vt_event_obs_t on_event = r->on_event;
    while (!rc) {
        int best = -1;
        const vt_event_t *ev = NULL;
        if (r->nin == 1) {
            /* One trace (the usual report): its next event is the next. */
            if (r->in[0].qn) {
                best = 0;
                ev = &r->in[0].q[r->in[0].qhead];
            }
        } else if (nheap) {
            best = heap[0];
            ev = &r->in[best].q[r->in[best].qhead];
        }
        if (best < 0)
            break;
        if (vt_model_feed_event(r->in[best].model, ev)) {
            fprintf(stderr, "vramtrace: %s: out of memory\n", r->in[best].path);
            rc = VT_EXIT_BAD_INPUT;
            break;
        }
        if (series)
            vt_series_on_event(series, r, best, ev);
        if (on_event)
            on_event(r->on_event_ctx, r, best, ev);
        rc = advance(&r->in[best]);
        if (heap) {
            /* Only best's first event changed: it moves down, or out. */
            if (!r->in[best].qn)
                heap[0] = heap[--nheap];
            merged_down(r, heap, nheap, 0);
        }
        if (tty && (++n & 4095) == 0) {
            double t = now_s();
            if (t - start > 1.0 && t - last > 0.25) {
                progress(r, start, &shown);
                last = t;
            }
        }
    }
    if (shown)
        fprintf(stderr, "\r%*s\r", 72, "");
    free(heap);
    return rc;
}

void vt_report_free(vt_report_t *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nin; i++) {
        if (r->in[i].reader)
            vt_reader_close(r->in[i].reader);
        vt_model_free(r->in[i].model);
        for (unsigned k = 0; k < VT_LOOKAHEAD; k++)
            free(r->in[i].qname[k]);
        free(r->in[i].path);
    }
    free(r->in);
    for (int i = 0; i < r->nbad; i++)
        free(r->bad[i].path);
    free(r->bad);
    vt_rules_free(r->rules);
    free(r);
}

vt_report_t *vt_report_new(void)
{
    vt_report_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->opts.margin_pct = 15;
    r->opts.top = 10;
    r->rules = vt_rules_new();
    if (!r->rules) {
        free(r);
        return NULL;
    }
    return r;
}

int vt_report_opt(vt_report_t *r, const char *cmd, int c, const char *arg)
{
    char *end;
    vt_error_t err = { 0 };
    switch (c) {
    case VT_OPT_MARGIN:
        errno = 0;
        r->opts.margin_pct = strtod(arg, &end);
        if (errno || end == arg || *end || !(r->opts.margin_pct >= 0 && r->opts.margin_pct <= 100)) {
            fprintf(stderr, "vramtrace: %s: --margin wants a percentage 0..100, got '%s'\n", cmd, arg);
            return VT_EXIT_BAD_INPUT;
        }
        return 0;
    case VT_OPT_RULES:
        r->nrules_files++;
        if (vt_rules_load_file(r->rules, arg, &err)) {
            fprintf(stderr, "vramtrace: %s:%llu: %s: %s\n", err.path, (unsigned long long)err.offset,
                    vt_error_message(err.code), err.detail);
            return VT_EXIT_BAD_INPUT;
        }
        return 0;
    default:
        return VT_EXIT_BAD_INPUT;
    }
}

int vt_saved_opts_add(vt_saved_opts_t *s, int cap, int code, const char *arg)
{
    if (cap > VT_SAVED_OPTS_MAX)
        cap = VT_SAVED_OPTS_MAX;
    if (s->n >= cap)
        return -1;
    s->v[s->n].code = code;
    s->v[s->n++].arg = arg;
    return 0;
}

int vt_saved_opts_apply(vt_report_t *r, const char *cmd, const vt_saved_opts_t *s)
{
    int rc = 0;
    for (int i = 0; i < s->n && !rc; i++)
        rc = vt_report_opt(r, cmd, s->v[i].code, s->v[i].arg);
    return rc;
}

/* in's model, set up as the report wants it, for in's reader. @return 0,
 * or VT_EXIT_BAD_INPUT after saying so. */
static int cmp_u64_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Keeps the inputs --pid, --since, --until and --last choose, by their
 * PROCESS headers (read at open): the others are closed before anything
 * more of them is read. r->unselected counts them. @return 0, or -1 when
 * out of memory. */
static int select_inputs(vt_report_t *r)
{
    const vt_report_opts_t *o = &r->opts;
    if (!o->npids && !o->last && !o->since_ns && !o->until_ns)
        return 0;
    uint64_t cut = 0;   /* --last: the earliest start kept */
    if (o->last > 0 && o->last < r->nin) {
        uint64_t *starts = malloc((size_t)r->nin * sizeof *starts);
        if (!starts)
            return -1;
        int n = 0;
        for (int i = 0; i < r->nin; i++) {
            const vt_rec_process_t *p = vt_reader_process(r->in[i].reader);
            uint64_t w = p ? p->wall_start_ns : 0;
            int in_window = (!o->since_ns || w >= o->since_ns) && (!o->until_ns || w <= o->until_ns);
            if (in_window)
                starts[n++] = w;
        }
        vt_sort(starts, (size_t)n, sizeof *starts, cmp_u64_desc);
        cut = n >= o->last ? starts[o->last - 1] : 0;
        free(starts);
    }
    int kept = 0;
    for (int i = 0; i < r->nin; i++) {
        vt_report_input_t *in = &r->in[i];
        const vt_rec_process_t *p = vt_reader_process(in->reader);
        uint64_t w = p ? p->wall_start_ns : 0;
        int keep = (!o->since_ns || w >= o->since_ns) && (!o->until_ns || w <= o->until_ns) && w >= cut;
        if (keep && o->npids) {
            keep = 0;
            for (int k = 0; k < o->npids && p; k++)
                keep |= o->pids[k] == p->pid;
        }
        if (keep && o->last && kept >= o->last)
            keep = 0;   /* several started at the cut: the first found */
        if (!keep) {
            vt_reader_close(in->reader);
            free(in->path);
            r->unselected++;
            continue;
        }
        r->in[kept++] = *in;
    }
    for (int i = kept; i < r->nin; i++)
        memset(&r->in[i], 0, sizeof r->in[i]);
    r->nin = kept;
    return 0;
}

static int new_model(vt_report_t *r, vt_report_input_t *in)
{
    in->model = vt_model_new(r->rules, r->opts.margin_pct);
    if (!in->model || vt_model_set_process(in->model, vt_reader_process(in->reader))) {
        fprintf(stderr, "vramtrace: out of memory\n");
        return VT_EXIT_BAD_INPUT;
    }
    vt_model_set_hook(in->model, vt_gpus_hook, r);
    if (r->keep_layout)
        vt_model_keep_layout(in->model, 1);
    if (r->opts.no_source)
        vt_model_set_source(in->model, 0);
    return 0;
}

/* Opens in's trace again from its start. @return 0, or -1 after saying
 * why on stderr. */
static int reopen(const vt_report_input_t *in, vt_reader_t **out)
{
    vt_error_t e = { 0 };
    if (!vt_reader_open_flags(in->path, in->from_dir ? VT_READER_REGULAR_ONLY : 0, out, &e))
        return 0;
    fprintf(stderr, "vramtrace: %s: cannot read it a second time (%s): ggml's buffer marks are not used\n",
            vt_text(in->path), vt_error_message(e.code));
    return -1;
}

/* The marks of in's trace matched to its allocations (model.h, "ggml's
 * buffer marks"), NULL for none. @return 0, or -1 after saying why. */
static int match_marks(const vt_report_input_t *in, vt_marks_t **out)
{
    *out = NULL;
    if (!vt_model_marks_seen(in->model))
        return 0;
    vt_reader_t *rd;
    if (reopen(in, &rd))
        return -1;
    vt_error_t e = { 0 };
    *out = vt_marks_match(in->model, rd, &e);
    vt_reader_close(rd);
    if (*out)
        return 0;
    snprintf(e.path, sizeof e.path, "%s", in->path);
    vt_error_print(&e);
    return -1;
}

/* ggml marked buffers in these traces: they are read again to match each
 * mark to its allocation, then fed again from the start into new models
 * given the matches, and what watched the first reading forgets it. Traces
 * without ggml never come here. A trace that cannot be read again (a
 * pipe, or gone) leaves the first reading's report standing, tagged by the
 * rules alone. @return as feed_merged(). */
static int read_again_with_marks(vt_report_t *r)
{
    vt_marks_t **marks = calloc((size_t)r->nin, sizeof *marks);
    vt_reader_t **again = calloc((size_t)r->nin, sizeof *again);
    int ok = marks && again;
    for (int i = 0; i < r->nin && ok; i++)
        ok = !match_marks(&r->in[i], &marks[i]) && !reopen(&r->in[i], &again[i]);
    if (!ok) {
        for (int i = 0; marks && again && i < r->nin; i++) {
            vt_marks_free(marks[i]);
            if (again[i])
                vt_reader_close(again[i]);
        }
        free(marks);
        free(again);
        return 0;
    }
    int rc = 0;
    for (int i = 0; i < r->nin; i++) {
        vt_report_input_t *in = &r->in[i];
        vt_model_free(in->model);
        in->model = NULL;
        vt_reader_close(in->reader);
        in->reader = again[i];
        in->qhead = in->qn = 0;
        in->held = in->done = in->damaged = in->truncated = 0;
        in->stop_offset = 0;
        in->stop_reason[0] = 0;
        if (rc || new_model(r, in)) {
            vt_marks_free(marks[i]);
            rc = VT_EXIT_BAD_INPUT;
        } else if (marks[i]) {
            vt_model_give_marks(in->model, marks[i]);
        }
    }
    free(marks);
    free(again);
    if (rc)
        return rc;
    vt_series_rewind(r->series);
    memset(r->gpus, 0, sizeof r->gpus);
    r->ngpus = 0;
    r->hook_m = NULL;
    r->hook_in = NULL;
    if (r->on_rewind)
        r->on_rewind(r->on_event_ctx);
    return feed_merged(r);
}

/* The models viewed or finished (keep_open), marked where their reading
 * stopped, and the per-GPU view completed. */
static void finish_all(vt_report_t *r)
{
    for (int i = 0; i < r->nin; i++) {
        vt_report_input_t *in = &r->in[i];
        if (r->keep_open) {
            vt_model_view(in->model);
            vt_reader_release_file(in->reader);
        } else {
            vt_model_finish(in->model);
        }
        if (in->truncated || in->damaged)
            vt_model_mark_truncated(in->model, in->stop_offset, in->damaged);
        if (in->truncated && !r->opts.quiet)
            fprintf(stderr, "vramtrace: %s: offset %llu: trace ends in the middle of a chunk; reporting what came before\n",
                    vt_text(in->path), (unsigned long long)in->stop_offset);
    }
    vt_gpus_finish(r);
}

/* vt_report_list, every path marked found in a directory when
 * found_in_dir. */
static int list_paths(char *const *args, int nargs, int found_in_dir, char ***paths, unsigned char **from_dir, int *n)
{
    int rc = 0;
    *paths = NULL;
    *from_dir = NULL;
    *n = 0;
    for (int i = 0; i < nargs && !rc; i++)
        rc = add_path(paths, from_dir, n, args[i], found_in_dir);
    if (rc) {
        for (int k = 0; k < *n; k++)
            free((*paths)[k]);
        free(*paths);
        free(*from_dir);
        *paths = NULL;
        *from_dir = NULL;
        *n = 0;
    }
    return rc;
}

int vt_report_list(char *const *args, int nargs, char ***paths, unsigned char **from_dir, int *n)
{
    return list_paths(args, nargs, 0, paths, from_dir, n);
}

int vt_report_load(vt_report_t *r, char *const *args, int nargs)
{
    vt_error_t err = { 0 };
    const char *env = getenv("VRAMTRACE_RULES");
    if (!r->nrules_files && env && *env) {
        r->nrules_files++;
        if (vt_rules_load_file(r->rules, env, &err)) {
            fprintf(stderr, "vramtrace: %s:%llu: %s (from VRAMTRACE_RULES): %s\n", err.path,
                    (unsigned long long)err.offset, vt_error_message(err.code), err.detail);
            return VT_EXIT_BAD_INPUT;
        }
    }
    char **paths = NULL;
    unsigned char *from_dir = NULL;
    int npaths = 0, rc = list_paths(args, nargs, r->found_in_dir, &paths, &from_dir, &npaths);
    r->in = rc ? NULL : calloc((size_t)npaths, sizeof *r->in);
    r->bad = rc || !r->keep_going ? NULL : calloc((size_t)npaths, sizeof *r->bad);
    if (!r->in || (r->keep_going && !r->bad)) {
        for (int k = 0; k < npaths; k++)
            free(paths[k]);
        free(paths);
        free(from_dir);
        return VT_EXIT_BAD_INPUT;
    }
    /* The same file named twice (run1 run1, or a file and its directory)
     * is one process, read once. */
    struct stat *ids = calloc((size_t)npaths, sizeof *ids);
    for (int i = 0; i < npaths; i++) {
        int dup = 0;
        /* lstat: a symlink in a directory is refused by the reader, not
         * taken for its target. */
        if (ids && lstat(paths[i], &ids[i]) == 0)
            for (int k = 0; k < i && !dup; k++)
                dup = ids[k].st_dev == ids[i].st_dev && ids[k].st_ino == ids[i].st_ino && ids[k].st_ino;
        if (dup) {
            fprintf(stderr, "vramtrace: %s: named twice, read once\n", vt_text(paths[i]));
            free(paths[i]);
            if (ids)
                ids[i].st_ino = 0;
            continue;
        }
        r->in[r->nin].path = paths[i];
        r->in[r->nin].from_dir = from_dir[i];
        r->in[r->nin].tolerant = r->keep_going;
        r->nin++;
    }
    free(ids);
    free(paths);
    free(from_dir);
    uint64_t grain = 0;
    for (int i = 0; i < r->nin; i++) {
        vt_report_input_t *in = &r->in[i];
        vt_error_t e = { 0 };
        if (vt_reader_open_flags(in->path, in->from_dir ? VT_READER_REGULAR_ONLY : 0, &in->reader, &e)) {
            snprintf(e.path, sizeof e.path, "%s", in->path);
            vt_error_print(&e);
            in->reader = NULL;
            if (!r->keep_going)
                return VT_EXIT_BAD_INPUT;
            /* Left out: the inputs after it move down one. */
            vt_report_bad_t *b = &r->bad[r->nbad++];
            b->path = in->path;
            b->offset = e.offset;
            snprintf(b->reason, sizeof b->reason, "%s: %.200s", vt_error_message(e.code), e.detail);
            memmove(in, in + 1, (size_t)(r->nin - i - 1) * sizeof *in);
            memset(&r->in[--r->nin], 0, sizeof *in);
            i--;
            continue;
        }
    }
    if (select_inputs(r))
        return VT_EXIT_BAD_INPUT;
    if (!r->nin && r->unselected) {
        fprintf(stderr, "vramtrace: none of the %d traces is a process --pid, --since, --until or --last chooses\n",
                r->unselected);
        return VT_EXIT_BAD_INPUT;
    }
    for (int i = 0; i < r->nin; i++) {
        vt_report_input_t *in = &r->in[i];
        if (new_model(r, in))
            return VT_EXIT_BAD_INPUT;
        const vt_proc_t *proc = vt_model_proc(in->model);
        if (i == 0 || proc->mono_start_ns < r->t0)
            r->t0 = proc->mono_start_ns;
        if (proc->time_res_ns > grain)
            grain = proc->time_res_ns;
    }
    if (!r->nin)
        return VT_EXIT_BAD_INPUT;   /* every trace was bad, each said why */
    vt_fmt_set_time_grain(grain);
    rc = feed_merged(r);
    for (int i = 0; i < r->nin && !rc; i++)
        if (vt_model_marks_seen(r->in[i].model)) {
            rc = read_again_with_marks(r);
            break;
        }
    if (rc)
        return rc;
    finish_all(r);
    return 0;
}

int vt_report_read_on(vt_report_t *r)
{
    for (int i = 0; i < r->nin; i++) {
        vt_report_input_t *in = &r->in[i];
        if (!r->keep_open || in->damaged || vt_model_marks_seen(in->model))
            return 1;
        if (vt_model_proc(in->model)->ended) {
            in->read_from = vt_reader_offset(in->reader);
            continue;
        }
        if (vt_reader_resume(in->reader, in->path))
            return 1;
        in->read_from = vt_reader_offset(in->reader);
        in->done = in->truncated = 0;
        in->stop_offset = 0;
        in->stop_reason[0] = 0;
        vt_model_resume(in->model);
    }
    /* ggml's marks name allocations read before them: a trace that meets
     * its first one now is read again from its start, as load does. */
    if (feed_merged(r))
        return 1;
    for (int i = 0; i < r->nin; i++)
        if (r->in[i].damaged || vt_model_marks_seen(r->in[i].model))
            return 1;
    finish_all(r);
    return 0;
}

int vt_parse_wall_time(const char *s, int utc, uint64_t *ns)
{
    char *end;
    double age = strtod(s, &end);
    if (end != s && age >= 0 && end[0] && !end[1] && strchr("smhd", end[0])) {
        double unit = end[0] == 's' ? 1 : end[0] == 'm' ? 60 : end[0] == 'h' ? 3600 : 86400;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        double t = (double)now.tv_sec - age * unit;
        if (t < 0)
            t = 0;
        *ns = (uint64_t)(t * 1e9);
        return 0;
    }
    struct tm tm = { 0 };
    const char *rest = strptime(s, "%Y-%m-%d", &tm);
    if (!rest)
        return -1;
    if (*rest == ' ' || *rest == 'T') {
        const char *r2 = strptime(rest + 1, "%H:%M:%S", &tm);
        if (!r2)
            r2 = strptime(rest + 1, "%H:%M", &tm);
        rest = r2;
    }
    if (!rest || *rest)
        return -1;
    tm.tm_isdst = -1;
    time_t t = utc ? timegm(&tm) : mktime(&tm);
    if (t == (time_t)-1 || t < 0)
        return -1;
    *ns = (uint64_t)t * 1000000000ull;
    return 0;
}

const char *vt_fmt_wall(char out[32], uint64_t wall_ns, int utc)
{
    time_t t = (time_t)(wall_ns / 1000000000ull);
    struct tm tm;
    if (!(utc ? gmtime_r(&t, &tm) : localtime_r(&t, &tm)) || !strftime(out, 32, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(out, 32, "?");
    return out;
}

int vt_report_color_opt(vt_report_t *r, const char *cmd, const char *when)
{
    if (!strcmp(when, "always"))
        r->opts.color = 1;
    else if (!strcmp(when, "never"))
        r->opts.color = 0;
    else if (!strcmp(when, "auto"))
        r->opts.color = -1;
    else {
        fprintf(stderr, "vramtrace: %s: --color wants auto, always or never, got '%s'\n", cmd, when);
        return VT_EXIT_BAD_INPUT;
    }
    return 0;
}

int vt_report_use_color(const vt_report_t *r, FILE *out)
{
    if (r->opts.color >= 0)
        return r->opts.color;
    /* https://no-color.org: present and not empty disables colour. */
    const char *nc = getenv("NO_COLOR");
    return !(nc && *nc) && isatty(fileno(out));
}
