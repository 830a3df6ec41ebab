/* `vramtrace replay --capacity SIZE [--reserve SIZE] TRACE|DIR...`: would
 * this run fit another card? The recorded device requests are replayed in
 * their recorded order (every process of a GPU, matched by UUID, on one
 * timeline) against CAPACITY - RESERVE, counting bytes: no placement is
 * modelled (no first-fit, rounding or fragmentation), which the output
 * says, so a real card can fail sooner, never later.
 *
 * A request's demand is what the GPU would hold with it: the tracked bytes
 * after a recorded success, or the tracked bytes plus the request for a
 * recorded failure (the program wanted it; it then took another path, which
 * the replay cannot know, and says so). The first request whose demand
 * exceeds the room is the first that would fail; the largest demand is how
 * much the run needs, and the excess is how much weights, KV, or the
 * context (KV + scratch, which grow with the context length) would have to
 * shrink, from their bytes at that moment.
 *
 * RESERVE defaults to the context reserve the trace recorded on that GPU
 * (the smallest any process saw). Exit status: 0 every GPU fits, 1 one
 * would not, 3 one cannot be told (the recorded run backed off after a
 * failed request: its full path is not in the trace), 2 unusable input or
 * bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "fit.h"
#include "report.h"
#include "sizes.h"

#define MAX_SLOTS 64

typedef struct moment {
    int valid;
    uint64_t demand, time_ns, bytes;   /* time: on the shared timeline */
    uint64_t by_tag[VT_MAX_TAGS];
    int input, tag, recorded_failure;
    uint16_t api;
    uint32_t stack;
} moment_t;

typedef struct gpu {
    uint8_t uuid[16];
    int have_uuid;
    char label[200];
    int nslot;
    int input[MAX_SLOTS], dev[MAX_SLOTS];
    uint64_t reserve;
    int have_reserve;
    moment_t first_fail, worst;
    uint64_t requests, recorded_failures;
} gpu_t;

typedef struct replay {
    uint64_t capacity, reserve;
    int reserve_set;
    gpu_t g[VT_MAX_GPUS];
    int ng;
    int wide, width;   /* --wide; the columns a frame may take (0: all) */
} replay_t;

static void usage(FILE *f)
{
    fprintf(f, "usage: vramtrace replay --capacity SIZE [--reserve SIZE] TRACE|DIR...\n"
               "\n"
               "Would this run fit a card of SIZE? Replays the recorded device requests in order\n"
               "against SIZE minus the context reserve, counting bytes (no placement or\n"
               "fragmentation is modelled, so a real card can fail sooner), names the first\n"
               "request that would fail with its tag and stack, and says how much the weights,\n"
               "the KV cache or the context would have to shrink to fit.\n"
               "\n"
               "  --capacity SIZE   the card: 16GiB, 24GB, 24576MiB (a unit is required;\n"
               "                    GB means GiB, B is bytes)\n"
               "  --reserve SIZE    CUDA context / driver reserve, less than the card\n"
               "                    (default: as recorded; 0 for none)\n"
               "  --rules FILE      tagging rules, as for report\n"
               "  --wide            lines as long as they come (default: they fit 80 columns)\n"
               "\n"
               "Exit status: 0 fits, 1 would not fit, 2 unusable input, 3 cannot tell (the\n"
               "recorded run took another path after a failed request).\n");
}

static gpu_t *gpu_for(replay_t *rp, vt_report_t *r, int input, int dev)
{
    const vt_dev_t *d = &vt_model_proc(r->in[input].model)->devs[dev];
    int known = d->have_info && vt_uuid_known(d->uuid);
    for (int i = 0; i < rp->ng; i++) {
        gpu_t *g = &rp->g[i];
        int match = known ? g->have_uuid && !memcmp(g->uuid, d->uuid, 16)
                          : !g->have_uuid && g->input[0] == input && g->dev[0] == dev;
        if (!match)
            continue;
        for (int k = 0; k < g->nslot; k++)
            if (g->input[k] == input && g->dev[k] == dev)
                return g;
        if (g->nslot < MAX_SLOTS) {
            g->input[g->nslot] = input;
            g->dev[g->nslot++] = dev;
        }
        return g;
    }
    if (rp->ng >= VT_MAX_GPUS)
        return NULL;
    gpu_t *g = &rp->g[rp->ng++];
    memset(g, 0, sizeof *g);
    g->have_uuid = known;
    memcpy(g->uuid, d->uuid, 16);
    if (d->name[0])
        snprintf(g->label, sizeof g->label, "GPU %d (%s)", d->ordinal, vt_text(d->name));
    else
        snprintf(g->label, sizeof g->label, "GPU %d", d->ordinal);
    g->input[0] = input;
    g->dev[0] = dev;
    g->nslot = 1;
    return g;
}

static void on_rewind(void *ctx)
{
    replay_t *rp = ctx;
    rp->ng = 0;
}

static void on_event(void *ctx, vt_report_t *r, int input, const vt_event_t *ev)
{
    replay_t *rp = ctx;
    const vt_api_info_t *info = vt_api_info(ev->api);
    if (!info || !(info->kind == VT_KIND_VMM_CREATE || (info->kind == VT_KIND_ALLOC && info->space == VT_SPACE_DEVICE)))
        return;
    const vt_model_t *m = r->in[input].model;
    int dev = vt_model_dev_index(m, ev->device < 0 ? 0 : ev->device);
    if (dev < 0)
        return;
    gpu_t *g = gpu_for(rp, r, input, dev);
    if (!g)
        return;
    moment_t mo = { 1 };
    for (int k = 0; k < g->nslot; k++) {
        const vt_dev_t *d = &vt_model_proc(r->in[g->input[k]].model)->devs[g->dev[k]];
        mo.demand += d->mem.tracked;
        for (int t = 0; t < VT_MAX_TAGS; t++)
            mo.by_tag[t] += d->mem.by_tag[t];
        if (d->have_info && (!g->have_reserve || vt_dev_reserve(d) < g->reserve)) {
            g->have_reserve = 1;
            g->reserve = vt_dev_reserve(d);
        }
    }
    /* A success has its site, whose tag ggml's mark may have decided; a
     * failed request has its stack's rules only. */
    const vt_proc_t *p = vt_model_proc(m);
    mo.tag = ev->result == 0 && p->last_alloc_site < p->nsites ? p->sites[p->last_alloc_site].match.tag
                                                               : vt_model_stack_tag(m, ev->stack);
    if (ev->result != 0) {
        mo.demand += ev->size;
        mo.by_tag[mo.tag] += ev->size;
        mo.recorded_failure = 1;
        g->recorded_failures++;
    }
    g->requests++;
    mo.time_ns = ev->time_ns > r->t0 ? ev->time_ns - r->t0 : 0;
    mo.bytes = ev->size;
    mo.api = ev->api;
    mo.stack = ev->stack;
    mo.input = input;
    uint64_t reserve = rp->reserve_set ? rp->reserve : g->reserve;
    uint64_t room = rp->capacity > reserve ? rp->capacity - reserve : 0;
    if (!g->first_fail.valid && mo.demand > room)
        g->first_fail = mo;
    if (!g->worst.valid || mo.demand > g->worst.demand)
        g->worst = mo;
}

static void shrink_line(FILE *o, const char *what, uint64_t have, uint64_t need)
{
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF];
    if (have >= need && have)
        fprintf(o, "    %-42s by %s: %.1f%% of its %s\n", what, vt_fmt_bytes(a, need), 100.0 * (double)need / (double)have,
                vt_fmt_bytes(b, have));
    else
        fprintf(o, "    %-42s not enough alone: it is only %s\n", what, vt_fmt_bytes(b, have));
}

/* @return 1 when a GPU does not fit, else 3 when one cannot be told, else 0. */
static int print(FILE *o, const vt_report_t *r, const replay_t *rp)
{
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF], c[VT_SIZE_BUF], t[VT_SIZE_BUF];
    int misfit = 0, unsure = 0;
    fprintf(o, "Replay of the recorded device requests against a %s card.\n", vt_fmt_bytes(a, rp->capacity));
    fprintf(o, "Bytes are counted, placement is not (no first-fit, rounding or fragmentation): a real card "
               "can fail sooner than this says, not later.\n");
    if (!rp->ng)
        fprintf(o, "\nNo device request in the trace%s.\n", r->nin == 1 ? "" : "s");
    for (int i = 0; i < rp->ng; i++) {
        const gpu_t *g = &rp->g[i];
        uint64_t reserve = rp->reserve_set ? rp->reserve : g->reserve;
        uint64_t room = rp->capacity > reserve ? rp->capacity - reserve : 0;
        fprintf(o, "\n%s: %" PRIu64 " request%s; %s for allocations (%s minus a %s reserve, %s).\n", g->label,
                g->requests, g->requests == 1 ? "" : "s", vt_fmt_bytes(a, room), vt_fmt_bytes(b, rp->capacity),
                vt_fmt_bytes(c, reserve), rp->reserve_set ? "--reserve" : "as recorded");
        const moment_t *w = &g->worst;
        if (!g->first_fail.valid && g->recorded_failures) {
            /* The recorded run backed off after its failures (fewer layers,
             * a smaller cache): what the full path would allocate next is
             * not in the trace, so "fits" would be a guess. */
            unsure = 1;
            fprintf(o, "  CANNOT TELL. %" PRIu64 " request%s failed when recorded and would succeed here, and the "
                       "recorded requests need at most %s (at %s), %s under the room; but after a failure the "
                       "program took another path (fewer layers, a smaller cache), and what the full path "
                       "would allocate instead is not in the trace. Record on a card of this size to be sure.\n",
                    g->recorded_failures, g->recorded_failures == 1 ? "" : "s", vt_fmt_bytes(a, w->demand),
                    vt_fmt_time(t, w->time_ns), vt_fmt_bytes(b, room - w->demand));
            continue;
        }
        if (!g->first_fail.valid) {
            fprintf(o, "  FITS: the run needs at most %s (at %s); %s to spare.\n", vt_fmt_bytes(a, w->demand),
                    vt_fmt_time(t, w->time_ns), vt_fmt_bytes(b, room - w->demand));
            continue;
        }
        misfit = 1;
        const moment_t *f = &g->first_fail;
        const vt_model_t *m = r->in[f->input].model;
        const vt_rules_t *rules = vt_model_rules(m);
        fprintf(o, "  DOES NOT FIT. First request that would fail: %s of %s for %s at %s%s,\n", vt_api_name(f->api),
                vt_fmt_bytes(a, f->bytes), vt_rules_tag_name(rules, f->tag), vt_fmt_time(t, f->time_ns),
                f->recorded_failure ? " (it failed when recorded too)" : "");
        fprintf(o, "  with %s already held: %s short.\n", vt_fmt_bytes(a, f->demand - f->bytes),
                vt_fmt_bytes(b, f->demand - room));
        vt_frame_t fr[VT_MAX_STACK_DEPTH];
        int n = vt_stacks_get(vt_model_stacks(m), f->stack, fr, VT_MAX_STACK_DEPTH);
        for (int k = 0; k < n; k++)
            vt_print_frame(o, "      ", k, &fr[k], rp->width);
        if (!n)
            fprintf(o, "      (no stack recorded)\n");
        uint64_t excess = w->demand - room;
        fprintf(o, "  The run needs at most %s (at %s):", vt_fmt_bytes(a, w->demand), vt_fmt_time(t, w->time_ns));
        for (int k = 0; k < vt_rules_tag_count(rules); k++)
            if (k < VT_TAG_BUILTIN_COUNT || w->by_tag[k])
                fprintf(o, "%s %s %s", k ? "," : "", vt_rules_tag_name(rules, k), vt_fmt_bytes(a, w->by_tag[k]));
        fprintf(o, ".\n  To fit, %s less is needed then; shrink one of:\n", vt_fmt_bytes(a, excess));
        shrink_line(o, "weights (fewer layers on the GPU, -ngl)", w->by_tag[VT_TAG_WEIGHTS], excess);
        shrink_line(o, "kv (a smaller or quantized KV cache)", w->by_tag[VT_TAG_KV], excess);
        shrink_line(o, "context (kv + scratch grow with the context)", w->by_tag[VT_TAG_KV] + w->by_tag[VT_TAG_SCRATCH],
                    excess);
        fprintf(o, "  or use a card of at least %s.\n", vt_fmt_bytes(a, w->demand + reserve));
        if (g->recorded_failures)
            fprintf(o, "  Note: %" PRIu64 " request%s failed when recorded; the program then took another path, "
                       "which a replay cannot follow: record on the card to be sure.\n",
                    g->recorded_failures, g->recorded_failures == 1 ? "" : "s");
    }
    return misfit ? 1 : unsure ? VT_EXIT_INCOMPLETE : 0;
}

int vt_cmd_replay(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "capacity", required_argument, NULL, 'C' },
        { "reserve", required_argument, NULL, 'R' },
        { "rules", required_argument, NULL, VT_OPT_RULES },
        { "wide", no_argument, NULL, 'w' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    replay_t *rp = calloc(1, sizeof *rp);
    vt_report_t *r = vt_report_new();
    int rc = VT_EXIT_OK, c, have_cap = 0;
    if (!rp || !r) {
        rc = VT_EXIT_BAD_INPUT;
        goto out;
    }
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'C':
        case 'R':
            switch (vt_parse_size(optarg, c == 'C' ? &rp->capacity : &rp->reserve)) {
            case 0:
                break;
            case VT_SIZE_NO_UNIT:
                fprintf(stderr, "vramtrace: replay: --%s %s: add a unit (%sGiB, %sMiB, %sB for bytes)\n",
                        c == 'C' ? "capacity" : "reserve", optarg, optarg, optarg, optarg);
                rc = VT_EXIT_BAD_INPUT;
                goto out;
            default:
                fprintf(stderr, "vramtrace: replay: --%s wants a size (24GiB, 512MiB, 4096B), got '%s'\n",
                        c == 'C' ? "capacity" : "reserve", optarg);
                rc = VT_EXIT_BAD_INPUT;
                goto out;
            }
            have_cap |= c == 'C';
            rp->reserve_set |= c == 'R';
            break;
        case 'w':
            rp->wide = 1;
            break;
        case VT_OPT_RULES:
            if ((rc = vt_report_opt(r, "replay", c, optarg)))
                goto out;
            break;
        case 'h':
            usage(stdout);
            goto out;
        default:
            usage(stderr);
            rc = VT_EXIT_BAD_INPUT;
            goto out;
        }
    }
    if (!have_cap || optind >= argc) {
        if (!have_cap)
            fprintf(stderr, "vramtrace: replay: --capacity is required\n");
        usage(stderr);
        rc = VT_EXIT_BAD_INPUT;
        goto out;
    }
    if (rp->capacity == 0) {
        fprintf(stderr, "vramtrace: replay: --capacity 0: a card needs some memory\n");
        rc = VT_EXIT_BAD_INPUT;
        goto out;
    }
    if (rp->reserve_set && rp->reserve >= rp->capacity) {
        char a[VT_SIZE_BUF], b[VT_SIZE_BUF];
        fprintf(stderr, "vramtrace: replay: --reserve %s leaves nothing of a %s card\n", vt_fmt_bytes(a, rp->reserve),
                vt_fmt_bytes(b, rp->capacity));
        rc = VT_EXIT_BAD_INPUT;
        goto out;
    }
    r->on_event = on_event;
    r->on_event_ctx = rp;
    r->on_rewind = on_rewind;
    if ((rc = vt_report_load(r, argv + optind, argc - optind)))
        goto out;
    vt_fit_t fit;
    rp->width = rp->wide ? 0 : VT_FIT_COLUMNS;
    rc = print(vt_fit_begin(&fit, stdout, rp->width), r, rp);
    vt_fit_end(&fit);
    fflush(stdout);
out:
    vt_report_free(r);
    free(rp);
    return rc;
}
