/* Event handling: what each EVENT record means for the model (contract:
 * model.h; the order per event is fixed). A request is judged against the
 * state before it (a spill, a smoking gun, a flush-and-retry), then
 * applied to the live table (model_live.c: charged or released), then the
 * state after it updates the lowest free memory and the margin crossing.
 * Owns the per-event bookkeeping of proc: event and api counts, failures
 * and their retries, implicit and late frees, temporaries, host fallback,
 * context teardowns; and the hints that start loading what the next
 * events will read (vt_model_prefetch). It asks model_sites.c for an
 * allocation's site and tag, model_devices.c for device state and views,
 * and reports spills to model_spill.c; none of those call back here. */
#include "model_internal.h"

#include <stdlib.h>
#include <string.h>

/* A failed device request on device di: the OOM spill, the shortfall, the
 * smoking-gun candidate the next driver sample will judge, and the retry
 * the program may make. */
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
    int di = space == VT_SPACE_DEVICE ? vt_m_dev_for(m, ev->device) : -1;
    /* Only an address ggml could name carries a mark: an allocation or a
     * registration that succeeded. */
    int usage = 0;
    if (__builtin_expect(m->marks_given != NULL, 0) && (kind == L_ALLOC || kind == L_REGISTER) && ev->result == 0 &&
        ev->ptr)
        usage = vt_m_mark_for(m);
    uint32_t si;
    if (vt_m_site_for(m, ev->stack, space, di, usage, &si))
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
        if (space != VT_SPACE_DEVICE || di < 0)
            return 0;
        if (vt_result_out_of_memory(ev->result)) {
            device_failure(m, di, ev, match.tag);
        } else if (!p->events.failed_not_oom++) {
            vt_m_view(m, ev, match.tag, di, &p->first_not_oom);
        }
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
     * new one goes (vt_m_live_insert). Nothing else puts or deletes in between. */
    vt_map_t *map = vt_m_map_of(m, kind);
    size_t hole;
    size_t slot = vt_map_find_hole(map, ev->ptr, &hole);
    if (slot != SIZE_MAX) {
        p->events.implicit_frees++;
        if (vt_m_live_remove_slot(m, map, slot, ev->time_ns, NULL, NULL) < 0)
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
        vt_m_view_dev(m, ev, match.tag, d, v);
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
    if (vt_m_live_insert(m, map, &e, ev->time_ns, hole))
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
                d->min_free_time_ns = vt_m_rel(m, ev->time_ns);
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

/* Things that hold no memory of this process, counted by reference in a
 * map (handles with no memory of their own, pointers to another process's
 * memory): one more reference to key... */
static int ref_add(vt_map_t *map, uint64_t key)
{
    uint32_t refs = 0;
    vt_map_get(map, key, &refs);
    return vt_map_put(map, key, refs < UINT32_MAX ? refs + 1 : refs) ? VT_E_NOMEM : 0;
}

/* ... and the release of one, counted in *released: 1 when ev was one. */
static int ref_release(vt_map_t *map, const vt_event_t *ev, uint64_t *released)
{
    uint32_t refs;
    if (!map->count || ev->result != 0 || !vt_map_get(map, ev->ptr, &refs))
        return 0;
    if (refs > 1)
        vt_map_put(map, ev->ptr, refs - 1);
    else
        vt_map_del(map, ev->ptr, NULL);
    (*released)++;
    return 1;
}

/* A reference to a handle that holds no memory of its own (VMM_EMPTY, or
 * a retain of one's mapping) that its own release will drop. */
static int empty_handle_ref(vt_model_t *m, uint64_t handle)
{
    return ref_add(&m->empty_handles, handle);
}

static int do_empty_handle(vt_model_t *m, const vt_event_t *ev)
{
    uint32_t hi;
    if (ev->result != 0 || !ev->ptr)
        return 0;
    if (ev->api == VT_API_cuMulticastCreate)
        m->p.events.multicast_objects++;
    else
        m->p.events.imported_handles++;
    /* The process's own export imported back can name a handle it created:
     * one more reference to that handle, as a retain is. */
    if (vt_map_get(&m->by_handle, ev->ptr, &hi)) {
        if (m->live[hi].retains < UINT8_MAX)
            m->live[hi].retains++;
        return 0;
    }
    return empty_handle_ref(m, ev->ptr);
}

/* The release of a reference to a handle with no memory of its own: 1 when
 * ev was one. */
static int empty_handle_release(vt_model_t *m, const vt_event_t *ev)
{
    return ref_release(&m->empty_handles, ev, &m->p.events.empty_handle_releases);
}

/* Another process's memory mapped at ev->ptr (PTR_IMPORT): one more
 * reference to that address, which holds nothing of this process. */
static int do_ptr_import(vt_model_t *m, const vt_event_t *ev)
{
    if (ev->result != 0 || !ev->ptr)
        return 0;
    m->p.events.imported_pointers++;
    return ref_add(&m->imported_ptrs, ev->ptr);
}

/* The release of an imported pointer's reference: 1 when ev was one. */
static int imported_ptr_release(vt_model_t *m, const vt_event_t *ev)
{
    return ref_release(&m->imported_ptrs, ev, &m->p.events.imported_pointer_frees);
}

/* cuMemRetainAllocationHandle: one more reference to the handle mapped at
 * aux (or to a handle with no memory of its own). A handle released while
 * mapped (only its mappings keep it) is taken back: it is the program's
 * again, and lives past its last unmap. */
static int do_retain(vt_model_t *m, const vt_event_t *ev)
{
    uint32_t mi, hi;
    if (ev->result == 0 && m->empty_handles.count && vt_map_get(&m->empty_handles, ev->ptr, &mi))
        return empty_handle_ref(m, ev->ptr);
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
    int got = vt_m_live_remove(m, kind, ev->ptr, ev->time_ns, &e, &phys);
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
    int di = vt_m_dev_for(m, ev->device);
    int rc = vt_m_live_remove(m, kind, ev->ptr, ev->time_ns, NULL, NULL);
    if (rc < 0)
        return rc;
    m->p.events.implicit_frees += rc > 0;
    uint32_t hi = UINT32_MAX;
    if (kind == L_MAP && vt_map_get(&m->by_handle, ev->aux, &hi))
        di = m->live[hi].dev;
    live_t e = { ev->ptr, ev->size, 0, UINT32_MAX, VT_TAG_UNKNOWN, (uint8_t)kind, VT_SPACE_DEVICE, 0, (int16_t)di, 0, 0, hi };
    if (vt_m_live_insert(m, vt_m_map_of(m, kind), &e, ev->time_ns, SIZE_MAX))
        return VT_E_NOMEM;
    if (hi != UINT32_MAX)
        m->live[hi].link++;
    return 0;
}

/* A context teardown (CTX_RESET) on device di: the driver freed every
 * allocation the context made. The shim names the device's allocations of
 * other contexts just before (VT_EF_OTHER_CONTEXT, same thread): every
 * other live cuMemAlloc-style allocation on the device goes
 * (docs/report.md). VMM handles and mappings, pinned and managed memory
 * stay, as they outlive the context. Visits only di's allocations. */
static int ctx_teardown(vt_model_t *m, int di, const vt_event_t *ev)
{
    vt_dev_keys_t *k;
    if (vt_m_live_on_device(m, di, &k))
        return VT_E_NOMEM;
    size_t kept = 0, n = k->n;
    int rc = 0;
    for (size_t i = 0; i < n && rc >= 0; i++) {
        uint32_t tid;
        uint64_t key = k->keys[i];
        if (vt_map_get(&m->other_context, key, &tid) && tid == ev->tid) {
            k->keys[kept++] = key;
            continue;
        }
        rc = vt_m_live_remove(m, L_ALLOC, key, ev->time_ns, NULL, NULL);
        m->p.events.teardown_frees += rc > 0;
    }
    if (rc < 0)
        return rc;
    k->n = kept;
    if (kept < n) {
        m->seq++;
        m->last_alloc_kind = -1;
        vt_m_check_oversub(m, ev, VT_TAG_UNKNOWN, di);
    }
    return 0;
}

/* A stream-ordered allocation or free captured into a CUDA graph
 * (VT_EF_CAPTURED): a node of the graph, which allocates at each launch
 * from the driver's graph pool; nothing was allocated or freed, and what a
 * captured free names stays live. */
static int do_captured(vt_model_t *m, const vt_event_t *ev, unsigned kind)
{
    vt_proc_t *p = &m->p;
    if (kind == VT_KIND_ALLOC) {
        p->events.captured_allocs++;
        p->events.captured_bytes += ev->size;
        return vt_map_put(&m->graph_ptrs, ev->ptr, 1) ? VT_E_NOMEM : 0;
    }
    p->events.captured_frees++;
    if (!vt_map_del(&m->graph_ptrs, ev->ptr, NULL))
        p->events.captured_frees_outside++;
    return 0;
}

/* A launch of a CUDA graph (trace_format.h: a failed one, or the first
 * success after a failure). A failure for lack of memory on a device is a
 * spill: the graph pool
 * could not grow for the graph's allocations, of a size the trace does not
 * hold, so no shortfall, free-memory judgement or retry is drawn from it. */
static void graph_launch_event(vt_model_t *m, const vt_event_t *ev)
{
    vt_proc_t *p = &m->p;
    int di;
    if (ev->result == 0) {
        /* The first launch that succeeded after a failed one. */
        if (!p->events.graph_launches_after_failure++)
            p->events.graph_relaunch_time_ns = vt_m_rel(m, ev->time_ns);
        p->events.graph_launch_recovered = p->events.graph_launch_oom;
        return;
    }
    p->events.graph_launch_failures++;
    if (!vt_result_out_of_memory(ev->result) || (di = vt_m_dev_for(m, ev->device)) < 0)
        return;
    p->events.graph_launch_oom++;
    vt_dev_t *d = &p->devs[di];
    d->graph_launch_oom++;
    vt_event_view_t v;
    vt_m_view(m, ev, VT_TAG_UNKNOWN, di, &v);
    v.bytes = 0;
    vt_m_spill(m, VT_SPILL_GRAPH_LAUNCH, &v);
    d->pend_launch_active = 1;
    d->pend_launch_time_ns = v.time_ns;
}

/* What the driver said its graph pool held (trace_format.h, POOL_USAGE). */
static void graph_pool_report(vt_dev_t *d, const vt_event_t *ev)
{
    if (ev->aux == VT_GRAPH_ATTR_RESERVED_CURRENT)
        d->graph_reserved_last = ev->size;
    if (ev->aux == VT_GRAPH_ATTR_RESERVED_CURRENT || ev->aux == VT_GRAPH_ATTR_RESERVED_HIGH) {
        d->graph_pool_reports++;
        if (ev->size > d->graph_reserved_max)
            d->graph_reserved_max = ev->size;
    }
    if ((ev->aux == VT_GRAPH_ATTR_USED_CURRENT || ev->aux == VT_GRAPH_ATTR_USED_HIGH) && ev->size > d->graph_used_max)
        d->graph_used_max = ev->size;
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
    unsigned kind = vt_event_kind(info, ev->aux);
    if (__builtin_expect((ev->flags & VT_EF_CAPTURED) != 0, 0) && ev->result == 0 && ev->ptr &&
        (kind == VT_KIND_ALLOC || kind == VT_KIND_FREE))
        return do_captured(m, ev, kind);
    switch (kind) {
    case VT_KIND_ALLOC:
        if (vt_api_allocates_from_pool(ev->api))
            p->pool_allocs += ev->result == 0;
        /* This process's memory at an imported address: the import was
         * unmapped unseen (a context teardown), so it is gone. */
        if (__builtin_expect(m->imported_ptrs.count != 0, 0) && ev->result == 0)
            vt_map_del(&m->imported_ptrs, ev->ptr, NULL);
        return do_alloc(m, ev, info, L_ALLOC);
    case VT_KIND_VMM_CREATE:
        return do_alloc(m, ev, info, L_HANDLE);
    case VT_KIND_REGISTER:
        return do_alloc(m, ev, info, L_REGISTER);
    case VT_KIND_FREE:
        /* Graph memory freed outside its graph: no allocation of the trace. */
        if (m->graph_ptrs.count && ev->result == 0 && vt_map_del(&m->graph_ptrs, ev->ptr, NULL)) {
            p->events.graph_frees++;
            return 0;
        }
        if (imported_ptr_release(m, ev))
            return 0;
        return do_release(m, ev, L_ALLOC);
    case VT_KIND_UNREGISTER:
        return do_release(m, ev, L_REGISTER);
    case VT_KIND_VMM_RELEASE:
        if (empty_handle_release(m, ev))
            return 0;
        return do_release(m, ev, L_HANDLE);
    case VT_KIND_VMM_EMPTY:
        return do_empty_handle(m, ev);
    case VT_KIND_PTR_IMPORT:
        return do_ptr_import(m, ev);
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
        vt_m_fit_query(m, ev);
        if (ev->result == 0) {
            int di = vt_m_dev_for(m, ev->device);
            if (di >= 0)
                vt_m_dev_sample(m, di, ev);
        }
        return 0;
    case VT_KIND_CTX_RESET: {
        if (ev->flags & VT_EF_OTHER_CONTEXT)
            return vt_map_put(&m->other_context, ev->ptr, ev->tid);
        int rc = 0, di;
        /* A primary context's release that left it active tore nothing down. */
        int kept = ev->aux == VT_CTX_RELEASE_KEPT &&
                   (ev->api == VT_API_cuDevicePrimaryCtxRelease_v2 || ev->api == VT_API_cuDevicePrimaryCtxRelease);
        if (ev->result == 0 && !kept && (di = vt_m_dev_for(m, ev->device)) >= 0)
            rc = ctx_teardown(m, di, ev);
        if (m->other_context.count) {
            /* Freed, not emptied: the map's size is then bounded by the
             * marks of one teardown, not by the largest ever seen. */
            vt_map_free(&m->other_context);
            vt_map_init(&m->other_context);
        }
        return rc;
    }
    case VT_KIND_CAPTURE_BEGIN:
        p->events.captures += ev->result == 0;
        return 0;
    case VT_KIND_GRAPH_LAUNCH:
        graph_launch_event(m, ev);
        return 0;
    case VT_KIND_POOL_USAGE:
        if (ev->result == 0) {
            int di = vt_m_dev_for(m, ev->device);
            if (di >= 0 && ev->api == VT_API_cuDeviceGetGraphMemAttribute)
                graph_pool_report(&p->devs[di], ev);
            else if (di >= 0)
                vt_m_dev_pool_usage(m, di, ev);
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
