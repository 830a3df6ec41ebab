/* cmd_export.c: `vramtrace export --format perfetto|folded [--by peak|total]
 * TRACE|DIR... [-o FILE]`: the report's numbers in formats other tools
 * read (output/perfetto.c, output/export_folded.c).
 *
 * Exit status: 0 written, 2 unusable input or bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "export.h"
#include "grow.h"
#include "json.h"
#include "report_series.h"
#include "sizes.h"

#define EXPORT_BUCKETS 5000   /* up to 10000 counter samples per track */

/* ---- allocation slices (export.h): the on_event observer ---- */

static void lanes_free(vt_slice_proc_t *sp)
{
    for (int t = 0; t < VT_TRACKS; t++)
        free(sp->lanes[t].free);
    for (int k = 0; k < 3; k++)
        vt_map_free(&sp->live[k]);
    free(sp->v);
}

static void slices_reset(void *ctx)
{
    vt_slices_t *s = ctx;
    for (int i = 0; s->p && i < s->nproc; i++)
        lanes_free(&s->p[i]);
    free(s->p);
    s->p = NULL;
    s->nproc = 0;
    s->total = 0;
}

/* The lowest lane with nothing live. */
static uint32_t lane_take(vt_lanes_t *l)
{
    if (!l->nfree)
        return l->used++;
    uint32_t *h = l->free, top = h[0], x = h[--l->nfree];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= l->nfree)
            break;
        if (c + 1 < l->nfree && h[c + 1] < h[c])
            c++;
        if (h[c] >= x)
            break;
        h[i] = h[c];
        i = c;
    }
    if (l->nfree)
        h[i] = x;
    return top;
}

static int lane_give(vt_lanes_t *l, uint32_t lane)
{
    if (vt_grow((void **)&l->free, &l->cap, l->nfree + 1, sizeof *l->free, 16))
        return VT_E_NOMEM;
    size_t i = l->nfree++;
    while (i && l->free[(i - 1) / 2] > lane) {
        l->free[i] = l->free[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    l->free[i] = lane;
    return 0;
}

/* Ends the slice live at key in map `which`, if one is. */
static int slice_close(vt_slice_proc_t *sp, int which, uint64_t key, uint64_t t)
{
    uint32_t idx;
    if (!vt_map_del(&sp->live[which], key, &idx))
        return 0;
    vt_slice_t *sl = &sp->v[idx];
    sl->end_ns = t > sl->start_ns ? t : sl->start_ns;
    sl->open = 0;
    return lane_give(&sp->lanes[sl->track], sl->lane);
}

static void slices_event(void *ctx, vt_report_t *r, int input, const vt_event_t *ev)
{
    vt_slices_t *s = ctx;
    const vt_api_info_t *info = vt_api_info(ev->api);
    if (s->nomem || !s->limit || !info || ev->result != 0 || input < 0 || (ev->flags & VT_EF_CAPTURED))
        return; /* captured into a CUDA graph: nothing was allocated or freed */
    int which, opens;
    switch (info->kind) {
    case VT_KIND_ALLOC: which = 0, opens = 1; break;
    case VT_KIND_FREE: which = 0, opens = 0; break;
    case VT_KIND_VMM_CREATE: which = 1, opens = 1; break;
    case VT_KIND_VMM_RELEASE: which = 1, opens = 0; break;
    case VT_KIND_REGISTER: which = 2, opens = 1; break;
    case VT_KIND_UNREGISTER: which = 2, opens = 0; break;
    default: return;
    }
    if (!s->p) {
        if (!(s->p = calloc((size_t)r->nin, sizeof *s->p))) {
            s->nomem = 1;
            return;
        }
        s->nproc = r->nin;
        for (int i = 0; i < r->nin; i++)
            for (int k = 0; k < 3; k++)
                vt_map_init(&s->p[i].live[k]);
    }
    if (input >= s->nproc)
        return;
    vt_slice_proc_t *sp = &s->p[input];
    const vt_model_t *m = r->in[input].model;
    const vt_proc_t *p = vt_model_proc(m);
    uint64_t t = ev->time_ns > p->mono_start_ns ? ev->time_ns - p->mono_start_ns : 0;
    /* An allocation at an address still live ended the old one (the
     * model's implicit free). */
    if (slice_close(sp, which, ev->ptr, t)) {
        s->nomem = 1;
        return;
    }
    if (!opens || (which == 0 && !ev->ptr) || p->last_alloc_site >= p->nsites)
        return;
    if (s->total >= s->limit) {
        sp->left_out++;
        return;
    }
    const vt_site_t *site = &p->sites[p->last_alloc_site];
    int track = site->space == VT_SPACE_HOST ? VT_TRACK_HOST : site->space == VT_SPACE_MANAGED ? VT_TRACK_MANAGED : -1;
    if (track < 0) {
        int di = vt_model_dev_index(m, site->device);
        if (di < 0)
            return;
        track = VT_TRACK_GPU0 + di;
    }
    if (vt_grow((void **)&sp->v, &sp->cap, sp->n + 1, sizeof *sp->v, 256) ||
        vt_map_put(&sp->live[which], ev->ptr, (uint32_t)sp->n)) {
        s->nomem = 1;
        return;
    }
    sp->v[sp->n] = (vt_slice_t){ .start_ns = t, .end_ns = t, .bytes = ev->size, .site = p->last_alloc_site,
                                 .lane = lane_take(&sp->lanes[track]), .api = ev->api,
                                 .track = (uint8_t)track, .open = 1 };
    sp->n++;
    s->total++;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: vramtrace export --format perfetto|folded [options] TRACE|DIR...\n"
               "\n"
               "  --format perfetto  Chrome trace-event JSON for ui.perfetto.dev and\n"
               "                     chrome://tracing: memory counters per GPU and tag, driver\n"
               "                     free memory, pinned host and managed memory, failures and\n"
               "                     spill events with stacks, a slice per allocation (its\n"
               "                     lifetime) in lanes per GPU, the allocation that tipped the\n"
               "                     run into spill on a track on top\n"
               "  --format folded    folded stacks (`outer;...;inner bytes`) of device\n"
               "                     allocations for flamegraph.pl, inferno and speedscope\n"
               "  --by peak|total    folded weight: bytes live at the GPU's peak (default; the\n"
               "                     lines sum to the peak) or total bytes allocated\n"
               "  --slices N         perfetto: at most N allocation slices (default 200000,\n"
               "                     0 = none; at most 1000000); the rest are counted in a\n"
               "                     process label\n"
               "  -o, --output FILE  write to FILE (default stdout)\n"
               "  --rules FILE       tagging rules, as for report; --margin PCT likewise\n"
               "\n"
               "Exit status: 0 written, 2 unusable input.\n");
}

int vt_cmd_export(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "format", required_argument, NULL, 'F' },
        { "by", required_argument, NULL, 'b' },
        { "output", required_argument, NULL, 'o' },
        { "slices", required_argument, NULL, 's' },
        { "margin", required_argument, NULL, VT_OPT_MARGIN },
        { "rules", required_argument, NULL, VT_OPT_RULES },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    vt_report_t *r = vt_report_new();
    if (!r)
        return VT_EXIT_BAD_INPUT;
    const char *format = NULL, *out = NULL;
    int by_total = 0, rc = VT_EXIT_OK, c;
    vt_series_set_t *set = NULL;
    vt_slices_t slices = { .limit = VT_SLICES_DEFAULT };
    char *end;
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
        switch (c) {
        case 'F':
            format = optarg;
            break;
        case 'b':
            if (strcmp(optarg, "peak") && strcmp(optarg, "total")) {
                fprintf(stderr, "vramtrace: export: --by wants peak or total, got '%s'\n", optarg);
                rc = VT_EXIT_BAD_INPUT;
                goto out;
            }
            by_total = !strcmp(optarg, "total");
            break;
        case 'o':
            out = optarg;
            break;
        case 's':
            errno = 0;
            slices.limit = strtoul(optarg, &end, 10);
            if (end == optarg || *end || errno || optarg[0] == '-' || slices.limit > VT_SLICES_MAX) {
                fprintf(stderr, "vramtrace: export: --slices wants a count up to %d, got '%s'\n", VT_SLICES_MAX, optarg);
                rc = VT_EXIT_BAD_INPUT;
                goto out;
            }
            break;
        case VT_OPT_MARGIN:
        case VT_OPT_RULES:
            if ((rc = vt_report_opt(r, "export", c, optarg)))
                goto out;
            break;
        case 'h':
            usage(stdout);
            goto out;
        default:
            rc = vt_usage_error("export", NULL);
            goto out;
        }
    }
    int perf = format && !strcmp(format, "perfetto"), folded = format && !strcmp(format, "folded");
    if ((!perf && !folded) || optind >= argc) {
        if (format && !perf && !folded)
            rc = vt_usage_error("export", "unknown --format '%s' (perfetto or folded)", format);
        else if (!format)
            rc = vt_usage_error("export", "--format perfetto or --format folded is required");
        else
            rc = vt_usage_error("export", "no TRACE or DIR given");
        goto out;
    }
    if (perf && !(set = vt_series_attach(r, EXPORT_BUCKETS))) {
        rc = VT_EXIT_BAD_INPUT;
        goto out;
    }
    if (perf) {
        r->on_event = slices_event;
        r->on_event_ctx = &slices;
        r->on_rewind = slices_reset;
    }
    if ((rc = vt_report_load(r, argv + optind, argc - optind)))
        goto out;
    if ((set && set->nomem) || slices.nomem) {
        fprintf(stderr, "vramtrace: export: out of memory\n");
        rc = VT_EXIT_BAD_INPUT;
        goto out;
    }
    FILE *f = out && strcmp(out, "-") ? fopen(out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "vramtrace: %s: %s\n", out, strerror(errno));
        rc = VT_EXIT_BAD_INPUT;
        goto out;
    }
    if (perf)
        vt_export_perfetto(f, r, set, &slices);
    else
        vt_export_folded(f, r, by_total);
    int bad = ferror(f) | (f != stdout ? fclose(f) != 0 : fflush(f) != 0);
    if (bad) {
        fprintf(stderr, "vramtrace: %s: write failed\n", out ? out : "stdout");
        rc = VT_EXIT_BAD_INPUT;
    }
out:
    slices_reset(&slices);
    vt_series_free(set);
    vt_report_free(r);
    return rc;
}
