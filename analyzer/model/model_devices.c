/* Devices: each GPU the process used (proc.devs), what the driver said of
 * it, and what the model estimates of its free memory. Owns the device
 * table (a device is added on its first DEVICE record or event, up to
 * VT_MAX_DEVICES), the DEVICE record, the shim's samples of free memory
 * (MEMINFO; those llama.cpp's --fit made are counted) and of pool usage
 * (POOL_USAGE), and the event views that carry a device's state (vt_m_view). Promises: free memory is the driver's last
 * word minus what this process allocated since (vt_m_free_est); a sample
 * updates the lowest free, the free at the peak, a failure's verdict and
 * the margin crossing from the driver's word (an allocation updates the
 * same from the estimate, in model_events.c). Calls nothing else in the
 * model, so the files that judge events (model_events.c, model_spill.c)
 * may all call it. */
#include "model_internal.h"

#include "grow.h"

#include <string.h>

int vt_model_dev_index(const vt_model_t *m, int ordinal)
{
    for (int i = 0; i < m->p.ndevs; i++)
        if (m->p.devs[i].ordinal == ordinal)
            return i;
    return -1;
}

/* A device-space event without a device (-1) is charged to ordinal 0, the
 * runtime's default device. */
int vt_m_dev_for(vt_model_t *m, int ordinal)
{
    if (ordinal < 0)
        ordinal = 0;
    int i = vt_model_dev_index(m, ordinal);
    if (i >= 0 || m->p.ndevs >= VT_MAX_DEVICES)
        return i;
    size_t cap = (size_t)m->p.devs_cap;
    if (vt_grow((void **)&m->p.devs, &cap, (size_t)m->p.ndevs + 1, sizeof *m->p.devs, 1))
        return -1;   /* out of memory: the event is charged nowhere, as past VT_MAX_DEVICES */
    m->p.devs_cap = (int)cap;
    vt_dev_t *d = &m->p.devs[m->p.ndevs];
    memset(d, 0, sizeof *d);
    d->ordinal = ordinal;
    return m->p.ndevs++;
}

void vt_m_view(vt_model_t *m, const vt_event_t *ev, int tag, int dev, vt_event_view_t *v)
{
    if (dev >= 0) {
        vt_m_view_dev(m, ev, tag, &m->p.devs[dev], v);
        return;
    }
    vt_m_view_event(m, ev, tag, v);
    v->device = ev->device;
    v->dev_tracked = 0;
    memset(v->dev_by_tag, 0, sizeof v->dev_by_tag);
    v->have_free = 0;
    v->last_free = 0;
    v->free_est = 0;
}

void vt_m_dev_sample(vt_model_t *m, int di, const vt_event_t *ev)
{
    vt_dev_t *d = &m->p.devs[di];
    uint64_t freeb = ev->size, t = vt_m_rel(m, ev->time_ns);
    if (!d->total && ev->aux)
        d->total = ev->aux;
    /* What this sample says beyond the estimate: free memory the process's
     * own allocations since the last report do not explain (another
     * process, or the driver). */
    int64_t expected = d->have_free ? vt_m_free_est(d) : (int64_t)freeb;
    uint64_t unexplained = expected > (int64_t)freeb ? (uint64_t)(expected - (int64_t)freeb) : 0;
    d->have_free = 1;
    d->last_free = freeb;
    d->last_free_time_ns = t;
    d->tracked_at_sample = d->mem.tracked;
    if (!d->have_min || freeb < d->min_free) {
        d->have_min = 1;
        d->min_free = freeb;
        d->min_free_time_ns = t;
        d->min_free_estimated = 0;
    }
    if ((ev->flags & VT_EF_AT_PEAK) && d->mem.have_peak && d->mem.tracked == d->mem.peak_bytes) {
        d->free_at_peak = freeb;
        d->have_free_at_peak = 1;
    }
    if ((ev->flags & VT_EF_AFTER_FAILURE) && d->pend_fail_active) {
        /* The driver's word right after the failure beats our estimate. */
        int judged = freeb >= d->pend_fail_size;
        if (judged && !d->pend_fail_counted) {
            d->failed_with_free++;
            if (!d->first_failed_with_free.valid) {
                d->first_failed_with_free = d->pend_fail_view;
                d->gun_holes = d->pend_fail_holes;
            }
        } else if (!judged && d->pend_fail_counted) {
            d->failed_with_free--;
            if (d->first_failed_with_free.time_ns == d->pend_fail_view.time_ns &&
                d->first_failed_with_free.bytes == d->pend_fail_view.bytes) {
                d->first_failed_with_free.valid = 0;
                memset(&d->gun_holes, 0, sizeof d->gun_holes);
            }
        }
        /* The tipping event's "free then" should be the driver's word too. */
        vt_event_view_t *tip = &m->p.tip;
        if (tip->valid && m->p.tip_kind == VT_SPILL_OOM && tip->time_ns == d->pend_fail_view.time_ns &&
            tip->device == d->ordinal && tip->bytes == d->pend_fail_size) {
            tip->last_free = freeb;
            tip->free_est = (int64_t)freeb;
        }
        d->pend_fail_active = 0;
    }
    if ((ev->flags & VT_EF_AFTER_FAILURE) && d->pend_launch_active) {
        /* The same for a failed graph launch: its "free then" is the
         * driver's word right after it, the graph pool's growth included. */
        vt_event_view_t *tip = &m->p.tip;
        if (tip->valid && m->p.tip_kind == VT_SPILL_GRAPH_LAUNCH && tip->time_ns == d->pend_launch_time_ns &&
            tip->device == d->ordinal) {
            tip->last_free = freeb;
            tip->free_est = (int64_t)freeb;
        }
        d->pend_launch_active = 0;
    }
    double margin = m->margin_frac * (double)d->total;
    if (d->total && !d->below_margin.valid && (double)freeb < margin) {
        /* The allocation after which free was below: the latest one here,
         * unless nothing was allocated, or free memory was still above the
         * margin after it and this sample finds less than this process's
         * own bytes explain: then the card filled from outside (another
         * process, or the driver), and the moment is this sample's. */
        /* Below 64 MiB the difference may be the driver's rounding of this
         * process's own requests: not called outside. */
        int outside = unexplained >= (64ull << 20) && d->last_alloc.valid &&
                      (double)d->last_alloc.free_after >= margin;
        if (d->last_alloc.valid && !outside) {
            d->below_margin = d->last_alloc;
        } else {
            vt_m_view(m, ev, VT_TAG_UNKNOWN, di, &d->below_margin);
            d->below_margin_outside = outside ? unexplained : 0;
        }
        d->below_margin.free_after = freeb;
    }
}

/* The shim reports each pool's reserved and used bytes as two events in a
 * row; slack is recomputed from the latest pair of every pool. */
void vt_m_dev_pool_usage(vt_model_t *m, int di, const vt_event_t *ev)
{
    vt_dev_t *d = &m->p.devs[di];
    if (ev->aux != VT_POOL_ATTR_RESERVED_CURRENT && ev->aux != VT_POOL_ATTR_USED_CURRENT)
        return;
    uint32_t i = 0;
    while (i < d->npools && d->pools[i].handle != ev->ptr)
        i++;
    if (i == d->npools) {
        if (d->npools == VT_MAX_POOLS) {
            d->pools_untracked++;
            return;
        }
        d->pools[d->npools++] = (vt_pool_usage_t){ ev->ptr, 0, 0 };
    }
    if (ev->aux == VT_POOL_ATTR_RESERVED_CURRENT)
        d->pools[i].reserved = ev->size;
    else
        d->pools[i].used = ev->size;
    uint64_t slack = 0;
    for (uint32_t k = 0; k < d->npools; k++)
        if (d->pools[k].reserved > d->pools[k].used)
            slack += d->pools[k].reserved - d->pools[k].used;
    d->pool_slack = slack;
    /* Between the two events of a pair the sum mixes a new reserved with an
     * old used: only a completed pair may set the maximum. */
    if (ev->aux == VT_POOL_ATTR_USED_CURRENT && slack > d->max_pool_slack)
        d->max_pool_slack = slack;
    if ((ev->flags & VT_EF_AT_PEAK) && d->mem.have_peak && d->mem.tracked == d->mem.peak_bytes) {
        d->pool_slack_at_peak = slack;
        d->have_pool_slack_at_peak = 1;
    }
}

void vt_m_dev_record(vt_model_t *m, const vt_rec_device_t *r)
{
    int di = vt_m_dev_for(m, r->ordinal);
    if (di < 0)
        return;
    vt_dev_t *d = &m->p.devs[di];
    if (d->have_info)
        return;
    d->have_info = 1;
    memcpy(d->uuid, r->uuid, 16);
    size_t n = r->name.len < sizeof d->name - 1 ? r->name.len : sizeof d->name - 1;
    if (n)
        memcpy(d->name, r->name.data, n);
    d->name[n] = 0;
    d->total = r->total_bytes;
    d->first_free = r->free_bytes <= r->total_bytes ? r->free_bytes : r->total_bytes;
    d->first_time_ns = vt_m_rel(m, r->time_ns);
    /* First sight is the first driver report, unless a sample came first. */
    if (!d->have_free) {
        d->have_free = 1;
        d->last_free = d->first_free;
        d->last_free_time_ns = d->first_time_ns;
        d->tracked_at_sample = d->mem.tracked;
        d->have_min = 1;
        d->min_free = d->first_free;
        d->min_free_time_ns = d->first_time_ns;
    }
}

/* Whether stack is under llama.cpp's --fit: common_fit_params
 * (common/fit.cpp) or llama_params_fit (libllama, where it began). Both are
 * exported, so a stripped library still names them. */
static int under_llama_fit(const vt_model_t *m, uint32_t stack)
{
    vt_frame_t frames[64];
    int n = vt_stacks_get(m->stacks, stack, frames, 64);
    for (int i = 0; i < n; i++)
        if (!strcmp(frames[i].name, "common_fit_params") || !strcmp(frames[i].name, "llama_params_fit"))
            return 1;
    return 0;
}

void vt_m_fit_query(vt_model_t *m, const vt_event_t *ev)
{
    if (!ev->stack || !under_llama_fit(m, ev->stack))
        return;
    m->p.llama_fit.last_ns = vt_m_rel(m, ev->time_ns);
    if (!m->p.llama_fit.queries++)
        m->p.llama_fit.first_ns = m->p.llama_fit.last_ns;
}
