/* External fragmentation of a device's address space: live device
 * allocations and VMM mappings sorted by address; holes are the gaps
 * between consecutive ones inside [lowest start, highest end), except gaps
 * larger than the device's total, which separate VA regions (span is the
 * sum of the regions). Computed
 * once per local maximum of tracked bytes (see live_remove in model.c), so
 * the figures describe the peak. Skipped (frag_skipped) above
 * VT_FRAG_MAX_LIVE live entries to bound time. With keep_layout the sorted
 * ranges are kept as the device's layout at peak (replacing the last). */
#include "model_internal.h"

#include <stdlib.h>

static int cmp_range(const void *x, const void *y)
{
    const vt_range_t *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static size_t collect(vt_model_t *m, const vt_map_t *map, int dev, int want_kind, vt_range_t *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < map->cap; i++) {
        if (!map->used[i])
            continue;
        const live_t *e = &m->live[map->vals[i]];
        if (e->dev != dev || e->kind != want_kind || e->space != VT_SPACE_DEVICE || !e->size)
            continue;
        /* a mapping's tag is its handle's */
        int8_t tag = e->kind == L_MAP && e->link != UINT32_MAX ? m->live[e->link].tag : e->tag;
        if (n < max)
            out[n] = (vt_range_t){ e->addr, e->size, tag, e->kind == L_MAP };
        n++;
    }
    return n;
}

int vt_m_frag_compute(vt_model_t *m, int dev)
{
    vt_dev_t *d = &m->p.devs[dev];
    d->frag_pending = 0;
    size_t total = m->by_ptr.count + m->by_map.count;
    if (total > VT_FRAG_MAX_LIVE) {
        d->frag_skipped = 1;
        d->frag_computed = 0;
        return 0;
    }
    vt_range_t *v = malloc((total ? total : 1) * sizeof *v);
    if (!v)
        return VT_E_NOMEM;
    size_t n = collect(m, &m->by_ptr, dev, L_ALLOC, v, total);
    n += collect(m, &m->by_map, dev, L_MAP, v + n, total - n);
    qsort(v, n, sizeof *v, cmp_range);
    uint64_t holes = 0, largest = 0, span = 0, start = n ? v[0].addr : 0, end = start;
    for (size_t i = 0; i < n; i++) {
        if (v[i].addr > end) {
            uint64_t h = v[i].addr - end;
            if (d->total && h > d->total) {
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
