/* Spill bookkeeping: the tipping event (the first spill of any kind) and a
 * bounded summary of every later one; managed oversubscription checks.
 * Invariant: spill_count[k] counts every spill event of kind k, while only
 * the first VT_MAX_LATER_SPILLS after the tip are kept in detail. It calls
 * only model_devices.c (vt_m_view), so the event handlers that report
 * spills here are never called back. */
#include "model_internal.h"

const char *vt_spill_kind_name(int kind)
{
    static const char *const names[] = {
        [VT_SPILL_OOM] = "oom",
        [VT_SPILL_HOST_FALLBACK] = "host_fallback",
        [VT_SPILL_MANAGED_OVERSUB] = "managed_oversubscription",
        [VT_SPILL_OVER_CAPACITY] = "over_capacity",
        [VT_SPILL_GRAPH_LAUNCH] = "graph_launch",
    };
    _Static_assert(sizeof names / sizeof names[0] == VT_SPILL_KINDS, "one name per enum vt_spill_kind");
    return kind >= 0 && kind < VT_SPILL_KINDS ? names[kind] : "?";
}

void vt_m_spill(vt_model_t *m, int kind, const vt_event_view_t *v)
{
    vt_proc_t *p = &m->p;
    p->spill_count[kind]++;
    p->spills++;
    p->spill_bytes[kind] += v->bytes;
    if (!p->tip.valid) {
        p->tip = *v;
        p->tip_kind = kind;
        return;
    }
    if (p->nlater < VT_MAX_LATER_SPILLS) {
        vt_spill_brief_t *b = &p->later[p->nlater];
        b->kind = kind;
        b->time_ns = v->time_ns;
        b->bytes = v->bytes;
        b->api = v->api;
        b->tag = v->tag;
        b->device = v->device;
        b->result = v->result;
    }
    p->nlater++;
}

/* Device bytes plus managed bytes above a device's total means unified
 * memory pages must migrate. One spill per crossing: re-armed when the sum
 * drops back under the total. only_dev < 0 checks every device (a managed
 * allocation can land on any). The scan behind vt_m_check_oversub
 * (model_internal.h), which answers the nothing-managed case itself. */
void vt_m_oversub_scan(vt_model_t *m, const vt_event_t *ev, int tag, int only_dev)
{
    vt_proc_t *p = &m->p;
    for (int i = 0; i < p->ndevs; i++) {
        if (only_dev >= 0 && i != only_dev && p->managed.tracked == 0)
            continue;
        vt_dev_t *d = &p->devs[i];
        if (!d->total)
            continue;
        uint64_t sum = d->mem.tracked + p->managed.tracked;
        if (p->managed.tracked && sum > d->total) {
            if (sum - d->total > p->oversub_excess)
                p->oversub_excess = sum - d->total;
            if (!d->oversub_active) {
                vt_event_view_t v;
                d->oversub_active = 1;
                m->oversub_mask |= 1ull << i;
                vt_m_view(m, ev, tag, i, &v);
                vt_m_spill(m, VT_SPILL_MANAGED_OVERSUB, &v);
            }
        } else {
            d->oversub_active = 0;
            m->oversub_mask &= ~(1ull << i);
        }
    }
}
