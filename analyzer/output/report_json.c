/* --json output, schema "vramtrace-report/3". Every field is documented in
 * docs/report.md; adding a field is compatible, renaming or removing one
 * needs a new schema version. by_tag objects always hold the four built-in
 * tags (then any custom tag); times are ns since the process's trace start
 * (gpus: since the earliest trace start); bytes are integers. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "json.h"
#include "u64map.h"
#include "report.h"

static void by_tag(vt_json_t *j, const char *key, const vt_rules_t *rules, const uint64_t *v)
{
    vt_json_obj(j, key);
    for (int t = 0; t < vt_rules_tag_count(rules); t++)
        vt_json_u64(j, vt_rules_tag_name(rules, t), v[t]);
    vt_json_obj_end(j);
}

/* A process's frames and stacks, each written once (schema /3): "frames"
 * holds every frame its stacks name, "stacks" is a prefix table, each
 * entry a frame and the entry of the stack it was called from, as the
 * Firefox Profiler's stackTable; a stack is one index. Arrays of frame
 * indices per site (schema /2) grew with sites x depth: 20,000 sites of
 * 200 frames were 19.8 MB of JSON from a 445 KB trace. A frame's text
 * depends only on its ip within one process (the stacks are final by now),
 * so the ip is a frame's key. An entry's key is the trace's node and how
 * many frames the walk keeps from it outwards: a walk stops at
 * VT_MAX_STACK_DEPTH frames (as the text's does), so a node met deeper
 * than that in one stack starts it there, with no prefix, and is another
 * entry. */
typedef struct stack_entry {
    uint32_t frame;    /* index in ips */
    uint32_t prefix;   /* its caller's entry, UINT32_MAX for none */
} stack_entry_t;

typedef struct frame_table {
    vt_map_t index;   /* ip -> position in ips */
    uint64_t *ips;    /* in order of first use */
    size_t n, cap;
    vt_map_t stack_index;    /* node | frames kept << 32 -> entry */
    stack_entry_t *stacks;   /* in order of first use, a caller before its callees */
    size_t nstacks, stacks_cap;
} frame_table_t;

/* The process being written: process() resets it, stack() fills it. */
static frame_table_t frames;

static void frames_reset(void)
{
    vt_map_free(&frames.index);
    vt_map_init(&frames.index);
    vt_map_free(&frames.stack_index);
    vt_map_init(&frames.stack_index);
    frames.n = 0;
    frames.nstacks = 0;
}

static void frames_free(void)
{
    vt_map_free(&frames.index);
    vt_map_free(&frames.stack_index);
    free(frames.ips);
    free(frames.stacks);
    frames = (frame_table_t){ 0 };
}

/* @return ip's index in the table, added if new; -1 when out of memory. */
static int64_t frame_index(uint64_t ip)
{
    uint32_t e;
    if (vt_map_get(&frames.index, ip, &e))
        return e;
    if (frames.n >= UINT32_MAX || vt_grow((void **)&frames.ips, &frames.cap, frames.n + 1, sizeof *frames.ips, 1024))
        return -1;
    if (vt_map_put(&frames.index, ip, (uint32_t)frames.n))
        return -1;
    frames.ips[frames.n] = ip;
    return (int64_t)frames.n++;
}

/* @return the entry for frame ip called from entry prefix, keyed by key,
 * added; -1 when out of memory. */
static int64_t stack_add(uint64_t key, uint64_t ip, uint32_t prefix)
{
    int64_t f = frame_index(ip);
    if (f < 0 || frames.nstacks >= UINT32_MAX - 1 ||
        vt_grow((void **)&frames.stacks, &frames.stacks_cap, frames.nstacks + 1, sizeof *frames.stacks, 1024) ||
        vt_map_put(&frames.stack_index, key, (uint32_t)frames.nstacks))
        return -1;
    frames.stacks[frames.nstacks] = (stack_entry_t){ .frame = (uint32_t)f, .prefix = prefix };
    return (int64_t)frames.nstacks++;
}

/* "stack": the entry of the stack whose leaf is node leaf, its frames
 * those vt_stacks_get gives; null for no frames, or when out of memory. */
static void stack(vt_json_t *j, const vt_model_t *m, uint32_t leaf)
{
    const vt_stacks_t *st = vt_model_stacks(m);
    uint32_t ids[VT_MAX_STACK_DEPTH];
    uint64_t ips[VT_MAX_STACK_DEPTH];
    uint32_t parent, have = UINT32_MAX, e;
    int n = 0, known = -1;
    for (uint32_t id = leaf; n < (int)VT_MAX_STACK_DEPTH && vt_stacks_node(st, id, &ips[n], &parent); id = parent)
        ids[n++] = id;
    /* ids[i] keeps n - i frames from itself outwards. */
    for (int i = 0; i < n; i++)
        if (vt_map_get(&frames.stack_index, ids[i] | (uint64_t)(n - i) << 32, &e)) {
            known = i;
            have = e;
            break;
        }
    for (int i = (known < 0 ? n : known) - 1; i >= 0; i--) {
        int64_t k = stack_add(ids[i] | (uint64_t)(n - i) << 32, ips[i], have);
        if (k < 0) {
            vt_json_null(j, "stack");
            return;
        }
        have = (uint32_t)k;
    }
    if (have == UINT32_MAX)
        vt_json_null(j, "stack");
    else
        vt_json_u64(j, "stack", have);
}

/* The process's "frames", in index order, then its "stacks". */
static void frame_table(vt_json_t *j, const vt_model_t *m)
{
    const vt_stacks_t *st = vt_model_stacks(m);
    vt_json_arr(j, "frames");
    for (size_t i = 0; i < frames.n; i++) {
        vt_frame_t f;
        vt_stacks_frame(st, frames.ips[i], &f);
        vt_stacks_src(st, &f, 1);
        vt_json_obj(j, NULL);
        int compact = j->compact;
        j->compact = 1;   /* one line a frame */
        vt_json_str(j, "function", f.display);
        vt_json_str(j, "module", f.module);
        vt_json_str(j, "file", f.file);
        vt_json_u64(j, "line", f.line);
        vt_json_u64(j, "ip", VT_IP_ADDR(f.ip));
        vt_json_obj_end(j);
        j->compact = compact;
    }
    vt_json_arr_end(j);
    vt_json_obj(j, "stacks");
    int compact = j->compact;
    vt_json_arr(j, "frame");
    j->compact = 1;   /* one line an array */
    for (size_t i = 0; i < frames.nstacks; i++)
        vt_json_u64(j, NULL, frames.stacks[i].frame);
    vt_json_arr_end(j);
    j->compact = compact;
    vt_json_arr(j, "prefix");
    j->compact = 1;
    for (size_t i = 0; i < frames.nstacks; i++) {
        if (frames.stacks[i].prefix == UINT32_MAX)
            vt_json_null(j, NULL);
        else
            vt_json_u64(j, NULL, frames.stacks[i].prefix);
    }
    vt_json_arr_end(j);
    j->compact = compact;
    vt_json_obj_end(j);
}

/* Sites go out in rank order, a random walk through p->sites and the
 * stack nodes, and with 100k sites each was two cache misses in a row (the
 * site, then its leaf node): the site 16 ahead and the leaf of the one 8
 * ahead (its site loaded by then) are asked for early. Hints only. */
static void prefetch_sites(const vt_proc_t *p, const size_t *rank, size_t k, const vt_stacks_t *st)
{
    if (k + 16 < p->nsites)
        __builtin_prefetch(&p->sites[rank[k + 16]]);
    if (k + 8 < p->nsites)
        vt_stacks_prefetch(st, p->sites[rank[k + 8]].stack);
}

static void event_view(vt_json_t *j, const char *key, const vt_model_t *m, const vt_event_view_t *v, int with_stack)
{
    if (!v->valid) {
        vt_json_null(j, key);
        return;
    }
    const vt_rules_t *rules = vt_model_rules(m);
    vt_json_obj(j, key);
    vt_json_u64(j, "time_ns", v->time_ns);
    vt_json_str(j, "api", vt_api_name(v->api));
    vt_json_u64(j, "bytes", v->bytes);
    vt_json_str(j, "tag", vt_rules_tag_name(rules, v->tag));
    vt_json_i64(j, "device", v->device);
    vt_json_u64(j, "result", v->result);
    vt_json_u64(j, "tid", v->tid);
    if (with_stack)
        stack(j, m, v->stack);
    vt_json_obj_end(j);
}

static void device(vt_json_t *j, const vt_model_t *m, const vt_dev_t *d)
{
    const vt_rules_t *rules = vt_model_rules(m);
    double margin = vt_model_margin(m);
    char uuid[48];
    vt_json_obj(j, NULL);
    vt_json_i64(j, "ordinal", d->ordinal);
    if (d->have_info && vt_uuid_known(d->uuid)) {
        vt_uuid_str(d->uuid, uuid);
        vt_json_str(j, "uuid", uuid);
    } else {
        vt_json_str(j, "uuid", "");
    }
    vt_json_str(j, "name", d->name);
    vt_json_u64(j, "total_bytes", d->total);
    vt_json_obj(j, "peak");
    vt_json_u64(j, "time_ns", d->mem.peak_time_ns);
    vt_json_u64(j, "tracked_bytes", d->mem.peak_bytes);
    by_tag(j, "by_tag", rules, d->mem.peak_by_tag);
    vt_json_obj_end(j);
    vt_json_u64(j, "live_bytes", d->mem.tracked);
    by_tag(j, "live_by_tag", rules, d->mem.by_tag);
    vt_json_u64(j, "allocs", d->allocs);
    vt_json_u64(j, "failures", d->failures);

    vt_headroom_t h;
    vt_dev_headroom(m, d, &h);
    vt_json_obj(j, "headroom");
    vt_json_u64(j, "context_bytes", h.reserve);
    vt_json_u64(j, "min_free_bytes", d->have_min ? d->min_free : 0);
    vt_json_u64(j, "min_free_time_ns", d->have_min ? d->min_free_time_ns : 0);
    vt_json_bool(j, "min_free_estimated", d->have_min && d->min_free_estimated);
    vt_json_u64(j, "untracked_bytes", h.untracked);
    if (d->graph_pool_reports) {
        vt_json_obj(j, "graph_pool");
        vt_json_u64(j, "reports", d->graph_pool_reports);
        vt_json_u64(j, "reserved_max_bytes", d->graph_reserved_max);
        vt_json_u64(j, "reserved_last_bytes", d->graph_reserved_last);
        vt_json_u64(j, "used_max_bytes", d->graph_used_max);
        vt_json_obj_end(j);
    } else {
        vt_json_null(j, "graph_pool");
    }
    vt_json_u64(j, "tracked_live_bytes", d->mem.tracked);
    vt_json_u64(j, "last_free_bytes", d->have_free ? d->last_free : 0);
    vt_json_u64(j, "last_free_time_ns", d->have_free ? d->last_free_time_ns : 0);
    vt_json_bool(j, "free_known", d->have_free);
    if (d->have_free_at_peak)
        vt_json_u64(j, "free_at_peak_bytes", d->free_at_peak);
    else
        vt_json_null(j, "free_at_peak_bytes");
    vt_json_num(j, "margin_pct", margin);
    vt_json_u64(j, "margin_bytes", h.margin_bytes);
    vt_json_bool(j, "above_margin", h.crossed == VT_MARGIN_ABOVE);
    if (h.crossed != VT_MARGIN_ABOVE) {
        vt_json_obj(j, "first_below_margin");
        vt_json_u64(j, "time_ns", d->below_margin.time_ns);
        vt_json_str(j, "api", vt_api_name(d->below_margin.api));
        vt_json_u64(j, "bytes", d->below_margin.bytes);
        vt_json_str(j, "tag", vt_rules_tag_name(rules, d->below_margin.tag));
        vt_json_u64(j, "free_after_bytes", d->below_margin.free_after);
        /* "allocation": this process's request crossed it; "report": a
         * driver report found free below it, outside_bytes more gone than
         * this process's own allocations explain. */
        vt_json_str(j, "crossed_by", h.crossed == VT_MARGIN_CROSSED_BY_REPORT ? "report" : "allocation");
        vt_json_u64(j, "outside_bytes", h.outside);
        stack(j, m, d->below_margin.stack);
        vt_json_obj_end(j);
    } else {
        vt_json_null(j, "first_below_margin");
    }
    vt_json_obj_end(j);

    vt_json_obj(j, "fragmentation");
    vt_json_u64(j, "rounding_waste_bytes", d->peak_rounding_waste);
    vt_json_u64(j, "va_reserved_bytes", d->peak_va_reserved);
    vt_json_u64(j, "va_mapped_bytes", d->peak_va_mapped);
    vt_json_u64(j, "va_unmapped_bytes", d->peak_va_reserved > d->peak_va_mapped ? d->peak_va_reserved - d->peak_va_mapped : 0);
    vt_json_u64(j, "va_reserved_max_bytes", d->max_va_reserved);
    vt_json_u64(j, "vmm_physical_bytes", d->peak_vmm_physical);
    if (d->have_pool_slack_at_peak)
        vt_json_u64(j, "pool_slack_bytes", d->pool_slack_at_peak);
    else
        vt_json_null(j, "pool_slack_bytes");
    vt_json_u64(j, "pool_slack_max_bytes", d->max_pool_slack);
    if (d->frag_computed) {
        vt_json_obj(j, "external");
        vt_json_u64(j, "live_allocations", d->frag_live_allocs);
        vt_json_u64(j, "span_bytes", d->frag_span);
        vt_json_u64(j, "hole_bytes", d->frag_holes);
        vt_json_u64(j, "largest_hole_bytes", d->frag_largest_hole);
        vt_json_num(j, "ratio", d->frag_holes ? 1.0 - (double)d->frag_largest_hole / (double)d->frag_holes : 0.0);
        vt_json_obj_end(j);
    } else {
        vt_json_null(j, "external");
    }
    vt_json_obj(j, "failed_with_free");
    vt_json_u64(j, "count", d->failed_with_free);
    if (d->failed_with_free && d->first_failed_with_free.valid) {
        vt_json_obj(j, "first");
        vt_json_u64(j, "time_ns", d->first_failed_with_free.time_ns);
        vt_json_str(j, "api", vt_api_name(d->first_failed_with_free.api));
        vt_json_u64(j, "bytes", d->first_failed_with_free.bytes);
        vt_json_u64(j, "free_bytes", vt_view_free(&d->first_failed_with_free));
        if (d->gun_holes.measured) {
            vt_json_obj(j, "holes");
            vt_json_u64(j, "bytes", d->gun_holes.bytes);
            vt_json_u64(j, "largest_bytes", d->gun_holes.largest);
            vt_json_u64(j, "live_ranges", d->gun_holes.ranges);
            vt_json_obj_end(j);
        } else {
            vt_json_null(j, "holes");
        }
        vt_json_obj_end(j);
    } else {
        vt_json_null(j, "first");
    }
    vt_json_obj_end(j);
    vt_json_obj(j, "flush_retry");
    vt_json_u64(j, "count", d->retry_bursts);
    vt_json_u64(j, "freed_bytes", d->retry_freed_bytes);
    vt_json_u64(j, "recovered", d->retry_recovered);
    if (d->retry_bursts) {
        vt_json_obj(j, "first");
        vt_json_u64(j, "time_ns", d->first_burst.time_ns);
        vt_json_str(j, "api", vt_api_name(d->first_burst.api));
        vt_json_u64(j, "bytes", d->first_burst.bytes);
        vt_json_u64(j, "frees", d->first_burst_frees);
        vt_json_u64(j, "freed_bytes", d->first_burst_freed);
        vt_json_obj_end(j);
    } else {
        vt_json_null(j, "first");
    }
    vt_json_obj_end(j);
    vt_json_obj_end(j);
    vt_json_obj_end(j);
}

static void tagged(vt_json_t *j, const char *key, const vt_rules_t *rules, const vt_tagged_peak_t *tp)
{
    vt_json_obj(j, key);
    vt_json_u64(j, "peak_bytes", tp->peak_bytes);
    vt_json_u64(j, "peak_time_ns", tp->peak_time_ns);
    by_tag(j, "by_tag", rules, tp->peak_by_tag);
    vt_json_u64(j, "live_bytes", tp->tracked);
}

static void spill(vt_json_t *j, const vt_model_t *m)
{
    const vt_proc_t *p = vt_model_proc(m);
    const vt_rules_t *rules = vt_model_rules(m);
    if (!p->tip.valid) {
        vt_json_null(j, "spill");
        return;
    }
    vt_json_obj(j, "spill");
    vt_json_str(j, "kind", vt_spill_kind_name(p->tip_kind));
    event_view(j, "event", m, &p->tip, 1);
    vt_json_obj(j, "device_state");
    vt_json_i64(j, "device", p->tip.device);
    vt_json_u64(j, "tracked_bytes", p->tip.dev_tracked);
    by_tag(j, "by_tag", rules, p->tip.dev_by_tag);
    vt_json_bool(j, "free_known", p->tip.have_free);
    vt_json_u64(j, "last_free_bytes", p->tip.last_free);
    vt_json_u64(j, "headroom_bytes", vt_view_free(&p->tip));
    vt_json_obj_end(j);
    vt_json_obj(j, "kinds");
    for (int k = 0; k < VT_SPILL_KINDS; k++) {
        vt_json_obj(j, vt_spill_kind_name(k));
        vt_json_u64(j, "count", p->spill_count[k]);
        vt_json_u64(j, "bytes", p->spill_bytes[k]);
        vt_json_obj_end(j);
    }
    vt_json_obj_end(j);
    vt_json_u64(j, "later_count", p->nlater);
    vt_json_arr(j, "later");
    for (uint64_t i = 0; i < p->nlater && i < VT_MAX_LATER_SPILLS; i++) {
        const vt_spill_brief_t *b = &p->later[i];
        vt_json_obj(j, NULL);
        vt_json_str(j, "kind", vt_spill_kind_name(b->kind));
        vt_json_u64(j, "time_ns", b->time_ns);
        vt_json_str(j, "api", vt_api_name(b->api));
        vt_json_u64(j, "bytes", b->bytes);
        vt_json_str(j, "tag", vt_rules_tag_name(rules, b->tag));
        vt_json_i64(j, "device", b->device);
        vt_json_u64(j, "result", b->result);
        vt_json_obj_end(j);
    }
    vt_json_arr_end(j);
    vt_json_u64(j, "more_vram_bytes", vt_proc_more_vram(p));
    vt_json_u64(j, "host_fallback_peak_bytes", p->fallback_peak);
    vt_json_u64(j, "oom_shortfall_bytes", p->oom_shortfall);
    vt_json_u64(j, "managed_excess_bytes", p->oversub_excess);
    vt_json_obj_end(j);
}

/* One member per GPU ordinal with a nonzero count, named PREFIX + ordinal
 * ("gpu0", or "0" with an empty prefix); values are u64 or u32 (wide). */
static void per_gpu(vt_json_t *j, const char *prefix, const uint64_t *v64, const uint32_t *v32)
{
    for (int i = 0; i < VT_MAX_DEVICES; i++) {
        uint64_t v = v64 ? v64[i] : v32[i];
        char k[16];
        if (!v)
            continue;
        snprintf(k, sizeof k, "%s%d", prefix, i);
        vt_json_u64(j, k, v);
    }
}

static void place_bytes(vt_json_t *j, const char *key, const vt_place_bytes_t *b)
{
    vt_json_obj(j, key);
    vt_json_u64(j, "gpu_bytes", b->gpu);
    vt_json_u64(j, "host_bytes", vt_place_host(b));
    vt_json_obj(j, "by_place");
    per_gpu(j, "gpu", b->gpu_by_dev, NULL);
    if (b->gpu > 0) {
        uint64_t named = 0;
        for (int i = 0; i < VT_MAX_DEVICES; i++)
            named += b->gpu_by_dev[i];
        if (b->gpu > named)
            vt_json_u64(j, "gpu_unnamed", b->gpu - named);
    }
    vt_json_u64(j, "pinned_host", b->pinned);
    vt_json_u64(j, "mapped_host", b->mapped);
    vt_json_u64(j, "pageable_host", b->pageable);
    vt_json_obj_end(j);
    vt_json_obj_end(j);
}

/* processes[].placement (docs/report.md, "Placement"): null without
 * ggml's buffer records. */
static void placement(vt_json_t *j, const vt_proc_t *p)
{
    const vt_placement_t *pl = &p->placement;
    if (!pl->known && vt_proc_pinned_offload(p)) {
        /* From the tagged allocations: weights and KV at each space's peak. */
        vt_place_bytes_t w = { 0 }, kv = { 0 };
        for (int i = 0; i < p->ndevs; i++) {
            int ord = p->devs[i].ordinal;
            w.gpu += p->devs[i].mem.peak_by_tag[VT_TAG_WEIGHTS];
            kv.gpu += p->devs[i].mem.peak_by_tag[VT_TAG_KV];
            if (ord >= 0 && ord < VT_MAX_DEVICES) {
                w.gpu_by_dev[ord] += p->devs[i].mem.peak_by_tag[VT_TAG_WEIGHTS];
                kv.gpu_by_dev[ord] += p->devs[i].mem.peak_by_tag[VT_TAG_KV];
            }
        }
        w.pinned = p->host.by_tag[VT_TAG_WEIGHTS];
        kv.pinned = p->host.by_tag[VT_TAG_KV];
        vt_json_obj(j, "placement");
        vt_json_str(j, "source", "allocations");
        vt_json_bool(j, "offloaded", 1);
        place_bytes(j, "weights", &w);
        place_bytes(j, "kv", &kv);
        vt_json_null(j, "layers");
        vt_json_null(j, "advice");
        vt_json_obj_end(j);
        return;
    }
    if (!pl->known) {
        vt_json_null(j, "placement");
        return;
    }
    vt_json_obj(j, "placement");
    vt_json_str(j, "source", "ggml");
    vt_json_num(j, "at_s", (double)pl->at_ns / 1e9);
    vt_json_bool(j, "offloaded", pl->offloaded);
    place_bytes(j, "weights", &pl->weights);
    place_bytes(j, "layer_weights", &pl->layer_weights_at);
    place_bytes(j, "kv", &pl->kv);
    place_bytes(j, "compute", &pl->compute);
    place_bytes(j, "other", &pl->other);
    vt_json_u64(j, "token_embeddings_host_bytes", pl->input_host);
    vt_json_u64(j, "models_at_once", pl->models_at_once);
    vt_json_arr(j, "other_models");
    for (uint32_t i = 0; i + 1 < pl->models_at_once && i < VT_MAX_OTHER_MODELS; i++) {
        vt_json_obj(j, NULL);
        vt_json_u64(j, "layers_total", pl->other_models[i].layers_total);
        vt_json_u64(j, "layers_gpu", pl->other_models[i].layers_gpu);
        vt_json_u64(j, "layer_weight_bytes", pl->other_models[i].layer_weights);
        vt_json_u64(j, "layer_weight_host_bytes", pl->other_models[i].layer_weights_host);
        vt_json_u64(j, "kv_host_bytes", pl->other_models[i].kv_host);
        vt_json_obj_end(j);
    }
    vt_json_arr_end(j);
    if (pl->kv_cells)
        vt_json_u64(j, "kv_cells", pl->kv_cells);
    else
        vt_json_null(j, "kv_cells");
    if (pl->kv_streams)
        vt_json_u64(j, "kv_streams", pl->kv_streams);
    else
        vt_json_null(j, "kv_streams");
    if (pl->layers_known) {
        vt_json_obj(j, "layers");
        vt_json_u64(j, "gpu", pl->layers_gpu);
        vt_json_u64(j, "total", pl->layers_total);
        vt_json_u64(j, "host", pl->layers_total - pl->layers_gpu);
        vt_json_u64(j, "blocks", pl->blocks);
        vt_json_u64(j, "blocks_gpu", pl->blocks_gpu);
        if (pl->output_layer < 0)
            vt_json_null(j, "output_layer");
        else
            vt_json_str(j, "output_layer", pl->output_layer ? "gpu" : "host");
        vt_json_obj(j, "blocks_by_gpu");
        per_gpu(j, "", NULL, pl->layers_by_dev);
        vt_json_obj_end(j);
        vt_json_u64(j, "kv_blocks", pl->kv_blocks);
        vt_json_u64(j, "kv_blocks_gpu", pl->kv_blocks_gpu);
        vt_json_u64(j, "block_weight_bytes", pl->block_weight_bytes);
        vt_json_u64(j, "block_kv_bytes", pl->block_kv_bytes);
        vt_json_u64(j, "expert_blocks_host", pl->expert_blocks_host);
        vt_json_u64(j, "experts_host_bytes", pl->experts_host);
        vt_json_u64(j, "kv_blocks_host", pl->kv_blocks_host);
        vt_json_u64(j, "kv_host_of_gpu_blocks_bytes", pl->kv_host_of_gpu_blocks);
        vt_json_u64(j, "override_blocks", pl->override_blocks);
        vt_json_u64(j, "override_host_bytes", pl->override_host);
        vt_json_u64(j, "part_blocks_host", pl->part_blocks_host);
        vt_json_u64(j, "part_host_bytes", pl->part_host);
        vt_json_obj_end(j);
    } else {
        vt_json_null(j, "layers");
    }
    const typeof(pl->advice) *a = &pl->advice;
    if (a->known) {
        vt_json_obj(j, "advice");
        vt_json_bool(j, "estimate", 1);
        vt_json_i64(j, "device", a->device);
        vt_json_u64(j, "gpu_layers", a->gpu_layers);
        vt_json_u64(j, "per_layer_bytes", a->per_layer);
        vt_json_u64(j, "per_layer_kv_bytes", a->per_layer_kv);
        vt_json_u64(j, "total_bytes", a->total);
        vt_json_u64(j, "free_lowest_bytes", a->free_lowest);
        vt_json_u64(j, "margin_bytes", a->margin);
        vt_json_u64(j, "unmet_request_bytes", a->unmet);
        vt_json_i64(j, "room_bytes", a->room);
        vt_json_u64(j, "all_layers_need_bytes", a->need_all);
        vt_json_i64(j, "all_layers_short_bytes", a->short_all > 0 ? a->short_all : 0);
        vt_json_u64(j, "expert_blocks_fit", a->expert_blocks_fit);
        vt_json_bool(j, "experts_kept", a->experts_kept);
        vt_json_bool(j, "of_kv", a->of_kv);
        vt_json_bool(j, "kv_fits", a->kv_fits);
        vt_json_bool(j, "kv_kept", a->kv_kept);
        vt_json_bool(j, "of_override", a->of_override);
        vt_json_u64(j, "override_blocks_fit", a->override_blocks_fit);
        vt_json_u64(j, "override_blocks_counted", a->override_n);
        vt_json_u64(j, "override_counted_bytes", a->override_bytes);
        vt_json_obj_end(j);
    } else {
        vt_json_null(j, "advice");
    }
    vt_json_u64(j, "advice_withheld_gpus", pl->advice_withheld_gpus);
    vt_json_u64(j, "advice_withheld_devices", pl->advice_withheld_devices);
    vt_json_bool(j, "advice_withheld_experts", pl->advice_withheld_experts);
    vt_json_bool(j, "advice_withheld_override", pl->advice_withheld_override);
    if (pl->advice_withheld_kv)
        vt_json_str(j, "advice_withheld_kv",
                    pl->advice_withheld_kv == VT_WITHHELD_KV_SOME ? "some_blocks" : "with_experts");
    else
        vt_json_null(j, "advice_withheld_kv");
    const char *args[VT_LAYER_ARGS_MAX];
    size_t n = vt_proc_layer_args(p, args, VT_LAYER_ARGS_MAX);
    vt_json_arr(j, "program_args");
    for (size_t i = 0; i < n; i++)
        vt_json_str(j, NULL, args[i]);
    vt_json_arr_end(j);
    n = vt_proc_layer_env(p, args, VT_LAYER_ARGS_MAX);
    vt_json_arr(j, "program_env");
    for (size_t i = 0; i < n; i++)
        vt_json_str(j, NULL, args[i]);
    vt_json_arr_end(j);
    vt_llama_fit_t fit;
    vt_proc_llama_fit(p, &fit);
    if (fit.ran) {
        static const char *const from[] = { "default", "command_line", "environment" };
        vt_json_obj(j, "llama_fit");
        vt_json_u64(j, "queries", p->llama_fit.queries);
        vt_json_u64(j, "first_ns", p->llama_fit.first_ns);
        vt_json_u64(j, "last_ns", p->llama_fit.last_ns);
        /* null: an unrecorded environment could have set an -ngl or an override. */
        if (vt_proc_fit_chose(p) || fit.ngl || fit.override)
            vt_json_bool(j, "chose_layers", vt_proc_fit_chose(p));
        else
            vt_json_null(j, "chose_layers");
        vt_json_str_or_null(j, "override", fit.override);
        vt_json_str_or_null(j, "override_value", fit.override ? fit.override_value : NULL);
        vt_json_str(j, "override_from", from[fit.override_from]);
        vt_json_str_or_null(j, "split", fit.split);
        vt_json_str_or_null(j, "split_value", fit.split ? fit.split_value : NULL);
        vt_json_str(j, "split_from", from[fit.split_from]);
        vt_json_str_or_null(j, "ngl", fit.ngl);
        vt_json_str(j, "ngl_from", from[fit.ngl_from]);
        if (fit.target_bytes)
            vt_json_u64(j, "target_bytes", fit.target_bytes);
        else
            vt_json_null(j, "target_bytes");
        vt_json_str_or_null(j, "target", fit.target);
        vt_json_str(j, "target_from", from[fit.target_from]);
        vt_json_bool(j, "environment_recorded", fit.env_recorded);
        /* null: an unrecorded environment could have set the context. */
        if (fit.ctx || fit.env_recorded)
            vt_json_bool(j, "chose_context", !fit.ctx);
        else
            vt_json_null(j, "chose_context");
        vt_json_str_or_null(j, "ctx", fit.ctx);
        vt_json_str(j, "ctx_from", from[fit.ctx_from]);
        vt_json_str_or_null(j, "fit_ctx", fit.fit_ctx);
        vt_json_str(j, "fit_ctx_from", from[fit.fit_ctx_from]);
        vt_json_obj_end(j);
    } else {
        vt_json_null(j, "llama_fit");
    }
    vt_json_u64(j, "tensors", pl->tensors);
    vt_json_u64(j, "tensors_unattributed", pl->tensors_unattributed);
    vt_json_u64(j, "buffers_placed_again", pl->placed_again);
    vt_json_u64(j, "buffers_outside_picture", pl->buffers_outside);
    vt_json_u64(j, "records_lost", pl->lost + pl->records_over_bounds);
    vt_json_obj_end(j);
}

static void process(vt_json_t *j, const vt_report_t *r, const vt_report_input_t *in)
{
    const vt_model_t *m = in->model;
    const vt_proc_t *p = vt_model_proc(m);
    const vt_rules_t *rules = vt_model_rules(m);
    frames_reset();
    vt_json_obj(j, NULL);
    vt_json_u64(j, "pid", p->pid);
    vt_json_u64(j, "ppid", p->ppid);
    vt_json_str(j, "exe", p->exe);
    vt_json_arr(j, "argv");
    for (uint32_t i = 0; i < p->argc; i++)
        vt_json_str(j, NULL, p->argv[i]);
    vt_json_arr_end(j);
    if (p->env_recorded) {
        vt_json_arr(j, "env");
        for (uint32_t i = 0; i < p->envc; i++)
            vt_json_str(j, NULL, p->env[i]);
        vt_json_arr_end(j);
    } else {
        vt_json_null(j, "env");
    }
    vt_json_str(j, "hostname", p->hostname);
    vt_json_u64(j, "start_wall_ns", p->wall_start_ns);
    vt_json_str(j, "verdict", vt_proc_verdict(p, 1));
    vt_json_bool(j, "placement_unseen", vt_proc_placement_unseen(p));
    vt_json_str(j, "verdict_of_read_part", vt_proc_verdict(p, 0));
    placement(j, p);
    vt_json_obj(j, "trace");
    vt_json_str(j, "path", in->path);
    vt_json_bool(j, "complete", p->ended && !in->truncated && !in->damaged);
    vt_json_bool(j, "ended", p->ended);
    if (vt_end_how_key(p))
        vt_json_str(j, "ended_by", vt_end_how_key(p));
    else
        vt_json_null(j, "ended_by");
    vt_json_bool(j, "truncated", in->truncated);
    vt_json_bool(j, "damaged", in->damaged);
    if (in->truncated || in->damaged)
        vt_json_u64(j, "stopped_at_offset", in->stop_offset);
    else
        vt_json_null(j, "stopped_at_offset");
    if (in->damaged)
        vt_json_str(j, "damage", in->stop_reason);
    vt_json_arr(j, "shim_without");
    if (p->degraded & VT_DEGRADED_NO_ZSTD)
        vt_json_str(j, NULL, "libzstd.so.1");
    if (p->degraded & VT_DEGRADED_NO_LIBUNWIND)
        vt_json_str(j, NULL, "libunwind.so.8");
    if (p->degraded & VT_DEGRADED_SHARED_FDS)
        vt_json_str(j, NULL, "unshare(CLONE_FILES)");
    vt_json_arr_end(j);
    vt_json_u64(j, "duration_ns", p->ended ? p->end_time_ns
                                           : (p->last_time_ns > p->mono_start_ns ? p->last_time_ns - p->mono_start_ns : 0));
    vt_json_obj_end(j);
    vt_json_obj(j, "events");
    vt_json_u64(j, "allocs", p->events.allocs);
    vt_json_u64(j, "frees", p->events.frees);
    vt_json_u64(j, "failed", p->events.failed);
    vt_json_u64(j, "dropped", p->events.dropped);
    /* dropped is a lower bound unless the trace ended cleanly: the loss
     * after its last DROPPED record is unknown. */
    vt_json_bool(j, "dropped_exact", p->ended && !in->truncated && !in->damaged);
    if (p->events.by_reason.reasons) {
        vt_json_obj(j, "dropped_by_reason");
        uint64_t named = 0;
        for (int i = 0; i < VT_LOST_REASONS; i++) {
            vt_json_u64(j, vt_lost_reason_key(i), p->events.by_reason.lost[i]);
            named += p->events.by_reason.lost[i];
        }
        vt_json_u64(j, "unnamed", p->events.dropped - named);
        vt_json_obj_end(j);
    } else {
        vt_json_null(j, "dropped_by_reason");
    }
    vt_json_u64(j, "total", p->events.total);
    vt_json_u64(j, "unmatched_frees", p->events.unmatched_frees);
    vt_json_u64(j, "implicit_frees", p->events.implicit_frees);
    vt_json_u64(j, "unknown_api", p->events.unknown_api);
    vt_json_u64(j, "stacks_lost", p->events.stacks_lost);
    vt_json_u64(j, "teardown_frees", p->events.teardown_frees);
    vt_json_u64(j, "impossible_requests", p->events.impossible);
    vt_json_u64(j, "failed_not_oom", p->events.failed_not_oom);
    event_view(j, "first_failed_not_oom", m, &p->first_not_oom, 1);
    vt_json_u64(j, "graph_captures", p->events.captures);
    vt_json_u64(j, "captured_allocs", p->events.captured_allocs);
    vt_json_u64(j, "captured_bytes", p->events.captured_bytes);
    vt_json_u64(j, "captured_frees", p->events.captured_frees);
    vt_json_u64(j, "captured_frees_outside", p->events.captured_frees_outside);
    vt_json_u64(j, "graph_frees", p->events.graph_frees);
    vt_json_u64(j, "graph_launch_failures", p->events.graph_launch_failures);
    vt_json_u64(j, "graph_launch_oom", p->events.graph_launch_oom);
    vt_json_u64(j, "graph_launches_after_failure", p->events.graph_launches_after_failure);
    vt_json_u64(j, "graph_launch_recovered", p->events.graph_launch_recovered);
    vt_json_u64(j, "imported_handles", p->events.imported_handles);
    vt_json_u64(j, "multicast_objects", p->events.multicast_objects);
    vt_json_u64(j, "empty_handle_releases", p->events.empty_handle_releases);
    vt_json_u64(j, "imported_pointers", p->events.imported_pointers);
    vt_json_u64(j, "imported_pointer_frees", p->events.imported_pointer_frees);
    vt_json_obj_end(j);
    vt_json_obj(j, "ggml_marks");
    vt_json_u64(j, "read", p->ggml.marks);
    vt_json_u64(j, "matched", p->ggml.matched);
    vt_json_u64(j, "unmatched", p->ggml.unmatched);
    vt_json_u64(j, "remarked", p->ggml.remarked);
    vt_json_obj_end(j);
    vt_json_obj(j, "apis");
    for (unsigned a = 0; a < VT_API_COUNT; a++) {
        if (!p->apis[a].calls)
            continue;
        vt_json_obj(j, vt_api_name(a));
        vt_json_u64(j, "calls", p->apis[a].calls);
        vt_json_u64(j, "failed", p->apis[a].failed);
        vt_json_u64(j, "bytes", p->apis[a].bytes);
        vt_json_obj_end(j);
    }
    vt_json_obj_end(j);
    vt_json_arr(j, "devices");
    for (int i = 0; i < p->ndevs; i++)
        device(j, m, &p->devs[i]);
    vt_json_arr_end(j);
    tagged(j, "host_pinned", rules, &p->host);
    vt_json_u64(j, "registered_bytes", p->host_registered);
    vt_json_obj_end(j);
    tagged(j, "managed", rules, &p->managed);
    vt_json_obj_end(j);
    vt_json_u64(j, "offloaded_weights_bytes", p->host.peak_by_tag[VT_TAG_WEIGHTS]);
    vt_json_obj(j, "pools");
    vt_json_u64(j, "created", p->pools_created);
    vt_json_u64(j, "allocs", p->pool_allocs);
    vt_json_u64(j, "trims", p->pool_trims);
    vt_json_obj_end(j);
    spill(j, m);
    size_t *rank = vt_sites_ordered(p, p->nsites, r->opts.order);
    /* Each site's place in "sites", for the --leaks and --churn references. */
    size_t *pos = rank ? malloc((p->nsites ? p->nsites : 1) * sizeof *pos) : NULL, shown = 0;
    for (size_t k = 0; pos && k < p->nsites; k++)
        pos[k] = SIZE_MAX;
    vt_json_arr(j, "sites");
    for (size_t k = 0; rank && k < p->nsites; k++) {
        const vt_site_t *s = &p->sites[rank[k]];
        prefetch_sites(p, rank, k, vt_model_stacks(m));
        if (!vt_site_matches(m, s, r->opts.filter))
            continue;
        if (pos)
            pos[rank[k]] = shown;
        shown++;
        char rule[1024];
        vt_rules_describe(rules, &s->match, rule, sizeof rule);
        vt_json_obj(j, NULL);
        vt_json_str(j, "tag", vt_rules_tag_name(rules, s->match.tag));
        vt_json_str(j, "rule", rule);
        vt_json_str(j, "decided_by", vt_decided_name(s->decided));
        if (s->ggml_usage)
            vt_json_str(j, "ggml_mark", vt_ggml_usage_name(s->ggml_usage));
        else
            vt_json_null(j, "ggml_mark");
        if (s->decided == VT_DECIDED_GGML_MARK) {
            char said[1024];
            vt_rules_describe(rules, &s->stack_match, said, sizeof said);
            if (s->stack_match.rule >= 0) {
                vt_json_str(j, "stack_rule", said);
                vt_json_str(j, "stack_rule_tag", vt_rules_tag_name(rules, s->stack_match.tag));
            } else {
                vt_json_null(j, "stack_rule");
                vt_json_null(j, "stack_rule_tag");
            }
        }
        vt_json_str(j, "space", vt_space_name(s->space));
        vt_json_i64(j, "device", s->device);
        vt_json_u64(j, "calls", s->calls);
        vt_json_u64(j, "failed", s->failed);
        vt_json_u64(j, "failed_bytes", s->failed_bytes);
        if (s->failed) {
            const char *err = vt_result_name(s->failed_api, s->failed_result);
            vt_json_str(j, "failed_result", err ? err : "");
            vt_json_u64(j, "failed_result_code", s->failed_result);
        } else {
            vt_json_null(j, "failed_result");
            vt_json_null(j, "failed_result_code");
        }
        vt_json_u64(j, "peak_bytes", s->at_peak);
        vt_json_u64(j, "max_live_bytes", s->max_live);
        vt_json_u64(j, "total_bytes", s->total_bytes);
        vt_json_u64(j, "live_bytes", s->live);
        vt_json_u64(j, "live_allocations", s->live_allocs);
        vt_json_u64(j, "freed", s->frees);
        vt_json_u64(j, "freed_bytes", s->freed_bytes);
        stack(j, m, s->stack);
        vt_json_obj_end(j);
    }
    vt_json_arr_end(j);
    free(rank);
    vt_report_json_heap(j, r, m, pos);
    free(pos);
    frame_table(j, m);
    vt_json_obj_end(j);
}

void vt_report_json(const vt_report_t *r, FILE *out)
{
    vt_json_t j;
    vt_json_init(&j, out);
    vt_map_init(&frames.index);
    vt_map_init(&frames.stack_index);
    vt_json_obj(&j, NULL);
    vt_json_str(&j, "schema", "vramtrace-report/3");
    vt_json_num(&j, "margin_pct", r->opts.margin_pct);
    if (r->opts.filter)
        vt_json_str(&j, "sites_filter", r->opts.filter);
    vt_json_arr(&j, "processes");
    for (int i = 0; i < r->nin; i++)
        process(&j, r, &r->in[i]);
    vt_json_arr_end(&j);
    vt_json_arr(&j, "not_reported");
    for (int i = 0; i < r->nbad; i++) {
        vt_json_obj(&j, NULL);
        vt_json_str(&j, "path", r->bad[i].path);
        vt_json_u64(&j, "offset", r->bad[i].offset);
        vt_json_str(&j, "error", r->bad[i].reason);
        vt_json_obj_end(&j);
    }
    vt_json_arr_end(&j);
    vt_json_arr(&j, "gpus");
    for (int g = 0; g < r->ngpus; g++) {
        const vt_gpu_t *gp = &r->gpus[g];
        char uuid[48];
        vt_uuid_str(gp->uuid, uuid);
        vt_json_obj(&j, NULL);
        vt_json_str(&j, "uuid", uuid);
        vt_json_str(&j, "name", gp->name);
        vt_json_u64(&j, "total_bytes", gp->total);
        vt_json_obj(&j, "peak");
        vt_json_u64(&j, "time_ns", gp->have_peak && gp->peak_time_abs > r->t0 ? gp->peak_time_abs - r->t0 : 0);
        vt_json_u64(&j, "tracked_bytes", gp->peak_bytes);
        by_tag(&j, "by_tag", r->rules, gp->peak_by_tag);
        vt_json_obj_end(&j);
        vt_json_u64(&j, "min_free_bytes", gp->have_min ? gp->min_free : 0);
        vt_json_u64(&j, "min_free_time_ns", gp->have_min && gp->min_free_time_abs > r->t0 ? gp->min_free_time_abs - r->t0 : 0);
        vt_json_arr(&j, "processes");
        for (int k = 0; k < gp->nprocs; k++) {
            const vt_proc_t *p = vt_model_proc(gp->procs[k]);
            vt_json_obj(&j, NULL);
            vt_json_u64(&j, "pid", p->pid);
            vt_json_str(&j, "exe", vt_base(p->exe));
            vt_json_i64(&j, "ordinal", p->devs[gp->dev_index[k]].ordinal);
            vt_json_u64(&j, "peak_bytes", p->devs[gp->dev_index[k]].mem.peak_bytes);
            vt_json_u64(&j, "bytes_at_gpu_peak", gp->have_peak ? gp->peak_contrib[k] : 0);
            vt_json_obj_end(&j);
        }
        vt_json_arr_end(&j);
        vt_json_obj_end(&j);
    }
    vt_json_arr_end(&j);
    vt_json_obj_end(&j);
    vt_json_finish(&j);
    frames_free();
}
