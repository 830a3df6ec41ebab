/* `vramtrace diff A B [--json]`: two runs side by side (each a trace or a
 * directory of traces), e.g. llama.cpp vs ollama on the same model, or one
 * version vs the next. Each side is reduced to one row set:
 *  - weights / kv / scratch / unknown / custom tags and peak: the sum over
 *    every process and GPU of its device peak (what each held at its peak);
 *  - context reserve and untracked: the largest of any GPU (they describe
 *    the card, and every process on it sees the same ones);
 *  - least free: the lowest of any GPU;
 *  - fragmentation: rounding waste, hole bytes and unmapped VMM address
 *    space summed, largest hole the largest;
 *  - pinned host and managed peaks summed; more VRAM needed (spill) summed;
 *  - where ggml programs' models ran (their GGML_* records), in the text
 *    when either run's records name layers or put some of the model in
 *    host memory: layers on a GPU of all, layer weights and KV cache in
 *    host memory, summed over the processes that have them, and the KV
 *    cache's cells (its context) where either run's trace records them.
 * Deltas are B - A, relative to A ("n/a" when A is 0).
 *
 * Below the rows, the call sites: addresses differ from run to run (ASLR,
 * another build), so a site is matched by what its stack says: its space,
 * its device and each frame's demangled function and module basename,
 * innermost first. Sites of one run with the same such stack (several
 * processes, or return addresses that differ within one function) are one
 * site, their bytes summed. Ranked by |B - A| of the bytes each held at
 * its space's peak.
 *
 * Exit status: 0 compared, 2 unusable input or bad usage.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "export.h"
#include "fit.h"
#include "json.h"
#include "report.h"
#include "sizes.h"
#include "sort.h"

enum { R_PEAK, R_RESERVE, R_UNTRACKED, R_MINFREE, R_ROUNDING, R_HOLES, R_LARGEST, R_VA_UNMAPPED,
       R_HOST, R_MANAGED, R_MORE, R_FIXED };

static const char *const fixed_names[] = {
    [R_PEAK] = "peak",
    [R_RESERVE] = "context_reserve",
    [R_UNTRACKED] = "untracked",
    [R_MINFREE] = "min_free",
    [R_ROUNDING] = "rounding_waste",
    [R_HOLES] = "hole_bytes",
    [R_LARGEST] = "largest_hole",
    [R_VA_UNMAPPED] = "va_unmapped",
    [R_HOST] = "host_pinned_peak",
    [R_MANAGED] = "managed_peak",
    [R_MORE] = "more_vram_needed",
};
_Static_assert(sizeof fixed_names / sizeof fixed_names[0] == R_FIXED, "one name per fixed row");

typedef struct side {
    uint64_t tag[VT_MAX_TAGS];
    uint64_t v[R_FIXED];
    int have_min, nproc, ngpu, spilled;
    /* The worst process's verdict key (vt_verdict_rank), NULL for none. */
    const char *verdict;
    /* Placement: processes with ggml's records, and with layers named. */
    int placed, layered, celled, multi_stream;
    uint64_t layers_gpu, layers_total, host_weights, host_kv, kv_cells, kv_streams;
} side_t;

static void usage(FILE *f)
{
    fprintf(f, "usage: vramtrace diff [options] A B\n"
               "\n"
               "Compares two runs (each a TRACE or a DIR of traces): weights, KV, scratch and\n"
               "unknown at peak, context reserve, untracked memory, fragmentation, peak and\n"
               "headroom, with absolute and relative deltas (B - A); where a ggml program's\n"
               "model ran (layers on a GPU, weights and KV cache in host memory) when either\n"
               "run has it; then the call sites, matched across the runs by their symbolized\n"
               "stacks, by how much they changed.\n"
               "\n"
               "options:\n"
               "  --json          machine-readable output, schema vramtrace-diff/1\n"
               "                  (docs/report.md)\n"
               "  --top N         call sites shown, by |B - A| (default 10, 0 = all; JSON has\n"
               "                  all)\n"
               "  --rules FILE    tagging rules for both runs (repeatable); --margin PCT\n"
               "                  likewise\n"
               "  --color WHEN    auto (default), always or never\n"
               "  --wide          lines as long as they come (default: they fit 80 columns)\n"
               "\n"
               "Exit status: 0 compared, 2 unusable input.\n");
}

static void reduce(const vt_report_t *r, side_t *s)
{
    memset(s, 0, sizeof *s);
    s->nproc = r->nin;
    s->verdict = NULL;
    for (int i = 0; i < r->nin; i++) {
        const vt_proc_t *p = vt_model_proc(r->in[i].model);
        const vt_placement_t *pl = &p->placement;
        s->spilled |= p->tip.valid;
        /* The run's verdict is its worst process's, as the report says it. */
        const char *v = vt_proc_verdict(p, 0);
        if (!s->verdict || vt_verdict_rank(v) < vt_verdict_rank(s->verdict))
            s->verdict = v;
        if (pl->known) {
            s->placed++;
            s->host_weights += pl->layer_weights_host;
            s->host_kv += vt_place_host(&pl->kv);
            s->celled += pl->kv_cells > 0;
            s->kv_cells += pl->kv_cells;
            /* Cells of one stream: with -np 4 and no --kv-unified, 4 caches of them. */
            s->kv_streams += pl->kv_streams;
            s->multi_stream |= pl->kv_streams > 1;
        }
        if (pl->known && pl->layers_known) {
            s->layered++;
            s->layers_gpu += pl->layers_gpu;
            s->layers_total += pl->layers_total;
        }
        s->v[R_HOST] += p->host.peak_bytes;
        s->v[R_MANAGED] += p->managed.peak_bytes;
        s->v[R_MORE] += p->tip.valid ? vt_proc_more_vram(p) : 0;
        for (int k = 0; k < p->ndevs; k++) {
            const vt_dev_t *d = &p->devs[k];
            if (!d->mem.have_peak && !d->have_info)
                continue;
            s->ngpu++;
            for (int t = 0; t < VT_MAX_TAGS; t++)
                s->tag[t] += d->mem.peak_by_tag[t];
            s->v[R_PEAK] += d->mem.peak_bytes;
            if (vt_dev_reserve(d) > s->v[R_RESERVE])
                s->v[R_RESERVE] = vt_dev_reserve(d);
            if (vt_dev_untracked(d) > s->v[R_UNTRACKED])
                s->v[R_UNTRACKED] = vt_dev_untracked(d);
            if (d->have_min && (!s->have_min || d->min_free < s->v[R_MINFREE])) {
                s->have_min = 1;
                s->v[R_MINFREE] = d->min_free;
            }
            s->v[R_ROUNDING] += d->peak_rounding_waste;
            s->v[R_HOLES] += d->frag_holes;
            if (d->frag_largest_hole > s->v[R_LARGEST])
                s->v[R_LARGEST] = d->frag_largest_hole;
            s->v[R_VA_UNMAPPED] += d->peak_va_reserved > d->peak_va_mapped ? d->peak_va_reserved - d->peak_va_mapped : 0;
        }
    }
}

/* One call site of one run, as the runs are matched: every site of every
 * process with the same key is one. */
typedef struct dsite {
    char *key;               /* space, device, tag, ggml mark, then "function\x1fmodule\x1e" per frame, innermost first */
    const vt_model_t *m;     /* the first process with it: where its stack is printed from */
    const vt_site_t *site;   /* its first site there */
    uint64_t at_peak, calls;
} dsite_t;

typedef struct dsites {
    dsite_t *v;
    size_t n;
} dsites_t;

/* A site of A, of B, or of both (gone: B NULL, new: A NULL). */
typedef struct pair {
    const dsite_t *a, *b;
    int64_t delta;
} pair_t;

static char *site_key(const vt_model_t *m, const vt_site_t *s)
{
    vt_frame_t fr[VT_MAX_STACK_DEPTH];
    int n = vt_stacks_get(vt_model_stacks(m), s->stack, fr, VT_MAX_STACK_DEPTH);
    char *key = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&key, &len);
    if (!f)
        return NULL;
    /* The tag's name and ggml's mark are part of it: one stack can hold
     * marked weights and an unmarked KV cache (a cgo gate), two findings
     * a single row would blur. */
    fprintf(f, "%u\x1f%d\x1f%s\x1f%u\x1e", s->space, s->space == VT_SPACE_DEVICE ? s->device : -1,
            vt_rules_tag_name(vt_model_rules(m), s->match.tag), s->ggml_usage);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\x1f%s\x1e", fr[i].display, fr[i].module_base);
    if (fclose(f)) {
        free(key);
        return NULL;
    }
    return key;
}

static int key_order(const void *x, const void *y)
{
    return strcmp(((const dsite_t *)x)->key, ((const dsite_t *)y)->key);
}

static void sites_free(dsites_t *d)
{
    for (size_t i = 0; d->v && i < d->n; i++)
        free(d->v[i].key);
    free(d->v);
    d->v = NULL;
    d->n = 0;
}

/* Every site of r, one per key, sorted by key. @return 0 or -1 (no memory). */
static int collect_sites(const vt_report_t *r, dsites_t *d)
{
    size_t total = 0;
    for (int i = 0; i < r->nin; i++)
        total += vt_model_proc(r->in[i].model)->nsites;
    d->n = 0;
    if (!(d->v = calloc(total ? total : 1, sizeof *d->v)))
        return -1;
    for (int i = 0; i < r->nin; i++) {
        const vt_proc_t *p = vt_model_proc(r->in[i].model);
        for (size_t k = 0; k < p->nsites; k++) {
            dsite_t *e = &d->v[d->n];
            if (!(e->key = site_key(r->in[i].model, &p->sites[k])))
                return -1;
            e->m = r->in[i].model;
            e->site = &p->sites[k];
            e->at_peak = p->sites[k].at_peak;
            e->calls = p->sites[k].calls;
            d->n++;
        }
    }
    vt_sort(d->v, d->n, sizeof *d->v, key_order);
    size_t out = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (out && !strcmp(d->v[out - 1].key, d->v[i].key)) {
            d->v[out - 1].at_peak += d->v[i].at_peak;
            d->v[out - 1].calls += d->v[i].calls;
            free(d->v[i].key);
            continue;
        }
        d->v[out++] = d->v[i];
    }
    d->n = out;
    return 0;
}

static uint64_t magnitude(int64_t v) { return v < 0 ? -(uint64_t)v : (uint64_t)v; }

static const char *pair_key(const pair_t *p) { return (p->b ? p->b : p->a)->key; }

/* Largest |B - A| first; then the larger of the two; then by key, so the
 * order never depends on the order of the files. */
static int pair_order(const void *x, const void *y)
{
    const pair_t *p = x, *q = y;
    uint64_t dp = magnitude(p->delta), dq = magnitude(q->delta);
    if (dp != dq)
        return dp > dq ? -1 : 1;
    uint64_t mp = p->a && (!p->b || p->a->at_peak > p->b->at_peak) ? p->a->at_peak : p->b->at_peak;
    uint64_t mq = q->a && (!q->b || q->a->at_peak > q->b->at_peak) ? q->a->at_peak : q->b->at_peak;
    if (mp != mq)
        return mp > mq ? -1 : 1;
    return strcmp(pair_key(p), pair_key(q));
}

/* Both runs' sites matched by key, ranked (pair_order). NULL: no memory. */
static pair_t *match_sites(const dsites_t *a, const dsites_t *b, size_t *n)
{
    pair_t *v = calloc(a->n + b->n + 1, sizeof *v);
    size_t i = 0, k = 0;
    *n = 0;
    if (!v)
        return NULL;
    while (i < a->n || k < b->n) {
        int c = i == a->n ? 1 : k == b->n ? -1 : strcmp(a->v[i].key, b->v[k].key);
        pair_t *p = &v[(*n)++];
        p->a = c <= 0 ? &a->v[i++] : NULL;
        p->b = c >= 0 ? &b->v[k++] : NULL;
        p->delta = (int64_t)((p->b ? p->b->at_peak : 0) - (p->a ? p->a->at_peak : 0));
    }
    vt_sort(v, *n, sizeof *v, pair_order);
    return v;
}

static const char *pair_status(const pair_t *p)
{
    return !p->b ? "gone" : !p->a ? "new" : p->delta ? "changed" : "same";
}

/* The site's telling frame (vt_telling_frame), -1 when its stack is empty. */
static int site_frame(const dsite_t *e, vt_frame_t *fr, int *n)
{
    const vt_site_t *s = e->site;
    *n = vt_stacks_get(vt_model_stacks(e->m), s->stack, fr, VT_MAX_STACK_DEPTH);
    return vt_telling_frame(fr, *n, s->match.frame >= 0 ? s->match.frame : s->stack_match.frame);
}

static int load(vt_report_t **out, char *path, char **rules, int nrules, const char *margin)
{
    vt_report_t *r = vt_report_new();
    *out = r;
    if (!r)
        return VT_EXIT_BAD_INPUT;
    for (int i = 0; i < nrules; i++)
        if (vt_report_opt(r, "diff", VT_OPT_RULES, rules[i]))
            return VT_EXIT_BAD_INPUT;
    if (margin && vt_report_opt(r, "diff", VT_OPT_MARGIN, margin))
        return VT_EXIT_BAD_INPUT;
    return vt_report_load(r, &path, 1);
}

typedef struct row {
    const char *name;
    uint64_t a, b;
} row_t;

static int rows(const vt_report_t *r, const side_t *a, const side_t *b, row_t *out)
{
    int n = 0;
    for (int t = 0; t < vt_rules_tag_count(r->rules); t++)
        if (t < VT_TAG_BUILTIN_COUNT || a->tag[t] || b->tag[t])
            out[n++] = (row_t){ vt_rules_tag_name(r->rules, t), a->tag[t], b->tag[t] };
    for (int k = 0; k < R_FIXED; k++)
        out[n++] = (row_t){ fixed_names[k], a->v[k], b->v[k] };
    return n;
}

/* "+2.00 GiB", "-1.00 GiB", "0 B": the sign always shown on a delta. */
static const char *signed_size(char buf[VT_SIZE_BUF + 1], int64_t v)
{
    buf[0] = '+';
    vt_fmt_sbytes(buf + (v > 0), v);
    return buf;
}

/* Where the models ran, when either run's ggml records name layers or put
 * some of the model in host memory: layers on a GPU of all (more is
 * better), then layer weights and KV cache in host memory (more is
 * worse); "-" for a run without ggml's records. */
/* A row of counts: each side's ("-" where it has none), and their delta
 * where both have one. */
static void count_row(FILE *o, const char *name, int have_a, uint64_t a, int have_b, uint64_t b)
{
    char va[24], vb[24];
    snprintf(va, sizeof va, have_a ? "%" PRIu64 : "-", a);
    snprintf(vb, sizeof vb, have_b ? "%" PRIu64 : "-", b);
    fprintf(o, "%-18s %12s %12s", name, va, vb);
    if (have_a && have_b)
        fprintf(o, " %+12" PRId64, (int64_t)(b - a));
    fputc('\n', o);
}

static void placement_text(FILE *o, int color, const side_t *s)
{
    const char *off = color ? "\033[0m" : "", *up = color ? "\033[31m" : "", *down = color ? "\033[32m" : "";
    if (!s[0].layered && !s[1].layered && !s[0].host_weights && !s[1].host_weights && !s[0].host_kv && !s[1].host_kv)
        return;
    char a[VT_SIZE_BUF + 24], b[VT_SIZE_BUF + 24], d[VT_SIZE_BUF + 1], rel[32];
    if (s[0].layered || s[1].layered) {
        for (int k = 0; k < 2; k++)
            snprintf(k ? b : a, sizeof a, s[k].layered ? "%" PRIu64 "/%" PRIu64 : "-", s[k].layers_gpu,
                     s[k].layers_total);
        int64_t delta = (int64_t)(s[1].layers_gpu - s[0].layers_gpu);
        snprintf(d, sizeof d, "%+" PRId64, delta);
        fprintf(o, "%-18s %12s %12s", "layers_on_gpu", a, b);
        if (s[0].layered && s[1].layered)
            fprintf(o, " %s%12s%s", delta ? (delta < 0 ? up : down) : "", d, delta ? off : "");
        fputc('\n', o);
    }
    /* The context each run made: a KV cache of more cells holds more. */
    if (s[0].celled || s[1].celled)
        count_row(o, "kv_cells", s[0].celled, s[0].kv_cells, s[1].celled, s[1].kv_cells);
    if (s[0].multi_stream || s[1].multi_stream)
        count_row(o, "kv_streams", s[0].kv_streams > 0, s[0].kv_streams, s[1].kv_streams > 0, s[1].kv_streams);
    static const char *const names[] = { "host_weights", "host_kv" };
    for (int r = 0; r < 2; r++) {
        uint64_t va = r ? s[0].host_kv : s[0].host_weights, vb = r ? s[1].host_kv : s[1].host_weights;
        int64_t delta = (int64_t)(vb - va);
        fprintf(o, "%-18s %12s %12s", names[r], s[0].placed ? vt_fmt_bytes(a, va) : "-",
                s[1].placed ? vt_fmt_bytes(b, vb) : "-");
        if (s[0].placed && s[1].placed) {
            if (va)
                snprintf(rel, sizeof rel, "%+.1f%%", 100.0 * (double)delta / (double)va);
            else
                snprintf(rel, sizeof rel, "%s", delta ? "n/a" : "0%");
            fprintf(o, " %s%12s%s %9s", delta ? (delta > 0 ? up : down) : "", signed_size(d, delta), delta ? off : "",
                    rel);
        }
        fputc('\n', o);
    }
}

static void text(FILE *o, int color, char **paths, const side_t *s, const row_t *rw, int n)
{
    const char *bold = color ? "\033[1m" : "", *off = color ? "\033[0m" : "";
    const char *up = color ? "\033[31m" : "", *down = color ? "\033[32m" : "";
    for (int k = 0; k < 2; k++) {
        /* The worst process's verdict, in the report's words, where it
         * says something went wrong or ran slow. */
        const char *v = s[k].verdict && vt_verdict_alarming(s[k].verdict) ? vt_verdict_words(s[k].verdict) : "";
        fprintf(o, "%s%s%s: %s (%d process%s, %d GPU%s)%s%s\n", bold, k ? "B" : "A", off, paths[k], s[k].nproc,
                s[k].nproc == 1 ? "" : "es", s[k].ngpu, s[k].ngpu == 1 ? "" : "s", *v ? ", " : "", v);
    }
    fputc('\n', o);
    fprintf(o, "%s%-18s %12s %12s %12s %9s%s\n", bold, "", "A", "B", "B - A", "relative", off);
    for (int i = 0; i < n; i++) {
        char a[VT_SIZE_BUF], b[VT_SIZE_BUF], d[VT_SIZE_BUF + 1], rel[32];
        int64_t delta = (int64_t)(rw[i].b - rw[i].a);
        if (rw[i].a)
            snprintf(rel, sizeof rel, "%+.1f%%", 100.0 * (double)delta / (double)rw[i].a);
        else
            snprintf(rel, sizeof rel, "%s", delta ? "n/a" : "0%");
        /* More memory is worse, except for free memory. */
        int worse = !strcmp(rw[i].name, "min_free") ? delta < 0 : delta > 0;
        fprintf(o, "%-18s %12s %12s %s%12s%s %9s\n", rw[i].name, vt_fmt_bytes(a, rw[i].a), vt_fmt_bytes(b, rw[i].b),
                delta ? (worse ? up : down) : "", signed_size(d, delta), delta ? off : "", rel);
    }
    placement_text(o, color, s);
}

/* The sites that changed, appeared or went, the first `top` (0: all) by
 * |B - A|, two lines each: the numbers, then the telling frame. */
static void sites_text(FILE *o, int color, const pair_t *v, size_t n, size_t top, int wide)
{
    const char *bold = color ? "\033[1m" : "", *off = color ? "\033[0m" : "";
    const char *up = color ? "\033[31m" : "", *down = color ? "\033[32m" : "";
    size_t same = 0, shown = 0, listed = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].a && v[i].b && !v[i].delta) {
            same++;
            continue;
        }
        if (top && listed++ >= top)
            continue;
        if (!shown++)
            fprintf(o, "\n%sCall sites by |B - A| of their bytes at peak%s (matched by stack)\n"
                       "%s  %-8s %-11s %12s %12s %12s%s\n",
                    bold, off, bold, "tag", "where", "A", "B", "B - A", off);
        const dsite_t *e = v[i].b ? v[i].b : v[i].a;
        char a[VT_SIZE_BUF], b[VT_SIZE_BUF], d[VT_SIZE_BUF + 1], where[32], name[160];
        vt_site_where(e->site, where);
        fprintf(o, "  %-8s %-11s %12s %12s %s%12s%s%s\n", vt_rules_tag_name(vt_model_rules(e->m), e->site->match.tag),
                where, v[i].a ? vt_fmt_bytes(a, v[i].a->at_peak) : "-", v[i].b ? vt_fmt_bytes(b, v[i].b->at_peak) : "-",
                v[i].delta ? (v[i].delta > 0 ? up : down) : "", signed_size(d, v[i].delta), v[i].delta ? off : "",
                !v[i].a ? "  new" : !v[i].b ? "  gone" : "");
        vt_frame_t fr[VT_MAX_STACK_DEPTH];
        int nf, f = site_frame(e, fr, &nf);
        if (f < 0) {
            fprintf(o, "    (no stack recorded)\n");
            continue;
        }
        const char *fn = fr[f].display[0] ? vt_text(fr[f].display) : "?";
        if (!wide)
            fn = vt_fit_elide(name, sizeof name, vt_fit_elide_args(name, sizeof name, fn), 56);
        fprintf(o, "    %s%s%s%s\n", fn, fr[f].module_base[0] ? "  [" : "", vt_text(fr[f].module_base),
                fr[f].module_base[0] ? "]" : "");
    }
    if (!shown)
        fprintf(o, "\nCall sites: none changed (%zu matched).\n", same);
    else if (listed > shown)
        fprintf(o, "  ... %zu more changed sites (--top 0 shows all); %zu unchanged\n", listed - shown, same);
    else
        fprintf(o, "  %zu site%s unchanged\n", same, same == 1 ? "" : "s");
}

static void sites_json(vt_json_t *j, const pair_t *v, size_t n)
{
    vt_json_arr(j, "sites");
    for (size_t i = 0; i < n; i++) {
        const dsite_t *e = v[i].b ? v[i].b : v[i].a;
        vt_frame_t fr[VT_MAX_STACK_DEPTH];
        int nf, f = site_frame(e, fr, &nf);
        vt_json_obj(j, NULL);
        vt_json_str(j, "status", pair_status(&v[i]));
        vt_json_str(j, "space", vt_space_name(e->site->space));
        vt_json_i64(j, "device", e->site->space == VT_SPACE_DEVICE ? e->site->device : -1);
        vt_json_str(j, "tag", vt_rules_tag_name(vt_model_rules(e->m), e->site->match.tag));
        vt_json_u64(j, "a", v[i].a ? v[i].a->at_peak : 0);
        vt_json_u64(j, "b", v[i].b ? v[i].b->at_peak : 0);
        vt_json_i64(j, "delta", v[i].delta);
        vt_json_u64(j, "calls_a", v[i].a ? v[i].a->calls : 0);
        vt_json_u64(j, "calls_b", v[i].b ? v[i].b->calls : 0);
        if (f >= 0) {
            vt_json_str(j, "function", fr[f].display);
            vt_json_str(j, "module", fr[f].module_base);
        } else {
            vt_json_null(j, "function");
            vt_json_null(j, "module");
        }
        vt_export_stack_args(j, e->m, e->site->stack);
        vt_json_obj_end(j);
    }
    vt_json_arr_end(j);
}

static void json(FILE *o, char **paths, const side_t *s, const row_t *rw, int n, const pair_t *v, size_t nv)
{
    vt_json_t j;
    vt_json_init(&j, o);
    vt_json_obj(&j, NULL);
    vt_json_str(&j, "schema", "vramtrace-diff/1");
    for (int k = 0; k < 2; k++) {
        vt_json_obj(&j, k ? "b" : "a");
        vt_json_str(&j, "path", paths[k]);
        vt_json_u64(&j, "processes", (uint64_t)s[k].nproc);
        vt_json_u64(&j, "gpus", (uint64_t)s[k].ngpu);
        vt_json_bool(&j, "spilled", s[k].spilled);
        if (s[k].verdict)
            vt_json_str(&j, "verdict", s[k].verdict);
        else
            vt_json_null(&j, "verdict");
        /* The text's placement rows: null for a side whose processes
         * have no ggml records (or name no layers). */
        if (s[k].placed) {
            vt_json_obj(&j, "placement");
            if (s[k].layered) {
                vt_json_u64(&j, "layers_gpu", s[k].layers_gpu);
                vt_json_u64(&j, "layers_total", s[k].layers_total);
            } else {
                vt_json_null(&j, "layers_gpu");
                vt_json_null(&j, "layers_total");
            }
            vt_json_u64(&j, "host_weights_bytes", s[k].host_weights);
            vt_json_u64(&j, "host_kv_bytes", s[k].host_kv);
            if (s[k].celled)
                vt_json_u64(&j, "kv_cells", s[k].kv_cells);
            else
                vt_json_null(&j, "kv_cells");
            if (s[k].kv_streams)
                vt_json_u64(&j, "kv_streams", s[k].kv_streams);
            else
                vt_json_null(&j, "kv_streams");
            vt_json_obj_end(&j);
        } else {
            vt_json_null(&j, "placement");
        }
        vt_json_obj_end(&j);
    }
    vt_json_obj(&j, "rows");
    for (int i = 0; i < n; i++) {
        vt_json_obj(&j, rw[i].name);
        vt_json_u64(&j, "a", rw[i].a);
        vt_json_u64(&j, "b", rw[i].b);
        vt_json_i64(&j, "delta", (int64_t)(rw[i].b - rw[i].a));
        if (rw[i].a)
            vt_json_num(&j, "relative", ((double)rw[i].b - (double)rw[i].a) / (double)rw[i].a);
        else
            vt_json_null(&j, "relative");
        vt_json_obj_end(&j);
    }
    vt_json_obj_end(&j);
    sites_json(&j, v, nv);
    vt_json_obj_end(&j);
    vt_json_finish(&j);
}

int vt_cmd_diff(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "json", no_argument, NULL, 'j' },
        { "margin", required_argument, NULL, VT_OPT_MARGIN },
        { "rules", required_argument, NULL, VT_OPT_RULES },
        { "color", required_argument, NULL, 'c' },
        { "wide", no_argument, NULL, 'w' },
        { "top", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    char *rules[64];
    int nrules = 0, as_json = 0, wide = 0, c, rc = VT_EXIT_OK;
    long top = 10;
    char *end;
    const char *margin = NULL, *color = "auto";
    vt_report_t *rep[2] = { NULL, NULL };
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': as_json = 1; break;
        case VT_OPT_MARGIN: margin = optarg; break;
        case 'c': color = optarg; break;
        case 'w': wide = 1; break;
        case 't':
            top = strtol(optarg, &end, 10);
            if (end == optarg || *end || top < 0) {
                fprintf(stderr, "vramtrace: diff: --top wants a count, got '%s'\n", optarg);
                return VT_EXIT_BAD_INPUT;
            }
            break;
        case VT_OPT_RULES:
            if (nrules < 64)
                rules[nrules++] = optarg;
            break;
        case 'h': usage(stdout); return VT_EXIT_OK;
        default: return vt_usage_error("diff", NULL);
        }
    }
    if (argc - optind != 2)
        return vt_usage_error("diff", "wants two runs, A and B (each a TRACE or DIR); %d given", argc - optind);
    side_t s[2];
    for (int k = 0; k < 2 && !rc; k++) {
        rc = load(&rep[k], argv[optind + k], rules, nrules, margin);
        if (!rc)
            reduce(rep[k], &s[k]);
    }
    if (!rc && vt_report_color_opt(rep[0], "diff", color))
        rc = VT_EXIT_BAD_INPUT;
    dsites_t sites[2] = { { NULL, 0 }, { NULL, 0 } };
    pair_t *pairs = NULL;
    size_t npairs = 0;
    if (!rc && (collect_sites(rep[0], &sites[0]) || collect_sites(rep[1], &sites[1]) ||
                !(pairs = match_sites(&sites[0], &sites[1], &npairs)))) {
        fprintf(stderr, "vramtrace: diff: out of memory\n");
        rc = VT_EXIT_BAD_INPUT;
    }
    if (!rc) {
        row_t rw[VT_MAX_TAGS + R_FIXED];
        int n = rows(rep[0], &s[0], &s[1], rw);
        if (as_json)
            json(stdout, argv + optind, s, rw, n, pairs, npairs);
        else {
            vt_fit_t fit;
            FILE *o = vt_fit_begin(&fit, stdout, wide ? 0 : VT_FIT_COLUMNS);
            int colored = vt_report_use_color(rep[0], stdout);
            text(o, colored, argv + optind, s, rw, n);
            sites_text(o, colored, pairs, npairs, (size_t)top, wide);
            vt_fit_end(&fit);
        }
        fflush(stdout);
    }
    free(pairs);
    sites_free(&sites[0]);
    sites_free(&sites[1]);
    vt_report_free(rep[0]);
    vt_report_free(rep[1]);
    return rc;
}
