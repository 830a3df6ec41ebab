/* The model fed event by event (contract: model.h; live table invariants: model_internal.h).
 * Per event the order is fixed: judge the request against the state before
 * it (spill, smoking guns), then apply it (charge or release), then update
 * peaks, estimates and the margin rule from the state after it. */
#include "model_internal.h"

#include "grow.h"

#include <stdlib.h>
#include <string.h>

const char *vt_spill_kind_name(int kind)
{
    static const char *const names[] = {
        [VT_SPILL_OOM] = "oom",
        [VT_SPILL_HOST_FALLBACK] = "host_fallback",
        [VT_SPILL_MANAGED_OVERSUB] = "managed_oversubscription",
        [VT_SPILL_OVER_CAPACITY] = "over_capacity",
    };
    _Static_assert(sizeof names / sizeof names[0] == VT_SPILL_KINDS, "one name per enum vt_spill_kind");
    return kind >= 0 && kind < VT_SPILL_KINDS ? names[kind] : "?";
}

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
    p->argv = calloc(pr->argc ? pr->argc : 1, sizeof *p->argv);
    if (!p->exe || !p->hostname || !p->shim_version || !p->argv)
        return VT_E_NOMEM;
    for (uint32_t i = 0; i < pr->argc; i++) {
        p->argv[i] = dup_bytes(pr->argv[i]);
        if (!p->argv[i])
            return VT_E_NOMEM;
        p->argc = i + 1;
    }
    p->have_process = 1;
    return 0;
}

int vt_model_dev_index(const vt_model_t *m, int ordinal)
{
    for (int i = 0; i < m->p.ndevs; i++)
        if (m->p.devs[i].ordinal == ordinal)
            return i;
    return -1;
}

/* A device-space event without a device (-1) is charged to ordinal 0, the
 * runtime's default device. */
static int dev_for(vt_model_t *m, int ordinal)
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

static uint64_t rel(const vt_model_t *m, uint64_t t)
{
    return t > m->p.mono_start_ns ? t - m->p.mono_start_ns : 0;
}

int64_t vt_m_free_est(const vt_dev_t *d)
{
    /* Unsigned, then reinterpreted: the same value wherever the signed
     * expression would not overflow, and no overflow on hostile sizes. */
    return (int64_t)(d->last_free - (d->mem.tracked - d->tracked_at_sample));
}

/* The fields of a view that come from the event itself. */
static inline void view_event(const vt_model_t *m, const vt_event_t *ev, int tag, vt_event_view_t *v)
{
    /* Field by field, not memset then fill: one view per allocation event. */
    v->valid = 1;
    v->time_ns = rel(m, ev->time_ns);
    v->api = ev->api;
    v->bytes = ev->size;
    v->tag = tag;
    v->result = ev->result;
    v->tid = ev->tid;
    v->stack = ev->stack;
    v->free_after = 0;
}

/* vt_m_view for device d (not NULL): inline in do_alloc, which builds one
 * per device allocation. */
static inline void view_dev(const vt_model_t *m, const vt_event_t *ev, int tag, const vt_dev_t *d,
                            vt_event_view_t *v)
{
    view_event(m, ev, tag, v);
    v->device = d->ordinal;
    v->dev_tracked = d->mem.tracked;
    memcpy(v->dev_by_tag, d->mem.by_tag, sizeof v->dev_by_tag);
    v->have_free = d->have_free;
    v->last_free = d->last_free;
    v->free_est = vt_m_free_est(d);
}

void vt_m_view(vt_model_t *m, const vt_event_t *ev, int tag, int dev, vt_event_view_t *v)
{
    if (dev >= 0) {
        view_dev(m, ev, tag, &m->p.devs[dev], v);
        return;
    }
    view_event(m, ev, tag, v);
    v->device = ev->device;
    v->dev_tracked = 0;
    memset(v->dev_by_tag, 0, sizeof v->dev_by_tag);
    v->have_free = 0;
    v->last_free = 0;
    v->free_est = 0;
}

/* ---- tagging and sites ---- */

/* The stack's first site (see hint_free), or UINT32_MAX. */
static inline uint32_t hinted_site(const vt_model_t *m, uint32_t stack)
{
    return stack < m->site_hint_cap ? m->site_hint[stack] : UINT32_MAX;
}

/* The stack's match if one was made: its first site's, else the one
 * match_for cached; NULL for a stack no allocation used. */
static const vt_match_t *known_match(const vt_model_t *m, uint32_t stack)
{
    uint32_t idx, h = hinted_site(m, stack);
    if (h != UINT32_MAX)
        return &m->p.sites[h].stack_match;
    return vt_map_get(&m->match_by_stack, stack, &idx) ? &m->matches[idx] : NULL;
}

int vt_model_stack_tag(const vt_model_t *m, uint32_t stack)
{
    const vt_match_t *k = known_match(m, stack);
    return k ? k->tag : VT_TAG_UNKNOWN;
}

/* A frame's verdict changes only when a MODULE record arrives (module_gen)
 * or the first FRAME record for its ip does (vt_model_feed marks it stale
 * with gen 0); module_gen starts at 1. */
struct ip_verdict {
    vt_frame_verdict_t v;
    uint64_t gen;
};

static int verdict_for(vt_model_t *m, uint64_t ip, vt_frame_verdict_t *out)
{
    uint32_t idx;
    if (!vt_map_get(&m->verdict_by_ip, ip, &idx)) {
        if (vt_grow((void **)&m->verdicts, &m->verdicts_cap, m->nverdicts + 1, sizeof *m->verdicts, 256))
            return VT_E_NOMEM;
        if (vt_map_put(&m->verdict_by_ip, ip, (uint32_t)m->nverdicts))
            return VT_E_NOMEM;
        idx = (uint32_t)m->nverdicts++;
        m->verdicts[idx].gen = 0;
    }
    struct ip_verdict *iv = &m->verdicts[idx];
    if (iv->gen != m->module_gen) {
        vt_frame_t f;
        vt_stacks_frame(m->stacks, ip, &f);
        iv->v = vt_rules_verdict(m->rules, &f);
        iv->gen = m->module_gen;
    }
    *out = iv->v;
    return 0;
}

/* The exact walk: every frame's verdict. For stacks deeper than a memo
 * can describe (see stack_match). */
static int match_by_walk(vt_model_t *m, uint32_t stack, vt_match_t *out)
{
    uint64_t ips[VT_MAX_STACK_DEPTH];
    vt_frame_verdict_t verd[VT_MAX_STACK_DEPTH];
    int n = vt_stacks_ips(m->stacks, stack, ips, VT_MAX_STACK_DEPTH);
    for (int i = 0; i < n; i++)
        if (verdict_for(m, ips[i], &verd[i]))
            return VT_E_NOMEM;
    *out = vt_rules_match_verdicts(m->rules, verd, n);
    return 0;
}

/* Nearest hits from a node rootward, within VT_MAX_STACK_DEPTH frames of
 * that node (the window vt_stacks_ips gives a leaf). */
struct node_memo {
    int32_t user, builtin;              /* rule index, -1 none */
    uint16_t user_frame, builtin_frame; /* frames from the node, itself 0 */
    uint64_t epoch;                     /* valid when == memo_epoch; 0 never */
};

static void memo_step(int32_t here, int32_t above, uint16_t above_frame, int32_t *rule, uint16_t *frame)
{
    if (here >= 0) {
        *rule = here;
        *frame = 0;
    } else if (above >= 0 && above_frame + 1u < VT_MAX_STACK_DEPTH) {
        *rule = above;
        *frame = (uint16_t)(above_frame + 1);
    } else {
        *rule = -1;
        *frame = 0;
    }
}

/* vt_rules_match_verdicts over the stack's frames, the same answer: the
 * first user hit innermost-first, else the first built-in one, within the
 * window. The nearest hit from a node is its own verdict's, or its
 * parent's one frame further; a hit beyond the parent's window is beyond
 * the child's too. So only nodes without a current memo are judged, leaf
 * side of the first ancestor that has one. */
static int stack_match(vt_model_t *m, uint32_t leaf, vt_match_t *out)
{
    uint32_t path[VT_MAX_STACK_DEPTH];
    uint64_t ips[VT_MAX_STACK_DEPTH];
    struct node_memo top = { -1, -1, 0, 0, 0 };
    int n = 0;
    uint32_t id = leaf, parent;
    uint64_t ip;
    while (vt_stacks_node(m->stacks, id, &ip, &parent)) {
        if (id < m->node_memo_cap && m->node_memo[id].epoch == m->memo_epoch) {
            top = m->node_memo[id];
            break;
        }
        if (n == (int)VT_MAX_STACK_DEPTH)
            return match_by_walk(m, leaf, out); /* a memo here would need frames past the window */
        path[n] = id;
        ips[n++] = ip;
        id = parent;
    }
    if (n && path[0] >= m->node_memo_cap) {
        /* parents have smaller ids than their children: the leaf is the
         * largest id on the path */
        size_t old = m->node_memo_cap;
        if (vt_grow((void **)&m->node_memo, &m->node_memo_cap, (size_t)path[0] + 1, sizeof *m->node_memo, 1024))
            return VT_E_NOMEM;
        memset(m->node_memo + old, 0, (m->node_memo_cap - old) * sizeof *m->node_memo);
    }
    for (int k = n - 1; k >= 0; k--) {
        vt_frame_verdict_t v;
        if (verdict_for(m, ips[k], &v))
            return VT_E_NOMEM;
        struct node_memo here;
        memo_step(v.user, top.user, top.user_frame, &here.user, &here.user_frame);
        memo_step(v.builtin, top.builtin, top.builtin_frame, &here.builtin, &here.builtin_frame);
        here.epoch = m->memo_epoch;
        m->node_memo[path[k]] = here;
        top = here;
    }
    *out = vt_rules_match_nearest(m->rules, top.user, top.user_frame, top.builtin, top.builtin_frame);
    return 0;
}

/* site_hint[stack] names the first site made for a stack (UINT32_MAX:
 * none yet), and that site carries the stack's match: for the usual trace
 * (stacks defined before use) a new stack costs an array slot, not an
 * entry in each of two maps that grow with the stacks. Sites and matches
 * the hint cannot hold (a stack not defined yet, or no memory for the
 * array) go to site_by_key and match_by_stack. */

/* @return 1 when stack's next site will be its hinted one. */
static int hint_free(vt_model_t *m, uint32_t stack)
{
    if (stack > vt_stacks_max_id(m->stacks))
        return 0;   /* no such stack (yet): the maps alone know it */
    if (stack >= m->site_hint_cap) {
        size_t ncap = m->site_hint_cap ? m->site_hint_cap : 1024;
        while (ncap <= stack)
            ncap *= 2;
        uint32_t *v = realloc(m->site_hint, ncap * sizeof *v);
        if (!v)
            return 0;   /* a hint is optional */
        for (size_t i = m->site_hint_cap; i < ncap; i++)
            v[i] = UINT32_MAX;
        m->site_hint = v;
        m->site_hint_cap = ncap;
    }
    return m->site_hint[stack] == UINT32_MAX;
}

/* The stack's match as first computed: the hinted site's, a cached one, or
 * computed now (and cached unless the new site, to be hinted, keeps it).
 * Stacks are complete before any event refers to them (format contract),
 * so one answer per stack id is safe. */
static int match_for(vt_model_t *m, uint32_t stack, int hinted, vt_match_t *out)
{
    const vt_match_t *k = known_match(m, stack);
    if (k) {
        *out = *k;
        return 0;
    }
    if (stack_match(m, stack, out))
        return VT_E_NOMEM;
    if (hinted)
        return 0;
    if (vt_grow((void **)&m->matches, &m->matches_cap, m->nmatches + 1, sizeof *m->matches, 256))
        return VT_E_NOMEM;
    m->matches[m->nmatches] = *out;
    if (vt_map_put(&m->match_by_stack, stack, (uint32_t)m->nmatches))
        return VT_E_NOMEM;
    m->nmatches++;
    return 0;
}

/* The tag a site's allocations get: a user rule beats ggml's mark, and
 * the mark beats a built-in rule (docs/report.md "Tags"). */
static void decide(vt_site_t *s, const vt_rules_t *rules, const vt_match_t *match, int usage)
{
    s->stack_match = *match;
    s->match = *match;
    s->ggml_usage = (uint8_t)usage;
    if (vt_rules_is_user(rules, match->rule)) {
        s->decided = VT_DECIDED_USER_RULE;
    } else if (usage) {
        s->decided = VT_DECIDED_GGML_MARK;
        s->match.tag = usage == VT_GGML_USAGE_WEIGHTS ? VT_TAG_WEIGHTS : VT_TAG_SCRATCH;
        s->match.rule = s->match.frame = -1;
    } else {
        s->decided = match->rule >= 0 ? VT_DECIDED_BUILTIN_RULE : VT_DECIDED_NOTHING;
    }
}

/* A site is a stack in one space on one device, with one ggml mark (or
 * none): one stack that allocates both marked and unmarked buffers (a
 * cgo gate) makes one site of each. */
static int site_for(vt_model_t *m, uint32_t stack, int space, int dev, int usage, uint32_t *out)
{
    int16_t ordinal = (int16_t)(dev >= 0 ? m->p.devs[dev].ordinal : -1);
    uint32_t h = hinted_site(m, stack);
    if (h != UINT32_MAX && m->p.sites[h].space == space && m->p.sites[h].device == ordinal &&
        m->p.sites[h].ggml_usage == usage) {
        *out = h;
        return 0;
    }
    _Static_assert(VT_SPACE_MANAGED < 16 && VT_GGML_USAGE_COMPUTE < 16, "site keys pack space and usage in 4 bits each");
    uint64_t key = ((uint64_t)stack << 24) | ((uint64_t)usage << 20) | ((uint64_t)space << 16) | (uint16_t)(dev + 1);
    if (vt_map_get(&m->site_by_key, key, out))
        return 0;
    int hinted = !usage && hint_free(m, stack);
    vt_match_t match;
    if (match_for(m, stack, hinted, &match))
        return VT_E_NOMEM;
    if (vt_grow((void **)&m->p.sites, &m->sites_cap, m->p.nsites + 1, sizeof *m->p.sites, 64))
        return VT_E_NOMEM;
    vt_site_t *s = &m->p.sites[m->p.nsites];
    memset(s, 0, sizeof *s);
    s->stack = stack;
    s->space = (uint8_t)space;
    s->device = ordinal;
    decide(s, m->rules, &match, usage);
    if (hinted)
        m->site_hint[stack] = (uint32_t)m->p.nsites;
    else if (vt_map_put(&m->site_by_key, key, (uint32_t)m->p.nsites))
        return VT_E_NOMEM;
    *out = (uint32_t)m->p.nsites++;
    return 0;
}

static vt_tagged_peak_t *space_peak(vt_model_t *m, int space, int dev)
{
    if (space == VT_SPACE_HOST)
        return &m->p.host;
    if (space == VT_SPACE_MANAGED)
        return &m->p.managed;
    return dev >= 0 ? &m->p.devs[dev].mem : NULL;
}

/* Sites remember their bytes at their space's peak lazily: when a site
 * changes after the latest peak, its bytes before the change are what it
 * held at that peak (nothing changed in between). */
/* tp is the site's space's peak: a live entry's site has the entry's space
 * and device (site_for's key), so account passes the entry's. */
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
    tp->peak_time_ns = rel(m, t);
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

static vt_map_t *map_of(vt_model_t *m, int kind)
{
    switch (kind) {
    case L_HANDLE: return &m->by_handle;
    case L_VA: return &m->by_va;
    case L_MAP: return &m->by_map;
    default: return &m->by_ptr;
    }
}

/* Charges (sign +1) or releases (-1) one live entry everywhere it counts.
 * This, live_insert and live_drop run for every allocation and free; they
 * are forced inline (gcc would not: each has several callers) so the
 * common path does not save and restore registers three calls deep:
 * ~13 fewer instructions per event. */
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
    vt_tagged_peak_t *tp = space_peak(m, e->space, e->dev);
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

/* e->addr must be absent from its map: both callers have just removed any
 * entry there (an implicit free), so the map skips its probe for one. hole
 * is where the caller's probe found it absent (vt_map_find_hole, nothing
 * put or deleted since), or SIZE_MAX; map is map_of(m, e->kind). */
__attribute__((always_inline)) static inline int live_insert(vt_model_t *m, vt_map_t *map, const live_t *e, uint64_t t, size_t hole)
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

/* Removes the entry at key from kind's map; *out (if set) gets a copy and
 * *phys (if set) the device bytes really given back to the driver.
 * @return 1 if it was live, 0 if not, or VT_E_NOMEM. A VMM handle that is
 * still mapped is only detached (model_internal.h): 1, with *phys 0. */
static int live_remove_slot(vt_model_t *m, vt_map_t *map, size_t slot, uint64_t t, live_t *out, uint64_t *phys);

static int live_remove(vt_model_t *m, int kind, uint64_t key, uint64_t t, live_t *out, uint64_t *phys)
{
    if (phys)
        *phys = 0;
    vt_map_t *map = map_of(m, kind);
    size_t slot = vt_map_find(map, key);
    if (slot == SIZE_MAX)
        return 0;
    return live_remove_slot(m, map, slot, t, out, phys);
}

/* live_remove for the slot a probe of map just found. */
static int live_remove_slot(vt_model_t *m, vt_map_t *map, size_t slot, uint64_t t, live_t *out, uint64_t *phys)
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

/* ---- events ---- */

static void sample(vt_model_t *m, int di, const vt_event_t *ev)
{
    vt_dev_t *d = &m->p.devs[di];
    uint64_t freeb = ev->size, t = rel(m, ev->time_ns);
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

static void device_failure(vt_model_t *m, int di, const vt_event_t *ev, int tag)
{
    vt_dev_t *d = &m->p.devs[di];
    vt_event_view_t v;
    vt_m_view(m, ev, tag, di, &v);
    d->failures++;
    vt_m_spill(m, VT_SPILL_OOM, &v);
    m->p.failed_tags |= 1u << tag;
    m->p.last_failed_dev = di;
    m->p.last_failed_tag = tag;
    int64_t est = vt_m_free_est(d);
    if (d->have_free) {
        uint64_t avail = est > 0 ? (uint64_t)est : 0;
        uint64_t shortfall = ev->size > avail ? ev->size - avail : 0;
        if (shortfall > m->p.oom_shortfall)
            m->p.oom_shortfall = shortfall;
    }
    d->pend_fail_active = 1;
    d->pend_fail_size = ev->size;
    d->pend_fail_counted = d->have_free && est >= (int64_t)ev->size;
    /* kept in case the after-failure sample proves memory was free */
    d->pend_fail_view = v;
    /* Measured until the first failure with free memory is known, a bounded
     * number of times: a retry loop can fail thousands of times. */
    memset(&d->pend_fail_holes, 0, sizeof d->pend_fail_holes);
    if (!d->first_failed_with_free.valid && d->fail_measures < 64) {
        d->fail_measures++;
        if (vt_m_frag_at_failure(m, di, &d->pend_fail_holes))
            d->pend_fail_holes.measured = 0;
    }
    if (d->pend_fail_counted) {
        d->failed_with_free++;
        if (!d->first_failed_with_free.valid) {
            d->first_failed_with_free = v;
            d->gun_holes = d->pend_fail_holes;
        }
    }
    d->retry_active = 1;
    m->retry_dev = di;
    d->retry_tag = tag;
    d->retry_size = ev->size;
    d->retry_tid = ev->tid;
    d->retry_frees = d->retry_freed = 0;
}

static int do_alloc(vt_model_t *m, const vt_event_t *ev, const vt_api_info_t *info, int kind)
{
    vt_proc_t *p = &m->p;
    int space = kind == L_HANDLE ? VT_SPACE_DEVICE : info->space;
    /* Memory located in host memory: a VMM handle so created, or a block of
     * a pool that is (trace_format.h, VT_EF_HOST_LOCATED). */
    if (__builtin_expect(kind == L_HANDLE ? (ev->flags & VT_EF_HOST_LOCATED) != 0
                                          : m->host_pools.count && vt_api_allocates_from_pool(ev->api) &&
                                                vt_map_find(&m->host_pools, ev->aux) != SIZE_MAX,
                         0))
        space = VT_SPACE_HOST;
    int di = space == VT_SPACE_DEVICE ? dev_for(m, ev->device) : -1;
    /* Only an address ggml could name carries a mark: an allocation or a
     * registration that succeeded. */
    int usage = 0;
    if (__builtin_expect(m->marks_given != NULL, 0) && (kind == L_ALLOC || kind == L_REGISTER) && ev->result == 0 &&
        ev->ptr)
        usage = vt_m_mark_for(m);
    uint32_t si;
    if (site_for(m, ev->stack, space, di, usage, &si))
        return VT_E_NOMEM;
    vt_site_t *s = &p->sites[si];
    vt_match_t match = s->match;
    s->calls++;
    if (m->retry_dev >= 0) {
        vt_dev_t *rd = &p->devs[m->retry_dev];
        if (rd->retry_active && ev->tid == rd->retry_tid && (m->retry_dev != di || ev->size != rd->retry_size)) {
            rd->retry_active = 0;
            m->retry_dev = -1;
        }
    }
    if (ev->result != 0) {
        s->failed++;
        s->failed_result = ev->result;
        s->failed_api = ev->api;
        if (ev->size == UINT64_MAX) {
            /* width x height over 64 bits: no card could hold it, and the
             * driver said so. Not an out-of-memory, not a spill. */
            p->events.impossible++;
            return 0;
        }
        s->failed_bytes += ev->size;
        if (space == VT_SPACE_DEVICE && di >= 0)
            device_failure(m, di, ev, match.tag);
        return 0;
    }
    if (kind == L_ALLOC && ev->ptr == 0)
        return 0;   /* a zero-byte request: success, nothing live */
    p->apis[ev->api].bytes += ev->size;
    p->events.allocs++;
    p->allocs_after_tip += p->tip.valid;
    s->total_bytes += ev->size;
    if (kind != L_VA && kind != L_MAP) {
        int b = 63 - __builtin_clzll(ev->size | 1);
        p->size_hist_count[b]++;
        p->size_hist_bytes[b] += ev->size;
    }
    live_t e = { ev->ptr, ev->size, ev->reserved, si, (int8_t)match.tag, (uint8_t)kind, (uint8_t)space, 0, (int16_t)di, 0, 0, 0 };
    /* One probe: the entry an implicit free removes, or the hole where the
     * new one goes (live_insert). Nothing else puts or deletes in between. */
    vt_map_t *map = map_of(m, kind);
    size_t hole;
    size_t slot = vt_map_find_hole(map, ev->ptr, &hole);
    if (slot != SIZE_MAX) {
        p->events.implicit_frees++;
        if (live_remove_slot(m, map, slot, ev->time_ns, NULL, NULL) < 0)
            return VT_E_NOMEM;
        hole = SIZE_MAX;   /* the removal moved entries */
        if (kind == L_ALLOC) {
            uint32_t n = 0;
            vt_map_get(&m->superseded, ev->ptr, &n);
            if (vt_map_put(&m->superseded, ev->ptr, n + 1))
                return VT_E_NOMEM;
        }
    }
    vt_dev_t *d = di >= 0 ? &p->devs[di] : NULL;
    /* A device allocation's view is built where it ends up (last_alloc):
     * nothing reads last_alloc before this event is done, and the copy of a
     * 200-byte view per event showed in profiles. */
    vt_event_view_t hv, *const v = d ? &d->last_alloc : &hv;
    if (d) {
        view_dev(m, ev, match.tag, d, v);
        if ((d->have_free && (int64_t)ev->size > vt_m_free_est(d)) || (d->total && ev->size > d->total))
            vt_m_spill(m, VT_SPILL_OVER_CAPACITY, v);
        if (d->retry_active && ev->size == d->retry_size && ev->tid == d->retry_tid) {
            if (d->retry_frees) {
                if (!d->retry_bursts) {
                    d->first_burst = *v;
                    d->first_burst_frees = d->retry_frees;
                    d->first_burst_freed = d->retry_freed;
                }
                d->retry_bursts++;
                d->retry_freed_bytes += d->retry_freed;
            }
            d->retry_recovered++;
            d->retry_active = 0;
            /* The failed request got its memory after all: a later pinned
             * allocation of that tag is the program's plan, not a fallback. */
            p->failed_tags &= ~(1u << d->retry_tag);
            if (p->last_failed_tag == d->retry_tag)
                p->last_failed_tag = -1;
        }
        d->pend_fail_active = 0;
    } else if (space == VT_SPACE_HOST) {
        /* What had failed on a device when pinned weights reached their
         * peak: the report's evidence for why they are there. */
        if (match.tag == VT_TAG_WEIGHTS && p->host.by_tag[VT_TAG_WEIGHTS] + ev->size > p->host.peak_by_tag[VT_TAG_WEIGHTS])
            p->host_weights_after = p->last_failed_tag;
        if (kind == L_ALLOC && (p->failed_tags & (1u << match.tag))) {
            vt_m_view(m, ev, match.tag, p->last_failed_dev, v);
            vt_m_spill(m, VT_SPILL_HOST_FALLBACK, v);
            p->fallback_tags |= 1u << match.tag;
            e.fallback = 1;
        }
    }
    m->seq++;
    if (live_insert(m, map, &e, ev->time_ns, hole))
        return VT_E_NOMEM;
    p->last_alloc_site = si;
    m->last_alloc_ptr = ev->ptr;
    m->last_alloc_kind = kind;
    if (d) {
        d->allocs++;
        if (d->have_free) {
            int64_t est = vt_m_free_est(d);
            uint64_t f = est > 0 ? (uint64_t)est : 0;
            if (!d->have_min || f < d->min_free) {
                d->have_min = 1;
                d->min_free = f;
                d->min_free_time_ns = rel(m, ev->time_ns);
                d->min_free_estimated = 1;
            }
            v->free_after = f;
            if (d->total && !d->below_margin.valid && (double)f < m->margin_frac * (double)d->total)
                d->below_margin = *v;
        }
    }
    if (space == VT_SPACE_DEVICE || space == VT_SPACE_MANAGED)
        vt_m_check_oversub(m, ev, match.tag, di);
    return 0;
}

/* cuMemRetainAllocationHandle: one more reference to the handle mapped at
 * aux. A handle released while mapped (only its mappings keep it) is taken
 * back: it is the program's again, and lives past its last unmap. */
static int do_retain(vt_model_t *m, const vt_event_t *ev)
{
    uint32_t mi, hi;
    if (ev->result != 0 || !vt_map_get(&m->by_map, ev->aux, &mi) || (hi = m->live[mi].link) == UINT32_MAX)
        return 0;
    live_t *h = &m->live[hi];
    if (h->released) {
        if (vt_map_put(&m->by_handle, h->addr, hi))
            return VT_E_NOMEM;
        h->released = 0;
    } else if (h->retains < UINT8_MAX) {
        h->retains++;
    }
    return 0;
}

static int do_release(vt_model_t *m, const vt_event_t *ev, int kind)
{
    vt_proc_t *p = &m->p;
    if (ev->result != 0)
        return 0;   /* a failed free released nothing */
    if (ev->ptr == 0 && (kind == L_ALLOC || kind == L_REGISTER))
        return 0;   /* free(NULL) is a no-op by the API's contract */
    if (kind == L_HANDLE) {
        uint32_t hi;
        if (vt_map_get(&m->by_handle, ev->ptr, &hi) && m->live[hi].retains) {
            m->live[hi].retains--;   /* a retained reference goes; the handle stays */
            p->events.frees++;
            return 0;
        }
    }
    uint32_t n;
    if (__builtin_expect((ev->flags & VT_EF_LATE) && kind == L_ALLOC && m->superseded.count, 0) &&
        vt_map_get(&m->superseded, ev->ptr, &n)) {
        /* A free written after the allocation that reused its address: it
         * freed the allocation the address held before, which that
         * allocation already took out (an implicit free, now explained).
         * The allocation live there now stays. */
        if (n > 1)
            vt_map_put(&m->superseded, ev->ptr, n - 1);
        else
            vt_map_del(&m->superseded, ev->ptr, NULL);
        p->events.implicit_frees--;
        p->events.frees++;
        return 0;
    }
    m->seq++;
    live_t e;
    uint64_t phys;
    int got = live_remove(m, kind, ev->ptr, ev->time_ns, &e, &phys);
    if (got < 0)
        return got;
    if (!got) {
        p->events.unmatched_frees++;
        return 0;
    }
    p->events.frees++;
    if (m->last_alloc_kind == kind && m->last_alloc_ptr == ev->ptr && e.site != UINT32_MAX) {
        p->sites[e.site].temporary++;
        p->sites[e.site].temporary_bytes += e.size;
    }
    m->last_alloc_kind = -1;
    p->apis[ev->api].bytes += e.size;
    /* Only bytes the driver got back can let a retry succeed: not a VA
     * range, nor a handle whose mappings keep it alive. */
    if (e.dev >= 0 && phys) {
        vt_dev_t *d = &p->devs[e.dev];
        if (d->retry_active) {
            d->retry_frees++;
            d->retry_freed += phys;
        }
    }
    if (e.space == VT_SPACE_DEVICE || e.space == VT_SPACE_MANAGED)
        vt_m_check_oversub(m, ev, e.tag, e.dev);
    return 0;
}

/* cuMemUnmap(ptr, size) unmaps every mapping in [ptr, ptr + size), and
 * ggml-cuda's VMM pool destructor unmaps all of its mappings with one call.
 * Mappings are keyed by their start, so the walk goes from one mapping to
 * the next that starts where it ends, and stops at the range's end or at
 * the first address where no mapping starts. Each step removes a live
 * entry, so the walk is bounded by what is live. */
static int do_unmap(vt_model_t *m, const vt_event_t *ev)
{
    vt_event_t one = *ev;
    uint64_t end = ev->ptr + ev->size;
    if (end <= ev->ptr)
        end = ev->ptr + 1;   /* no size (or a wrap): the mapping at ptr alone */
    for (;;) {
        uint32_t i;
        uint64_t size = vt_map_get(&m->by_map, one.ptr, &i) ? m->live[i].size : 0;
        if (!size && one.ptr != ev->ptr)
            return 0;   /* nothing starts here: the walk ends */
        int rc = do_release(m, &one, L_MAP);   /* at ptr with nothing: an unmatched free */
        if (rc || !size)
            return rc;
        one.ptr += size;
        if (one.ptr >= end || one.ptr < ev->ptr)
            return 0;
    }
}

static int do_va(vt_model_t *m, const vt_event_t *ev, int kind)
{
    if (ev->result != 0 || !ev->ptr)
        return 0;
    int di = dev_for(m, ev->device);
    int rc = live_remove(m, kind, ev->ptr, ev->time_ns, NULL, NULL);
    if (rc < 0)
        return rc;
    m->p.events.implicit_frees += rc > 0;
    uint32_t hi = UINT32_MAX;
    if (kind == L_MAP && vt_map_get(&m->by_handle, ev->aux, &hi))
        di = m->live[hi].dev;
    live_t e = { ev->ptr, ev->size, 0, UINT32_MAX, VT_TAG_UNKNOWN, (uint8_t)kind, VT_SPACE_DEVICE, 0, (int16_t)di, 0, 0, hi };
    if (live_insert(m, map_of(m, kind), &e, ev->time_ns, SIZE_MAX))
        return VT_E_NOMEM;
    if (hi != UINT32_MAX)
        m->live[hi].link++;
    return 0;
}

/* The shim reports each pool's reserved and used bytes as two events in a
 * row; slack is recomputed from the latest pair of every pool. */
static void pool_usage(vt_model_t *m, int di, const vt_event_t *ev)
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

/* A context teardown (CTX_RESET) on device di: the driver freed every
 * allocation the context made. The trace does not say which context an
 * allocation belongs to, so every live cuMemAlloc-style allocation on the
 * device goes (docs/report.md): VMM handles and mappings, pinned and
 * managed memory stay, as they outlive the context. */
static int ctx_teardown(vt_model_t *m, int di, const vt_event_t *ev)
{
    vt_map_t *map = &m->by_ptr;
    size_t n = 0, cap = 0;
    uint64_t *keys = NULL;
    for (size_t i = 0; i < map->cap; i++) {
        if (!map->slots[i].tag)
            continue;
        const live_t *e = &m->live[map->slots[i].val];
        if (e->kind != L_ALLOC || e->space != VT_SPACE_DEVICE || e->dev != di)
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            uint64_t *k = realloc(keys, nc * sizeof *k);
            if (!k) {
                free(keys);
                return VT_E_NOMEM;
            }
            keys = k, cap = nc;
        }
        keys[n++] = map->slots[i].key;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc >= 0; i++) {
        rc = live_remove(m, L_ALLOC, keys[i], ev->time_ns, NULL, NULL);
        m->p.events.teardown_frees += rc > 0;
    }
    free(keys);
    if (n) {
        m->seq++;
        m->last_alloc_kind = -1;
        vt_m_check_oversub(m, ev, VT_TAG_UNKNOWN, di);
    }
    return rc < 0 ? rc : 0;
}

static int feed_event(vt_model_t *m, const vt_event_t *ev)
{
    vt_proc_t *p = &m->p;
    const vt_api_info_t *info = vt_api_info(ev->api);
    p->events.total++;
    if (ev->time_ns > p->last_time_ns)
        p->last_time_ns = ev->time_ns;
    if (!info || info->kind == VT_KIND_ROUTE) {
        p->events.unknown_api += !info;
        return 0;
    }
    /* apis counts what the program called (docs/report.md); the shim's own
     * samples of free memory and pool usage are not calls. */
    if (!(ev->flags & VT_EF_SAMPLE)) {
        p->apis[ev->api].calls++;
        if (ev->result != 0) {
            p->apis[ev->api].failed++;
            p->events.failed++;
        }
    }
    switch (info->kind) {
    case VT_KIND_ALLOC:
        if (vt_api_allocates_from_pool(ev->api))
            p->pool_allocs += ev->result == 0;
        return do_alloc(m, ev, info, L_ALLOC);
    case VT_KIND_VMM_CREATE:
        return do_alloc(m, ev, info, L_HANDLE);
    case VT_KIND_REGISTER:
        return do_alloc(m, ev, info, L_REGISTER);
    case VT_KIND_FREE:
        return do_release(m, ev, L_ALLOC);
    case VT_KIND_UNREGISTER:
        return do_release(m, ev, L_REGISTER);
    case VT_KIND_VMM_RELEASE:
        return do_release(m, ev, L_HANDLE);
    case VT_KIND_VA_RESERVE:
        return do_va(m, ev, L_VA);
    case VT_KIND_VMM_MAP:
        return do_va(m, ev, L_MAP);
    case VT_KIND_VA_FREE:
        return do_release(m, ev, L_VA);
    case VT_KIND_VMM_UNMAP:
        return do_unmap(m, ev);
    case VT_KIND_POOL_CREATE:
        p->pools_created += ev->result == 0;
        if (ev->result == 0 && (ev->flags & VT_EF_HOST_LOCATED) && vt_map_put(&m->host_pools, ev->ptr, 1))
            return VT_E_NOMEM;
        return 0;
    case VT_KIND_POOL_DESTROY:
        if (ev->result == 0 && m->host_pools.count)
            vt_map_del(&m->host_pools, ev->ptr, NULL);
        return 0;
    case VT_KIND_VMM_RETAIN:
        return do_retain(m, ev);
    case VT_KIND_POOL_TRIM:
        p->pool_trims += ev->result == 0;
        return 0;
    case VT_KIND_MEMINFO:
        if (ev->result == 0) {
            int di = dev_for(m, ev->device);
            if (di >= 0)
                sample(m, di, ev);
        }
        return 0;
    case VT_KIND_CTX_RESET:
        if (ev->result == 0) {
            int di = dev_for(m, ev->device);
            if (di >= 0)
                return ctx_teardown(m, di, ev);
        }
        return 0;
    case VT_KIND_POOL_USAGE:
        if (ev->result == 0) {
            int di = dev_for(m, ev->device);
            if (di >= 0)
                pool_usage(m, di, ev);
        }
        return 0;
    default:
        return 0;
    }
}

int vt_model_feed_event(vt_model_t *m, const vt_event_t *ev)
{
    return feed_event(m, ev);
}

/* Sites (80 bytes) always straddle two cache lines, and half the live
 * entries (40 bytes) do: a prefetch of the first byte alone left the
 * other line to miss when the event was fed. */
static inline void prefetch_object(const void *p, size_t size)
{
    __builtin_prefetch(p);
    __builtin_prefetch((const char *)p + size - 1);
}

enum { PF_ALLOC = 1, PF_FREE = 2 };   /* stage 0's cookie: what ev is */

/* Declared inline (model.h's declaration keeps this an external
 * definition): a hint that lets the LTO build inline it into pipeline/load.c's
 * reading loop (pipeline/load.c) at every call. Left to gcc's heuristics it went out of line
 * after unrelated changes (another call site, a larger do_alloc), and the
 * 100k-stack trace then took 9-25 % longer: its stage-1 and -2 loads, which
 * may miss, stalled the loop from inside a call. */
inline uint32_t vt_model_prefetch(const vt_model_t *m, const vt_event_t *ev, int stage, uint32_t cookie)
{
    if (stage == 0) {
        /* The live map's slot for both kinds; an allocation's site only
         * through a stack the hints cover. The kind found here rides in
         * the cookie, so the later stages need not look the api up. */
        const vt_api_info_t *info = vt_api_info(ev->api);
        if (!info || (info->kind != VT_KIND_ALLOC && info->kind != VT_KIND_FREE))
            return 0;
        vt_map_prefetch(&m->by_ptr, ev->ptr);
        if (info->kind == VT_KIND_FREE)
            return PF_FREE;
        if (ev->stack >= m->site_hint_cap)
            return 0;
        __builtin_prefetch(&m->site_hint[ev->stack]);
        return PF_ALLOC;
    }
    if (stage == 1 && cookie == PF_ALLOC) {
        if (ev->stack < m->site_hint_cap && m->site_hint[ev->stack] < m->p.nsites)
            prefetch_object(&m->p.sites[m->site_hint[ev->stack]], sizeof *m->p.sites);
        return 0;
    }
    /* A free: its slot, then its live entry (cookie: index + 1), then its
     * site. Entries may have changed in between: everything is checked. */
    if (stage == 1) {
        if (cookie != PF_FREE)
            return 0;
        /* Only the home slot, where most keys sit (the map is at most
         * half full): a full probe here was a second lookup per free. */
        const vt_map_t *map = &m->by_ptr;
        if (!map->cap)
            return 0;
        const vt_map_slot_t *s = &map->slots[vt_map_home(map, ev->ptr)];
        if (!s->tag || s->key != ev->ptr || s->val >= m->nlive)
            return 0;
        prefetch_object(&m->live[s->val], sizeof *m->live);
        return s->val + 1;
    }
    if (cookie && cookie - 1 < m->nlive) {
        const live_t *e = &m->live[cookie - 1];
        if (e->addr == ev->ptr && e->site < m->p.nsites)
            prefetch_object(&m->p.sites[e->site], sizeof *m->p.sites);
    }
    return 0;
}

void vt_model_prefetch_node(const vt_model_t *m, const vt_rec_stack_t *n)
{
    if (n->parent_id < UINT32_MAX)
        vt_stacks_prefetch(m->stacks, (uint32_t)n->parent_id);
    if (n->parent_id < m->node_memo_cap)
        __builtin_prefetch(&m->node_memo[n->parent_id]);
    if (n->node_id < m->node_memo_cap)
        __builtin_prefetch(&m->node_memo[n->node_id]);
}

static void device_record(vt_model_t *m, const vt_rec_device_t *r)
{
    int di = dev_for(m, r->ordinal);
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
    d->first_time_ns = rel(m, r->time_ns);
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

int vt_model_feed(vt_model_t *m, const vt_record_t *rec)
{
    switch (rec->type) {
    case VT_REC_PROCESS:
        return vt_model_set_process(m, &rec->u.process);
    case VT_REC_DEVICE:
        device_record(m, &rec->u.device);
        return 0;
    case VT_REC_MODULE:
        m->module_gen++;
        m->memo_epoch++;
        return vt_stacks_add_module(m->stacks, &rec->u.module);
    case VT_REC_FRAME: {
        uint32_t idx;
        if (vt_map_get(&m->verdict_by_ip, rec->u.frame.ip, &idx)) {
            m->verdicts[idx].gen = 0;
            m->memo_epoch++;
        }
        return vt_stacks_add_frame(m->stacks, &rec->u.frame);
    }
    case VT_REC_STACK:
        /* A node at or below the highest id may fill a gap a walk stopped
         * at, or replace one: memos above it may be wrong. A new highest
         * id is nobody's parent yet. */
        if (rec->u.stack.node_id <= vt_stacks_max_id(m->stacks))
            m->memo_epoch++;
        return vt_stacks_add_node(m->stacks, &rec->u.stack);
    case VT_REC_EVENT:
        return feed_event(m, &rec->u.event);
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
        m->p.end_time_ns = rel(m, rec->u.end.time_ns);
        if (rec->u.end.dropped_total >= m->p.events.dropped && rec->u.end.by_reason.reasons)
            m->p.events.by_reason = rec->u.end.by_reason;
        if (rec->u.end.dropped_total > m->p.events.dropped)
            m->p.events.dropped = rec->u.end.dropped_total;
        return 0;
    default:
        return 0;
    }
}

void vt_model_finish(vt_model_t *m)
{
    /* Out of memory here leaves fragmentation unmeasured (null), no more. */
    (void)vt_m_frag_finish(m);
    /* Likewise: placement stays unknown. */
    (void)vt_m_placement_finish(m);
    m->seq++;
    for (size_t i = 0; i < m->p.nsites; i++) {
        vt_site_t *s = &m->p.sites[i];
        if (s->space == VT_SPACE_HOST && s->match.tag == VT_TAG_WEIGHTS && s->stack_match.rule >= 0) {
            char rule[256];
            vt_rules_describe(m->rules, &s->stack_match, rule, sizeof rule);
            if (!strncmp(rule, "builtin:llama.cpp ", 18))
                m->p.host_weights_ggml_rule = 1;
        }
        int dev = s->space == VT_SPACE_DEVICE ? vt_model_dev_index(m, s->device) : -1;
        const vt_tagged_peak_t *tp = space_peak(m, s->space, dev);
        if (tp && tp->have_peak && tp->peak_seq >= s->changed_seq)
            s->at_peak = s->live;
    }
}
