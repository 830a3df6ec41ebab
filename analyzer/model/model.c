/* The model's lifetime and its records (contract: model.h; the private
 * state and the live table's invariant: model_internal.h). Owns creating
 * and freeing a model, its settings, the PROCESS record, the dispatch of
 * every other record to the file that owns what it changes, and the
 * finishing pass. The model's work is in its rooms, which depend one way
 * (tests/t/67-model-graph.t checks it):
 *   model_events.c     what each event means, in its fixed order
 *   model_sites.c      tagging and sites: which site and tag an allocation gets
 *   model_live.c       the live table: charging and releasing live entries
 *   model_devices.c    the device table, driver samples, event views
 *   model_spill.c      the tipping event and later spills
 *   model_frag.c       fragmentation snapshots
 *   model_witness.c    ggml's buffer marks
 *   model_placement.c  where a ggml program's model ran */
#include "model_internal.h"

#include <stdlib.h>
#include <string.h>

vt_model_t *vt_model_new(const vt_rules_t *rules, double margin_pct)
{
    vt_model_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->stacks = vt_stacks_new();
    if (!m->stacks) {
        free(m);
        return NULL;
    }
    m->rules = rules;
    m->margin_pct = margin_pct;
    m->margin_frac = margin_pct / 100.0;
    vt_map_init(&m->by_ptr);
    vt_map_init(&m->by_handle);
    vt_map_init(&m->by_va);
    vt_map_init(&m->by_map);
    vt_map_init(&m->host_pools);
    vt_map_init(&m->graph_ptrs);
    vt_map_init(&m->empty_handles);
    vt_map_init(&m->imported_ptrs);
    vt_map_init(&m->other_context);
    vt_map_init(&m->superseded);
    vt_map_init(&m->site_by_key);
    vt_map_init(&m->match_by_stack);
    vt_map_init(&m->verdict_by_ip);
    m->module_gen = 1;
    m->memo_epoch = 1;
    m->p.tip_kind = -1;
    m->p.last_failed_dev = -1;
    m->p.last_failed_tag = -1;
    m->p.host_weights_after = -1;
    m->p.last_alloc_site = UINT32_MAX;
    m->retry_dev = -1;
    m->last_alloc_kind = -1;
    return m;
}

void vt_model_free(vt_model_t *m)
{
    if (!m)
        return;
    vt_stacks_free(m->stacks);
    free(m->live);
    free(m->free_slots);
    vt_map_free(&m->by_ptr);
    vt_map_free(&m->by_handle);
    vt_map_free(&m->by_va);
    vt_map_free(&m->host_pools);
    vt_map_free(&m->graph_ptrs);
    vt_map_free(&m->empty_handles);
    vt_map_free(&m->imported_ptrs);
    vt_map_free(&m->other_context);
    vt_m_live_dev_keys_free(m);
    vt_map_free(&m->superseded);
    vt_map_free(&m->by_map);
    vt_map_free(&m->site_by_key);
    vt_map_free(&m->match_by_stack);
    free(m->matches);
    free(m->site_hint);
    vt_map_free(&m->verdict_by_ip);
    free(m->verdicts);
    free(m->node_memo);
    free(m->p.sites);
    for (int i = 0; i < m->p.ndevs; i++)
        free(m->p.devs[i].layout);
    free(m->p.devs);
    vt_m_frag_free(m);
    vt_m_marks_free(m);
    vt_m_placement_free_state(m);
    free(m->p.exe);
    free(m->p.hostname);
    free(m->p.shim_version);
    for (uint32_t i = 0; i < m->p.argc; i++)
        free(m->p.argv[i]);
    free(m->p.argv);
    for (uint32_t i = 0; i < m->p.envc; i++)
        free(m->p.env[i]);
    free(m->p.env);
    free(m);
}

void vt_model_set_hook(vt_model_t *m, vt_dev_hook_t hook, void *ctx)
{
    m->hook = hook;
    m->hook_ctx = ctx;
}

void vt_model_set_hook_floor(vt_model_t *m, int dev_index, uint64_t floor)
{
    if (dev_index >= 0 && dev_index < VT_MAX_DEVICES)
        m->hook_floor[dev_index] = floor;
}

void vt_model_keep_layout(vt_model_t *m, int on) { m->keep_layout = on; }
void vt_model_set_source(vt_model_t *m, int on) { vt_stacks_set_source(m->stacks, on); }

const vt_proc_t *vt_model_proc(const vt_model_t *m) { return &m->p; }

void vt_model_mark_truncated(vt_model_t *m, uint64_t offset, int damaged)
{
    m->p.truncated = 1;
    m->p.damaged = damaged;
    m->p.truncated_at = offset;
}
const vt_stacks_t *vt_model_stacks(const vt_model_t *m) { return m->stacks; }
const vt_rules_t *vt_model_rules(const vt_model_t *m) { return m->rules; }
double vt_model_margin(const vt_model_t *m) { return m->margin_pct; }

static char *dup_bytes(vt_bytes_t b)
{
    char *s = malloc((size_t)b.len + 1);
    if (s) {
        if (b.len)
            memcpy(s, b.data, b.len);
        s[b.len] = 0;
    }
    return s;
}

/* count strings copied into a new array *out; *n counts those copied so
 * far, so the model's free releases a partial copy. -1 when out of memory. */
static int dup_all(char ***out, uint32_t *n, const vt_bytes_t *src, uint32_t count)
{
    *out = calloc(count ? count : 1, sizeof **out);
    if (!*out)
        return -1;
    for (uint32_t i = 0; i < count; i++) {
        if (!((*out)[i] = dup_bytes(src[i])))
            return -1;
        *n = i + 1;
    }
    return 0;
}

int vt_model_set_process(vt_model_t *m, const vt_rec_process_t *pr)
{
    vt_proc_t *p = &m->p;
    if (p->have_process)
        return 0;   /* the header's PROCESS record is the one that counts */
    p->pid = pr->pid;
    p->ppid = pr->ppid;
    p->mono_start_ns = pr->mono_start_ns;
    p->wall_start_ns = pr->wall_start_ns;
    p->time_res_ns = pr->time_res_ns;
    p->degraded = pr->degraded;
    p->exe = dup_bytes(pr->exe);
    p->hostname = dup_bytes(pr->hostname);
    p->shim_version = dup_bytes(pr->shim_version);
    if (!p->exe || !p->hostname || !p->shim_version)
        return VT_E_NOMEM;
    p->env_recorded = pr->env_recorded;
    if (dup_all(&p->argv, &p->argc, pr->argv, pr->argc) || dup_all(&p->env, &p->envc, pr->env, pr->envc))
        return VT_E_NOMEM;
    p->have_process = 1;
    return 0;
}

int vt_model_feed(vt_model_t *m, const vt_record_t *rec)
{
    switch (rec->type) {
    case VT_REC_PROCESS:
        return vt_model_set_process(m, &rec->u.process);
    case VT_REC_DEVICE:
        vt_m_dev_record(m, &rec->u.device);
        return 0;
    case VT_REC_MODULE:
    case VT_REC_FRAME:
    case VT_REC_STACK:
        return vt_m_sites_feed(m, rec);
    case VT_REC_EVENT:
        return vt_model_feed_event(m, &rec->u.event);
    case VT_REC_DROPPED:
        if (rec->u.dropped.dropped_total >= m->p.events.dropped && rec->u.dropped.by_reason.reasons)
            m->p.events.by_reason = rec->u.dropped.by_reason;
        if (rec->u.dropped.dropped_total > m->p.events.dropped)
            m->p.events.dropped = rec->u.dropped.dropped_total;
        if (rec->u.dropped.stacks_lost_total > m->p.events.stacks_lost)
            m->p.events.stacks_lost = rec->u.dropped.stacks_lost_total;
        return 0;
    case VT_REC_GGML_BUFFER: {
        int rc = vt_m_ggml_record(m, &rec->u.ggml_buffer);
        return rc ? rc : vt_m_placement_buffer(m, &rec->u.ggml_buffer);
    }
    case VT_REC_GGML_TENSOR:
        return vt_m_placement_tensor(m, &rec->u.ggml_tensor);
    case VT_REC_GGML_FREE:
        return vt_m_placement_free(m, &rec->u.ggml_free);
    case VT_REC_GGML_LOST:
        vt_m_placement_lost(m, &rec->u.ggml_lost);
        return 0;
    case VT_REC_END:
        m->p.ended = 1;
        m->p.end_how = rec->u.end.how;
        m->p.end_time_ns = vt_m_rel(m, rec->u.end.time_ns);
        if (rec->u.end.dropped_total >= m->p.events.dropped && rec->u.end.by_reason.reasons)
            m->p.events.by_reason = rec->u.end.by_reason;
        if (rec->u.end.dropped_total > m->p.events.dropped)
            m->p.events.dropped = rec->u.end.dropped_total;
        return 0;
    default:
        return 0;
    }
}

void vt_model_resume(vt_model_t *m)
{
    m->p.truncated = 0;
    m->p.damaged = 0;
    m->p.truncated_at = 0;
}

/* What finishing adds to proc, from the state fed so far, without
 * changing that state: each figure is computed afresh (fragmentation's
 * pending points measured, placement summed from its buffers, the sites'
 * bytes at peak written as site_change would write them at their next
 * change), so a view, more records and another view give what one view
 * at the end gives. */
void vt_model_view(vt_model_t *m)
{
    /* Out of memory here leaves fragmentation unmeasured (null), no more. */
    (void)vt_m_frag_view(m);
    /* Likewise: placement stays unknown. */
    (void)vt_m_placement_finish(m);
    /* seq is not moved: the implicit free an allocation makes comes before
     * the allocation moves it, so it is of the last event's seq, and a
     * view between the two must not make it later than a peak there. */
    m->p.host_weights_ggml_rule = 0;
    for (size_t i = 0; i < m->p.nsites; i++) {
        vt_site_t *s = &m->p.sites[i];
        if (s->space == VT_SPACE_HOST && s->match.tag == VT_TAG_WEIGHTS && s->stack_match.rule >= 0) {
            char rule[256];
            vt_rules_describe(m->rules, &s->stack_match, rule, sizeof rule);
            if (!strncmp(rule, "builtin:llama.cpp ", 18))
                m->p.host_weights_ggml_rule = 1;
        }
        int dev = s->space == VT_SPACE_DEVICE ? vt_model_dev_index(m, s->device) : -1;
        const vt_tagged_peak_t *tp = vt_m_space_peak(m, s->space, dev);
        if (tp && tp->have_peak && tp->peak_seq >= s->changed_seq)
            s->at_peak = s->live;
    }
}

void vt_model_finish(vt_model_t *m)
{
    vt_model_view(m);
    vt_m_frag_free(m);
    vt_m_placement_reading_done(m);
}
