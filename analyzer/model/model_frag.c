/* External fragmentation of a device's address space: live device
 * allocations and VMM mappings sorted by address; holes are the gaps
 * between consecutive ones inside [lowest start, highest end), except gaps
 * larger than the device's total, which separate VA regions (span is the
 * sum of the regions). Skipped (frag_skipped) above VT_FRAG_MAX_LIVE live
 * entries to bound time. With keep_layout the sorted ranges are kept as the
 * device's layout at peak.
 *
 * What is measured: the state just before the first device decrease after
 * the device's last peak (the peak state, plus any mapping made since), or
 * the state at the end when no decrease followed it.
 *
 * How, without O(live) work per peak: a run whose peak creeps up (a KV
 * cache growing, scratch freed between steps) makes a new "snapshot point"
 * at almost every event, and measuring each one is O(n^2). So a point is
 * only marked: from then on, every change to the device's ranges is logged
 * (add or remove, with the range). The log is dropped when a newer peak
 * supersedes the point, and the point is measured at the end, as the
 * ranges live then with the log undone (for each address, the first logged
 * change says what it held at the point); a view before the end
 * (vt_model_view) measures it the same way and keeps the log, so the
 * point is measured again when more has been fed. The log is bounded: when it
 * outgrows twice the live entries (+ a constant), the point is measured
 * right away and the log freed, so memory stays bounded by live entries
 * and the cost of measuring is amortized over the logged changes. The
 * figures are exactly those of measuring at the point. */
#include "model_internal.h"
#include "sort.h"

#include <stdlib.h>
#include <string.h>

#define LOG_SLACK 4096   /* entries a log may hold beyond twice the live ones */

static int cmp_range(const void *x, const void *y)
{
    const vt_range_t *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* A live entry counts as a range of device dev: the one test collect() and
 * the log share, so both see the same set. */
static int is_range(const live_t *e, int dev)
{
    return e->dev == dev && e->size && e->space == VT_SPACE_DEVICE &&
           (e->kind == L_ALLOC || e->kind == L_MAP);
}

static vt_range_t range_of(const vt_model_t *m, const live_t *e)
{
    /* a mapping's tag is its handle's */
    int8_t tag = e->kind == L_MAP && e->link != UINT32_MAX ? m->live[e->link].tag : e->tag;
    return (vt_range_t){ e->addr, e->size, tag, e->kind == L_MAP };
}

static size_t collect(vt_model_t *m, const vt_map_t *map, int dev, vt_range_t *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < map->cap; i++) {
        if (!map->slots[i].tag)
            continue;
        const live_t *e = &m->live[map->slots[i].val];
        if (!is_range(e, dev))
            continue;
        if (n < max)
            out[n] = range_of(m, e);
        n++;
    }
    return n;
}

static size_t live_entries(const vt_model_t *m)
{
    return m->by_ptr.count + m->by_map.count;
}

static void log_clear(vt_frag_log_t *lg)
{
    free(lg->ops);
    memset(lg, 0, sizeof *lg);
}

/* Turns the ranges live now (v[0..n)) into those live at the log's point:
 * an address whose first logged change was a removal held that range; one
 * whose first change was an addition held nothing. @return the new count
 * (v has room for n + lg->n), or VT_E_NOMEM. */
static long undo_log(vt_range_t *v, size_t n, const vt_frag_log_t *lg)
{
    vt_map_t first[2];   /* [vmm] address -> index of its first logged op */
    vt_map_init(&first[0]);
    vt_map_init(&first[1]);
    long rc = 0;
    uint32_t idx;
    for (size_t i = 0; i < lg->n && !rc; i++) {
        vt_map_t *f = &first[lg->ops[i].r.vmm];
        if (!vt_map_get(f, lg->ops[i].r.addr, &idx) && vt_map_put(f, lg->ops[i].r.addr, (uint32_t)i))
            rc = VT_E_NOMEM;
    }
    size_t k = 0;
    if (!rc) {
        for (size_t i = 0; i < n; i++)
            if (!vt_map_get(&first[v[i].vmm], v[i].addr, &idx))
                v[k++] = v[i];
        for (size_t i = 0; i < lg->n; i++)
            if (!lg->ops[i].add && vt_map_get(&first[lg->ops[i].r.vmm], lg->ops[i].r.addr, &idx) && idx == i)
                v[k++] = lg->ops[i].r;
        rc = (long)k;
    }
    vt_map_free(&first[0]);
    vt_map_free(&first[1]);
    return rc;
}

/* The gaps between v[0..n) (sorted by address); @return the span. */
static uint64_t holes_in(const vt_range_t *v, size_t n, uint64_t dev_total, uint64_t *holes_out, uint64_t *largest_out)
{
    uint64_t holes = 0, largest = 0, span = 0, start = n ? v[0].addr : 0, end = start;
    for (size_t i = 0; i < n; i++) {
        if (v[i].addr > end) {
            uint64_t h = v[i].addr - end;
            if (dev_total && h > dev_total) {
                /* A gap larger than the card cannot be free device memory:
                 * the driver put the next allocation in another VA region
                 * (cudaMalloc heap vs a VMM reservation). New region. */
                span += end - start;
                start = v[i].addr;
            } else {
                holes += h;
                if (h > largest)
                    largest = h;
            }
        }
        if (v[i].addr + v[i].size > end)
            end = v[i].addr + v[i].size;
    }
    span += end - start;
    *holes_out = holes;
    *largest_out = largest;
    return span;
}

/* Measures device dev: as it is now (lg NULL), or as it was at lg's point. */
static int measure(vt_model_t *m, int dev, const vt_frag_log_t *lg)
{
    vt_dev_t *d = &m->p.devs[dev];
    size_t total = live_entries(m);
    if ((lg ? lg->live_at_point : total) > VT_FRAG_MAX_LIVE) {
        d->frag_skipped = 1;
        d->frag_computed = 0;
        return 0;
    }
    size_t extra = lg ? lg->n : 0;
    vt_range_t *v = malloc((total + extra ? total + extra : 1) * sizeof *v);
    if (!v)
        return VT_E_NOMEM;
    size_t n = collect(m, &m->by_ptr, dev, v, total);
    n += collect(m, &m->by_map, dev, v + n, total - n);
    if (extra) {
        long k = undo_log(v, n, lg);
        if (k < 0) {
            free(v);
            return (int)k;
        }
        n = (size_t)k;
    }
    vt_sort(v, n, sizeof *v, cmp_range);
    uint64_t holes, largest, span = holes_in(v, n, d->total, &holes, &largest);
    d->frag_computed = 1;
    d->frag_skipped = 0;
    d->frag_live_allocs = n;
    d->frag_span = span;
    d->frag_holes = holes;
    d->frag_largest_hole = largest;
    if (m->keep_layout) {
        free(d->layout);
        d->layout = v;
        d->nlayout = n;
        return 0;
    }
    free(v);
    return 0;
}

int vt_m_frag_at_failure(vt_model_t *m, int dev, vt_holes_t *out)
{
    memset(out, 0, sizeof *out);
    size_t total = live_entries(m);
    if (total > VT_FRAG_MAX_LIVE)
        return 0;
    vt_range_t *v = malloc((total ? total : 1) * sizeof *v);
    if (!v)
        return VT_E_NOMEM;
    size_t n = collect(m, &m->by_ptr, dev, v, total);
    n += collect(m, &m->by_map, dev, v + n, total - n);
    vt_sort(v, n, sizeof *v, cmp_range);
    holes_in(v, n, m->p.devs[dev].total, &out->bytes, &out->largest);
    out->ranges = n;
    out->measured = 1;
    free(v);
    return 0;
}

static int log_op(vt_model_t *m, const live_t *e, int add)
{
    vt_frag_log_t *lg = &m->flog[e->dev];
    if (m->p.devs[e->dev].frag_pending) {
        /* a newer peak: this point will never be the one reported */
        log_clear(lg);
        return 0;
    }
    if (lg->n == lg->cap) {
        size_t ncap = lg->cap ? lg->cap * 2 : 64;
        frag_op_t *ops = realloc(lg->ops, ncap * sizeof *ops);
        if (!ops)
            return VT_E_NOMEM;
        lg->ops = ops;
        lg->cap = ncap;
    }
    lg->ops[lg->n++] = (frag_op_t){ range_of(m, e), (uint8_t)add };
    if (lg->n > 2 * live_entries(m) + LOG_SLACK) {
        /* Measure the point now rather than let the log grow with the
         * run: this costs O(live + log), paid for by the log's entries. */
        int rc = measure(m, e->dev, lg);
        log_clear(lg);
        return rc;
    }
    return 0;
}

int vt_m_frag_note_remove(vt_model_t *m, const live_t *e)
{
    if (e->dev < 0)
        return 0;
    vt_dev_t *d = &m->p.devs[e->dev];
    vt_frag_log_t *lg = &m->flog[e->dev];
    if (d->frag_pending && ((e->kind == L_ALLOC && e->space == VT_SPACE_DEVICE) || e->kind == L_HANDLE ||
                            e->kind == L_MAP)) {
        /* The first decrease after the peak: the state now is the peak
         * state. Mark it; measured later (see the header). */
        d->frag_pending = 0;
        log_clear(lg);
        lg->active = 1;
        lg->live_at_point = live_entries(m);
    }
    return lg->active && is_range(e, e->dev) ? log_op(m, e, 0) : 0;
}

int vt_m_frag_note_added(vt_model_t *m, const live_t *e)
{
    if (e->dev < 0 || !m->flog[e->dev].active || !is_range(e, e->dev))
        return 0;
    return log_op(m, e, 1);
}

int vt_m_frag_view(vt_model_t *m)
{
    /* The pending point and the log stay: measured here as the end would
     * measure them, and again (from the same state, or a later one's)
     * when more is fed; a later measurement overwrites every figure. */
    int rc = 0;
    for (int i = 0; i < m->p.ndevs; i++) {
        vt_frag_log_t *lg = &m->flog[i];
        int r = 0;
        if (m->p.devs[i].frag_pending)
            r = measure(m, i, NULL);
        else if (lg->active)
            r = measure(m, i, lg);
        if (r && !rc)
            rc = r;
    }
    return rc;
}

void vt_m_frag_free(vt_model_t *m)
{
    for (int i = 0; i < VT_MAX_DEVICES; i++)
        log_clear(&m->flog[i]);
}
