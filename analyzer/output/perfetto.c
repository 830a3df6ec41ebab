/* perfetto.c: the report as Chrome trace-event JSON (ui.perfetto.dev,
 * chrome://tracing): process and thread metadata ("M"); per process,
 * counter tracks ("C") "GPU N memory" (one series per tag), "GPU N free
 * (driver)", "pinned host memory", "managed memory", from the bucketed
 * series of report_series.h (peaks kept); instant events ("i") for every
 * failed device request and every spill event, stacks in args; complete
 * events ("X") for every allocation's lifetime (export.h's slices), in
 * lanes per GPU, pinned host and managed memory; the tipping event as an
 * instant on a track of its own, sorted on top. ts: us since the earliest
 * trace start, so processes share one timeline.
 */
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "json.h"
#include "report_series.h"
#include "sizes.h"

typedef struct ctr {
    vt_json_t *j;
    const char *name;
    uint64_t pid;
    uint64_t base_ns;   /* the process's start on the shared timeline */
    const vt_rules_t *rules;
} ctr_t;

static void ts(vt_json_t *j, uint64_t ns) { vt_json_num(j, "ts", (double)ns / 1000.0); }

static void counter(void *ctx, uint64_t t, uint64_t total, const uint64_t *by_tag)
{
    ctr_t *c = ctx;
    (void)total;
    vt_json_obj(c->j, NULL);
    vt_json_str(c->j, "ph", "C");
    vt_json_str(c->j, "name", c->name);
    vt_json_u64(c->j, "pid", c->pid);
    vt_json_u64(c->j, "tid", 0);
    ts(c->j, c->base_ns + t);
    vt_json_obj(c->j, "args");
    for (int k = 0; k < vt_rules_tag_count(c->rules); k++)
        vt_json_u64(c->j, vt_rules_tag_name(c->rules, k), by_tag[k]);
    vt_json_obj_end(c->j);
    vt_json_obj_end(c->j);
}

/* A metadata event up to its args, which the caller fills and closes
 * with meta_end. */
static void meta_begin(vt_json_t *j, const char *what, uint64_t pid, uint64_t tid)
{
    vt_json_obj(j, NULL);
    vt_json_str(j, "ph", "M");
    vt_json_str(j, "name", what);
    vt_json_u64(j, "pid", pid);
    vt_json_u64(j, "tid", tid);
    vt_json_obj(j, "args");
}

static void meta_end(vt_json_t *j)
{
    vt_json_obj_end(j);
    vt_json_obj_end(j);
}

static void meta(vt_json_t *j, const char *what, uint64_t pid, uint64_t tid, const char *name)
{
    meta_begin(j, what, pid, tid);
    vt_json_str(j, "name", name);
    meta_end(j);
}

void vt_export_stack_args(vt_json_t *j, const vt_model_t *m, uint32_t leaf)
{
    vt_frame_t fr[VT_MAX_STACK_DEPTH];
    int n = vt_stacks_get(vt_model_stacks(m), leaf, fr, VT_MAX_STACK_DEPTH);
    vt_json_arr(j, "stack");
    for (int i = 0; i < n; i++) {
        char buf[64];
        const char *fn = fr[i].display;
        if (!fn[0]) {
            snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)VT_IP_ADDR(fr[i].ip));
            fn = buf;
        }
        char *s = NULL;
        if (asprintf(&s, "%s%s%s%s", fn, fr[i].module_base[0] ? " [" : "", fr[i].module_base,
                     fr[i].module_base[0] ? "]" : "") >= 0) {
            vt_json_str(j, NULL, s);
            free(s);
        }
    }
    vt_json_arr_end(j);
}

/* Thread ids of the lanes and of the tipping track: above any Linux tid
 * (pid_max is at most 2^22) and below 2^31, which trace viewers read as
 * an int; track t's lanes from TID_BASE + (t + 1) * 2^20 (lanes stay below
 * 2^20: VT_SLICES_MAX). */
#define TID_BASE 0x40000000u
#define TIP_TID TID_BASE

static uint64_t lane_tid(int track, uint32_t lane) { return TID_BASE + ((uint64_t)track + 1) * 0x100000u + lane; }

/* Chrome's fixed color names (chrome://tracing's cname), one per tag. */
static const char *tag_color(int tag)
{
    switch (tag) {
    case VT_TAG_WEIGHTS: return "good";
    case VT_TAG_KV: return "rail_response";
    case VT_TAG_SCRATCH: return "yellow";
    case VT_TAG_UNKNOWN: return "grey";
    default: return "olive";
    }
}

static void sort_index(vt_json_t *j, uint64_t pid, uint64_t tid, int64_t index)
{
    meta_begin(j, "thread_sort_index", pid, tid);
    vt_json_i64(j, "sort_index", index);
    meta_end(j);
}

/* "TAG FUNCTION": the site's tag and its telling frame's qualified name
 * (vt_telling_frame), into buf. */
static const char *site_name(const vt_model_t *m, uint32_t si, char *buf, size_t size)
{
    const vt_site_t *s = &vt_model_proc(m)->sites[si];
    vt_frame_t fr[VT_MAX_STACK_DEPTH];
    int n = vt_stacks_get(vt_model_stacks(m), s->stack, fr, VT_MAX_STACK_DEPTH);
    int f = vt_telling_frame(fr, n, s->match.frame >= 0 ? s->match.frame : s->stack_match.frame);
    const char *tag = vt_rules_tag_name(vt_model_rules(m), s->match.tag);
    if (f < 0)
        snprintf(buf, size, "%s (no stack)", tag);
    else if (fr[f].name[0] || fr[f].display[0])
        snprintf(buf, size, "%s %s", tag, fr[f].name[0] ? fr[f].name : fr[f].display);
    else
        snprintf(buf, size, "%s 0x%llx", tag, (unsigned long long)VT_IP_ADDR(fr[f].ip));
    return buf;
}

static void lane_names(vt_json_t *j, const vt_proc_t *p, const vt_slice_proc_t *sp)
{
    for (int t = 0; t < VT_TRACKS; t++) {
        for (uint32_t l = 0; l < sp->lanes[t].used; l++) {
            char name[64];
            if (t == VT_TRACK_HOST)
                snprintf(name, sizeof name, "pinned host allocations, lane %u", l);
            else if (t == VT_TRACK_MANAGED)
                snprintf(name, sizeof name, "managed allocations, lane %u", l);
            else
                snprintf(name, sizeof name, "GPU %d allocations, lane %u", p->devs[t - VT_TRACK_GPU0].ordinal, l);
            meta(j, "thread_name", p->pid, lane_tid(t, l), name);
            sort_index(j, p->pid, lane_tid(t, l), (int64_t)(lane_tid(t, l) - TID_BASE));
        }
    }
}

/* Every kept allocation as a complete event; site names are cached per
 * site (a run has far fewer sites than allocations). */
static void slices_out(vt_json_t *j, const vt_model_t *m, const vt_slice_proc_t *sp, uint64_t base, uint64_t end)
{
    const vt_proc_t *p = vt_model_proc(m);
    char **names = p->nsites ? calloc(p->nsites, sizeof *names) : NULL;
    char buf[512];
    for (size_t i = 0; i < sp->n; i++) {
        const vt_slice_t *sl = &sp->v[i];
        if (sl->site >= p->nsites)
            continue;
        const vt_site_t *site = &p->sites[sl->site];
        const char *name = names && names[sl->site] ? names[sl->site] : site_name(m, sl->site, buf, sizeof buf);
        if (names && !names[sl->site])
            names[sl->site] = strdup(buf);
        uint64_t stop = sl->open ? (end > sl->start_ns ? end : sl->start_ns) : sl->end_ns;
        vt_json_obj(j, NULL);
        vt_json_str(j, "ph", "X");
        vt_json_str(j, "cat", "allocation");
        vt_json_str(j, "name", name);
        vt_json_str(j, "cname", tag_color(site->match.tag));
        vt_json_u64(j, "pid", p->pid);
        vt_json_u64(j, "tid", lane_tid(sl->track, sl->lane));
        ts(j, base + sl->start_ns);
        vt_json_num(j, "dur", (double)(stop - sl->start_ns) / 1000.0);
        vt_json_obj(j, "args");
        vt_json_u64(j, "bytes", sl->bytes);
        vt_json_str(j, "api", vt_api_name(sl->api));
        vt_json_str(j, "tag", vt_rules_tag_name(vt_model_rules(m), site->match.tag));
        vt_json_bool(j, "freed", !sl->open);
        vt_export_stack_args(j, m, site->stack);
        vt_json_obj_end(j);
        vt_json_obj_end(j);
    }
    for (size_t k = 0; names && k < p->nsites; k++)
        free(names[k]);
    free(names);
    if (sp->left_out) {
        char label[128];
        snprintf(label, sizeof label, "%llu allocation slices left out (export --slices)",
                 (unsigned long long)sp->left_out);
        meta_begin(j, "process_labels", p->pid, 0);
        vt_json_str(j, "labels", label);
        vt_json_u64(j, "slices_left_out", sp->left_out);
        meta_end(j);
    }
}

/* The allocation that tipped the run into spill, alone on the top track. */
static void tipping(vt_json_t *j, const vt_model_t *m, uint64_t base)
{
    const vt_proc_t *p = vt_model_proc(m);
    if (!p->tip.valid)
        return;
    char name[320], what[200], a[VT_SIZE_BUF];
    const char *tag = vt_rules_tag_name(vt_model_rules(m), p->tip.tag);
    meta(j, "thread_name", p->pid, TIP_TID, "tipped into spill");
    sort_index(j, p->pid, TIP_TID, -1);
    /* A graph launch's size is not in the trace: said, not printed as 0 B. */
    if (p->tip_kind == VT_SPILL_GRAPH_LAUNCH)
        snprintf(name, sizeof name, "tipped into spill: %s %s", vt_spill_kind_name(p->tip_kind),
                 vt_spill_what(what, sizeof what, p->tip_kind, p->tip.api, p->tip.bytes, NULL));
    else
        snprintf(name, sizeof name, "tipped into spill: %s %s %s (%s)",
                 p->tip_kind >= 0 ? vt_spill_kind_name(p->tip_kind) : "", vt_api_name(p->tip.api),
                 vt_fmt_bytes(a, p->tip.bytes), tag);
    vt_json_obj(j, NULL);
    vt_json_str(j, "ph", "i");
    vt_json_str(j, "s", "t");
    vt_json_str(j, "cat", "tipping");
    vt_json_str(j, "name", name);
    vt_json_str(j, "cname", "terrible");
    vt_json_u64(j, "pid", p->pid);
    vt_json_u64(j, "tid", TIP_TID);
    ts(j, base + p->tip.time_ns);
    vt_json_obj(j, "args");
    vt_json_str(j, "kind", p->tip_kind >= 0 ? vt_spill_kind_name(p->tip_kind) : "");
    vt_json_str(j, "api", vt_api_name(p->tip.api));
    vt_json_u64(j, "bytes", p->tip.bytes);
    vt_json_str(j, "tag", tag);
    vt_json_i64(j, "device", p->tip.device);
    vt_json_u64(j, "result", p->tip.result);
    vt_export_stack_args(j, m, p->tip.stack);
    vt_json_obj_end(j);
    vt_json_obj_end(j);
}

static void instants(vt_json_t *j, const vt_model_t *m, const vt_proc_series_t *ps, uint64_t base, uint64_t pid)
{
    const vt_rules_t *rules = vt_model_rules(m);
    for (size_t i = 0; i < ps->ninst; i++) {
        const vt_instant_t *in = &ps->inst[i];
        char name[160], a[VT_SIZE_BUF];
        const char *tag = vt_rules_tag_name(rules, in->tag);
        if (in->kind == VT_INSTANT_FAILURE)
            snprintf(name, sizeof name, "failed %s %s (%s)", vt_api_name(in->api), vt_fmt_bytes(a, in->bytes), tag);
        else
            snprintf(name, sizeof name, "spill: %s", vt_spill_kind_name(in->spill));
        vt_json_obj(j, NULL);
        vt_json_str(j, "ph", "i");
        vt_json_str(j, "s", "p");
        vt_json_str(j, "cat", in->kind == VT_INSTANT_FAILURE ? "failure" : "spill");
        vt_json_str(j, "name", name);
        vt_json_u64(j, "pid", pid);
        vt_json_u64(j, "tid", in->tid);
        ts(j, base + in->time_ns);
        vt_json_obj(j, "args");
        if (in->kind == VT_INSTANT_SPILL)
            vt_json_str(j, "kind", vt_spill_kind_name(in->spill));
        vt_json_str(j, "api", vt_api_name(in->api));
        vt_json_u64(j, "bytes", in->bytes);
        vt_json_str(j, "tag", tag);
        vt_json_i64(j, "device", in->device);
        vt_json_u64(j, "result", in->result);
        vt_export_stack_args(j, m, in->stack);
        vt_json_obj_end(j);
        vt_json_obj_end(j);
    }
}

void vt_export_perfetto(FILE *f, const vt_report_t *r, const vt_series_set_t *set, const vt_slices_t *slices)
{
    vt_json_t j;
    vt_json_init(&j, f);
    j.compact = 1;
    vt_json_obj(&j, NULL);
    vt_json_str(&j, "displayTimeUnit", "ms");
    vt_json_arr(&j, "traceEvents");
    for (int i = 0; i < r->nin && i < set->nproc; i++) {
        const vt_model_t *m = r->in[i].model;
        const vt_proc_t *p = vt_model_proc(m);
        const vt_proc_series_t *ps = &set->p[i];
        uint64_t base = p->mono_start_ns > r->t0 ? p->mono_start_ns - r->t0 : 0, end = vt_proc_end_ns(p);
        char name[256];
        snprintf(name, sizeof name, "%s (pid %llu)", vt_base(p->exe), (unsigned long long)p->pid);
        meta(&j, "process_name", p->pid, 0, name);
        meta(&j, "thread_name", p->pid, 0, "memory counters");
        for (size_t k = 0; k < ps->ninst; k++) {
            int seen = ps->inst[k].tid == 0;
            for (size_t q = 0; q < k && !seen; q++)
                seen = ps->inst[q].tid == ps->inst[k].tid;
            if (!seen) {
                snprintf(name, sizeof name, "thread %u", ps->inst[k].tid);
                meta(&j, "thread_name", p->pid, ps->inst[k].tid, name);
            }
        }
        ctr_t c = { &j, name, p->pid, base, vt_model_rules(m) };
        for (int d = 0; d < p->ndevs; d++) {
            snprintf(name, sizeof name, "GPU %d memory", p->devs[d].ordinal);
            vt_series_points(&ps->dev[d], end, counter, &c);
            snprintf(name, sizeof name, "GPU %d free (driver)", p->devs[d].ordinal);
            for (int b = 0; b < ps->dev[d].nb; b++) {
                const vt_bucket_t *bk = &ps->dev[d].b[b];
                if (!bk->have_free)
                    continue;
                vt_json_obj(&j, NULL);
                vt_json_str(&j, "ph", "C");
                vt_json_str(&j, "name", name);
                vt_json_u64(&j, "pid", p->pid);
                vt_json_u64(&j, "tid", 0);
                ts(&j, base + bk->free_t);
                vt_json_obj(&j, "args");
                vt_json_u64(&j, "free", bk->min_free);
                vt_json_obj_end(&j);
                vt_json_obj_end(&j);
            }
        }
        snprintf(name, sizeof name, "pinned host memory");
        vt_series_points(&ps->host, end, counter, &c);
        snprintf(name, sizeof name, "managed memory");
        vt_series_points(&ps->managed, end, counter, &c);
        instants(&j, m, ps, base, p->pid);
        tipping(&j, m, base);
        if (slices && slices->p && i < slices->nproc) {
            lane_names(&j, p, &slices->p[i]);
            slices_out(&j, m, &slices->p[i], base, end);
        }
    }
    vt_json_arr_end(&j);
    vt_json_obj_end(&j);
    vt_json_finish(&j);
}
