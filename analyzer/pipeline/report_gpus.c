/* The per-GPU combined view: every process's tracked device bytes summed
 * per GPU UUID on one timeline (monotonic time; every trace on a host
 * shares the clock). Driven by the model's device hook, in the merged event
 * order load.c produces. Devices without a DEVICE record (no UUID) are
 * left out: they cannot be matched across processes. */
#include "report.h"

#include <string.h>

static vt_gpu_t *gpu_for(vt_report_t *r, const vt_dev_t *d)
{
    for (int i = 0; i < r->ngpus; i++)
        if (!memcmp(r->gpus[i].uuid, d->uuid, 16))
            return &r->gpus[i];
    if (r->ngpus >= VT_MAX_GPUS)
        return NULL;
    vt_gpu_t *g = &r->gpus[r->ngpus++];
    memset(g, 0, sizeof *g);
    memcpy(g->uuid, d->uuid, 16);
    memcpy(g->name, d->name, sizeof g->name);
    g->ordinal = d->ordinal;
    g->total = d->total;
    return g;
}

static int slot_for(vt_gpu_t *g, const vt_model_t *m, int dev)
{
    for (int i = 0; i < g->nprocs; i++)
        if (g->procs[i] == m && g->dev_index[i] == dev)
            return i;
    if (g->nprocs >= VT_GPU_MAX_PROCS)
        return -1;
    g->procs[g->nprocs] = m;
    g->dev_index[g->nprocs] = dev;
    g->contrib[g->nprocs] = 0;
    return g->nprocs++;
}

/* A new combined peak: every process's bytes by tag, now (rare: out of
 * line, noinline, like hook_bind below). */
__attribute__((noinline)) static void gpu_peak(vt_gpu_t *g, uint64_t t)
{
    g->have_peak = 1;
    g->peak_bytes = g->tracked;
    g->peak_time_abs = t;
    memset(g->peak_by_tag, 0, sizeof g->peak_by_tag);
    for (int i = 0; i < g->nprocs; i++) {
        const vt_dev_t *pd = &vt_model_proc(g->procs[i])->devs[g->dev_index[i]];
        for (int k = 0; k < VT_MAX_TAGS; k++)
            g->peak_by_tag[k] += pd->mem.by_tag[k];
        g->peak_contrib[i] = g->contrib[i];
    }
}

/* The device's new bytes into the GPU and slot the hook is bound to.
 * The GPU's bytes are recomputed from every slot's device as it is now,
 * not kept as a running sum: so only increases need to reach the hook once
 * the GPU has a peak (a decrease cannot make a new one), and @return 1
 * says so to the model. */
static inline int hook_update(vt_report_t *r, const vt_model_t *m, int dev, uint64_t t)
{
    vt_gpu_t *g = &r->gpus[r->hook_gpu];
    int s = r->hook_slot;
    uint64_t now = vt_model_proc(m)->devs[dev].mem.tracked;
    g->contrib[s] = now;
    if (g->nprocs > 1) {
        now = 0;
        for (int i = 0; i < g->nprocs; i++) {
            g->contrib[i] = vt_model_proc(g->procs[i])->devs[g->dev_index[i]].mem.tracked;
            now += g->contrib[i];
        }
    }
    g->tracked = now;
    if (!g->have_peak || g->tracked > g->peak_bytes)
        gpu_peak(g, t);
    /* Alone on its GPU, the device can make a new peak only by passing
     * this one: its model need not call until then (in a steady state,
     * hardly ever). */
    if (g->nprocs == 1)
        vt_model_set_hook_floor(r->hook_in, dev, g->peak_bytes);
    return 1;
}

/* The input whose model is m: the report's writable pointer to it. */
static vt_model_t *writable(vt_report_t *r, const vt_model_t *m)
{
    for (int i = 0; i < r->nin; i++)
        if (r->in[i].model == m)
            return r->in[i].model;
    return NULL;
}

/* The hook for another process or device than last time: finds its GPU
 * and slot, remembers them, then updates. 0 while the device has no GPU
 * (no DEVICE record yet): every change keeps coming until it has one. */
__attribute__((noinline)) static int hook_bind(vt_report_t *r, const vt_model_t *m, int dev, uint64_t t)
{
    const vt_dev_t *d = &vt_model_proc(m)->devs[dev];
    if (!d->have_info || !vt_uuid_known(d->uuid))
        return 0;
    vt_gpu_t *g = gpu_for(r, d);
    if (!g)
        return 0;
    vt_model_t *wm = writable(r, m);
    int was = g->nprocs;
    int s = wm ? slot_for(g, m, dev) : -1;
    if (s < 0)
        return 0;
    /* A second device on this GPU: the first one's floor no longer holds
     * (their sum can peak while each is below its own). */
    if (g->nprocs > 1 && was == 1) {
        vt_model_t *first = writable(r, g->procs[0]);
        if (first)
            vt_model_set_hook_floor(first, g->dev_index[0], 0);
    }
    r->hook_m = m;
    r->hook_in = wm;
    r->hook_dev = dev;
    r->hook_gpu = (int)(g - r->gpus);
    r->hook_slot = s;
    return hook_update(r, m, dev, t);
}

/* Called for every device allocation, and for frees until it returns 1.
 * The common case (the process and device of last time) makes no call but,
 * at a new peak, a tail call: binding, done once per device, is kept out
 * of line (noinline) so this path saves and restores no registers. */
int vt_gpus_hook(void *ctx, const vt_model_t *m, int dev, uint64_t t)
{
    vt_report_t *r = ctx;
    if (r->hook_m != m || r->hook_dev != dev)
        return hook_bind(r, m, dev, t);
    return hook_update(r, m, dev, t);
}

void vt_gpus_finish(vt_report_t *r)
{
    /* GPUs a process only saw (DEVICE record, no allocation) still count,
     * and the driver's free is card-wide: the minimum over processes. */
    for (int i = 0; i < r->nin; i++) {
        const vt_model_t *m = r->in[i].model;
        const vt_proc_t *p = vt_model_proc(m);
        for (int k = 0; k < p->ndevs; k++) {
            const vt_dev_t *d = &p->devs[k];
            if (!d->have_info || !vt_uuid_known(d->uuid))
                continue;
            vt_gpu_t *g = gpu_for(r, d);
            if (!g || slot_for(g, m, k) < 0)
                continue;
            if (!g->total)
                g->total = d->total;
            if (d->have_min) {
                uint64_t t = p->mono_start_ns + d->min_free_time_ns;
                if (!g->have_min || d->min_free < g->min_free) {
                    g->have_min = 1;
                    g->min_free = d->min_free;
                    g->min_free_time_abs = t;
                }
            }
        }
    }
}
