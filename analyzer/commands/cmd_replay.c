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
 *
 * A ggml program whose report has an offload estimate (placement.advice)
 * gets the same estimate for this card: vt_model_advise with total =
 * CAPACITY and the free memory at the lowest moved by what the replay's
 * room (CAPACITY - RESERVE) gains or loses against the recorded card's
 * (its total - the recorded reserve); the reserve, other processes and
 * untracked memory stay as recorded. On the recorded card it is the
 * report's estimate. With layers in host memory it also gives the smallest
 * card for all of them: the run's most + the reserve + the report's
 * "would need X more", counting bytes as the replay does (the bound), and
 * the smallest card on which the estimate, margin kept, puts them all.
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
               "the KV cache or the context would have to shrink to fit. For a ggml program\n"
               "(llama.cpp) it also estimates, as the report does, how many layers fit SIZE.\n"
               "\n"
               "  --capacity SIZE   the card: 16GiB, 24GB, 24576MiB (a unit is required;\n"
               "                    GB means GiB, B is bytes)\n"
               "  --reserve SIZE    CUDA context / driver reserve, less than the card\n"
               "                    (default: as recorded; 0 for none)\n"
               "  --margin PCT      the offload estimate's margin, as for report (default 15)\n"
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
    if (ev->flags & VT_EF_CAPTURED)
        return; /* a node of a CUDA graph: no memory was asked for then */
    if (ev->result != 0 && (ev->size == UINT64_MAX || !vt_result_out_of_memory(ev->result)))
        return; /* an impossible request (over 64 bits), or one refused for another reason than memory (a
                 * sticky error, no context): no demand to replay */
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

/* Sizes above this come only from a hostile trace or option: capped, so
 * the estimate's signed arithmetic cannot overflow. */
#define BIG (1ull << 62)

static uint64_t capped(uint64_t v) { return v < BIG ? v : BIG; }

static uint64_t sum_capped(uint64_t x, uint64_t y) { return capped(capped(x) + capped(y)); }

/* A process's free memory at the lowest on a card of `capacity` on GPU g,
 * where ad is its recorded estimate: the recorded free moved by what the
 * replay's room (capacity - reserve) gains or loses against the recorded
 * card's (its total - the recorded reserve). The reserve, other processes
 * and untracked memory stay as recorded; on the recorded card with the
 * recorded reserve it is the recorded free. Below 0 on a card smaller
 * than what the run used. */
static int64_t free_on(const replay_t *rp, const gpu_t *g, const struct vt_advice *ad, uint64_t capacity)
{
    uint64_t reserve = rp->reserve_set ? rp->reserve : g->reserve;
    uint64_t room = capped(capacity > reserve ? capacity - reserve : 0);
    uint64_t was = capped(ad->total > g->reserve ? ad->total - g->reserve : 0);
    return (int64_t)capped(ad->free_lowest) + (int64_t)room - (int64_t)was;
}

/* The report's estimate for the process in g's slot on a card of
 * `capacity`. @return 0 when it has none on this GPU. */
static int advise_on(const vt_report_t *r, const replay_t *rp, const gpu_t *g, int slot, uint64_t capacity,
                     struct vt_advice *out)
{
    const vt_model_t *m = r->in[g->input[slot]].model;
    const vt_proc_t *p = vt_model_proc(m);
    const struct vt_advice *ad = &p->placement.advice;
    if (!ad->known || ad->device != p->devs[g->dev[slot]].ordinal)
        return 0;
    return vt_model_advise(m, capped(capacity), free_on(rp, g, ad, capacity), out);
}

/* The smallest card on which the estimate puts every layer on the GPU
 * (room and layers only grow with the card); 0 when none does. */
static uint64_t card_for_all(const vt_report_t *r, const replay_t *rp, const gpu_t *g, int slot, uint32_t layers)
{
    struct vt_advice e;
    uint64_t lo = 1, hi = BIG;
    if (!advise_on(r, rp, g, slot, hi, &e) || e.gpu_layers < layers)
        return 0;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        advise_on(r, rp, g, slot, mid, &e);
        if (e.gpu_layers >= layers)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The offload estimate on this card for the ggml program in g's slot,
 * with its arithmetic (docs/report.md, "Offload estimate"), and with
 * layers in host memory the cards that would hold them all. */
static void print_layers(FILE *o, const vt_report_t *r, const replay_t *rp, const gpu_t *g, int slot)
{
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF], c[VT_SIZE_BUF], d[VT_SIZE_BUF], n[VT_SIZE_BUF];
    struct vt_advice e;
    if (!advise_on(r, rp, g, slot, rp->capacity, &e))
        return;
    const vt_model_t *m = r->in[g->input[slot]].model;
    const vt_proc_t *p = vt_model_proc(m);
    const vt_placement_t *pl = &p->placement;
    const struct vt_advice *rec = &pl->advice;
    /* Every layer on the GPU, experts of some blocks in host memory: the
     * estimate is of experts, as the report's. */
    int experts = e.of_experts;
    if (e.of_override)
        fprintf(o, "  Estimate for pid %" PRIu64 ": the host-memory weights of %u of the %u blocks an override keeps "
                   "there fit on this card.\n",
                p->pid, e.override_blocks_fit, e.override_n);
    else if (e.of_kv)
        fprintf(o, "  Estimate for pid %" PRIu64 ": the KV cache of the %u blocks with it in host memory (%s) %s on "
                   "this card%s.\n",
                p->pid, pl->kv_blocks_host, vt_fmt_bytes(a, pl->kv_host_of_gpu_blocks),
                e.kv_fits ? "fits" : "does not fit", e.kv_fits ? " (llama.cpp: without --no-kv-offload)" : "");
    else if (experts)
        fprintf(o, "  Estimate for pid %" PRIu64 ": the experts of %u of the %u blocks with experts in host memory fit "
                   "on this card (llama.cpp: --n-cpu-moe %u).\n",
                p->pid, e.expert_blocks_fit, pl->expert_blocks_host, pl->blocks - e.expert_blocks_fit);
    else
        fprintf(o, "  Estimate for pid %" PRIu64 ": %u of %u layers fit on this card (-ngl %u).\n", p->pid,
                e.gpu_layers, pl->layers_total, e.gpu_layers);
    int64_t was = (int64_t)capped(rec->free_lowest), now = free_on(rp, g, rec, rp->capacity);
    fprintf(o, "    GPU %d would have %s free at the lowest", e.device, vt_fmt_sbytes(a, now));
    if (now == was)
        fprintf(o, " (as recorded)");
    else
        fprintf(o, " (%s on the recorded %s card, %s %s room here)", vt_fmt_bytes(b, (uint64_t)was),
                vt_fmt_bytes(c, rec->total), vt_fmt_bytes(d, (uint64_t)(now > was ? now - was : was - now)),
                now > was ? "more" : "less");
    fprintf(o, "; the %g%% margin is %s", vt_model_margin(m), vt_fmt_bytes(a, e.margin));
    if (e.unmet)
        fprintf(o, ", and the failed request wanted %s", vt_fmt_bytes(b, e.unmet));
    if (e.room >= 0)
        fprintf(o, ": %s of room.\n", vt_fmt_bytes(c, (uint64_t)e.room));
    else
        fprintf(o, ": %s short.\n", vt_fmt_bytes(c, (uint64_t)-e.room));
    if (e.of_override) {
        uint64_t per = e.override_bytes / e.override_n;
        fprintf(o, "    A block's are about %s: floor(%s / %s), at most the %u = %u.\n", vt_fmt_bytes(a, per),
                vt_fmt_bytes(b, e.room > 0 ? (uint64_t)e.room : 0), vt_fmt_bytes(c, per), e.override_n,
                e.override_blocks_fit);
        return;
    }
    if (e.of_kv)
        return;
    if (experts) {
        fprintf(o, "    A block's experts are about %s: floor(%s / %s), at most the %u in host memory = %u.\n",
                vt_fmt_bytes(a, pl->experts_host / pl->expert_blocks_host),
                vt_fmt_bytes(b, e.room > 0 ? (uint64_t)e.room : 0), vt_fmt_bytes(c, pl->experts_host / pl->expert_blocks_host),
                pl->expert_blocks_host, e.expert_blocks_fit);
        return;
    }
    uint32_t host_blocks = pl->blocks - pl->blocks_gpu;
    uint64_t output = pl->output_layer == 0 ? pl->output_bytes : 0;
    fprintf(o, "    A layer is about %s of weights%s", vt_fmt_bytes(a, e.per_layer - e.per_layer_kv),
            e.experts_kept ? " besides its experts (kept in host memory)" : "");
    if (e.per_layer_kv)
        fprintf(o, " + %s of KV cache", vt_fmt_bytes(b, e.per_layer_kv));
    else if (e.kv_kept)
        fprintf(o, " (its KV cache kept in host memory)");
    fprintf(o, ": %u on the GPU now ", pl->layers_gpu);
    if (e.room < 0)
        fprintf(o, "- ceil(%s short / %s)", vt_fmt_bytes(a, (uint64_t)-e.room), vt_fmt_bytes(b, e.per_layer));
    else if (output && (uint64_t)e.room < output)
        fprintf(o, "(the output layer, %s, comes first and does not fit)", vt_fmt_bytes(a, output));
    else if (output)
        fprintf(o, "+ 1 (the output layer, %s, first) + floor(%s left / %s), at most the %u in host memory",
                vt_fmt_bytes(a, output), vt_fmt_bytes(b, (uint64_t)e.room - output), vt_fmt_bytes(c, e.per_layer),
                host_blocks);
    else
        fprintf(o, "+ floor(%s / %s), at most the %u in host memory", vt_fmt_bytes(b, (uint64_t)e.room),
                vt_fmt_bytes(c, e.per_layer), host_blocks);
    fprintf(o, " = %u.\n", e.gpu_layers);
    if (pl->layers_gpu >= pl->layers_total)
        return;
    /* The report's "would need X more" on top of what this replay counts
     * the run to need: the smallest card that can hold every layer, by
     * bytes. The estimate keeps its margin above that. */
    uint64_t reserve = rp->reserve_set ? rp->reserve : g->reserve;
    uint64_t bound = sum_capped(sum_capped(g->worst.demand, reserve), e.need_all);
    fprintf(o, "  All %u layers on the GPU would need %s more (as the report says): a card of at least %s counting "
               "bytes (the %s the run needs + the %s reserve + %s), no less",
            pl->layers_total, vt_fmt_bytes(n, e.need_all), vt_fmt_bytes(b, bound), vt_fmt_bytes(c, g->worst.demand),
            vt_fmt_bytes(d, reserve), n);
    uint64_t all = card_for_all(r, rp, g, slot, pl->layers_total);
    if (all)
        fprintf(o, "; the estimate, which keeps the %g%% margin, puts them all on a card of at least %s.\n",
                vt_model_margin(m), vt_fmt_bytes(b, all));
    else
        fprintf(o, "; with the %g%% margin the estimate puts them all on no card.\n", vt_model_margin(m));
}

/* One GPU's verdict. @return 1 when it does not fit, else 3 when it cannot
 * be told, else 0. */
static int print_gpu(FILE *o, const vt_report_t *r, const replay_t *rp, const gpu_t *g)
{
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF], c[VT_SIZE_BUF], t[VT_SIZE_BUF];
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
        fprintf(o, "  CANNOT TELL. %" PRIu64 " request%s failed when recorded and would succeed here, and the "
                   "recorded requests need at most %s (at %s), %s under the room; but after a failure the "
                   "program took another path (fewer layers, a smaller cache), and what the full path "
                   "would allocate instead is not in the trace. Record on a card of this size to be sure.\n",
                g->recorded_failures, g->recorded_failures == 1 ? "" : "s", vt_fmt_bytes(a, w->demand),
                vt_fmt_time(t, w->time_ns), vt_fmt_bytes(b, room - w->demand));
        return VT_EXIT_INCOMPLETE;
    }
    if (!g->first_fail.valid) {
        fprintf(o, "  FITS: the run needs at most %s (at %s); %s to spare.\n", vt_fmt_bytes(a, w->demand),
                vt_fmt_time(t, w->time_ns), vt_fmt_bytes(b, room - w->demand));
        return 0;
    }
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
    return 1;
}

/* @return 1 when a GPU does not fit, else 3 when one cannot be told, else 0. */
static int print(FILE *o, const vt_report_t *r, const replay_t *rp)
{
    char a[VT_SIZE_BUF];
    int misfit = 0, unsure = 0;
    fprintf(o, "Replay of the recorded device requests against a %s card.\n", vt_fmt_bytes(a, rp->capacity));
    fprintf(o, "Bytes are counted, placement is not (no first-fit, rounding or fragmentation): a real card "
               "can fail sooner than this says, not later.\n");
    if (!rp->ng)
        fprintf(o, "\nNo device request in the trace%s.\n", r->nin == 1 ? "" : "s");
    for (int i = 0; i < rp->ng; i++) {
        const gpu_t *g = &rp->g[i];
        int rc = print_gpu(o, r, rp, g);
        misfit |= rc == 1;
        unsure |= rc == VT_EXIT_INCOMPLETE;
        for (int k = 0; k < g->nslot; k++)
            print_layers(o, r, rp, g, k);
    }
    return misfit ? 1 : unsure ? VT_EXIT_INCOMPLETE : 0;
}

int vt_cmd_replay(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "capacity", required_argument, NULL, 'C' },
        { "reserve", required_argument, NULL, 'R' },
        { "rules", required_argument, NULL, VT_OPT_RULES },
        { "margin", required_argument, NULL, VT_OPT_MARGIN },
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
        case VT_OPT_MARGIN:
            if ((rc = vt_report_opt(r, "replay", c, optarg)))
                goto out;
            break;
        case 'h':
            usage(stdout);
            goto out;
        default:
            rc = vt_usage_error("replay", NULL);
            goto out;
        }
    }
    if (!have_cap || optind >= argc) {
        rc = vt_usage_error("replay", have_cap ? "no TRACE or DIR given" : "--capacity SIZE is required");
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
