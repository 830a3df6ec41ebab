/* The HTML page (contract: html.h): the markup, written here with every
 * trace string escaped; the charts' data (html_data.c) and the script that
 * draws them (html_js.c) are inlined. Sections work without the script:
 * verdicts, tables and stacks are plain HTML. */
#include "html.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "sizes.h"

void vt_html_esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

vt_html_t *vt_html_new(vt_report_t *r)
{
    vt_html_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->r = r;
    h->series = vt_series_attach(r, VT_HTML_BUCKETS);
    if (!h->series) {
        free(h);
        return NULL;
    }
    return h;
}

void vt_html_free(vt_html_t *h)
{
    if (!h)
        return;
    vt_series_free(h->series);
    free(h);
}

static void stack_list(FILE *f, const vt_model_t *m, uint32_t leaf)
{
    vt_frame_t fr[VT_MAX_STACK_DEPTH];
    int n = vt_stacks_get_src(vt_model_stacks(m), leaf, fr, VT_MAX_STACK_DEPTH);
    if (!n) {
        fputs("<p>(no stack recorded)</p>\n", f);
        return;
    }
    fputs("<ol class=\"stack\" start=\"0\">", f);
    for (int i = 0; i < n; i++) {
        fputs("<li>", f);
        if (fr[i].display[0])
            vt_html_esc(f, fr[i].display);
        else
            fprintf(f, "0x%" PRIx64, VT_IP_ADDR(fr[i].ip));
        if (fr[i].line) {
            /* the basename reads well; the whole path is in the tooltip */
            fputs(" <span class=\"src\" title=\"", f);
            vt_html_esc(f, fr[i].file);
            fputs("\">", f);
            vt_html_esc(f, vt_base(fr[i].file));
            fprintf(f, ":%" PRIu32 "</span>", fr[i].line);
        }
        if (fr[i].module_base[0]) {
            fputs(" <span>[", f);
            vt_html_esc(f, fr[i].module_base);
            fputs("]</span>", f);
        }
        fputs("</li>", f);
    }
    fputs("</ol>\n", f);
}

static const char *tagn(const vt_model_t *m, int tag) { return vt_rules_tag_name(vt_model_rules(m), tag); }

static void row(FILE *f, const char *name, uint64_t bytes, const char *note)
{
    char a[VT_SIZE_BUF];
    fprintf(f, "<tr><td>%s</td><td class=\"n\">%s</td><td>", name, vt_fmt_bytes(a, bytes));
    vt_html_esc(f, note);
    fputs("</td></tr>\n", f);
}

static void device(FILE *f, const vt_model_t *m, const vt_dev_t *d, int pi, int di)
{
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF], t[VT_SIZE_BUF], uuid[48] = "";
    if (d->have_info && vt_uuid_known(d->uuid))
        vt_uuid_str(d->uuid, uuid);
    fprintf(f, "<h3>GPU %d ", d->ordinal);
    vt_html_esc(f, d->name);
    fprintf(f, " <small>%s</small></h3>\n", uuid);
    fprintf(f, "<div class=\"chart\" data-chart=\"p%dd%d\"></div>\n", pi, di);
    fputs("<table>\n", f);
    row(f, "total", d->total, "");
    row(f, "context reserve", vt_dev_reserve(d), "total - free when the process first saw the GPU");
    snprintf(a, sizeof a, "%s", vt_fmt_time(t, d->mem.peak_time_ns));
    fprintf(f, "<tr><td>peak tracked</td><td class=\"n\">%s</td><td>at %s</td></tr>\n",
            vt_fmt_bytes(b, d->mem.peak_bytes), a);
    for (int k = 0; k < vt_rules_tag_count(vt_model_rules(m)); k++) {
        if (!d->mem.peak_by_tag[k] && k >= VT_TAG_BUILTIN_COUNT)
            continue;
        fputs("<tr><td>&nbsp;&nbsp;", f);
        vt_html_esc(f, tagn(m, k));
        fprintf(f, "</td><td class=\"n\">%s</td><td>%.1f%%</td></tr>\n", vt_fmt_bytes(a, d->mem.peak_by_tag[k]),
                d->mem.peak_bytes ? 100.0 * (double)d->mem.peak_by_tag[k] / (double)d->mem.peak_bytes : 0.0);
    }
    if (d->have_min)
        fprintf(f, "<tr><td>least free</td><td class=\"n\">%s</td><td>at %s%s</td></tr>\n",
                vt_fmt_bytes(a, d->min_free), vt_fmt_time(t, d->min_free_time_ns),
                d->min_free_estimated ? " (estimated)" : "");
    row(f, "untracked", vt_dev_untracked(d), "used per the driver, beyond the reserve and this process's allocations");
    row(f, "rounding waste", d->peak_rounding_waste, "at peak");
    if (d->max_va_reserved)
        row(f, "VMM address space", d->peak_va_reserved, "reserved at peak");
    if (d->have_pool_slack_at_peak)
        row(f, "pool slack", d->pool_slack_at_peak, "held by stream-ordered pools beyond their allocations, at peak");
    fputs("</table>\n", f);
    fputs("<h4>Address space at peak</h4>\n", f);
    if (d->frag_computed)
        fprintf(f, "<p>%" PRIu64 " live ranges; %s in holes between them, largest hole %s.</p>\n", d->frag_live_allocs,
                vt_fmt_bytes(a, d->frag_holes), vt_fmt_bytes(b, d->frag_largest_hole));
    else if (d->frag_skipped)
        fputs("<p>Too many live allocations to measure.</p>\n", f);
    fprintf(f, "<div class=\"layout\" data-layout=\"p%dd%d\"></div>\n", pi, di);
}

static void sites(FILE *f, const vt_report_t *r, const vt_model_t *m)
{
    const vt_proc_t *p = vt_model_proc(m);
    size_t shown = r->opts.top > 0 && (size_t)r->opts.top < p->nsites ? (size_t)r->opts.top : p->nsites;
    size_t *rank = vt_sites_ranked(p, shown);
    if (!rank || !shown) {
        free(rank);
        return;
    }
    fputs("<h3>Top allocation sites <small>(by bytes live at peak)</small></h3>\n<table>\n"
          "<tr><th>#</th><th>at peak</th><th>tag</th><th>where</th><th>calls</th><th>what decided the tag, and the stack</th></tr>\n",
          f);
    for (size_t k = 0; k < shown; k++) {
        const vt_site_t *s = &p->sites[rank[k]];
        char a[VT_SIZE_BUF], rule[1024], where[32];
        vt_site_evidence(m, s, rule, sizeof rule);
        vt_site_where(s, where);
        fprintf(f, "<tr><td class=\"n\">%zu</td><td class=\"n\">%s</td><td>", k + 1, vt_fmt_bytes(a, s->at_peak));
        vt_html_esc(f, tagn(m, s->match.tag));
        fprintf(f, "</td><td>%s</td><td class=\"n\">%" PRIu64, where, s->calls);
        if (s->failed) {
            const char *err = vt_result_name(s->failed_api, s->failed_result);
            char b[VT_SIZE_BUF];
            fprintf(f, "<br><b>%" PRIu64 " failed</b>, %s requested (%s)", s->failed,
                    vt_fmt_bytes(b, s->failed_bytes), err ? err : "error");
        }
        fputs("</td><td><details><summary>", f);
        vt_html_esc(f, rule);
        fputs("</summary>", f);
        stack_list(f, m, s->stack);
        fputs("</details></td></tr>\n", f);
    }
    fputs("</table>\n", f);
    if (shown < p->nsites)
        fprintf(f, "<p>... %zu more sites (--top 0 shows all)</p>\n", p->nsites - shown);
    free(rank);
}

/* One cell of the placement table: the bytes in one place, and by GPU
 * when more than one GPU holds some. */
static void place_cell(FILE *f, const vt_place_bytes_t *b, int place)
{
    char a[VT_SIZE_BUF];
    uint64_t v = place == VT_PLACE_GPU ? b->gpu : place == VT_PLACE_PINNED ? b->pinned
                                                 : place == VT_PLACE_MAPPED ? b->mapped : b->pageable;
    fprintf(f, "<td class=\"n\">%s", vt_fmt_bytes(a, v));
    int gpus = 0;
    for (int i = 0; place == VT_PLACE_GPU && i < VT_MAX_DEVICES; i++)
        gpus += b->gpu_by_dev[i] > 0;
    if (gpus > 1) {
        fputs("<br><small>", f);
        for (int i = 0, n = 0; i < VT_MAX_DEVICES; i++)
            if (b->gpu_by_dev[i])
                fprintf(f, "%sGPU %d: %s", n++ ? ", " : "", i, vt_fmt_bytes(a, b->gpu_by_dev[i]));
        fputs("</small>", f);
    }
    fputs("</td>", f);
}

/* Where a ggml program's model ran (its GGML_* records: the report's
 * placement lines, as a table). Nothing without them. */
/* lead and words (escaped, space-separated) as code, when there are any. */
static void code_words(FILE *f, const char *lead, const char **words, size_t n)
{
    if (!n)
        return;
    fprintf(f, "<p>%s<code>", lead);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputc(' ', f);
        vt_html_esc(f, words[i]);
    }
    fputs("</code></p>\n", f);
}

static void placement(FILE *f, const vt_model_t *m, int pi)
{
    const vt_proc_t *p = vt_model_proc(m);
    const vt_placement_t *pl = &p->placement;
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF], c[VT_SIZE_BUF], t[VT_SIZE_BUF];
    if (!pl->known)
        return;
    static const struct {
        const char *name;
        size_t offset;
    } rows[] = {
        { "weights", offsetof(vt_placement_t, weights) },
        { "KV cache", offsetof(vt_placement_t, kv) },
        { "compute", offsetof(vt_placement_t, compute) },
    };
    fprintf(f, "<div class=\"placement\" id=\"p%d-placement\"><h3>Where the model runs <small>(ggml's buffers, "
               "at %s)</small></h3>\n<table>\n<tr><th></th><th>GPU</th><th>pinned host</th><th>mapped host</th>"
               "<th>pageable host</th></tr>\n",
            pi, vt_fmt_time(t, pl->at_ns));
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const vt_place_bytes_t *pb = (const vt_place_bytes_t *)((const char *)pl + rows[i].offset);
        fprintf(f, "<tr><td>%s</td>", rows[i].name);
        for (int place = VT_PLACE_GPU; place <= VT_PLACE_PAGEABLE; place++)
            place_cell(f, pb, place);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
    char cells[VT_KV_CELLS_WORDS_MAX];
    vt_kv_cells_words(cells, sizeof cells, pl);
    if (cells[0])
        fprintf(f, "<p>KV cache: <b>%s</b> (%s).</p>\n", cells, vt_kv_cells_scope(pl));
    if (pl->layers_known) {
        fprintf(f, "<p>Layers on a GPU: <b>%u of %u</b> (as llama.cpp counts them: %u block%s%s; on a GPU %u block%s%s)",
                pl->layers_gpu, pl->layers_total, pl->blocks, pl->blocks == 1 ? "" : "s",
                pl->output_layer >= 0 ? " + the output layer" : "", pl->blocks_gpu, pl->blocks_gpu == 1 ? "" : "s",
                pl->output_layer == 1 ? " + the output layer" : "");
        if (pl->layers_total > pl->layers_gpu)
            fprintf(f, "; %u run from host memory", pl->layers_total - pl->layers_gpu);
        if (pl->expert_blocks_host)
            fprintf(f, "; <b>%u block%s on a GPU with %s experts</b> (ffn_*_exps, %s) <b>in host memory</b>",
                    pl->expert_blocks_host, pl->expert_blocks_host == 1 ? "" : "s",
                    pl->expert_blocks_host == 1 ? "its" : "their", vt_fmt_bytes(a, pl->experts_host));
        if (pl->part_blocks_host)
            fprintf(f, "; <b>%u block%s on a GPU with part of %s %sweights</b> (%s) <b>in host memory</b>",
                    pl->part_blocks_host, pl->part_blocks_host == 1 ? "" : "s",
                    pl->part_blocks_host == 1 ? "its" : "their", pl->expert_blocks_host ? "other " : "",
                    vt_fmt_bytes(a, pl->part_host));
        if (pl->override_blocks)
            fprintf(f, "; <b>%u block%s in host memory by an override</b> (%s: %s KV cache on the GPU, "
                       "%s of weights in host memory)",
                    pl->override_blocks, pl->override_blocks == 1 ? "" : "s",
                    vt_proc_fit_chose(p) ? "set by <code>--fit</code>" : "<code>-ot</code>",
                    pl->override_blocks == 1 ? "its" : "their", vt_fmt_bytes(a, pl->override_host));
        if (pl->kv_blocks_host)
            fprintf(f, "; <b>%u block%s on a GPU with %s KV cache</b> (%s) <b>in host memory</b>",
                    pl->kv_blocks_host, pl->kv_blocks_host == 1 ? "" : "s", pl->kv_blocks_host == 1 ? "its" : "their",
                    vt_fmt_bytes(a, pl->kv_host_of_gpu_blocks));
        fputs(".</p>\n", f);
    }
    if (pl->layer_weights)
        fprintf(f, "<p>Layer weights in host memory: %s of %s.</p>\n", vt_fmt_bytes(a, pl->layer_weights_host),
                vt_fmt_bytes(b, pl->layer_weights));
    if (pl->input_host)
        fprintf(f, "<p>%s of token embeddings are in host memory (llama.cpp keeps them there by design).</p>\n",
                vt_fmt_bytes(a, pl->input_host));
    char models[1024];
    vt_other_models_sentence(models, sizeof models, pl);
    if (models[0])
        fprintf(f, "<p>%s</p>\n", models);   /* numbers and fixed words only */
    /* The estimate where the run left layers in host memory or failed, as
     * the text report gives it. */
    const typeof(pl->advice) *ad = &pl->advice;
    char withheld[VT_WITHHELD_SENTENCE_MAX];
    vt_advice_withheld_sentence(withheld, sizeof withheld, pl);
    if (withheld[0] && (pl->offloaded || p->tip.valid))
        fprintf(f, "<p>%s</p>\n", withheld);   /* numbers and fixed words only */
    if (ad->known && (pl->offloaded || p->tip.valid)) {
        if (ad->of_override)
            fprintf(f, "<p>Estimate: <b>the host-memory weights of %u of the %u blocks an override keeps there</b> fit on "
                       "GPU %d too%s: %s free at the lowest, the %g%% margin %s",
                    ad->override_blocks_fit, ad->override_n, ad->device,
                    vt_proc_fit_chose(p) ? " (llama.cpp: <code>--fit</code> set that override; a smaller "
                                           "<code>--fit-target</code> puts more on the GPU)"
                                         : "",
                    vt_fmt_bytes(a, ad->free_lowest),
                    vt_model_margin(m), vt_fmt_bytes(c, ad->margin));
        else if (ad->of_kv)
            fprintf(f, "<p>Estimate: <b>the KV cache of those %u blocks (%s) %s</b> on GPU %d (llama.cpp: %s "
                       "<code>--no-kv-offload</code>): %s free at the lowest, the %g%% margin %s",
                    pl->kv_blocks_host, vt_fmt_bytes(a, pl->kv_host_of_gpu_blocks),
                    ad->kv_fits ? "fits too" : "does not fit", ad->device, ad->kv_fits ? "without" : "it stays with",
                    vt_fmt_bytes(b, ad->free_lowest), vt_model_margin(m), vt_fmt_bytes(c, ad->margin));
        else if (ad->of_experts)
            fprintf(f, "<p>Estimate: <b>the experts of %u of those %u blocks</b> fit on GPU %d too (llama.cpp: "
                       "<code>--n-cpu-moe %u</code>): %s free at the lowest, the %g%% margin %s",
                    ad->expert_blocks_fit, pl->expert_blocks_host, ad->device, pl->blocks - ad->expert_blocks_fit,
                    vt_fmt_bytes(a, ad->free_lowest), vt_model_margin(m), vt_fmt_bytes(b, ad->margin));
        else
            fprintf(f, "<p>Estimate: <b>%u of %u layers</b> fit on GPU %d (<code>-ngl %u</code>): %s free at the "
                       "lowest, the %g%% margin %s",
                    ad->gpu_layers, pl->layers_total, ad->device, ad->gpu_layers, vt_fmt_bytes(a, ad->free_lowest),
                    vt_model_margin(m), vt_fmt_bytes(b, ad->margin));
        if (ad->unmet)
            fprintf(f, ", a failed request of %s", vt_fmt_bytes(a, ad->unmet));
        if (ad->room >= 0)
            fprintf(f, ": %s of room", vt_fmt_bytes(a, (uint64_t)ad->room));
        else
            fprintf(f, ": %s short", vt_fmt_bytes(a, (uint64_t)-ad->room));
        if (ad->of_override) {
            fprintf(f, "; a block's are about %s.</p>\n", vt_fmt_bytes(b, ad->override_bytes / ad->override_n));
        } else if (ad->of_kv) {
            fputs(".</p>\n", f);
        } else if (ad->of_experts) {
            fprintf(f, "; a block's experts here are about %s.</p>\n",
                    vt_fmt_bytes(b, pl->experts_host / pl->expert_blocks_host));
        } else {
            fprintf(f, "; a layer here is about %s of weights%s", vt_fmt_bytes(b, ad->per_layer - ad->per_layer_kv),
                    ad->experts_kept ? " besides its experts (kept in host memory as now)" : "");
            if (ad->per_layer_kv)
                fprintf(f, " + %s of KV cache", vt_fmt_bytes(a, ad->per_layer_kv));
            else if (ad->kv_kept)
                fputs(" (its KV cache kept in host memory as now)", f);
            fputs(".</p>\n", f);
        }
    }
    const char *args[VT_LAYER_ARGS_MAX];
    code_words(f, "Its command line says: ", args, vt_proc_layer_args(p, args, VT_LAYER_ARGS_MAX));
    code_words(f, "Its environment sets: ", args, vt_proc_layer_env(p, args, VT_LAYER_ARGS_MAX));
    /* --fit's sentences, plain text with values from the trace: escaped. */
    void (*const fit_sentences[])(char *, size_t, const vt_proc_t *) = { vt_llama_fit_sentence,
                                                                        vt_llama_context_sentence };
    char fit[VT_FIT_SENTENCE_MAX];
    for (size_t i = 0; i < sizeof fit_sentences / sizeof fit_sentences[0]; i++) {
        fit_sentences[i](fit, sizeof fit, p);
        if (fit[0]) {
            fputs("<p>", f);
            vt_html_esc(f, fit);
            fputs("</p>\n", f);
        }
    }
    fputs("</div>\n", f);
}

static void process(FILE *f, const vt_report_t *r, int pi)
{
    const vt_report_input_t *in = &r->in[pi];
    const vt_model_t *m = in->model;
    const vt_proc_t *p = vt_model_proc(m);
    char a[VT_SIZE_BUF], t[VT_SIZE_BUF];
    fprintf(f, "<section id=\"p%d\"><h2>", pi);
    vt_html_esc(f, vt_base(p->exe));
    fprintf(f, " <small>pid %" PRIu64 "</small></h2>\n<p><code>", p->pid);
    for (uint32_t i = 0; i < p->argc; i++) {
        if (i)
            fputc(' ', f);
        vt_html_esc(f, p->argv[i]);
    }
    fputs("</code><br>exe: <code>", f);
    vt_html_esc(f, p->exe);
    fputs("</code><br>trace: <code>", f);
    vt_html_esc(f, in->path);
    fputs("</code></p>\n", f);
    if (in->truncated)
        fprintf(f, "<p><b>Note:</b> the trace stops at offset %" PRIu64 "; everything before is shown.</p>\n",
                in->stop_offset);
    else if (in->damaged)
        fprintf(f, "<p><b>Note:</b> the trace is damaged at offset %" PRIu64 "; everything before is shown.</p>\n",
                in->stop_offset);
    else if (!p->ended)
        fputs("<p><b>Note:</b> no clean exit recorded (killed, or still running).</p>\n", f);
    if (vt_proc_degraded_note(p))
        fprintf(f, "<p><b>Note:</b> %s</p>\n", vt_proc_degraded_note(p)); /* constant text: nothing from the trace */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem) {
        vt_report_verdict(mem, m);
        fclose(mem);
        const char *verdict = vt_proc_verdict(p, 1);
        int fine = !strcmp(verdict, "no_spill") || !strcmp(verdict, "no_gpu_memory");
        fprintf(f, "<pre class=\"verdict%s\">", fine ? " ok" : "");
        vt_html_esc(f, text);
        fputs("</pre>\n", f);
        free(text);
    }
    placement(f, m, pi);
    /* A GPU probe has no tables or charts to show, as in the text report. */
    for (int d = 0; d < p->ndevs && !vt_proc_allocated_nothing(p); d++)
        device(f, m, &p->devs[d], pi, d);
    if (p->tip.valid) {
        const vt_event_view_t *v = &p->tip;
        char what[200];
        fprintf(f, "<div class=\"tip\" id=\"p%d-tip\"><h3>Tipping event: %s</h3>\n<p>", pi,
                vt_spill_kind_name(p->tip_kind));
        vt_html_esc(f, vt_spill_what(what, sizeof what, p->tip_kind, v->api, v->bytes, tagn(m, v->tag)));
        fprintf(f, " on GPU %d at %s, result %u; %s tracked then.</p>\n", v->device, vt_fmt_time(t, v->time_ns),
                v->result, vt_fmt_bytes(a, v->dev_tracked));
        stack_list(f, m, v->stack);
        fputs("</div>\n", f);
    }
    if (p->host.have_peak)
        fprintf(f, "<h3>Pinned host memory <small>peak %s</small></h3>\n<div class=\"chart\" data-chart=\"p%dh\"></div>\n",
                vt_fmt_bytes(a, p->host.peak_bytes), pi);
    if (p->managed.have_peak)
        fprintf(f, "<h3>Managed memory <small>peak %s</small></h3>\n<div class=\"chart\" data-chart=\"p%dm\"></div>\n",
                vt_fmt_bytes(a, p->managed.peak_bytes), pi);
    sites(f, r, m);
    fputs("</section>\n", f);
}

int vt_html_write(vt_html_t *h, const char *path)
{
    const vt_report_t *r = h->r;
    if (h->series->nomem) {
        fprintf(stderr, "vramtrace: report --html: out of memory\n");
        return VT_EXIT_BAD_INPUT;
    }
    FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
    if (!f) {
        fprintf(stderr, "vramtrace: %s: %s\n", path, strerror(errno));
        return VT_EXIT_BAD_INPUT;
    }
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          /* Self-contained by construction: the page may fetch nothing. */
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n"
          "<link rel=\"icon\" href=\"data:,\">\n<title>vramtrace report</title>\n<style>\n",
          f);
    fputs(vt_html_style, f);
    fputs("</style></head><body>\n<h1>vramtrace report</h1>\n<ul>\n", f);
    for (int i = 0; i < r->nin; i++) {
        const vt_proc_t *p = vt_model_proc(r->in[i].model);
        fprintf(f, "<li><a href=\"#p%d\">", i);
        vt_html_esc(f, vt_base(p->exe));
        fprintf(f, " (pid %" PRIu64 ")</a>: %s", p->pid, vt_verdict_lower(vt_proc_verdict(p, 1)));
        if (p->tip.valid)
            fprintf(f, " (%s)", vt_spill_kind_name(p->tip_kind));
        fputs("</li>\n", f);
    }
    for (int i = 0; i < r->nbad; i++) {
        fputs("<li><code>", f);
        vt_html_esc(f, r->bad[i].path);
        fprintf(f, "</code>: not reported: offset %" PRIu64 ": ", r->bad[i].offset);
        vt_html_esc(f, r->bad[i].reason);
        fputs("</li>\n", f);
    }
    fputs("</ul>\n", f);
    for (int i = 0; i < r->nin; i++)
        process(f, r, i);
    fputs("<script type=\"application/json\" id=\"vt-data\">", f);
    vt_html_data(f, h);
    fputs("</script>\n<script>\n", f);
    fputs(vt_html_script, f);
    fputs("</script>\n</body></html>\n", f);
    int bad = ferror(f);
    if (f != stdout)
        bad |= fclose(f) != 0;
    else
        bad |= fflush(f) != 0;
    if (bad) {
        fprintf(stderr, "vramtrace: %s: write failed\n", path);
        return VT_EXIT_BAD_INPUT;
    }
    return 0;
}
