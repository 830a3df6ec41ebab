/* What heaptrack users look for, per process: allocations never freed
 * (--leaks), allocations freed again (--churn: the temporaries a caching
 * allocator keeps from the driver, so they show only where the program
 * calls CUDA itself) and the allocation-size histogram (--histogram).
 * Text sections after the sites table and JSON members beside "sites";
 * both take the sites --filter keeps, and --top of them. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "json.h"
#include "report.h"
#include "sizes.h"

#define W 11   /* width of a size column, as in report_text.c */

static uint64_t succeeded(const vt_site_t *s) { return s->calls - s->failed; }

static void stack_lines(FILE *o, const vt_model_t *m, const vt_site_t *s, int width)
{
    vt_frame_t fr[VT_MAX_STACK_DEPTH];
    int n = vt_stacks_get(vt_model_stacks(m), s->stack, fr, VT_MAX_STACK_DEPTH), max = 12;
    vt_stacks_src(vt_model_stacks(m), fr, n > max ? max : n);
    if (!n)
        fprintf(o, "        (no stack recorded)\n");
    for (int i = 0; i < n && i < max; i++)
        vt_print_frame(o, "        ", i, &fr[i], width);
    if (n > max)
        fprintf(o, "        ... %d more frames\n", n - max);
}

/* The sites with something to show (live allocations or frees), in the
 * order of that measure, filtered; *n gets how many. */
static size_t *pick(const vt_report_t *r, const vt_model_t *m, int order, size_t *n)
{
    const vt_proc_t *p = vt_model_proc(m);
    size_t *rank = vt_sites_ordered(p, p->nsites, order), k = 0;
    for (size_t i = 0; rank && i < p->nsites; i++) {
        const vt_site_t *s = &p->sites[rank[i]];
        if ((order == VT_ORDER_LIVE ? s->live_allocs : s->frees) && vt_site_matches(m, s, r->opts.filter))
            rank[k++] = rank[i];
    }
    *n = k;
    return rank;
}

static size_t shown_of(const vt_report_t *r, size_t n)
{
    return r->opts.top > 0 && (size_t)r->opts.top < n ? (size_t)r->opts.top : n;
}

static void leaks_text(FILE *o, const vt_report_t *r, const vt_model_t *m, int width)
{
    const vt_proc_t *p = vt_model_proc(m);
    size_t n, shown;
    size_t *sel = pick(r, m, VT_ORDER_LIVE, &n);
    uint64_t bytes = 0, allocs = 0;
    char a[VT_SIZE_BUF], wb[32];
    for (size_t k = 0; sel && k < n; k++) {
        bytes += p->sites[sel[k]].live;
        allocs += p->sites[sel[k]].live_allocs;
    }
    char when[96], before[96];
    if (p->ended) {
        snprintf(when, sizeof when, "when the process %s", vt_end_how_words(p));
        snprintf(before, sizeof before, "the process %s", vt_end_how_words(p));
    } else {
        snprintf(when, sizeof when, "when the trace ends");
        snprintf(before, sizeof before, "the trace ends");
    }
    if (!n) {
        fprintf(o, "\nNever freed: nothing; every allocation%s was freed before %s.\n",
                r->opts.filter ? " of the matching sites" : "", before);
        free(sel);
        return;
    }
    fprintf(o, "\nNever freed: %" PRIu64 " allocation%s holding %s, live %s%s", allocs, allocs == 1 ? "" : "s",
            vt_fmt_bytes(a, bytes), when,
            p->ended ? "" : " (the process had not exited: not freed yet, not necessarily leaked)");
    fprintf(o, "%s\n", r->opts.filter ? ", from the matching sites" : "");
    shown = shown_of(r, n);
    for (size_t k = 0; k < shown; k++) {
        const vt_site_t *s = &p->sites[sel[k]];
        fprintf(o, "  %2zu. %*s  in %" PRIu64 " of %" PRIu64 " allocation%s  %s  %s\n", k + 1, W, vt_fmt_bytes(a, s->live),
                s->live_allocs, succeeded(s), succeeded(s) == 1 ? "" : "s",
                vt_text(vt_rules_tag_name(vt_model_rules(m), s->match.tag)), vt_site_where(s, wb));
        stack_lines(o, m, s, width);
    }
    if (shown < n)
        fprintf(o, "  ... %zu more sites (--top 0 shows all)\n", n - shown);
    free(sel);
}

static void churn_text(FILE *o, const vt_report_t *r, const vt_model_t *m, int width)
{
    const vt_proc_t *p = vt_model_proc(m);
    size_t n, shown;
    size_t *sel = pick(r, m, VT_ORDER_FREES, &n);
    uint64_t bytes = 0, frees = 0, temporary = 0;
    char a[VT_SIZE_BUF], wb[32];
    for (size_t k = 0; sel && k < n; k++) {
        bytes += p->sites[sel[k]].freed_bytes;
        frees += p->sites[sel[k]].frees;
        temporary += p->sites[sel[k]].temporary;
    }
    if (!n) {
        fprintf(o, "\nFreed again: none; no allocation%s was freed.\n", r->opts.filter ? " of the matching sites" : "");
        free(sel);
        return;
    }
    fprintf(o, "\nFreed again (churn): %" PRIu64 " allocation%s, %s in all, by the number freed%s\n", frees,
            frees == 1 ? "" : "s", vt_fmt_bytes(a, bytes), r->opts.filter ? ", from the matching sites" : "");
    fprintf(o, "  %" PRIu64 " of them temporary: freed with no other allocation or free in between\n", temporary);
    shown = shown_of(r, n);
    for (size_t k = 0; k < shown; k++) {
        const vt_site_t *s = &p->sites[sel[k]];
        fprintf(o, "  %2zu. %6" PRIu64 " of %" PRIu64 " freed (%" PRIu64 " temporary), %s  %s  %s\n", k + 1, s->frees,
                succeeded(s), s->temporary, vt_fmt_bytes(a, s->freed_bytes),
                vt_text(vt_rules_tag_name(vt_model_rules(m), s->match.tag)), vt_site_where(s, wb));
        stack_lines(o, m, s, width);
    }
    if (shown < n)
        fprintf(o, "  ... %zu more sites (--top 0 shows all)\n", n - shown);
    free(sel);
}

static void histogram_text(FILE *o, const vt_model_t *m)
{
    const vt_proc_t *p = vt_model_proc(m);
    int lo = 64, hi = -1;
    uint64_t most = 0;
    for (int b = 0; b < 64; b++) {
        if (!p->size_hist_count[b])
            continue;
        lo = lo < b ? lo : b;
        hi = b;
        most = p->size_hist_count[b] > most ? p->size_hist_count[b] : most;
    }
    if (hi < 0) {
        fprintf(o, "\nAllocation sizes: no allocation succeeded.\n");
        return;
    }
    fprintf(o, "\nAllocation sizes (successful requests that hold memory)\n");
    fprintf(o, "  %-*s %-*s %8s %*s\n", W + 1, "from", W + 1, "below", "count", W, "bytes");
    for (int b = lo; b <= hi; b++) {
        char a[VT_SIZE_BUF], c[VT_SIZE_BUF], d[VT_SIZE_BUF], bar[32];
        uint64_t n = p->size_hist_count[b];
        /* At least one mark for a bucket that is not empty. */
        size_t len = n ? (size_t)((n * 24 + most - 1) / most) : 0;
        memset(bar, '#', len);
        bar[len] = 0;
        fprintf(o, "  %*s %*s %8" PRIu64 " %*s%s%s\n", W + 1, vt_fmt_bytes(a, 1ull << b), W + 1,
                b < 63 ? vt_fmt_bytes(c, 1ull << (b + 1)) : "16.00 EiB", n, W, vt_fmt_bytes(d, p->size_hist_bytes[b]),
                len ? "  " : "", bar);
    }
}

void vt_report_text_heap(FILE *o, const vt_report_t *r, const vt_model_t *m)
{
    int width = r->opts.wide ? 0 : VT_FIT_COLUMNS;
    if (r->opts.leaks)
        leaks_text(o, r, m, width);
    if (r->opts.churn)
        churn_text(o, r, m, width);
    if (r->opts.histogram)
        histogram_text(o, m);
}

/* pos[site] is the site's index in the process's "sites" array, SIZE_MAX
 * for one --filter left out. */
static void site_refs(vt_json_t *j, const vt_report_t *r, const vt_model_t *m, const size_t *pos, int order)
{
    const vt_proc_t *p = vt_model_proc(m);
    size_t n;
    size_t *sel = pick(r, m, order, &n);
    vt_json_arr(j, order == VT_ORDER_LIVE ? "leaks" : "churn");
    for (size_t k = 0; sel && k < n; k++) {
        const vt_site_t *s = &p->sites[sel[k]];
        if (pos[sel[k]] == SIZE_MAX)
            continue;
        vt_json_obj(j, NULL);
        vt_json_u64(j, "site", pos[sel[k]]);
        vt_json_u64(j, "allocations", succeeded(s));
        if (order == VT_ORDER_LIVE) {
            vt_json_u64(j, "live_allocations", s->live_allocs);
            vt_json_u64(j, "live_bytes", s->live);
        } else {
            vt_json_u64(j, "freed", s->frees);
            vt_json_u64(j, "freed_bytes", s->freed_bytes);
            vt_json_u64(j, "temporary", s->temporary);
            vt_json_u64(j, "temporary_bytes", s->temporary_bytes);
        }
        vt_json_obj_end(j);
    }
    vt_json_arr_end(j);
    free(sel);
}

void vt_report_json_heap(vt_json_t *j, const vt_report_t *r, const vt_model_t *m, const size_t *pos)
{
    const vt_proc_t *p = vt_model_proc(m);
    if (r->opts.leaks && pos)
        site_refs(j, r, m, pos, VT_ORDER_LIVE);
    if (r->opts.churn && pos)
        site_refs(j, r, m, pos, VT_ORDER_FREES);
    if (!r->opts.histogram)
        return;
    vt_json_arr(j, "size_histogram");
    for (int b = 0; b < 64; b++) {
        if (!p->size_hist_count[b])
            continue;
        vt_json_obj(j, NULL);
        vt_json_u64(j, "min_bytes", 1ull << b);
        vt_json_u64(j, "max_bytes", b < 63 ? (1ull << (b + 1)) - 1 : UINT64_MAX);
        vt_json_u64(j, "count", p->size_hist_count[b]);
        vt_json_u64(j, "bytes", p->size_hist_bytes[b]);
        vt_json_obj_end(j);
    }
    vt_json_arr_end(j);
}
