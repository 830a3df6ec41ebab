/* Tagging and sites. Owns the answer to "which site, with which tag, does
 * this allocation belong to": the rule verdicts per ip, the memos per
 * stack-tree node, the per-stack matches and the sites themselves
 * (proc.sites, site_hint, site_by_key, match_by_stack). Promises: one
 * match per stack id (stacks are complete before any event refers to
 * them, trace_format.h), the same answer the rules give a full walk of the
 * stack's frames (vt_rules_match_verdicts), and a site's tag decided once,
 * when it is made, in the order docs/report.md "Tags" gives. A site's
 * bytes are kept by the live table (model_live.c). Calls nothing else in
 * the model. */
#include "model_internal.h"

#include "grow.h"

#include <stdlib.h>
#include <string.h>

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
int vt_m_site_for(vt_model_t *m, uint32_t stack, int space, int dev, int usage, uint32_t *out)
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

/* MODULE, FRAME and STACK records: what they change in the stacks, and
 * which verdicts and memos that makes stale. */
int vt_m_sites_feed(vt_model_t *m, const vt_record_t *rec)
{
    switch (rec->type) {
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
    default:
        return 0;
    }
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
