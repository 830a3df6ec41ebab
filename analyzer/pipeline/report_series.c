/* The time-series recorder (contract: report_series.h). It watches the
 * model's counters after each event rather than decoding the event again,
 * so the series always agree with the report's own numbers. */
#include "report_series.h"

#include <stdlib.h>
#include <string.h>

/* First bucket width; doubling (O(buckets) each time) reaches an hour-long
 * trace in about 30 steps, and a short one keeps its detail. */
#define FIRST_WIDTH 64ull

static void merge(vt_bucket_t *dst, const vt_bucket_t *a, const vt_bucket_t *b)
{
    if (!a->used) {
        *dst = *b;
        return;
    }
    if (!b->used) {
        *dst = *a;
        return;
    }
    vt_bucket_t out = *a;
    if (b->max_total > a->max_total) {
        out.max_total = b->max_total;
        out.max_t = b->max_t;
        memcpy(out.max_tag, b->max_tag, sizeof out.max_tag);
    }
    out.last_t = b->last_t;
    out.last_total = b->last_total;
    memcpy(out.last_tag, b->last_tag, sizeof out.last_tag);
    if (b->have_free && (!a->have_free || b->min_free < a->min_free)) {
        out.have_free = 1;
        out.min_free = b->min_free;
        out.free_t = b->free_t;
    }
    *dst = out;
}

/* The bucket for time t, widening the buckets as needed. The bucket found
 * is remembered with its start (hot, hot_lo): most events land in the
 * bucket of the one before, and the check for that is a subtraction where
 * the general path divides. Only this function moves buckets, and it
 * re-aims hot every time, so hot never points at a stale bucket. */
static vt_bucket_t *bucket_slow(vt_series_t *s, uint64_t t, int max, int *nomem)
{
    if (!s->b) {
        s->b = calloc((size_t)max, sizeof *s->b);
        if (!s->b) {
            *nomem = 1;
            return NULL;
        }
        s->max = max;
        s->width = FIRST_WIDTH;
    }
    while (t / s->width >= (uint64_t)s->max) {
        int half = (s->nb + 1) / 2;
        for (int i = 0; i < half; i++) {
            vt_bucket_t m;
            vt_bucket_t empty = { 0 };
            merge(&m, &s->b[2 * i], 2 * i + 1 < s->nb ? &s->b[2 * i + 1] : &empty);
            s->b[i] = m;
        }
        memset(s->b + half, 0, (size_t)(s->max - half) * sizeof *s->b);
        s->nb = half;
        s->width *= 2;
    }
    int i = (int)(t / s->width);
    if (i + 1 > s->nb)
        s->nb = i + 1;
    s->hot = &s->b[i];
    s->hot_lo = (uint64_t)i * s->width;
    return s->hot;
}

/* The hot bucket holds t only if t / width is its index, so no widening is
 * due and nb already counts it: the same bucket bucket_slow would return. */
static inline vt_bucket_t *bucket_at(vt_series_t *s, uint64_t t, int max, int *nomem)
{
    if (s->hot && t - s->hot_lo < s->width)
        return s->hot;
    return bucket_slow(s, t, max, nomem);
}

/* Only the rules' tags are copied (the 4 built-ins, not VT_MAX_TAGS, unless
 * rules add some), in groups of 4 (set->ntags is rounded up; VT_MAX_TAGS is
 * a multiple of 4): account() never gives bytes to a tag past the rules', so
 * those entries are 0 in the model and in the calloc'd buckets alike. */
static inline void copy_tags(uint64_t *dst, const uint64_t *src, int ntags)
{
    memcpy(dst, src, 4 * sizeof *dst);
    for (int k = 4; k < ntags; k += 4)
        memcpy(dst + k, src + k, 4 * sizeof *dst);
}

/* Runs for every series after every event: inlined, since a call per series
 * per event was a third of the recorder's instructions. */
static inline __attribute__((always_inline)) void record(vt_series_set_t *set, vt_series_t *s, uint64_t t,
                                                         const vt_tagged_peak_t *tp)
{
    if (tp->tracked == s->cur && (s->seen || !tp->tracked))
        return;   /* unchanged, or nothing yet */
    vt_bucket_t *b = bucket_at(s, t, set->max_buckets, &set->nomem);
    if (!b)
        return;
    s->seen = 1;
    s->cur = tp->tracked;
    if (!b->used || tp->tracked > b->max_total) {
        b->max_total = tp->tracked;
        b->max_t = t;
        copy_tags(b->max_tag, tp->by_tag, set->ntags);
    }
    b->used = 1;
    b->last_t = t;
    b->last_total = tp->tracked;
    copy_tags(b->last_tag, tp->by_tag, set->ntags);
}

static void free_sample(vt_series_set_t *set, vt_series_t *s, uint64_t t, uint64_t freeb, const vt_tagged_peak_t *tp)
{
    vt_bucket_t *b = bucket_at(s, t, set->max_buckets, &set->nomem);
    if (!b)
        return;
    if (!b->used) {
        /* a bucket with only a sample still carries the memory state */
        b->used = 1;
        b->max_t = b->last_t = t;
        b->max_total = b->last_total = tp->tracked;
        copy_tags(b->max_tag, tp->by_tag, set->ntags);
        copy_tags(b->last_tag, tp->by_tag, set->ntags);
    }
    if (!b->have_free || freeb < b->min_free) {
        b->have_free = 1;
        b->min_free = freeb;
        b->free_t = t;
    }
}

static void instant(vt_proc_series_t *ps, int *nomem, const vt_instant_t *in)
{
    if (ps->ninst >= VT_SERIES_MAX_INSTANTS) {
        ps->inst_dropped++;
        return;
    }
    if (ps->ninst == ps->inst_cap) {
        size_t ncap = ps->inst_cap ? ps->inst_cap * 2 : 64;
        vt_instant_t *v = realloc(ps->inst, ncap * sizeof *v);
        if (!v) {
            *nomem = 1;
            return;
        }
        ps->inst = v;
        ps->inst_cap = ncap;
    }
    ps->inst[ps->ninst++] = *in;
}

/* Inputs are listed only inside vt_report_load, so the per-input state is
 * made on the first event; each input's model and process are kept there. */
static int set_start(vt_series_set_t *set, vt_report_t *r)
{
    set->p = calloc((size_t)r->nin, sizeof *set->p);
    if (!set->p) {
        set->nomem = 1;
        return -1;
    }
    set->nproc = r->nin;
    int ntags = vt_rules_tag_count(r->rules);
    _Static_assert(VT_MAX_TAGS % 4 == 0 && VT_TAG_BUILTIN_COUNT <= 4, "copy_tags copies groups of 4");
    set->ntags = ntags <= 4 ? 4 : ntags > VT_MAX_TAGS ? VT_MAX_TAGS : (ntags + 3) & ~3;
    for (int i = 0; i < r->nin; i++) {
        set->p[i].model = r->in[i].model;
        set->p[i].proc = vt_model_proc(r->in[i].model);
    }
    return 0;
}

void vt_series_on_event(vt_series_set_t *set, vt_report_t *r, int input, const vt_event_t *ev)
{
    if (!set->p && set_start(set, r))
        return;
    if (input < 0 || input >= set->nproc)
        return;
    vt_proc_series_t *ps = &set->p[input];
    const vt_model_t *m = ps->model;
    const vt_proc_t *p = ps->proc;
    uint64_t t = ev->time_ns > p->mono_start_ns ? ev->time_ns - p->mono_start_ns : 0;
    for (int i = 0; i < p->ndevs; i++)
        record(set, &ps->dev[i], t, &p->devs[i].mem);
    record(set, &ps->host, t, &p->host);
    record(set, &ps->managed, t, &p->managed);

    const vt_api_info_t *info = vt_api_info(ev->api);
    if (!info)
        return;
    if (info->kind == VT_KIND_MEMINFO && ev->result == 0) {
        int di = vt_model_dev_index(m, ev->device < 0 ? 0 : ev->device);
        if (di >= 0)
            free_sample(set, &ps->dev[di], t, ev->size, &p->devs[di].mem);
    }
    unsigned kind = vt_event_kind(info, ev->aux);
    int is_alloc = kind == VT_KIND_ALLOC || kind == VT_KIND_VMM_CREATE;
    if (is_alloc && ev->result != 0 && (info->kind == VT_KIND_VMM_CREATE || info->space == VT_SPACE_DEVICE)) {
        vt_instant_t in = { .time_ns = t, .bytes = ev->size, .stack = ev->stack, .result = ev->result,
                            .tid = ev->tid, .api = ev->api, .kind = VT_INSTANT_FAILURE, .spill = -1,
                            .device = (int16_t)(ev->device < 0 ? 0 : ev->device) };
        in.tag = (int8_t)vt_model_stack_tag(m, ev->stack);
        instant(ps, &set->nomem, &in);
    }
    uint64_t spills = p->spills;
    if (spills > ps->spills_seen) {
        const vt_spill_brief_t *b = p->nlater && p->nlater <= VT_MAX_LATER_SPILLS ? &p->later[p->nlater - 1] : NULL;
        vt_instant_t in = { .time_ns = t, .bytes = ev->size, .stack = ev->stack, .result = ev->result,
                            .tid = ev->tid, .api = ev->api, .tag = VT_TAG_UNKNOWN, .kind = VT_INSTANT_SPILL,
                            .spill = -1, .device = -1 };
        if (spills == 1 && p->tip.valid) {
            in.tag = (int8_t)p->tip.tag;
            in.spill = (int8_t)p->tip_kind;
            in.device = (int16_t)p->tip.device;
        } else if (b && b->time_ns == t) {
            in.tag = (int8_t)b->tag;
            in.spill = (int8_t)b->kind;
            in.device = (int16_t)b->device;
        }
        ps->spills_seen = spills;
        instant(ps, &set->nomem, &in);
    }
}

vt_series_set_t *vt_series_attach(vt_report_t *r, int max_buckets)
{
    vt_series_set_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->max_buckets = max_buckets < 2 ? 2 : max_buckets;
    r->series = s;
    return s;
}

static void series_free(vt_series_t *s) { free(s->b); }

void vt_series_rewind(vt_series_set_t *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nproc; i++) {
        for (int d = 0; d < VT_MAX_DEVICES; d++)
            series_free(&s->p[i].dev[d]);
        series_free(&s->p[i].host);
        series_free(&s->p[i].managed);
        free(s->p[i].inst);
    }
    free(s->p);
    s->p = NULL;
    s->nproc = 0;
    s->nomem = 0;
}

void vt_series_free(vt_series_set_t *s)
{
    vt_series_rewind(s);
    free(s);
}

void vt_series_points(const vt_series_t *s, uint64_t end_ns, vt_point_fn fn, void *ctx)
{
    const vt_bucket_t *last = NULL;
    for (int i = 0; i < s->nb; i++) {
        const vt_bucket_t *b = &s->b[i];
        if (!b->used)
            continue;
        fn(ctx, b->max_t, b->max_total, b->max_tag);
        if (b->last_t != b->max_t)
            fn(ctx, b->last_t, b->last_total, b->last_tag);
        last = b;
    }
    if (last && end_ns > last->last_t)
        fn(ctx, end_ns, last->last_total, last->last_tag);
}

uint64_t vt_proc_end_ns(const vt_proc_t *p)
{
    uint64_t last = p->last_time_ns > p->mono_start_ns ? p->last_time_ns - p->mono_start_ns : 0;
    return p->ended && p->end_time_ns > last ? p->end_time_ns : last;
}
