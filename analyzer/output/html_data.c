/* The HTML page's chart data: one JSON document, written script_safe so no
 * trace string can close the <script> element it sits in. Shapes (read by
 * html_js.c):
 *   { "tags": [names], "colors": [css], "charts": { KEY: chart }, "layouts": { KEY: layout } }
 *   chart  = { "label", "total", "margin_pct", "end", "p": [[t, tag0, tag1, ...]],
 *              "f": [[t, free]], "fail": [t...], "tip": null | { "t", "bytes", "text", "href" } }
 *   layout = { "regions": [ { "base": "0x..", "span", "r": [[off, size, tag, vmm, holes]] } ],
 *              "holes", "largest", "live" }
 * Times are ns since the process's start, sizes bytes (exact below 2^53). */
#include <inttypes.h>
#include <stdio.h>

#include "html.h"
#include "json.h"
#include "sizes.h"

typedef struct pts {
    vt_json_t *j;
    int ntags;
} pts_t;

static void point(void *ctx, uint64_t t, uint64_t total, const uint64_t *by_tag)
{
    pts_t *p = ctx;
    (void)total;
    vt_json_arr(p->j, NULL);
    vt_json_u64(p->j, NULL, t);
    for (int k = 0; k < p->ntags; k++)
        vt_json_u64(p->j, NULL, by_tag[k]);
    vt_json_arr_end(p->j);
}

static void chart(vt_json_t *j, const char *key, const char *label, const vt_model_t *m, const vt_series_t *s,
                  const vt_dev_t *d, const vt_proc_series_t *ps, int pi)
{
    const vt_proc_t *p = vt_model_proc(m);
    int ntags = vt_rules_tag_count(vt_model_rules(m));
    uint64_t end = vt_proc_end_ns(p);
    vt_json_obj(j, key);
    vt_json_str(j, "label", label);
    vt_json_u64(j, "total", d ? d->total : 0);
    vt_json_num(j, "margin_pct", vt_model_margin(m));
    vt_json_u64(j, "end", end);
    vt_json_arr(j, "p");
    pts_t ctx = { j, ntags };
    vt_series_points(s, end, point, &ctx);
    vt_json_arr_end(j);
    vt_json_arr(j, "f");
    for (int i = 0; d && i < s->nb; i++)
        if (s->b[i].have_free) {
            vt_json_arr(j, NULL);
            vt_json_u64(j, NULL, s->b[i].free_t);
            vt_json_u64(j, NULL, s->b[i].min_free);
            vt_json_arr_end(j);
        }
    vt_json_arr_end(j);
    vt_json_arr(j, "fail");
    for (size_t i = 0, shown = 0; d && i < ps->ninst && shown < 500; i++)
        if (ps->inst[i].kind == VT_INSTANT_FAILURE && ps->inst[i].device == d->ordinal) {
            vt_json_u64(j, NULL, ps->inst[i].time_ns);
            shown++;
        }
    vt_json_arr_end(j);
    const vt_event_view_t *tip = &p->tip;
    int here = d ? vt_proc_tip_on_device(p, d->ordinal) : vt_proc_tip_in_host(p) && s == &ps->host;
    if (here) {
        char a[VT_SIZE_BUF], text[512], href[32];
        snprintf(text, sizeof text, "tipping event (%s): %s of %s for %s", vt_spill_kind_name(p->tip_kind),
                 vt_api_name(tip->api), vt_fmt_bytes(a, tip->bytes), vt_rules_tag_name(vt_model_rules(m), tip->tag));
        snprintf(href, sizeof href, "#p%d-tip", pi);
        vt_json_obj(j, "tip");
        vt_json_u64(j, "t", tip->time_ns);
        vt_json_u64(j, "bytes", tip->bytes);
        vt_json_str(j, "text", text);
        vt_json_str(j, "href", href);
        vt_json_obj_end(j);
    } else {
        vt_json_null(j, "tip");
    }
    vt_json_obj_end(j);
}

static int dominant(const vt_range_t *v, size_t n)
{
    uint64_t by[VT_MAX_TAGS] = { 0 };
    int best = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].tag >= 0 && v[i].tag < VT_MAX_TAGS)
            by[(int)v[i].tag] += v[i].size;
    for (int k = 1; k < VT_MAX_TAGS; k++)
        if (by[k] > by[best])
            best = k;
    return best;
}

/* Ranges in regions (a gap larger than the card starts a new one, as in
 * model_frag.c); above VT_HTML_MAX_RANGES neighbours are drawn as groups,
 * each with the tag holding most of its bytes and its inner hole bytes. */
static void layout(vt_json_t *j, const char *key, const vt_dev_t *d)
{
    size_t n = d->nlayout, group = (n + VT_HTML_MAX_RANGES - 1) / VT_HTML_MAX_RANGES;
    if (!group)
        group = 1;
    vt_json_obj(j, key);
    vt_json_arr(j, "regions");
    uint64_t base = 0, end = 0;
    int open = 0;
    for (size_t i = 0; i < n; i += group) {
        size_t k = i + group <= n ? group : n - i;
        const vt_range_t *g = &d->layout[i];
        uint64_t gend = 0, live = 0;
        for (size_t q = 0; q < k; q++) {
            if (g[q].addr + g[q].size > gend)
                gend = g[q].addr + g[q].size;
            live += g[q].size;
        }
        if (!open || (g->addr > end && d->total && g->addr - end > d->total)) {
            if (open) {
                vt_json_arr_end(j);
                vt_json_u64(j, "span", end - base);
                vt_json_obj_end(j);
            }
            char hex[32];
            base = g->addr;
            snprintf(hex, sizeof hex, "0x%" PRIx64, base);
            vt_json_obj(j, NULL);
            vt_json_str(j, "base", hex);
            vt_json_arr(j, "r");
            open = 1;
        }
        vt_json_arr(j, NULL);
        vt_json_u64(j, NULL, g->addr - base);
        vt_json_u64(j, NULL, gend - g->addr);
        vt_json_u64(j, NULL, (uint64_t)dominant(g, k));
        vt_json_u64(j, NULL, g->vmm);
        vt_json_u64(j, NULL, gend - g->addr > live ? gend - g->addr - live : 0);
        vt_json_arr_end(j);
        if (gend > end)
            end = gend;
    }
    if (open) {
        vt_json_arr_end(j);
        vt_json_u64(j, "span", end - base);
        vt_json_obj_end(j);
    }
    vt_json_arr_end(j);
    vt_json_u64(j, "holes", d->frag_holes);
    vt_json_u64(j, "largest", d->frag_largest_hole);
    vt_json_u64(j, "live", d->frag_live_allocs);
    vt_json_obj_end(j);
}

void vt_html_data(FILE *f, const vt_html_t *h)
{
    static const char *const colors[] = { "#4e79a7", "#f28e2b", "#59a14f", "#9d9d9d", "#b07aa1", "#76b7b2",
                                          "#edc948", "#e15759", "#ff9da7", "#9c755f", "#8cd17d", "#86bcb6",
                                          "#d37295", "#a0cbe8", "#ffbe7d", "#d4a6c8" };
    const vt_report_t *r = h->r;
    vt_json_t j;
    vt_json_init(&j, f);
    j.compact = 1;
    j.script_safe = 1;
    vt_json_obj(&j, NULL);
    vt_json_arr(&j, "tags");
    for (int k = 0; k < vt_rules_tag_count(r->rules); k++)
        vt_json_str(&j, NULL, vt_rules_tag_name(r->rules, k));
    vt_json_arr_end(&j);
    vt_json_arr(&j, "colors");
    for (int k = 0; k < VT_MAX_TAGS; k++)
        vt_json_str(&j, NULL, colors[k]);
    vt_json_arr_end(&j);
    vt_json_obj(&j, "charts");
    for (int i = 0; h->series && i < r->nin && i < h->series->nproc; i++) {
        const vt_model_t *m = r->in[i].model;
        const vt_proc_t *p = vt_model_proc(m);
        const vt_proc_series_t *ps = &h->series->p[i];
        char key[32], label[200];
        for (int d = 0; d < p->ndevs; d++) {
            snprintf(key, sizeof key, "p%dd%d", i, d);
            snprintf(label, sizeof label, "GPU %d %s", p->devs[d].ordinal, p->devs[d].name);
            chart(&j, key, label, m, &ps->dev[d], &p->devs[d], ps, i);
        }
        snprintf(key, sizeof key, "p%dh", i);
        chart(&j, key, "pinned host", m, &ps->host, NULL, ps, i);
        snprintf(key, sizeof key, "p%dm", i);
        chart(&j, key, "managed", m, &ps->managed, NULL, ps, i);
    }
    vt_json_obj_end(&j);
    vt_json_obj(&j, "layouts");
    for (int i = 0; i < r->nin; i++) {
        const vt_proc_t *p = vt_model_proc(r->in[i].model);
        for (int d = 0; d < p->ndevs; d++) {
            char key[32];
            snprintf(key, sizeof key, "p%dd%d", i, d);
            layout(&j, key, &p->devs[d]);
        }
    }
    vt_json_obj_end(&j);
    vt_json_obj_end(&j);
}
