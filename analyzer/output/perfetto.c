/* perfetto.c: the report as Chrome trace-event JSON (ui.perfetto.dev,
 * chrome://tracing): process and thread metadata ("M"); per process,
 * counter tracks ("C") "GPU N memory" (one series per tag), "GPU N free
 * (driver)", "pinned host memory", "managed memory", from the bucketed
 * series of report_series.h (peaks kept); instant events ("i") for every
 * failed device request and every spill event, stacks in args. ts: us
 * since the earliest trace start, so processes share one timeline.
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

static void meta(vt_json_t *j, const char *what, uint64_t pid, uint64_t tid, const char *name)
{
    vt_json_obj(j, NULL);
    vt_json_str(j, "ph", "M");
    vt_json_str(j, "name", what);
    vt_json_u64(j, "pid", pid);
    vt_json_u64(j, "tid", tid);
    vt_json_obj(j, "args");
    vt_json_str(j, "name", name);
    vt_json_obj_end(j);
    vt_json_obj_end(j);
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

void vt_export_perfetto(FILE *f, const vt_report_t *r, const vt_series_set_t *set)
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
    }
    vt_json_arr_end(&j);
    vt_json_obj_end(&j);
    vt_json_finish(&j);
}
