/* The live table: every allocation, registration, VMM handle, VA range and
 * mapping the model holds live, in live[] with one map per kind
 * (model_internal.h has the entry, its invariant and the VMM lifetime).
 * Owns charging and releasing: an entry is charged once when it goes in
 * (vt_m_live_insert) and uncharged exactly that when it goes out
 * (vt_m_live_remove), to its space's tagged bytes and peak, its site's
 * bytes, its device's VA, VMM, rounding and fallback counters, the device
 * hook and the fragmentation log (model_frag.c). Promises: the peak of a
 * space is taken from the state after an increase, and a site's bytes at
 * that peak are kept lazily (site_change). Decides nothing about what an
 * event means: the event handlers (model_events.c) do. */
#include "model_internal.h"

#include "grow.h"

#include "sort.h"

#include <stdlib.h>
#include <string.h>

/* Sites remember their bytes at their space's peak lazily: when a site
 * changes after the latest peak, its bytes before the change are what it
 * held at that peak (nothing changed in between). */
/* tp is the site's space's peak: a live entry's site has the entry's space
 * and device (vt_m_site_for's key), so account passes the entry's. */
static void site_change(vt_model_t *m, uint32_t si, int sign, int64_t delta, const vt_tagged_peak_t *tp)
{
    if (si == UINT32_MAX)
        return;
    vt_site_t *s = &m->p.sites[si];
    if (tp && tp->have_peak && tp->peak_seq >= s->changed_seq)
        s->at_peak = s->live;
    s->live += (uint64_t)delta; /* modulo 2^64: hostile sizes must not overflow a signed add */
    s->changed_seq = m->seq;
    if (sign > 0) {
        s->live_allocs++;
    } else {
        s->live_allocs--;
        s->frees++;
        s->freed_bytes += (uint64_t)-delta;
    }
    if (s->live > s->max_live)
        s->max_live = s->live;
}

static int tp_update_peak(vt_model_t *m, vt_tagged_peak_t *tp, uint64_t t)
{
    if (tp->have_peak && tp->tracked <= tp->peak_bytes)
        return 0;
    tp->have_peak = 1;
    tp->peak_bytes = tp->tracked;
    tp->peak_time_ns = vt_m_rel(m, t);
    tp->peak_seq = m->seq;
    memcpy(tp->peak_by_tag, tp->by_tag, sizeof tp->peak_by_tag);
    return 1;
}

/* ---- the live table ---- */

static int live_new(vt_model_t *m, uint32_t *out)
{
    if (m->nfree_slots) {
        *out = m->free_slots[--m->nfree_slots];
        return 0;
    }
    if (vt_grow((void **)&m->live, &m->live_cap, m->nlive + 1, sizeof *m->live, 1024))
        return VT_E_NOMEM;
    *out = (uint32_t)m->nlive++;
    return 0;
}

static int live_free_slot(vt_model_t *m, uint32_t i)
{
    if (vt_grow((void **)&m->free_slots, &m->free_cap, m->nfree_slots + 1, sizeof *m->free_slots, 1024))
        return VT_E_NOMEM;
    m->free_slots[m->nfree_slots++] = i;
    return 0;
}

/* Charges (sign +1) or releases (-1) one live entry everywhere it counts.
 * This and live_drop run for every allocation and free; they are forced
 * inline (gcc would not: each has several callers) so the common path does
 * not save and restore registers three calls deep: ~13 fewer instructions
 * per event. */
__attribute__((always_inline)) static inline void account(vt_model_t *m, const live_t *e, int sign, uint64_t t)
{
    int64_t sz = sign * (int64_t)e->size;
    vt_dev_t *d = e->dev >= 0 ? &m->p.devs[e->dev] : NULL;
    if (e->kind == L_VA) {
        if (d) {
            d->va_reserved += (uint64_t)sz;
            if (d->va_reserved > d->max_va_reserved)
                d->max_va_reserved = d->va_reserved;
        }
        return;
    }
    if (e->kind == L_MAP) {
        if (d) {
            d->va_mapped += (uint64_t)sz;
            if (d->va_mapped > d->max_va_mapped)
                d->max_va_mapped = d->va_mapped;
        }
        return;
    }
    vt_tagged_peak_t *tp = vt_m_space_peak(m, e->space, e->dev);
    site_change(m, e->site, sign, sz, tp);
    if (!tp)
        return;
    tp->tracked += (uint64_t)sz;
    tp->by_tag[e->tag] += (uint64_t)sz;
    if (e->fallback) {
        m->p.fallback_live += (uint64_t)sz;
        if (m->p.fallback_live > m->p.fallback_peak)
            m->p.fallback_peak = m->p.fallback_live;
    }
    if (e->kind == L_REGISTER)
        m->p.host_registered += (uint64_t)sz;
    if (d && e->space == VT_SPACE_DEVICE) {
        if (e->kind == L_HANDLE)
            d->vmm_physical += (uint64_t)sz;
        if (e->reserved > e->size) {
            d->rounding_waste += (uint64_t)(sign * (int64_t)(e->reserved - e->size));
            d->rounding_allocs += (uint64_t)(int64_t)sign;
        }
    }
    if (sign > 0 && tp_update_peak(m, tp, t) && d && e->space == VT_SPACE_DEVICE) {
        d->peak_va_reserved = d->va_reserved;
        d->peak_va_mapped = d->va_mapped;
        d->peak_vmm_physical = d->vmm_physical;
        d->peak_rounding_waste = d->rounding_waste;
        d->frag_pending = 1;
        d->pool_slack_at_peak = d->pool_slack;
        d->have_pool_slack_at_peak = d->npools > 0;
        if (d->have_free) {
            int64_t est = vt_m_free_est(d);
            d->free_at_peak = est > 0 ? (uint64_t)est : 0;
            d->have_free_at_peak = 1;
        }
    }
    if (d && e->space == VT_SPACE_DEVICE && m->hook &&
        (sign > 0 ? d->mem.tracked >= m->hook_floor[e->dev] : !(m->hook_increases_only >> e->dev & 1)) &&
        m->hook(m->hook_ctx, m, e->dev, t))
        m->hook_increases_only |= 1ull << e->dev;
}

/* ---- each device's live allocations, once a teardown needs them ---- */

static int is_device_alloc(const live_t *e)
{
    return e->kind == L_ALLOC && e->space == VT_SPACE_DEVICE && e->dev >= 0 && e->dev < VT_MAX_DEVICES;
}

static int key_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Drops the addresses no longer live on di and the repeats. The next
 * compaction waits until the list has doubled: O(1) per allocation. */
static void dev_keys_compact(vt_model_t *m, int di)
{
    vt_dev_keys_t *k = &m->dev_keys[di];
    vt_sort(k->keys, k->n, sizeof *k->keys, key_cmp);
    size_t kept = 0;
    for (size_t i = 0; i < k->n; i++) {
        uint32_t li;
        if ((kept && k->keys[kept - 1] == k->keys[i]) || !vt_map_get(&m->by_ptr, k->keys[i], &li) ||
            !is_device_alloc(&m->live[li]) || m->live[li].dev != di)
            continue;
        k->keys[kept++] = k->keys[i];
    }
    k->n = kept;
    k->compact_at = 2 * kept + 1024;
}

static int dev_keys_add(vt_model_t *m, int di, uint64_t key)
{
    vt_dev_keys_t *k = &m->dev_keys[di];
    if (k->n >= k->compact_at)
        dev_keys_compact(m, di);
    if (vt_grow((void **)&k->keys, &k->cap, k->n + 1, sizeof *k->keys, 64))
        return VT_E_NOMEM;
    k->keys[k->n++] = key;
    return 0;
}

int vt_m_live_on_device(vt_model_t *m, int di, vt_dev_keys_t **out)
{
    if (!m->dev_keys) {
        m->dev_keys = calloc(VT_MAX_DEVICES, sizeof *m->dev_keys);
        if (!m->dev_keys)
            return VT_E_NOMEM;
        for (size_t i = 0; i < m->by_ptr.cap; i++) {
            if (!m->by_ptr.slots[i].tag)
                continue;
            const live_t *e = &m->live[m->by_ptr.slots[i].val];
            if (is_device_alloc(e) && dev_keys_add(m, e->dev, e->addr))
                return VT_E_NOMEM;
        }
    }
    dev_keys_compact(m, di);
    *out = &m->dev_keys[di];
    return 0;
}

void vt_m_live_dev_keys_free(vt_model_t *m)
{
    if (!m->dev_keys)
        return;
    for (int i = 0; i < VT_MAX_DEVICES; i++)
        free(m->dev_keys[i].keys);
    free(m->dev_keys);
    m->dev_keys = NULL;
}

/* e->addr must be absent from its map: both callers have just removed any
 * entry there (an implicit free), so the map skips its probe for one. hole
 * is where the caller's probe found it absent (vt_map_find_hole, nothing
 * put or deleted since), or SIZE_MAX; map is vt_m_map_of(m, e->kind).
 * Forced inline, though its callers are in model_events.c: the plain
 * declaration in model_internal.h makes this the external definition, and
 * the LTO build of vramtrace inlines it into both callers. Left to gcc's
 * heuristics it stayed a call, ~0.5 % more instructions per event. */
__attribute__((always_inline)) inline int vt_m_live_insert(vt_model_t *m, vt_map_t *map, const live_t *e, uint64_t t, size_t hole)
{
    uint32_t i;
    if (live_new(m, &i))
        return VT_E_NOMEM;
    m->live[i] = *e;
    if (vt_map_put_hole(map, hole, e->addr, i)) {
        live_free_slot(m, i);
        return VT_E_NOMEM;
    }
    account(m, &m->live[i], +1, t);
    if (__builtin_expect(m->dev_keys != NULL, 0) && is_device_alloc(e) && dev_keys_add(m, e->dev, e->addr))
        return VT_E_NOMEM;
    return vt_m_frag_added(m, &m->live[i]);
}

/* Uncharges live entry i (already out of its map), recycles its slot and
 * adds to *phys the device bytes this gave back to the driver. */
__attribute__((always_inline)) static inline int live_drop(vt_model_t *m, uint32_t i, uint64_t t, uint64_t *phys)
{
    /* In place: neither account nor the hook it calls changes m->live. */
    const live_t *e = &m->live[i];
    account(m, e, -1, t);
    if (e->dev >= 0 && ((e->kind == L_ALLOC && e->space == VT_SPACE_DEVICE) || e->kind == L_HANDLE))
        *phys += e->size;
    return live_free_slot(m, i);
}

/* model_internal.h has the contract. */
int vt_m_live_remove(vt_model_t *m, int kind, uint64_t key, uint64_t t, live_t *out, uint64_t *phys)
{
    if (phys)
        *phys = 0;
    vt_map_t *map = vt_m_map_of(m, kind);
    size_t slot = vt_map_find(map, key);
    if (slot == SIZE_MAX)
        return 0;
    return vt_m_live_remove_slot(m, map, slot, t, out, phys);
}

/* vt_m_live_remove for the slot a probe of map just found. */
int vt_m_live_remove_slot(vt_model_t *m, vt_map_t *map, size_t slot, uint64_t t, live_t *out, uint64_t *phys)
{
    uint64_t freed = 0;
    if (phys)
        *phys = 0;
    uint32_t i = map->slots[slot].val;
    live_t e = m->live[i];
    if (out)
        *out = e;
    if (e.kind == L_HANDLE && e.link) {
        vt_map_del_slot(map, slot);
        m->live[i].released = 1;
        return 1;
    }
    /* The state before the first decrease after a peak is the peak state:
     * model_frag.c marks it before e leaves its map. It reads the maps but
     * never changes them, so slot still holds key. */
    int frc = vt_m_frag_before_remove(m, &e);
    vt_map_del_slot(map, slot);
    if (e.kind == L_ALLOC) {
        uint32_t r = m->recent_next++ % VT_RECENT_FREES;
        m->recent_frees[r].addr = e.addr, m->recent_frees[r].time_ns = t;
        if (__builtin_expect(m->placement != NULL, 0))
            vt_m_placement_memory_freed(m, e.addr, t);
    }
    int rc = live_drop(m, i, t, &freed);
    if (frc)
        rc = frc;
    if (e.kind == L_MAP && e.link != UINT32_MAX) {
        live_t *h = &m->live[e.link];
        if (h->link)
            h->link--;
        if (!h->link && h->released && live_drop(m, e.link, t, &freed))
            rc = VT_E_NOMEM;
    }
    if (phys)
        *phys = freed;
    return rc ? rc : 1;
}
