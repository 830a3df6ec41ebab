/* Private to model*.c: the model's state, the live-allocation table and the
 * functions the model's files share, declared in groups under the name of
 * the file that defines them. The files call each other one way, never in
 * a circle (tests/t/67-model-graph.t): model.c dispatches records to
 * model_events.c and the others; the event handlers call sites, the live
 * table, devices, spills, fragmentation and ggml's marks; the live table
 * calls fragmentation; spills call devices; devices and sites call nothing
 * of the model. Small helpers every side needs on the per-event path are
 * inline here instead.
 *
 * Invariant: every live_t reachable from one of the four
 * maps, or (a released VMM handle) from a live mapping's `link`, has been
 * charged exactly once to its space's counters; releasing it uncharges
 * exactly that.
 *
 * VMM lifetime (CUDA semantics): cuMemRelease only drops the handle; the
 * physical memory lives until the last mapping of it is unmapped. ggml
 * releases right after cuMemMap. So a released handle that is still mapped
 * leaves by_handle (the handle value is invalid, and may be reused) but its
 * entry stays charged, reachable from its mappings, until the last one
 * goes. */
#ifndef VT_MODEL_INTERNAL_H
#define VT_MODEL_INTERNAL_H

#include "model.h"

#include <string.h>

enum live_kind {
    L_ALLOC,     /* ALLOC: device, host or managed, by address */
    L_REGISTER,  /* REGISTER: pinned host, by address */
    L_HANDLE,    /* VMM_CREATE: device physical memory, by handle */
    L_VA,        /* VA_RESERVE: address space, by va */
    L_MAP,       /* VMM_MAP: mapping, by va */
};

/* model_witness.c: one ggml mark matched to an allocation, named by its
 * ordinal: proc.events.total when its event was fed, the same in every
 * reading of a trace. */
typedef struct vt_mark {
    uint64_t ordinal;
    uint32_t seq;    /* order found: the later of two marks on one allocation wins */
    uint8_t usage;   /* VT_GGML_USAGE_WEIGHTS or _COMPUTE */
} vt_mark_t;

struct vt_marks {
    vt_mark_t *v;   /* by ordinal once given (vt_model_give_marks sorts) */
    size_t n, cap;
    uint64_t marks, matched, unmatched, remarked;   /* proc.ggml as the matching found them */
};

/* A GGML_BUFFER record as read: what it marked, where, when. */
typedef struct vt_seen_mark {
    uint64_t base, size, time_ns;
    uint8_t usage;
} vt_seen_mark_t;

/* One device's addresses in model.dev_keys: keys[0..n) holds every live
 * device allocation's address on the device, and may also hold addresses
 * freed since, or twice over, until the next compaction. */
typedef struct vt_dev_keys {
    uint64_t *keys;
    size_t n, cap, compact_at;
} vt_dev_keys_t;

typedef struct live {
    uint64_t addr, size, reserved;
    uint32_t site;      /* UINT32_MAX = none */
    int8_t tag;
    uint8_t kind;       /* enum live_kind */
    uint8_t space;      /* enum vt_space */
    uint8_t fallback;   /* counted as host_fallback */
    int16_t dev;        /* index into proc.devs, -1 none */
    uint8_t released;   /* L_HANDLE: cuMemRelease seen, alive through its maps */
    uint8_t retains;    /* L_HANDLE: cuMemRetainAllocationHandle references
                         * not yet released (each takes a cuMemRelease);
                         * saturates at 255 */
    uint32_t link;      /* L_MAP: live index of its handle (UINT32_MAX none);
                         * L_HANDLE: number of live mappings of it */

} live_t;

/* model_frag.c: changes to a device's ranges since its fragmentation
 * snapshot point (see model_frag.c). */
typedef struct frag_op {
    vt_range_t r;
    uint8_t add;   /* 1 added, 0 removed */
} frag_op_t;

typedef struct vt_frag_log {
    frag_op_t *ops;
    size_t n, cap;
    int active;             /* a point is marked and not measured yet */
    size_t live_at_point;   /* live entries then (the skip rule) */
} vt_frag_log_t;

_Static_assert(VT_MAX_DEVICES <= 64, "vt_model.hook_increases_only has a bit per device");

typedef struct vt_placement_state vt_placement_state_t;

struct vt_model {
    const vt_rules_t *rules;
    double margin_pct;
    double margin_frac;   /* margin_pct / 100.0: no division per allocation */
    vt_stacks_t *stacks;
    vt_proc_t p;
    /* The device whose failed request waits for its flush-and-retry
     * (retry_active), -1 none: any other allocation by that thread first
     * means the program took another path (llama.cpp's back-off reloads
     * the model), not an allocator's flush and retry. */
    int retry_dev;
    live_t *live;
    size_t nlive, live_cap;
    uint32_t *free_slots;
    size_t nfree_slots, free_cap;
    vt_map_t by_ptr, by_handle, by_va, by_map;
    /* The last allocations freed (address, absolute time), oldest
     * overwritten: ggml's records come after the events of the drain that
     * wrote them, so a buffer's memory may be freed before its record is
     * read (model_placement.c). */
#define VT_RECENT_FREES 64
    struct { uint64_t addr, time_ns; } recent_frees[VT_RECENT_FREES];
    uint32_t recent_next;
    /* Pools located in host memory (POOL_CREATE with VT_EF_HOST_LOCATED):
     * what is allocated from them is pinned host memory. */
    vt_map_t host_pools;
    /* The addresses graphs will allocate at (captured allocations,
     * VT_EF_CAPTURED) not yet freed in a capture: a free of one outside a
     * graph frees graph memory, no allocation the trace holds. */
    vt_map_t graph_ptrs;
    /* VMM handles with no memory of their own (VMM_EMPTY: imported from
     * another process's export, multicast objects), each with its
     * references not yet released, which free nothing of this process. */
    vt_map_t empty_handles;
    /* Device pointers mapped from other processes' memory (PTR_IMPORT: a
     * shared pool's pointer, an IPC mapping), each with its references not
     * yet released (an IPC handle opened again returns the same address).
     * A release frees nothing of this process. A context teardown unmaps
     * them without an event: an entry it leaves is dropped when an
     * allocation of this process gets its address back. */
    vt_map_t imported_ptrs;
    /* Allocations a coming teardown leaves alone (VT_EF_OTHER_CONTEXT
     * events: another context's), each with the thread whose CTX_RESET
     * event they precede. Every CTX_RESET event ends them all. */
    vt_map_t other_context;
    /* Once the trace has had a context teardown: per device index, the
     * addresses of its live device allocations (model_live.c,
     * vt_m_live_on_device), so that each teardown visits its own device's
     * allocations, not every live one (a trace of many teardowns on one
     * device beside many allocations on another was quadratic). NULL
     * before. */
    vt_dev_keys_t *dev_keys;
    /* Addresses an allocation took while the model still had them live
     * (implicit frees), and how many: a late free (VT_EF_LATE) of one of
     * them frees the allocation the address held before. */
    vt_map_t superseded;
    vt_map_t site_by_key;
    /* site_hint[stack]: the first site made for that stack (UINT32_MAX
     * none), which carries the stack's match; site_by_key and
     * match_by_stack hold only what it cannot (model_sites.c hint_free). Only
     * for stack ids the stack tree has (bounded by its nodes). */
    uint32_t *site_hint;
    size_t site_hint_cap;
    vt_map_t match_by_stack;
    vt_match_t *matches;
    size_t nmatches, matches_cap;
    /* Rule verdicts per ip (model_sites.c): a stack's match is computed from its
     * frames' verdicts, so 100k stacks sharing their outer frames evaluate
     * the rules once per distinct ip, not once per frame of every stack. */
    vt_map_t verdict_by_ip;
    struct ip_verdict *verdicts;
    size_t nverdicts, verdicts_cap;
    uint64_t module_gen;   /* MODULE records fed; a verdict of another gen is stale */
    /* Per stack-tree node (model_sites.c stack_match): the nearest user-rule and
     * built-in hits from that node rootward, so a new stack costs one
     * verdict per node not seen before instead of one per frame. An entry
     * is valid while its epoch equals memo_epoch, which moves whenever a
     * verdict or the tree under a memo may have changed. */
    struct node_memo *node_memo;
    size_t node_memo_cap;
    uint64_t memo_epoch;
    size_t sites_cap;
    uint64_t seq;
    vt_dev_hook_t hook;
    void *hook_ctx;
    uint64_t hook_increases_only;   /* bit d: the hook returned 1 for device d */
    uint64_t hook_floor[VT_MAX_DEVICES];   /* vt_model_set_hook_floor */
    uint64_t oversub_mask;          /* bit d: p.devs[d].oversub_active */
    int keep_layout;
    vt_frag_log_t flog[VT_MAX_DEVICES];
    /* ggml marks (model_witness.c): the marks read (seen), or, in a
     * reading given the matches, those (marks_given, next = the first not
     * yet reached). */
    /* The latest successful allocation (heaptrack's temporaries): its
     * address and kind, until the next allocation or free. */
    uint64_t last_alloc_ptr;
    int last_alloc_kind;   /* enum live_kind, -1 none */
    vt_seen_mark_t *seen;
    size_t nseen, seen_cap;
    vt_marks_t *marks_given;
    size_t marks_next;
    vt_placement_state_t *placement;   /* model_placement.c, NULL without ggml records */
};

/* model_witness.c. mark_for: the usage ggml marked the allocation ev (just
 * counted in proc.events.total) with, 0 none. record: a GGML_BUFFER
 * record. free: what the model holds. */
int vt_m_mark_for(vt_model_t *m);
int vt_m_ggml_record(vt_model_t *m, const vt_rec_ggml_buffer_t *g);
void vt_m_marks_free(vt_model_t *m);

/* model_placement.c: the GGML_* records that say where the model runs;
 * finish fills proc.placement afresh from what was fed (again after more
 * records); free_state frees what it kept. */
int vt_m_placement_buffer(vt_model_t *m, const vt_rec_ggml_buffer_t *g);
int vt_m_placement_tensor(vt_model_t *m, const vt_rec_ggml_tensor_t *t);
int vt_m_placement_free(vt_model_t *m, const vt_rec_ggml_free_t *f);
/* An allocation at addr was freed at t (absolute): a device or pinned
 * ggml buffer based there ended then, whether or not ggml's own free was
 * seen (model_placement.c). */
void vt_m_placement_memory_freed(vt_model_t *m, uint64_t addr, uint64_t t);
/* model_advise.c: the offload estimate of the finished picture, into
 * m->p.placement.advice (known only when it can be made). */
void vt_m_placement_advise(vt_model_t *m);
/* No record will follow (vt_model_finish): the maps only reading needs
 * (tensor names, buffer bases) are freed, 32 KB for a 70B model. */
void vt_m_placement_reading_done(vt_model_t *m);
void vt_m_placement_lost(vt_model_t *m, const vt_rec_ggml_lost_t *l);
int vt_m_placement_finish(vt_model_t *m);
void vt_m_placement_free_state(vt_model_t *m);

/* Time since the process started, as the report gives it. */
static inline uint64_t vt_m_rel(const vt_model_t *m, uint64_t t)
{
    return t > m->p.mono_start_ns ? t - m->p.mono_start_ns : 0;
}

/* model_devices.c. The device table, the driver's samples and the views of
 * events with a device's state; it calls nothing else in the model.
 * dev_for: the index of ordinal (a device-space event without a device,
 * -1, is ordinal 0, the runtime's default), added on first sight; -1 past
 * VT_MAX_DEVICES or out of memory. view: the view of ev for device index
 * dev, or without a device (dev < 0). sample: a MEMINFO event on device
 * di; pool_usage: a POOL_USAGE one; record: a DEVICE record. */
int vt_m_dev_for(vt_model_t *m, int ordinal);
void vt_m_view(vt_model_t *m, const vt_event_t *ev, int tag, int dev, vt_event_view_t *v);
void vt_m_dev_sample(vt_model_t *m, int di, const vt_event_t *ev);
/* A free-memory query: counted in proc.llama_fit when llama.cpp's --fit made it. */
void vt_m_fit_query(vt_model_t *m, const vt_event_t *ev);
void vt_m_dev_pool_usage(vt_model_t *m, int di, const vt_event_t *ev);
void vt_m_dev_record(vt_model_t *m, const vt_rec_device_t *r);

/* The estimate of d's free memory: the driver's last word minus what this
 * process allocated since. */
static inline int64_t vt_m_free_est(const vt_dev_t *d)
{
    /* Unsigned, then reinterpreted: the same value wherever the signed
     * expression would not overflow, and no overflow on hostile sizes. */
    return (int64_t)(d->last_free - (d->mem.tracked - d->tracked_at_sample));
}

/* The fields of a view that come from the event itself. */
static inline void vt_m_view_event(const vt_model_t *m, const vt_event_t *ev, int tag, vt_event_view_t *v)
{
    /* Field by field, not memset then fill: one view per allocation event. */
    v->valid = 1;
    v->time_ns = vt_m_rel(m, ev->time_ns);
    v->api = ev->api;
    v->bytes = ev->size;
    v->tag = tag;
    v->result = ev->result;
    v->tid = ev->tid;
    v->stack = ev->stack;
    v->free_after = 0;
}

/* vt_m_view for device d (not NULL): inline here because the event
 * handlers build one per device allocation. */
static inline void vt_m_view_dev(const vt_model_t *m, const vt_event_t *ev, int tag, const vt_dev_t *d,
                                 vt_event_view_t *v)
{
    vt_m_view_event(m, ev, tag, v);
    v->device = d->ordinal;
    v->dev_tracked = d->mem.tracked;
    memcpy(v->dev_by_tag, d->mem.by_tag, sizeof v->dev_by_tag);
    v->have_free = d->have_free;
    v->last_free = d->last_free;
    v->free_est = vt_m_free_est(d);
}

/* model_sites.c. site_for: the site of an allocation with this stack, in
 * space on device index dev (-1 none) with ggml's mark usage (0 none),
 * made (and its tag decided) on first use; 0 or VT_E_NOMEM. sites_feed: a
 * MODULE, FRAME or STACK record. */
int vt_m_site_for(vt_model_t *m, uint32_t stack, int space, int dev, int usage, uint32_t *out);
int vt_m_sites_feed(vt_model_t *m, const vt_record_t *rec);

/* model_live.c. insert: e->addr must be absent from map (vt_m_map_of of
 * its kind); hole is where a probe found it absent, or SIZE_MAX. remove:
 * takes the entry at key out of kind's map; *out (if set) gets a copy and
 * *phys (if set) the device bytes really given back to the driver.
 * @return 1 if it was live, 0 if not, or VT_E_NOMEM. A VMM handle that is
 * still mapped is only detached (see the top of this file): 1, with *phys
 * 0. remove_slot: remove for the slot a probe of map just found. */
int vt_m_live_insert(vt_model_t *m, vt_map_t *map, const live_t *e, uint64_t t, size_t hole);
int vt_m_live_remove(vt_model_t *m, int kind, uint64_t key, uint64_t t, live_t *out, uint64_t *phys);
int vt_m_live_remove_slot(vt_model_t *m, vt_map_t *map, size_t slot, uint64_t t, live_t *out, uint64_t *phys);
/* The live device allocations on device index di, exactly (compacted):
 * *out's keys[0..n). The first call builds the index for every device
 * from the live table; from then on each device allocation adds its
 * address. The caller may shrink n to the addresses it keeps live.
 * 0 or VT_E_NOMEM. */
int vt_m_live_on_device(vt_model_t *m, int di, vt_dev_keys_t **out);
void vt_m_live_dev_keys_free(vt_model_t *m);

/* The map that holds live entries of kind. */
static inline vt_map_t *vt_m_map_of(vt_model_t *m, int kind)
{
    switch (kind) {
    case L_HANDLE: return &m->by_handle;
    case L_VA: return &m->by_va;
    case L_MAP: return &m->by_map;
    default: return &m->by_ptr;
    }
}

/* The tagged bytes and peak of space (on device index dev): NULL for a
 * device-space entry without a device. */
static inline vt_tagged_peak_t *vt_m_space_peak(vt_model_t *m, int space, int dev)
{
    if (space == VT_SPACE_HOST)
        return &m->p.host;
    if (space == VT_SPACE_MANAGED)
        return &m->p.managed;
    return dev >= 0 ? &m->p.devs[dev].mem : NULL;
}

/* model_spill.c */
void vt_m_spill(vt_model_t *m, int kind, const vt_event_view_t *v);
/* cold: the scan runs only with managed memory live or a device marked
 * over; the hint keeps its call and arguments off the per-event path. */
__attribute__((cold)) void vt_m_oversub_scan(vt_model_t *m, const vt_event_t *ev, int tag, int only_dev);

/* Managed oversubscription after a device or managed change (see
 * model_spill.c). Inline because with nothing managed, every device event's
 * verdict is one store, and the call was a visible share of each event. */
static inline void vt_m_check_oversub(vt_model_t *m, const vt_event_t *ev, int tag, int only_dev)
{
    vt_proc_t *p = &m->p;
    if (!p->managed.tracked && only_dev >= 0) {
        /* Nothing managed: only only_dev is looked at, and it is not over
         * (the scan's verdict for it, without the scan). With no device
         * marked over, that verdict changes nothing: one test per event. */
        if (m->oversub_mask && only_dev < p->ndevs && p->devs[only_dev].total) {
            p->devs[only_dev].oversub_active = 0;
            m->oversub_mask &= ~(1ull << only_dev);
        }
        return;
    }
    vt_m_oversub_scan(m, ev, tag, only_dev);
}

/* model_frag.c. before_remove: e is about to leave its map (the first
 * one after a peak marks the snapshot point); added: e just entered its
 * map. view: measures what is still pending, leaving it pending (more
 * may be fed). free: the logs. Each returns 0 or VT_E_NOMEM. */
/* The holes between this process's live ranges on dev now (at a failed
 * request); out->measured stays 0 above VT_FRAG_MAX_LIVE live entries. */
int vt_m_frag_at_failure(vt_model_t *m, int dev, vt_holes_t *out);
int vt_m_frag_note_remove(vt_model_t *m, const live_t *e);
int vt_m_frag_note_added(vt_model_t *m, const live_t *e);

/* Inline gates for the two hooks above: most events meet a device with no
 * point pending or marked, where both hooks do nothing. */
static inline int vt_m_frag_before_remove(vt_model_t *m, const live_t *e)
{
    if (e->dev < 0 || (!m->p.devs[e->dev].frag_pending && !m->flog[e->dev].active))
        return 0;
    return vt_m_frag_note_remove(m, e);
}

static inline int vt_m_frag_added(vt_model_t *m, const live_t *e)
{
    if (e->dev < 0 || !m->flog[e->dev].active)
        return 0;
    return vt_m_frag_note_added(m, e);
}
int vt_m_frag_view(vt_model_t *m);
void vt_m_frag_free(vt_model_t *m);

#endif
