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
 *  - pinned host and managed peaks summed; more VRAM needed (spill) summed.
 * Deltas are B - A, relative to A ("n/a" when A is 0).
 *
 * Exit status: 0 compared, 2 unusable input or bad usage.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "fit.h"
#include "json.h"
#include "report.h"
#include "sizes.h"

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
} side_t;

static void usage(FILE *f)
{
    fprintf(f, "usage: vramtrace diff [options] A B\n"
               "\n"
               "Compares two runs (each a TRACE or a DIR of traces): weights, KV, scratch and\n"
               "unknown at peak, context reserve, untracked memory, fragmentation, peak and\n"
               "headroom, with absolute and relative deltas (B - A).\n"
               "\n"
               "options:\n"
               "  --json          machine-readable output, schema vramtrace-diff/1 (docs/report.md)\n"
               "  --rules FILE    tagging rules for both runs (repeatable); --margin PCT likewise\n"
               "  --color WHEN    auto (default), always or never\n"
               "  --wide          lines as long as they come (default: they fit 80 columns)\n"
               "\n"
               "Exit status: 0 compared, 2 unusable input.\n");
}

static void reduce(const vt_report_t *r, side_t *s)
{
    memset(s, 0, sizeof *s);
    s->nproc = r->nin;
    for (int i = 0; i < r->nin; i++) {
        const vt_proc_t *p = vt_model_proc(r->in[i].model);
        s->spilled |= p->tip.valid;
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

static void text(FILE *o, int color, char **paths, const side_t *s, const row_t *rw, int n)
{
    const char *bold = color ? "\033[1m" : "", *off = color ? "\033[0m" : "";
    const char *up = color ? "\033[31m" : "", *down = color ? "\033[32m" : "";
    fprintf(o, "%sA%s: %s (%d process%s, %d GPU%s)%s\n", bold, off, paths[0], s[0].nproc, s[0].nproc == 1 ? "" : "es",
            s[0].ngpu, s[0].ngpu == 1 ? "" : "s", s[0].spilled ? ", SPILLED" : "");
    fprintf(o, "%sB%s: %s (%d process%s, %d GPU%s)%s\n\n", bold, off, paths[1], s[1].nproc, s[1].nproc == 1 ? "" : "es",
            s[1].ngpu, s[1].ngpu == 1 ? "" : "s", s[1].spilled ? ", SPILLED" : "");
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
}

static void json(FILE *o, char **paths, const side_t *s, const row_t *rw, int n)
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
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    char *rules[64];
    int nrules = 0, as_json = 0, wide = 0, c, rc = VT_EXIT_OK;
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
        case VT_OPT_RULES:
            if (nrules < 64)
                rules[nrules++] = optarg;
            break;
        case 'h': usage(stdout); return VT_EXIT_OK;
        default: usage(stderr); return VT_EXIT_BAD_INPUT;
        }
    }
    if (argc - optind != 2) {
        usage(stderr);
        return VT_EXIT_BAD_INPUT;
    }
    side_t s[2];
    for (int k = 0; k < 2 && !rc; k++) {
        rc = load(&rep[k], argv[optind + k], rules, nrules, margin);
        if (!rc)
            reduce(rep[k], &s[k]);
    }
    if (!rc && vt_report_color_opt(rep[0], "diff", color))
        rc = VT_EXIT_BAD_INPUT;
    if (!rc) {
        row_t rw[VT_MAX_TAGS + R_FIXED];
        int n = rows(rep[0], &s[0], &s[1], rw);
        if (as_json)
            json(stdout, argv + optind, s, rw, n);
        else {
            vt_fit_t fit;
            FILE *o = vt_fit_begin(&fit, stdout, wide ? 0 : VT_FIT_COLUMNS);
            text(o, vt_report_use_color(rep[0], stdout), argv + optind, s, rw, n);
            vt_fit_end(&fit);
        }
        fflush(stdout);
    }
    vt_report_free(rep[0]);
    vt_report_free(rep[1]);
    return rc;
}
