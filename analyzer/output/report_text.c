/* The text report: the verdict first, in plain words (did it spill, where,
 * why, what filled the card, how much headroom), then aligned tables per
 * process and per GPU. Sizes use sizes.h; numbers here are the same ones
 * --json prints. The verdict paragraph has no blank line: `vramtrace
 * record` prints it up to the first one. Colour (opts.color) only marks
 * the verdict and headings; the words stand alone without it. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "report.h"
#include "sizes.h"

#define W 11   /* width of a size column */

static const char *tagn(const vt_model_t *m, int tag)
{
    return vt_text(vt_rules_tag_name(vt_model_rules(m), tag));
}

static const char *dev_label(const vt_dev_t *d, char *buf, size_t n)
{
    if (d->name[0])
        snprintf(buf, n, "GPU %d (%s)", d->ordinal, vt_text(d->name));
    else
        snprintf(buf, n, "GPU %d", d->ordinal);
    return buf;
}

static int color;   /* set by vt_report_text for this print */
static int width;   /* columns a stack frame may take; 0: --wide, all of it */
#define C_RED "\033[1;31m"
#define C_YEL "\033[1;33m"
#define C_GRN "\033[1;32m"
#define C_BOLD "\033[1m"
#define C_OFF "\033[0m"
static const char *col(const char *code) { return color ? code : ""; }

static void print_stack(FILE *o, const vt_model_t *m, uint32_t leaf, const char *indent, int max)
{
    vt_frame_t fr[VT_MAX_STACK_DEPTH];
    int n = vt_stacks_get(vt_model_stacks(m), leaf, fr, VT_MAX_STACK_DEPTH);
    vt_stacks_src(vt_model_stacks(m), fr, max > 0 && n > max ? max : n);   /* only what is shown */
    if (!n)
        fprintf(o, "%s(no stack recorded)\n", indent);
    for (int i = 0; i < n && (max <= 0 || i < max); i++)
        vt_print_frame(o, indent, i, &fr[i], width);
    if (max > 0 && n > max)
        fprintf(o, "%s... %d more frames\n", indent, n - max);
}

static void verdict_device(FILE *o, const vt_model_t *m, const vt_dev_t *d, int breakdown);

/* The end of a SMOKING GUN sentence: fragmentation is claimed only when the
 * holes between this process's allocations at the first such failure were
 * measured and none of them could take the request. */
static void gun_holes(FILE *o, const vt_dev_t *d)
{
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF], c[VT_SIZE_BUF];
    const vt_holes_t *h = &d->gun_holes;
    uint64_t req = d->first_failed_with_free.valid ? d->first_failed_with_free.bytes : 0;
    if (!h->measured || !d->first_failed_with_free.valid) {
        fprintf(o, "; where that memory was is unknown (holes not measured): fragmented, or held by another "
                   "context.\n");
    } else if (h->bytes && h->largest < req) {
        fprintf(o, "; at the first, %s lay in holes between this process's %" PRIu64
                   " allocations, the largest %s, too small for %s: fragmentation.\n",
                vt_fmt_bytes(a, h->bytes), h->ranges, vt_fmt_bytes(b, h->largest), vt_fmt_bytes(c, req));
    } else {
        fprintf(o, "; at the first, the holes between this process's %" PRIu64
                   " allocations held %s (largest %s), which does not explain it: the memory was held by another "
                   "context or split where the trace cannot see.\n",
                h->ranges, vt_fmt_bytes(a, h->bytes), vt_fmt_bytes(b, h->largest));
    }
}

/* Whether a llama.cpp rule matches the stack of the pinned site holding
 * the most weights (whatever decided its tag: ggml's mark outranks the
 * rule): then the program is llama.cpp (or ggml under it). */
static int host_weights_from_llama(const vt_model_t *m)
{
    const vt_proc_t *p = vt_model_proc(m);
    const vt_site_t *best = NULL;
    for (size_t i = 0; i < p->nsites; i++) {
        const vt_site_t *s = &p->sites[i];
        if (s->space == VT_SPACE_HOST && s->match.tag == VT_TAG_WEIGHTS && (!best || s->max_live > best->max_live))
            best = s;
    }
    char rule[256] = "";
    if (best)
        vt_rules_describe(vt_model_rules(m), &best->stack_match, rule, sizeof rule);
    return !strncmp(rule, "builtin:llama.cpp ", 18);
}

/* Weights in pinned host memory, said as the trace shows them: after a
 * failed device request for weights (a fallback), after a failed request
 * of another tag (a runtime that backed off; llama.cpp fails its load or
 * context instead), or with nothing failed before (the
 * program's choice); and whether they were all freed by the end. Never
 * "layers offloaded" without the failure that would make it so. */
static void host_weights(FILE *o, const vt_model_t *m)
{
    const vt_proc_t *p = vt_model_proc(m);
    uint64_t host = p->host.peak_by_tag[VT_TAG_WEIGHTS], gpu = 0;
    if (!host)
        return;
    for (int i = 0; i < p->ndevs; i++)
        gpu += p->devs[i].mem.peak_by_tag[VT_TAG_WEIGHTS];
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF];
    vt_fmt_bytes(a, host);
    vt_fmt_bytes(b, gpu);
    int freed = p->ended && !p->host.by_tag[VT_TAG_WEIGHTS], llama = host_weights_from_llama(m);
    fprintf(o, "  %s of weights %s in pinned host memory%s (%s on the %s)", a, freed ? "were" : "sit",
            freed ? " at most" : "", b, p->ndevs > 1 ? "GPUs at their peaks" : "GPU at its peak");
    if (p->fallback_tags & (1u << VT_TAG_WEIGHTS))
        fprintf(o, ", after a device request for weights failed: what runs from them runs at host speed");
    else if (p->host_weights_after >= 0)
        /* No claim of why: llama.cpp itself fails the load or the context
         * instead of backing off in-process, so a runtime that did is not
         * named from its frames. */
        fprintf(o, ", allocated after a device request for %s failed: what runs from them runs at host speed",
                tagn(m, p->host_weights_after));
    else
        fprintf(o, ", by the program's choice: no device request had failed%s",
                llama ? " (llama.cpp keeps its token embeddings there even with every layer on the GPU, and any "
                        "layers -ngl leaves on the CPU)"
                      : "");
    fprintf(o, "%s.\n", freed ? "; all were freed by the end" : "");
}

/* "More VRAM needed", with the arithmetic behind the bound and what the
 * full path may need on top (vt_more_vram). Only a lower bound is claimed. */
static void more_vram(FILE *o, const vt_model_t *m)
{
    const vt_event_view_t *v = &vt_model_proc(m)->tip;
    vt_more_vram_t mv;
    vt_more_vram(m, &mv);
    if (!mv.bytes)
        return;
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF], c[VT_SIZE_BUF];
    fprintf(o, "  More VRAM needed to hold everything: at least %s", vt_fmt_bytes(a, mv.bytes));
    if (mv.why == VT_MORE_FAILED_REQUEST) {
        fprintf(o, " (the %s request for %s that failed, minus about %s free then)", vt_fmt_bytes(b, v->bytes),
                tagn(m, v->tag), vt_fmt_bytes(c, mv.free_then));
        char names[128] = "";
        size_t len = 0;
        for (int t = 0; t < vt_rules_tag_count(vt_model_rules(m)); t++) {
            if (!(mv.later_tags >> t & 1))
                continue;
            int n = snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "", tagn(m, t));
            if (n > 0 && (size_t)n < sizeof names - len)
                len += (size_t)n;
        }
        if (mv.later)
            fprintf(o, ";\n    the run then also held %s of %s, none of it held when the request failed: "
                       "about %s if the full path needs that too",
                    vt_fmt_bytes(b, mv.later), names, vt_fmt_bytes(c, mv.bytes + mv.later));
    } else if (mv.why == VT_MORE_FALLBACK) {
        fprintf(o, " (what sat in pinned host memory at once after device requests failed)");
    } else if (mv.why == VT_MORE_OVERSUB) {
        fprintf(o, " (device + managed memory past the card's total)");
    }
    fprintf(o, ".\n");
}

/* "A of B (P%)" of bytes in host memory, with the kinds of host memory
 * that hold them. */
static void host_share(FILE *o, const char *what, uint64_t host, uint64_t all, const vt_place_bytes_t *pb)
{
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF];
    fprintf(o, "%s %s of %s (%.1f%%) in host memory", what, vt_fmt_bytes(a, host), vt_fmt_bytes(b, all),
            all ? 100.0 * (double)host / (double)all : 0.0);
    const char *sep = " (";
    static const char *const kinds[] = { "mapped from the model file", "pinned", "pageable" };
    uint64_t v[3] = { pb->mapped, pb->pinned, pb->pageable };
    int parts = 0;
    for (int i = 0; i < 3; i++)
        parts += v[i] > 0;
    if (parts > 0 && host)
        for (int i = 0; i < 3; i++)
            if (v[i]) {
                fprintf(o, "%s%s %s", sep, vt_fmt_bytes(a, v[i]), kinds[i]);
                sep = ", ";
            }
    if (parts > 0 && host)
        fputc(')', o);
}

/* Where the model ran (docs/report.md, "Placement"): the verdict's words
 * for a partial offload or a CPU run (headline), else the layers line a
 * failure verdict adds; then the offload estimate. Nothing without ggml's
 * records: the report does not guess placement from allocations. */
/* The placement is one moment's: say so when the model's buffers changed
 * over the run. */
static void picture_moment(FILE *o, const vt_placement_t *pl)
{
    char t[VT_SIZE_BUF];
    if (pl->known && pl->buffers_outside)
        fprintf(o, "  Where the model runs is shown at %s; %u of its buffers lived only before or after then "
                   "(the model loaded again, or freed) and are not in that picture.\n",
                vt_fmt_time(t, pl->at_ns), pl->buffers_outside);
}

/* What a trace without END (killed, a raw exit, still running) says of the
 * whole run, it says of its chunks only: " up to the trace's last chunk",
 * with "(no clean end)" after it where the sentence says nothing else of
 * the missing END; "" for an ended trace, and for a cut one, whose
 * verdict already says where it stops. */
static const char *of_chunks(const vt_proc_t *p, int no_clean_end)
{
    if (p->ended || p->truncated)
        return "";
    return no_clean_end ? " up to the trace's last chunk (no clean end)" : " up to the trace's last chunk";
}

static void placement_lines(FILE *o, const vt_model_t *m, int headline)
{
    const vt_proc_t *p = vt_model_proc(m);
    const vt_placement_t *pl = &p->placement;
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF], c[VT_SIZE_BUF];
    int fit_chose = vt_proc_fit_chose(p);
    if (headline && vt_proc_pinned_offload(p)) {
        uint64_t gpu = 0;
        for (int i = 0; i < p->ndevs; i++)
            gpu += p->devs[i].mem.peak_by_tag[VT_TAG_WEIGHTS];
        fprintf(o, "%s%s%sPARTIAL OFFLOAD.%s %s of weights stay in pinned host memory (%s on the %s at its peak), "
                   "by the program's choice: no device request failed.\n"
                   "  What runs from them runs at host-memory speed; which layers they hold, the trace does not say.\n",
                p->truncated ? "  " : "", col(C_YEL), p->truncated ? "" : "VERDICT: ", col(C_OFF),
                vt_fmt_bytes(a, p->host.by_tag[VT_TAG_WEIGHTS]), vt_fmt_bytes(b, gpu),
                p->ndevs > 1 ? "GPUs" : "GPU");
        return;
    }
    if (!pl->known || (!pl->offloaded && !headline))
        return;
    const char *ind = p->truncated ? "  " : "";
    int cpu = vt_proc_ran_on_cpu(p);
    if (headline && cpu) {
        fprintf(o, "%s%s%sRAN ON THE CPU.%s No GPU allocation: 0 of %u layers on a GPU; every layer runs at "
                   "host-memory speed.\n",
                ind, col(C_RED), p->truncated ? "" : "VERDICT: ", col(C_OFF), pl->layers_total);
    } else if (headline) {
        fprintf(o, "%s%s%sPARTIAL OFFLOAD.%s ", ind, col(C_YEL), p->truncated ? "" : "VERDICT: ", col(C_OFF));
        char kv_too[96] = "", part_too[96] = "", also[192];
        if (pl->kv_blocks_host)
            snprintf(kv_too, sizeof kv_too, " and the KV cache of %u (%s)", pl->kv_blocks_host,
                     vt_fmt_bytes(b, pl->kv_host_of_gpu_blocks));
        if (pl->part_blocks_host)
            snprintf(part_too, sizeof part_too, " and other weights of %u (%s)", pl->part_blocks_host,
                     vt_fmt_bytes(c, pl->part_host));
        snprintf(also, sizeof also, "%s%s", part_too, kv_too);
        if (pl->layers_known && pl->layers_total > pl->layers_gpu && pl->expert_blocks_host)
            fprintf(o, "%u of %u layers run from host memory, and the experts of %u block%s on the GPU (%s)%s: "
                       "generation runs at host-memory speed for them.\n",
                    pl->layers_total - pl->layers_gpu, pl->layers_total, pl->expert_blocks_host,
                    pl->expert_blocks_host == 1 ? "" : "s", vt_fmt_bytes(a, pl->experts_host), kv_too);
        else if (pl->layers_known && pl->layers_total > pl->layers_gpu && pl->kv_blocks_host)
            fprintf(o, "%u of %u layers run from host memory, and the KV cache of %u block%s on the GPU (%s): "
                       "generation runs at host-memory speed for them.\n",
                    pl->layers_total - pl->layers_gpu, pl->layers_total, pl->kv_blocks_host,
                    pl->kv_blocks_host == 1 ? "" : "s", vt_fmt_bytes(a, pl->kv_host_of_gpu_blocks));
        else if (pl->layers_known && pl->layers_total > pl->layers_gpu)
            fprintf(o, "%u of %u layers run from host memory: generation runs at host-memory speed for them.\n",
                    pl->layers_total - pl->layers_gpu, pl->layers_total);
        else if (pl->layers_known && pl->expert_blocks_host)
            fprintf(o, "Every layer is on the GPU, but the experts of %u of its %u blocks are in host memory "
                       "(%s)%s: generation runs at host-memory speed for them.\n",
                    pl->expert_blocks_host, pl->blocks, vt_fmt_bytes(a, pl->experts_host), also);
        else if (pl->layers_known && pl->part_blocks_host)
            fprintf(o, "Every layer is on the GPU, but part of the weights of %u of its %u blocks %s in host memory "
                       "(%s)%s: generation runs at host-memory speed for that part.\n",
                    pl->part_blocks_host, pl->blocks, pl->part_blocks_host == 1 ? "is" : "are",
                    vt_fmt_bytes(a, pl->part_host), kv_too);
        else if (pl->layers_known && pl->kv_blocks_host)
            fprintf(o, "All layers are on the GPU, but the KV cache of %u of its %u blocks is in host memory "
                       "(%s): attention over it runs at host-memory speed.\n",
                    pl->kv_blocks_host, pl->blocks, vt_fmt_bytes(a, pl->kv_host_of_gpu_blocks));
        else if (vt_place_host(&pl->kv))
            fprintf(o, "All layers are on the GPU, but part of the KV cache is in host memory: attention over "
                       "it runs at host-memory speed.\n");
        else
            fprintf(o, "All layers are on the GPU, but %s of their weights are in host memory: what runs from "
                       "them runs at host-memory speed.\n",
                    vt_fmt_bytes(a, pl->layer_weights_host));
    } else if (pl->layers_known) {
        fprintf(o, "  Before it, %u of %u layers had been placed in host memory by the program's plan (not a "
                   "fallback).\n",
                pl->layers_total - pl->layers_gpu, pl->layers_total);
    }
    if (pl->layers_known) {
        fprintf(o, "  Layers as llama.cpp counts them: %u blocks%s; on the %s: %u block%s%s", pl->blocks,
                pl->output_layer >= 0 ? " + the output layer" : "", pl->advice_withheld_gpus > 1 ? "GPUs" : "GPU",
                pl->blocks_gpu, pl->blocks_gpu == 1 ? "" : "s",
                pl->output_layer == 1 ? " + the output layer" : pl->output_layer == 0 ? " (the output layer is in host memory)" : "");
        if (pl->expert_blocks_host)
            fprintf(o, ", %u of those blocks with their experts (ffn_*_exps) in host memory", pl->expert_blocks_host);
        if (pl->part_blocks_host)
            fprintf(o, ", %u of those blocks with part of %s %sweights in host memory", pl->part_blocks_host,
                    pl->part_blocks_host == 1 ? "its" : "their", pl->expert_blocks_host ? "other " : "");
        if (pl->kv_blocks_host)
            fprintf(o, ", %u %s %s KV cache in host memory", pl->kv_blocks_host,
                    pl->expert_blocks_host ? "with" : "of those blocks with",
                    pl->kv_blocks_host == 1 ? "its" : "their");
        fprintf(o, ".\n");
        if (pl->override_blocks)
            fprintf(o, "  %u of the blocks in host memory %s %s KV cache on the GPU: %s placed %s there, and %s "
                       "keeps %s weights in host memory (llama.cpp counts %s as offloaded).\n",
                    pl->override_blocks, pl->override_blocks == 1 ? "has" : "have",
                    pl->override_blocks == 1 ? "its" : "their", fit_chose ? "--fit's -ngl" : "-ngl",
                    pl->override_blocks == 1 ? "it" : "them", fit_chose ? "an override --fit set" : "an override (-ot)",
                    pl->override_blocks == 1 ? "its" : "their", pl->override_blocks == 1 ? "it" : "them");
    }
    host_share(o, "  Layer weights:", pl->layer_weights_host, pl->layer_weights, &pl->layer_weights_at);
    uint64_t kv_host = vt_place_host(&pl->kv), kv_all = kv_host + pl->kv.gpu;
    if (kv_all) {
        char what[32 + VT_KV_CELLS_WORDS_MAX], cells[VT_KV_CELLS_WORDS_MAX];
        vt_kv_cells_words(cells, sizeof cells, pl);
        if (cells[0])
            snprintf(what, sizeof what, ";\n  KV cache (%s):", cells);
        else
            snprintf(what, sizeof what, ";\n  KV cache:");
        host_share(o, what, kv_host, kv_all, &pl->kv);
    }
    fprintf(o, ".\n");
    if (pl->input_host)
        fprintf(o, "  (%s of token embeddings are in host memory too: llama.cpp keeps them there by design.)\n",
                vt_fmt_bytes(a, pl->input_host));
    char models[1024];
    vt_other_models_sentence(models, sizeof models, pl);
    if (models[0])
        fprintf(o, "  %s\n", models);
    picture_moment(o, pl);
    const char *args[VT_LAYER_ARGS_MAX];
    size_t nargs = vt_proc_layer_args(p, args, VT_LAYER_ARGS_MAX);
    if (headline && cpu) {
        fprintf(o, "  The trace holds no CUDA allocation: the program's CUDA backend did not load (a driver or "
                   "library missing), or it was told to use none%s",
                nargs ? "; its command line says:" : ".\n");
        for (size_t i = 0; i < nargs; i++)
            fprintf(o, " %s%s", vt_text(args[i]), i + 1 == nargs ? ".\n" : "");
    } else if (headline) {
        if (p->tip.valid)
            fprintf(o, "  A device request failed and was retried successfully.\n");
        else
            fprintf(o, "  No device request failed%s: the program chose this split%s",
                    of_chunks(p, 0),
                    nargs ? "; its command line says:" : " (its command line does not say how).\n");
        if (!p->tip.valid && nargs) {
            for (size_t i = 0; i < nargs; i++)
                fprintf(o, " %s", vt_text(args[i]));
            fprintf(o, ".\n");
        }
    }
    if (headline) {
        const char *env[VT_LAYER_ARGS_MAX];
        size_t nenv = vt_proc_layer_env(p, env, VT_LAYER_ARGS_MAX);
        if (nenv) {
            fprintf(o, "  Its environment sets:");
            for (size_t i = 0; i < nenv; i++)
                fprintf(o, " %s%s", vt_text(env[i]), i + 1 == nenv ? ".\n" : "");
        }
        char fit[VT_FIT_SENTENCE_MAX];
        vt_llama_fit_sentence(fit, sizeof fit, p);
        if (fit[0])
            fprintf(o, "  %s\n", vt_text(fit));
        vt_llama_context_sentence(fit, sizeof fit, p);
        if (fit[0])
            fprintf(o, "  %s\n", vt_text(fit));
    }
    const typeof(pl->advice) *ad = &pl->advice;
    char withheld[VT_WITHHELD_SENTENCE_MAX];
    vt_advice_withheld_sentence(withheld, sizeof withheld, pl);
    if (withheld[0])
        fprintf(o, "  %s\n", withheld);
    if (!ad->known)
        return;
    fprintf(o, "  GPU %d had %s free at the lowest; the %g%% margin is %s", ad->device, vt_fmt_bytes(a, ad->free_lowest),
            vt_model_margin(m), vt_fmt_bytes(b, ad->margin));
    if (ad->unmet)
        fprintf(o, ", and the failed request wanted %s", vt_fmt_bytes(c, ad->unmet));
    if (ad->room >= 0)
        fprintf(o, ": %s of room.\n", vt_fmt_bytes(a, (uint64_t)ad->room));
    else
        fprintf(o, ": %s short.\n", vt_fmt_bytes(a, (uint64_t)-ad->room));
    if (ad->of_experts) {
        /* Every layer runs on the GPU: -ngl is not the knob, the experts'
         * place is (llama.cpp's --cpu-moe, --n-cpu-moe N: the first N). */
        uint32_t fit = ad->expert_blocks_fit, n = pl->expert_blocks_host;
        char which[32];
        snprintf(which, sizeof which, n == 1 ? "that block" : n == 2 ? "both blocks" : "all %u blocks", n);
        if (fit == n)
            fprintf(o, "  Estimate: the experts of %s fit on this card too (llama.cpp: without --cpu-moe or "
                       "--n-cpu-moe).",
                    which);
        else
            fprintf(o, "  Estimate: the experts of %u of those %u blocks fit on this card too (llama.cpp: --n-cpu-moe "
                       "%u keeps the other blocks' experts in host memory).",
                    fit, n, pl->blocks - fit);
        fprintf(o, " A block's experts here are about %s.\n", vt_fmt_bytes(a, pl->experts_host / n));
        if (ad->short_all > 0)
            fprintf(o, "  All the experts on the GPU would need %s more: %s more VRAM than this card had above the "
                       "margin.\n",
                    vt_fmt_bytes(a, ad->need_all), vt_fmt_bytes(b, (uint64_t)ad->short_all));
        else
            fprintf(o, "  All the experts on the GPU would need %s more, which fits.\n", vt_fmt_bytes(a, ad->need_all));
        return;
    }
    if (ad->of_override) {
        /* -ngl already covers them: the override is the knob, or --fit's
         * target where --fit set the override. */
        uint32_t fit = ad->override_blocks_fit, n = ad->override_n;
        if (fit == n)
            fprintf(o, "  Estimate: the weights %s keep%s in host memory (%s) fit on this card too (llama.cpp: %s).",
                    n == 1 ? "that block" : "those blocks", n == 1 ? "s" : "", vt_fmt_bytes(a, ad->override_bytes),
                    fit_chose ? "--fit keeps them there; a smaller --fit-target puts more on the GPU"
                              : "without the -ot that keeps them there");
        else if (fit_chose)
            fprintf(o, "  Estimate: the host-memory weights of %u of those %u blocks fit on this card too (llama.cpp: "
                       "--fit keeps them there; a smaller --fit-target puts more on the GPU).",
                    fit, n);
        else
            fprintf(o, "  Estimate: the host-memory weights of %u of those %u blocks fit on this card too (llama.cpp: "
                       "an -ot that keeps %u block%s weights in host memory).",
                    fit, n, n - fit, n - fit == 1 ? "'s" : "s'");
        fprintf(o, " A block's are about %s.\n", vt_fmt_bytes(a, ad->override_bytes / n));
        if (ad->short_all > 0)
            fprintf(o, "  All of them on the GPU would need %s more: %s more VRAM than this card had above the margin.\n",
                    vt_fmt_bytes(a, ad->need_all), vt_fmt_bytes(b, (uint64_t)ad->short_all));
        return;
    }
    if (ad->of_kv) {
        /* Every layer runs on the GPU: -ngl is not the knob; llama.cpp
         * puts all of the KV cache on the GPU or none of it. */
        if (ad->kv_fits)
            fprintf(o, "  Estimate: the KV cache of those %u blocks (%s) fits on this card too (llama.cpp: without "
                       "--no-kv-offload).\n",
                    pl->kv_blocks_host, vt_fmt_bytes(a, pl->kv_host_of_gpu_blocks));
        else
            fprintf(o, "  Estimate: the KV cache of those %u blocks (%s) does not fit on this card: %s more VRAM than "
                       "it had above the margin (llama.cpp moves all of it or none; a smaller -c shrinks it).\n",
                    pl->kv_blocks_host, vt_fmt_bytes(a, pl->kv_host_of_gpu_blocks),
                    vt_fmt_bytes(b, (uint64_t)((int64_t)pl->kv_host_of_gpu_blocks - ad->room)));
        return;
    }
    const char *kept = ad->experts_kept && ad->kv_kept ? ", with every block's experts and KV cache kept in host memory as now"
                       : ad->experts_kept              ? ", with every block's experts kept in host memory as now"
                       : ad->kv_kept                   ? ", with the KV cache kept in host memory as now"
                                                       : "";
    fprintf(o, "  Estimate: %u of %u layers fit on this card (-ngl %u%s). A layer here is about %s of weights%s",
            ad->gpu_layers, pl->layers_total, ad->gpu_layers, kept, vt_fmt_bytes(a, ad->per_layer - ad->per_layer_kv),
            ad->experts_kept ? " besides its experts" : "");
    if (ad->per_layer_kv)
        fprintf(o, " + %s of KV cache at this context", vt_fmt_bytes(b, ad->per_layer_kv));
    else if (ad->kv_kept)
        fprintf(o, " (its KV cache stays in host memory)");
    fprintf(o, ".\n");
    if (pl->layers_gpu < pl->layers_total) {
        char with[96] = "";
        if (pl->expert_blocks_host && pl->kv_blocks_host)
            snprintf(with, sizeof with, ", with the experts and KV cache of the blocks there,");
        else if (pl->expert_blocks_host)
            snprintf(with, sizeof with, ", with the experts of the %u blocks there,", pl->expert_blocks_host);
        else if (pl->kv_blocks_host)
            snprintf(with, sizeof with, ", with the KV cache of the %u block%s there,", pl->kv_blocks_host,
                     pl->kv_blocks_host == 1 ? "" : "s");
        if (ad->short_all > 0)
            fprintf(o, "  All %u layers on the GPU%s would need %s more: %s more VRAM than this card had above the "
                       "margin.\n",
                    pl->layers_total, with, vt_fmt_bytes(a, ad->need_all), vt_fmt_bytes(b, (uint64_t)ad->short_all));
        else
            fprintf(o, "  All %u layers on the GPU%s would need %s more, which fits.\n", pl->layers_total, with,
                    vt_fmt_bytes(a, ad->need_all));
    }
}

/* What follows NO SPILL: the moment pictured, and what the trace cannot
 * say of where the model runs. */
static void no_spill_lines(FILE *o, const vt_model_t *m)
{
    const vt_proc_t *p = vt_model_proc(m);
    char a[VT_SIZE_BUF], context[VT_FIT_SENTENCE_MAX];
    picture_moment(o, &p->placement);
    /* Every layer fit: the context --fit may have shrunk to get there. */
    vt_llama_context_sentence(context, sizeof context, p);
    if (context[0])
        fprintf(o, "  %s\n", vt_text(context));
    uint64_t host_weights = vt_place_host(&p->placement.weights);
    if (!vt_proc_placement_unseen(p))
        return;
    if (host_weights)
        fprintf(o, "  %s of model weights are in host memory (ggml's buffers), but no record names their "
                   "tensors: whether they hold layers or only the token embeddings, the trace does not say.\n",
                vt_fmt_bytes(a, host_weights));
    else
        fprintf(o, "  Whether part of the model stays in host memory, the trace does not say: it holds no "
                   "record of where the model's tensors were placed, and host memory outside CUDA is not "
                   "traced.\n");
}

/* END says the process aborted (abort(), a failed assert(): ggml's
 * CUDA_CHECK on a failed request, std::terminate); END's time is the
 * abort call's. */
/* Failed device requests whose result was not out of memory: named, as
 * the evidence that they are no part of the verdict (docs/report.md). */
static void not_oom_line(FILE *o, const vt_model_t *m)
{
    const vt_proc_t *p = vt_model_proc(m);
    const vt_event_view_t *v = &p->first_not_oom;
    if (!p->events.failed_not_oom || !v->valid)
        return;
    char a[VT_SIZE_BUF], t[VT_SIZE_BUF], num[16];
    const char *err = vt_result_name(v->api, v->result);
    snprintf(num, sizeof num, "error %u", v->result);
    int one = p->events.failed_not_oom == 1;
    fprintf(o, "  %" PRIu64 " device request%s failed with %s other than out of memory%s %s of %s for %s (%s) at %s.\n"
               "    The driver refused %s for another reason than memory: not a spill.\n",
            p->events.failed_not_oom, one ? "" : "s", one ? "an error" : "errors", one ? ":" : ", the first",
            vt_api_name(v->api), vt_fmt_bytes(a, v->bytes), tagn(m, v->tag), err ? err : num,
            vt_fmt_time(t, v->time_ns), one ? "it" : "them");
}

/* Allocations and frees made as nodes of CUDA graphs (stream-ordered
 * calls captured, memory nodes added by hand): what the trace cannot say
 * about them, said (docs/report.md). */
static void captured_lines(FILE *o, const vt_proc_t *p)
{
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF];
    uint64_t n = p->events.captured_allocs, outside = p->events.captured_frees_outside, pool = 0, reports = 0;
    for (int i = 0; i < p->ndevs; i++) {
        reports += p->devs[i].graph_pool_reports;
        pool = p->devs[i].graph_reserved_max > pool ? p->devs[i].graph_reserved_max : pool;
    }
    if (n) {
        fprintf(o, "  %" PRIu64 " allocation%s (%s) made as nodes of CUDA graphs (captured, or added by hand) "
                   "held no memory then: a graph allocates at each launch, from the driver's graph pool, which "
                   "no event records; ",
                n, n == 1 ? "" : "s", vt_fmt_bytes(a, p->events.captured_bytes));
        /* The reports are moments: the pool may have held more between
         * them, and none that said 0 is a claim about the launches. */
        if (pool)
            fprintf(o, "the largest of the driver's %" PRIu64 " reports on that pool was %s.\n", reports,
                    vt_fmt_bytes(b, pool));
        else
            fprintf(o, "that pool shows only in the driver's free memory.\n");
    }
    if (outside)
        fprintf(o, "  %" PRIu64 " %s memory allocated outside a graph: a launch frees it, unseen; it counts "
                   "as live to the end.\n",
                outside, outside == 1 ? "free made as a graph node names" : "frees made as graph nodes name");
}

static void aborted_line(FILE *o, const vt_proc_t *p)
{
    char t[VT_SIZE_BUF];
    if (p->ended && p->end_how == VT_END_ABORT)
        fprintf(o, "  The trace ends with the process aborting (abort(): SIGABRT) at %s.\n",
                vt_fmt_time(t, p->end_time_ns));
}

void vt_report_verdict(FILE *o, const vt_model_t *m)
{
    const vt_proc_t *p = vt_model_proc(m);
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF], c[VT_SIZE_BUF], t[VT_SIZE_BUF], dl[200];
    /* A cut trace cannot vouch for the run: what it holds is said as what
     * the complete chunks show, never as the whole run's verdict. */
    if (p->truncated) {
        if (p->damaged)
            fprintf(o, "%sVERDICT: INCOMPLETE TRACE.%s It is damaged at offset %" PRIu64
                       " (a corrupt chunk); nothing after that is known.\n",
                    col(C_YEL), col(C_OFF), p->truncated_at);
        else
            fprintf(o, "%sVERDICT: INCOMPLETE TRACE.%s It stops inside a chunk at offset %" PRIu64
                       " (the process was killed while writing it, or is still running); nothing after that is known.\n",
                    col(C_YEL), col(C_OFF), p->truncated_at);
        if (!p->events.allocs && !p->events.failed && !p->tip.valid) {
            fprintf(o, "  The complete chunks hold no CUDA allocation: whether the process used GPU memory is unknown.\n");
            return;
        }
        fprintf(o, "  What the complete chunks show:\n");
    }
    const char *verdict = vt_proc_verdict(p, 0);
    if (!strcmp(verdict, "partial_offload") || !strcmp(verdict, "cpu_only")) {
        placement_lines(o, m, 1);
        if (p->tip.valid && p->tip_kind == VT_SPILL_GRAPH_LAUNCH)
            fprintf(o, "  Tipped by: %s failed at %s, then a launch succeeded at %s.\n",
                    vt_spill_what(dl, sizeof dl, p->tip_kind, p->tip.api, 0, NULL), vt_fmt_time(t, p->tip.time_ns),
                    vt_fmt_time(b, p->events.graph_relaunch_time_ns));
        else if (p->tip.valid)
            fprintf(o, "  Tipped by: %s of %s for %s failed at %s, then succeeded when retried.\n",
                    vt_api_name(p->tip.api), vt_fmt_bytes(a, p->tip.bytes), tagn(m, p->tip.tag),
                    vt_fmt_time(t, p->tip.time_ns));
    } else if (p->tip.valid) {
        const vt_event_view_t *v = &p->tip;
        int di = vt_proc_tip_dev(m);
        const vt_dev_t *d = di >= 0 ? &p->devs[di] : NULL;
        const char *kind = vt_proc_verdict(p, 0);
        if (!strcmp(kind, "failed") && p->tip_kind == VT_SPILL_GRAPH_LAUNCH) {
            /* The shim records the first launch that succeeds after a
             * failed one: none in the trace means none was made, unless
             * events were lost. */
            fprintf(o, "%s%s%sOUT OF MEMORY.%s A launch of a CUDA graph failed for lack of memory",
                    p->truncated ? "  " : "", col(C_RED), p->truncated ? "" : "VERDICT: ", col(C_OFF));
            if (d)
                fprintf(o, " on %s", dev_label(d, dl, sizeof dl));
            fprintf(o, ":\n  the driver's graph pool could not grow to hold the graph's allocations");
            if (p->events.dropped)
                fprintf(o, ".\n");
            else
                fprintf(o, ", and no launch succeeded after it%s.\n", of_chunks(p, 1));
        } else if (!strcmp(kind, "failed")) {
            fprintf(o, "%s%s%sOUT OF MEMORY.%s A device request for %s failed", p->truncated ? "  " : "",
                    col(C_RED), p->truncated ? "" : "VERDICT: ", col(C_OFF), tagn(m, v->tag));
            if (d)
                fprintf(o, " on %s", dev_label(d, dl, sizeof dl));
            /* Only a weights request that ends all allocation is a load
             * that failed; a server's failed KV growth may go on serving. */
            /* With layers placed in host memory by plan, "nothing ran from
             * host memory" would contradict the placement lines below. */
            /* Without END the chunks end where the process's last act may
             * have begun (killed, a raw exit): "nothing after it" is said
             * of them only. */
            fprintf(o, " and the process allocated nothing after it%s:\n  %s%s\n",
                    of_chunks(p, 1),
                    v->tag == VT_TAG_WEIGHTS ? "the model load failed; " : "no fallback was taken; ",
                    p->placement.offloaded ? "the run stopped there." : "nothing ran from host memory.");
        } else if (!strcmp(kind, "near_spill") && p->tip_kind == VT_SPILL_GRAPH_LAUNCH) {
            fprintf(o, "%s%s%sNEAR SPILL.%s A launch of a CUDA graph failed for lack of memory",
                    p->truncated ? "  " : "", col(C_YEL), p->truncated ? "" : "VERDICT: ", col(C_OFF));
            if (d)
                fprintf(o, " on %s", dev_label(d, dl, sizeof dl));
            fprintf(o, ",\n  then a launch succeeded at %s: nothing left VRAM, but the run stalled at the limit.\n",
                    vt_fmt_time(t, p->events.graph_relaunch_time_ns));
        } else if (!strcmp(kind, "near_spill")) {
            fprintf(o, "%s%s%sNEAR SPILL.%s A device request failed", p->truncated ? "  " : "", col(C_YEL),
                    p->truncated ? "" : "VERDICT: ", col(C_OFF));
            if (d)
                fprintf(o, " on %s", dev_label(d, dl, sizeof dl));
            fprintf(o, ",\n  then succeeded when retried: nothing left VRAM, but the run stalled at the limit.\n");
        } else {
            fprintf(o, "%s%s%sSPILL.%s The model did not fit in VRAM", p->truncated ? "  " : "", col(C_RED),
                    p->truncated ? "" : "VERDICT: ", col(C_OFF));
            if (d)
                fprintf(o, " of %s", dev_label(d, dl, sizeof dl));
            fprintf(o, ".\n");
        }
        switch (p->tip_kind) {
        case VT_SPILL_OOM: {
            const char *err = vt_result_name(v->api, v->result);
            char num[16];
            snprintf(num, sizeof num, "error %u", v->result);
            fprintf(o, "  Tipped by: %s of %s for %s failed (%s) at %s;", vt_api_name(v->api),
                    vt_fmt_bytes(a, v->bytes), tagn(m, v->tag), err ? err : num, vt_fmt_time(t, v->time_ns));
            break;
        }
        case VT_SPILL_GRAPH_LAUNCH: {
            const char *err = vt_result_name(v->api, v->result);
            fprintf(o, "  Tipped by: %s failed (%s) at %s; the size of the graph's allocations is not in the trace;",
                    vt_api_name(v->api), err ? err : "out of memory", vt_fmt_time(t, v->time_ns));
            break;
        }
        case VT_SPILL_HOST_FALLBACK:
            fprintf(o, "  Tipped by: %s of %s for %s landed in pinned host memory at %s;", vt_api_name(v->api),
                    vt_fmt_bytes(a, v->bytes), tagn(m, v->tag), vt_fmt_time(t, v->time_ns));
            break;
        case VT_SPILL_MANAGED_OVERSUB:
            fprintf(o, "  Tipped by: %s of %s for %s at %s took device + managed memory past the card's total;",
                    vt_api_name(v->api), vt_fmt_bytes(a, v->bytes), tagn(m, v->tag), vt_fmt_time(t, v->time_ns));
            break;
        default:
            fprintf(o, "  Tipped by: %s of %s for %s at %s succeeded although only %s was free: the driver "
                       "fell back to system memory;",
                    vt_api_name(v->api), vt_fmt_bytes(a, v->bytes), tagn(m, v->tag), vt_fmt_time(t, v->time_ns),
                    vt_fmt_bytes(b, vt_view_free(v)));
            break;
        }
        if (d)
            fprintf(o, " %s was tracked and about %s free then.\n", vt_fmt_bytes(b, v->dev_tracked),
                    vt_fmt_bytes(c, vt_view_free(v)));
        else
            fprintf(o, "\n");
        if (d && d->failed_with_free) {
            fprintf(o, "  SMOKING GUN: the driver reported enough free memory when %s failed",
                    d->failed_with_free == 1 ? "the request" : "requests");
            gun_holes(o, d);
        }
        if (d && d->retry_bursts)
            fprintf(o, "  The allocator flushed %s of cached blocks and retried (%" PRIu64 " time%s).\n",
                    vt_fmt_bytes(a, d->retry_freed_bytes), d->retry_bursts, d->retry_bursts == 1 ? "" : "s");
        uint64_t fallbacks = vt_proc_later_spills(p, VT_SPILL_HOST_FALLBACK);
        if (fallbacks && p->tip_kind != VT_SPILL_HOST_FALLBACK)
            fprintf(o, "  Then %" PRIu64 " allocation%s fell back to pinned host memory (%s at most at once).\n",
                    fallbacks, fallbacks == 1 ? "" : "s", vt_fmt_bytes(a, p->fallback_peak));
        more_vram(o, m);
        placement_lines(o, m, 0);
    } else if (p->truncated) {
        fprintf(o, "  No spill up to offset %" PRIu64 ": %s.\n", p->truncated_at,
                p->events.failed_not_oom ? "no device request read failed for lack of memory, and every one that "
                                           "succeeded fit within the card's free memory"
                                         : "every device allocation read succeeded within the card's free memory");
    } else if (!p->events.allocs && !p->events.failed && !p->ended) {
        /* No END: the process was killed, is still running, or ended in a
         * way the shim did not see; what came after the last chunk is
         * unknown, so "nothing" is said of the chunks only. */
        fprintf(o, "%sVERDICT: NO GPU MEMORY USED%s up to the trace's last chunk. The trace has no clean end: "
                   "whether the process allocated after that is unknown.\n",
                col(C_BOLD), col(C_OFF));
    } else if (!p->events.allocs && !p->events.failed) {
        fprintf(o, "%sVERDICT: NO GPU MEMORY USED.%s This process allocated nothing through CUDA.\n", col(C_BOLD),
                col(C_OFF));
    } else if (!p->ended) {
        fprintf(o, "%sVERDICT: NO SPILL%s up to the trace's last chunk: %s. The trace has no clean end: whether a "
                   "later request failed is unknown.\n",
                col(C_GRN), col(C_OFF),
                p->events.failed_not_oom ? "no device request in it failed for lack of memory, and every one that "
                                           "succeeded fit within the card's free memory"
                                         : "every device allocation in it succeeded within the card's free memory");
        no_spill_lines(o, m);
    } else {
        fprintf(o, "%sVERDICT: NO SPILL.%s %s.\n", col(C_GRN), col(C_OFF),
                p->events.failed_not_oom ? "No device request failed for lack of memory; every one that succeeded "
                                           "fit within the card's free memory"
                                         : "Every device allocation succeeded within the card's free memory");
        no_spill_lines(o, m);
    }
    aborted_line(o, p);
    not_oom_line(o, m);
    captured_lines(o, p);
    if (p->events.impossible)
        fprintf(o, "  %" PRIu64 " request%s of more than 2^64 bytes (width x height overflowed) refused by the\n"
                   "    driver: impossible, not a shortage of memory.\n",
                p->events.impossible, p->events.impossible == 1 ? "" : "s");
    if (!p->placement.offloaded && !vt_proc_pinned_offload(p))
        host_weights(o, m);
    /* The tipping device first, with what filled it; others after. */
    int tip_di = vt_proc_tip_dev(m);
    for (int k = -1; k < p->ndevs; k++) {
        int i = k < 0 ? tip_di : k;
        if (i < 0 || (k >= 0 && i == tip_di))
            continue;
        verdict_device(o, m, &p->devs[i], tip_di < 0 || i == tip_di);
    }
}

/* What filled the device at its peak, and the true headroom: the least free
 * the driver reported (or we estimated) over the run, with the context
 * reserve and the untracked bytes that nvidia-smi would count as used. */
static void verdict_device(FILE *o, const vt_model_t *m, const vt_dev_t *d, int breakdown)
{
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF], cc[VT_SIZE_BUF], t[VT_SIZE_BUF], dl[200];
    dev_label(d, dl, sizeof dl);
    if (!d->have_min || !d->total) {
        fprintf(o, "  %s: peak %s tracked; free memory unknown (no driver report in the trace)", dl,
                vt_fmt_bytes(a, d->mem.peak_bytes));
    } else {
        fprintf(o, "  %s: peak %s of %s", dl, vt_fmt_bytes(a, d->mem.peak_bytes), vt_fmt_bytes(b, d->total));
        if (d->mem.have_peak) /* without an allocation there is no moment to name */
            fprintf(o, " at %s", vt_fmt_time(t, d->mem.peak_time_ns));
    }
    if (breakdown && d->mem.have_peak) {
        /* One paragraph: `record` prints the verdict up to its first blank line. */
        fprintf(o, "%s\n    at peak:", d->have_min && d->total ? ":" : ".");
        int n = 0;
        for (int tg = 0; tg < vt_rules_tag_count(vt_model_rules(m)); tg++) {
            if (!d->mem.peak_by_tag[tg] && tg >= VT_TAG_BUILTIN_COUNT)
                continue;
            fprintf(o, "%s %s %s", n++ ? "," : "", tagn(m, tg), vt_fmt_bytes(a, d->mem.peak_by_tag[tg]));
        }
        fprintf(o, ".\n");
    } else {
        fprintf(o, ".\n");
    }
    if (!d->have_min || !d->total)
        return;
    vt_headroom_t h;
    vt_dev_headroom(m, d, &h);
    fprintf(o, "    %sTrue headroom: %s%s free at the lowest (%.1f%% of the card), at %s; context reserve %s, untracked %s.\n",
            col(C_BOLD), col(C_OFF), vt_fmt_bytes(a, d->min_free), 100.0 * (double)d->min_free / (double)d->total,
            vt_fmt_time(t, d->min_free_time_ns), vt_fmt_bytes(b, h.reserve), vt_fmt_bytes(cc, h.untracked));
    if (h.reserve_by_others)
        fprintf(o, "    The context reserve is what was not free at this process's first sight of the card; %s is more "
                   "than a CUDA context takes, so other processes (or an earlier context) held memory before this "
                   "one started.\n",
                vt_fmt_bytes(a, h.reserve));
    const vt_proc_t *p = vt_model_proc(m);
    if (p->managed.peak_bytes) {
        fprintf(o, "    That free memory does not count the %s of managed memory (at its peak), which the driver pages "
                   "into the card when touched%s\n",
                vt_fmt_bytes(a, p->managed.peak_bytes),
                h.managed_over ? ": with this process's own it is more than the card holds, so the margin is not judged."
                               : ".");
        if (h.managed_over)
            return;
    }
    if (h.crossed == VT_MARGIN_CROSSED_BY_REPORT && h.outside)
        fprintf(o, "    Below the %g%% margin since %s, when the driver reported %s free: %s less than this "
                   "process's own allocations explain (another process, or the driver, took it).\n",
                vt_model_margin(m), vt_fmt_time(t, d->below_margin.time_ns), vt_fmt_bytes(a, d->below_margin.free_after),
                vt_fmt_bytes(b, h.outside));
    else if (h.crossed == VT_MARGIN_CROSSED_BY_REPORT)
        fprintf(o, "    Below the %g%% margin since %s, when the driver reported %s free.\n", vt_model_margin(m),
                vt_fmt_time(t, d->below_margin.time_ns), vt_fmt_bytes(a, d->below_margin.free_after));
    else if (h.crossed == VT_MARGIN_CROSSED_BY_ALLOCATION)
        fprintf(o, "    Below the %g%% margin since %s of %s (%s) at %s.\n", vt_model_margin(m),
                vt_api_name(d->below_margin.api), vt_fmt_bytes(a, d->below_margin.bytes), tagn(m, d->below_margin.tag),
                vt_fmt_time(t, d->below_margin.time_ns));
    else
        fprintf(o, "    Stayed above the %g%% margin%s: %s to spare beyond it.\n", vt_model_margin(m),
                of_chunks(p, 0), vt_fmt_bytes(a, h.spare));
}

static void tag_rows(FILE *o, const vt_model_t *m, const uint64_t *v, uint64_t total, const char *indent)
{
    char a[VT_SIZE_BUF];
    for (int t = 0; t < vt_rules_tag_count(vt_model_rules(m)); t++) {
        if (!v[t] && t >= VT_TAG_BUILTIN_COUNT)
            continue;
        fprintf(o, "%s%-18s %*s  %5.1f%%\n", indent, tagn(m, t), W, vt_fmt_bytes(a, v[t]),
                total ? 100.0 * (double)v[t] / (double)total : 0.0);
    }
}

static void device_section(FILE *o, const vt_model_t *m, const vt_dev_t *d)
{
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF], t[VT_SIZE_BUF], dl[200], uuid[48];
    fprintf(o, "\n%s", dev_label(d, dl, sizeof dl));
    if (d->have_info && vt_uuid_known(d->uuid)) {
        vt_uuid_str(d->uuid, uuid);
        fprintf(o, "  %s", uuid);
    }
    fprintf(o, "\n");
    fprintf(o, "  %-20s %*s\n", "total", W, vt_fmt_bytes(a, d->total));
    fprintf(o, "  %-20s %*s\n", "context reserve", W, vt_fmt_bytes(a, vt_dev_reserve(d)));
    fprintf(o, "  %-20s %*s  at %s\n", "peak tracked", W, vt_fmt_bytes(a, d->mem.peak_bytes),
            vt_fmt_time(t, d->mem.peak_time_ns));
    tag_rows(o, m, d->mem.peak_by_tag, d->mem.peak_bytes, "    ");
    fprintf(o, "  %-20s %*s\n", "live at end", W, vt_fmt_bytes(a, d->mem.tracked));
    fprintf(o, "  %-20s %*s\n", "untracked", W, vt_fmt_bytes(a, vt_dev_untracked(d)));
    if (d->graph_pool_reports)
        fprintf(o, "  %-20s %*s  most reported, last %s\n", "graph pool", W,
                vt_fmt_bytes(a, d->graph_reserved_max), vt_fmt_bytes(b, d->graph_reserved_last));
    if (d->have_free) {
        fprintf(o, "  %-20s %*s  at %s\n", "last free (driver)", W, vt_fmt_bytes(a, d->last_free),
                vt_fmt_time(t, d->last_free_time_ns));
        fprintf(o, "  %-20s %*s  at %s%s\n", "min free", W, vt_fmt_bytes(a, d->min_free),
                vt_fmt_time(t, d->min_free_time_ns), d->min_free_estimated ? " (estimated)" : "");
        if (d->have_free_at_peak)
            fprintf(o, "  %-20s %*s\n", "free at peak", W, vt_fmt_bytes(a, d->free_at_peak));
        else
            fprintf(o, "  %-20s %*s\n", "free at peak", W, "unknown");
    }
    fprintf(o, "  fragmentation\n");
    fprintf(o, "    %-18s %*s\n", "rounding waste", W, vt_fmt_bytes(a, d->peak_rounding_waste));
    if (d->max_va_reserved || d->peak_vmm_physical)
        fprintf(o, "    %-18s %*s reserved, %s mapped at peak\n", "VMM address space", W,
                vt_fmt_bytes(a, d->peak_va_reserved), vt_fmt_bytes(b, d->peak_va_mapped));
    if (d->have_pool_slack_at_peak)
        fprintf(o, "    %-18s %*s held by stream-ordered pools beyond their allocations at peak (most: %s)\n",
                "pool slack", W, vt_fmt_bytes(a, d->pool_slack_at_peak), vt_fmt_bytes(b, d->max_pool_slack));
    if (d->frag_computed)
        fprintf(o, "    %-18s %*s in holes between %" PRIu64 " live allocations; largest hole %s\n",
                "external at peak", W, vt_fmt_bytes(a, d->frag_holes), d->frag_live_allocs,
                vt_fmt_bytes(b, d->frag_largest_hole));
    if (d->failed_with_free) {
        fprintf(o, "    SMOKING GUN: %" PRIu64 " request%s failed although the driver reported enough free memory",
                d->failed_with_free, d->failed_with_free == 1 ? "" : "s");
        gun_holes(o, d);
    }
    if (d->retry_bursts)
        fprintf(o, "    SMOKING GUN: %" PRIu64 " flush-and-retry burst%s: a failure, then %s of cached blocks "
                   "freed, then the same request succeeded\n",
                d->retry_bursts, d->retry_bursts == 1 ? "" : "s", vt_fmt_bytes(a, d->retry_freed_bytes));
}

static void tagged_section(FILE *o, const vt_model_t *m, const char *title, const vt_tagged_peak_t *tp)
{
    char a[VT_SIZE_BUF], t[VT_SIZE_BUF];
    if (!tp->have_peak)
        return;
    fprintf(o, "\n%s\n  %-20s %*s  at %s\n", title, "peak", W, vt_fmt_bytes(a, tp->peak_bytes),
            vt_fmt_time(t, tp->peak_time_ns));
    tag_rows(o, m, tp->peak_by_tag, tp->peak_bytes, "    ");
}

/* The sites in --sort order (bytes at peak by default), the first --top of
 * those whose stack matches --filter. The size column is the sort's bytes:
 * at peak, or allocated over the run for --sort bytes. */
static void sites_table(FILE *o, const vt_report_t *r, const vt_model_t *m)
{
    static const char *const by[] = { [VT_ORDER_PEAK] = "by bytes live at peak",
                                      [VT_ORDER_BYTES] = "by bytes allocated over the run",
                                      [VT_ORDER_CALLS] = "by calls; bytes live at peak" };
    const vt_proc_t *p = vt_model_proc(m);
    const char *filter = r->opts.filter;
    int order = r->opts.order == VT_ORDER_BYTES || r->opts.order == VT_ORDER_CALLS ? r->opts.order : VT_ORDER_PEAK;
    size_t top = r->opts.top > 0 && (size_t)r->opts.top < p->nsites ? (size_t)r->opts.top : p->nsites;
    size_t *rank = vt_sites_ordered(p, filter ? p->nsites : top, order);
    size_t shown = 0, matching = 0;
    char a[VT_SIZE_BUF];
    for (size_t k = 0; rank && k < (filter ? p->nsites : top); k++) {
        const vt_site_t *s = &p->sites[rank[k]];
        if (!vt_site_matches(m, s, filter))
            continue;
        if (matching++ >= top)
            continue;
        if (!shown++) {
            fprintf(o, "\nTop allocation sites (%s)", by[order]);
            if (filter)
                fprintf(o, ", stacks with a frame matching '%s'", vt_text(filter));
            fprintf(o, "\n");
        }
        char rule[1024], where[32];
        vt_site_evidence(m, s, rule, sizeof rule);
        vt_site_where(s, where);
        fprintf(o, "  %2zu. %*s  %-8s %-11s %6" PRIu64 " call%s  %s\n", shown, W,
                vt_fmt_bytes(a, order == VT_ORDER_BYTES ? s->total_bytes : s->at_peak), tagn(m, s->match.tag), where,
                s->calls, s->calls == 1 ? " " : "s", vt_text(rule));
        if (s->failed) {
            /* A request that failed holds nothing: without this line its
             * row reads as a 0-byte allocation. */
            const char *err = vt_result_name(s->failed_api, s->failed_result);
            char num[24], b[VT_SIZE_BUF];
            snprintf(num, sizeof num, "error %u", s->failed_result);
            fprintf(o, "      FAILED: %" PRIu64 " of %" PRIu64 " call%s, %s requested (%s)\n", s->failed, s->calls,
                    s->calls == 1 ? "" : "s", vt_fmt_bytes(b, s->failed_bytes), err ? err : num);
        }
        print_stack(o, m, s->stack, "        ", s->match.rule < 0 ? 0 : 12);
    }
    if (filter && rank && !matching)
        fprintf(o, "\nNo allocation site has a frame matching '%s'.\n", vt_text(filter));
    else if (filter && matching > shown)
        fprintf(o, "  ... %zu more matching sites (--top 0 shows all)\n", matching - shown);
    else if (!filter && shown < p->nsites)
        fprintf(o, "  ... %zu more sites (--top 0 shows all)\n", p->nsites - shown);
    free(rank);
}

/* "NOTE: the shim lost N events (why); ..." from the last DROPPED or END. */
static void lost_note(FILE *o, const vt_proc_t *p)
{
    const vt_lost_t *l = &p->events.by_reason;
    fprintf(o, "NOTE: the shim lost %" PRIu64 " events (", p->events.dropped);
    if (!l->reasons) {
        fprintf(o, "the trace does not say why");
    } else {
        const char *sep = "";
        uint64_t named = 0;
        for (int i = 0; i < VT_LOST_REASONS; i++) {
            if (!l->lost[i])
                continue;
            fprintf(o, "%s%" PRIu64 " %s", sep, l->lost[i], vt_lost_reason_text(i));
            named += l->lost[i];
            sep = ", ";
        }
        if (named < p->events.dropped)
            fprintf(o, "%s%" PRIu64 " for reasons this version cannot name", sep, p->events.dropped - named);
    }
    fprintf(o, "); numbers are lower bounds.\n");
}

/* The Events line's loss: exact only when the trace ended cleanly. A trace
 * without END (or cut inside a chunk) holds the loss up to its last DROPPED
 * record; what came after is unknown, and never printed as 0. */
static void dropped_clause(FILE *o, const vt_proc_t *p, const vt_report_input_t *in)
{
    if (p->ended && !in->truncated && !in->damaged) {
        fprintf(o, ", %" PRIu64 " dropped", p->events.dropped);
        return;
    }
    if (in->truncated || in->damaged) {
        const char *why = in->truncated ? "the trace ends mid-chunk" : "the trace is damaged there";
        if (p->events.dropped)
            fprintf(o, ", dropped: %" PRIu64 " before offset %" PRIu64 ", unknown after: %s", p->events.dropped,
                    in->stop_offset, why);
        else
            fprintf(o, ", dropped: unknown after offset %" PRIu64 ": %s", in->stop_offset, why);
    } else if (p->events.dropped) {
        fprintf(o, ", dropped: %" PRIu64 " by the last chunk, unknown after it: no END record", p->events.dropped);
    } else {
        fprintf(o, ", dropped: unknown after the last chunk: no END record");
    }
}

static void process_section(FILE *o, const vt_report_t *r, const vt_report_input_t *in)
{
    const vt_model_t *m = in->model;
    const vt_proc_t *p = vt_model_proc(m);
    char a[VT_SIZE_BUF], t[VT_SIZE_BUF];
    fprintf(o, "%s== %s (pid %" PRIu64 ") ", col(C_BOLD), vt_text(vt_base(p->exe)), p->pid);
    for (uint32_t i = 0; i < p->argc && i < 8; i++)
        fprintf(o, "%s%s", i ? " " : "", vt_text(p->argv[i]));
    if (p->argc > 8)
        fprintf(o, " ...");
    fprintf(o, "%s\n", col(C_OFF));
    if (in->truncated)
        fprintf(o, "NOTE: the trace stops at offset %" PRIu64 " (%s): the process was killed or is still "
                   "running; everything before that is reported.\n",
                in->stop_offset, vt_text(in->stop_reason));
    else if (in->damaged)
        fprintf(o, "NOTE: the trace is damaged at offset %" PRIu64 " (%s): everything before that is reported, "
                   "nothing after it.\n",
                in->stop_offset, vt_text(in->stop_reason));
    else if (!p->ended)
        fprintf(o, "NOTE: no clean exit recorded: the process died or was still running when the trace was read.\n");
    if (p->events.dropped)
        lost_note(o, p);
    if (vt_proc_degraded_note(p))
        fprintf(o, "NOTE: %s\n", vt_proc_degraded_note(p));
    if (p->degraded & VT_DEGRADED_SHARED_FDS)
        fprintf(o, "NOTE: the shim could not give its writer a descriptor table of its own (unshare(CLONE_FILES) "
                   "refused, as under Docker's default seccomp profile): the trace's descriptor was in the "
                   "program's table, checked before each write; a program that replaced it in the instant between "
                   "the check and the write could have had trace bytes written into its own file.\n");
    vt_report_verdict(o, m);

    if (p->tip.valid) {
        const vt_event_view_t *v = &p->tip;
        const char *err = vt_result_name(v->api, v->result);
        char what[200];
        fprintf(o, "\nTipping event: %s, %s on GPU %d at %s, result %u%s%s%s\n", vt_spill_kind_name(p->tip_kind),
                vt_spill_what(what, sizeof what, p->tip_kind, v->api, v->bytes, tagn(m, v->tag)), v->device,
                vt_fmt_time(t, v->time_ns), v->result, err ? " (" : "", err ? err : "", err ? ")" : "");
        print_stack(o, m, v->stack, "    ", 0);
        if (v->device >= 0) {
            fprintf(o, "  device state then: %s tracked, last driver free %s, estimated free %s\n",
                    vt_fmt_bytes(a, v->dev_tracked), vt_fmt_bytes(t, v->last_free),
                    vt_fmt_sbytes((char[VT_SIZE_BUF]){ 0 }, v->free_est));
            tag_rows(o, m, v->dev_by_tag, v->dev_tracked, "    ");
        }
        if (p->nlater) {
            fprintf(o, "  later spill events: %" PRIu64 "", p->nlater);
            for (int k = 0; k < VT_SPILL_KINDS; k++) {
                uint64_t n = vt_proc_later_spills(p, k);
                if (n)
                    fprintf(o, "; %s %" PRIu64, vt_spill_kind_name(k), n);
            }
            fprintf(o, "\n");
            for (uint64_t i = 0; i < p->nlater && i < 10; i++) {
                const vt_spill_brief_t *b = &p->later[i];
                /* A graph launch's size is not in the trace. */
                int sized = b->kind != VT_SPILL_GRAPH_LAUNCH;
                fprintf(o, "    %-18s %9s %-24s %*s  %s\n", vt_spill_kind_name(b->kind), vt_fmt_time(t, b->time_ns),
                        vt_api_name(b->api), W, sized ? vt_fmt_bytes(a, b->bytes) : "?", sized ? tagn(m, b->tag) : "");
            }
            if (p->nlater > 10)
                fprintf(o, "    ... %" PRIu64 " more\n", p->nlater - 10);
        }
    }
    /* A GPU probe has no tables to show: its verdict, entry points and
     * counts say all of it. */
    if (!vt_proc_allocated_nothing(p)) {
        for (int i = 0; i < p->ndevs; i++)
            device_section(o, m, &p->devs[i]);
        tagged_section(o, m, "Pinned host memory", &p->host);
        tagged_section(o, m, "Managed memory", &p->managed);
        sites_table(o, r, m);
        vt_report_text_heap(o, r, m);
    }

    /* The name column fits the longest name called (cuMemImportFromShareableHandle
     * is 30), so the figures stay in their columns. */
    int name_w = 22;
    for (unsigned api = 0; api < VT_API_COUNT; api++)
        if (p->apis[api].calls && (int)strlen(vt_api_name(api)) > name_w)
            name_w = (int)strlen(vt_api_name(api));
    fprintf(o, "\n%-*s calls   failed       bytes\n", name_w + 3, "Entry points");
    for (unsigned api = 0; api < VT_API_COUNT; api++)
        if (p->apis[api].calls)
            fprintf(o, "  %-*s %7" PRIu64 " %8" PRIu64 " %*s\n", name_w, vt_api_name(api), p->apis[api].calls,
                    p->apis[api].failed, W, vt_fmt_bytes(a, p->apis[api].bytes));
    fprintf(o, "Events: %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64 " failed", p->events.allocs,
            p->events.frees, p->events.failed);
    if (p->events.failed_not_oom)
        fprintf(o, " (%" PRIu64 " not for lack of memory)", p->events.failed_not_oom);
    dropped_clause(o, p, in);
    if (p->events.unmatched_frees)
        fprintf(o, ", %" PRIu64 " frees of unknown pointers", p->events.unmatched_frees);
    if (p->events.implicit_frees)
        fprintf(o, ", %" PRIu64 " reused live pointers", p->events.implicit_frees);
    if (p->events.teardown_frees)
        fprintf(o, ", %" PRIu64 " freed by context teardown", p->events.teardown_frees);
    if (p->events.impossible)
        fprintf(o, ", %" PRIu64 " impossible requests refused (over 2^64 bytes)", p->events.impossible);
    if (p->events.captured_allocs || p->events.captured_frees)
        fprintf(o, ", %" PRIu64 " allocs and %" PRIu64 " frees as CUDA graph nodes", p->events.captured_allocs,
                p->events.captured_frees);
    if (p->events.graph_launch_failures)
        fprintf(o, ", %" PRIu64 " graph launch%s failed (a launch is recorded when it fails, and the first to "
                   "succeed after one)",
                p->events.graph_launch_failures, p->events.graph_launch_failures == 1 ? "" : "es");
    if (p->events.imported_handles)
        fprintf(o, ", %" PRIu64 " VMM handle%s imported from other processes (their memory: not counted here)",
                p->events.imported_handles, p->events.imported_handles == 1 ? "" : "s");
    if (p->events.multicast_objects)
        fprintf(o, ", %" PRIu64 " multicast object%s (holding no memory: what is bound to %s is counted where it was made)",
                p->events.multicast_objects, p->events.multicast_objects == 1 ? "" : "s",
                p->events.multicast_objects == 1 ? "it" : "them");
    if (p->events.imported_pointers)
        fprintf(o, ", %" PRIu64 " device pointer%s mapped from other processes' memory (IPC; not counted here)",
                p->events.imported_pointers, p->events.imported_pointers == 1 ? "" : "s");
    fprintf(o, "\n");
    if (p->ggml.marks) {
        /* Unmatched marks are mostly ggml's CPU buffers: memory no CUDA
         * call made, so nothing here for them to tag. */
        fprintf(o, "ggml buffer marks: %" PRIu64 " read, %" PRIu64 " on traced allocations (they set those tags), %" PRIu64
                   " on memory not traced",
                p->ggml.marks, p->ggml.matched, p->ggml.unmatched);
        if (p->ggml.remarked)
            fprintf(o, ", %" PRIu64 " allocations marked twice (the later mark counts)", p->ggml.remarked);
        fprintf(o, "\n");
    }
}

/* The model file a runner was started with (-m / --model), or NULL. */
static const char *model_arg(const vt_proc_t *p)
{
    for (uint32_t i = 1; i + 1 < p->argc; i++)
        if (!strcmp(p->argv[i], "-m") || !strcmp(p->argv[i], "--model"))
            return vt_base(p->argv[i + 1]);
    return NULL;
}

static const vt_report_input_t *index_sort_base;
static int by_start(const void *a, const void *b)
{
    const vt_proc_t *x = vt_model_proc(index_sort_base[*(const int *)a].model);
    const vt_proc_t *y = vt_model_proc(index_sort_base[*(const int *)b].model);
    if (x->wall_start_ns != y->wall_start_ns)
        return x->wall_start_ns < y->wall_start_ns ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

/* With several processes, the story first: one line each, by when it
 * started (wall clock), so a run is found by when it happened. */
static void process_index(const vt_report_t *r, FILE *o)
{
    /* Not vt_verdict_words: capitals only for what needs a look, and
     * words short enough for the column ("no GPU memory"). */
    static const struct { const char *key, *words; } words[] = {
        { "spill", "SPILL" }, { "near_spill", "NEAR SPILL" }, { "failed", "OUT OF MEMORY" },
        { "partial_offload", "PARTIAL OFFLOAD" }, { "cpu_only", "RAN ON THE CPU" }, { "no_spill", "no spill" },
        { "no_gpu_memory", "no GPU memory" }, { "incomplete", "INCOMPLETE TRACE" },
    };
    int *order = malloc((size_t)r->nin * sizeof *order);
    if (!order)
        return;
    for (int i = 0; i < r->nin; i++)
        order[i] = i;
    index_sort_base = r->in;
    qsort(order, (size_t)r->nin, sizeof *order, by_start);
    char year[8] = "";
    if (r->nin) {
        char w0[32];
        vt_fmt_wall(w0, vt_model_proc(r->in[order[0]].model)->wall_start_ns, r->opts.utc);
        snprintf(year, sizeof year, "%.4s", w0);
    }
    fprintf(o, "== %d processes by start (%s, %s); a section each below\n", r->nin,
            r->opts.utc ? "UTC" : "local time", year);
    if (r->unselected)
        fprintf(o, "   (%d more traces not chosen by --pid, --since, --until or --last)\n", r->unselected);
    fprintf(o, "  %-14s  %-7s %-12s %-14s %9s  %s\n", "START", "PID", "PROCESS", "MODEL", "PEAK", "VERDICT");
    for (int k = 0; k < r->nin; k++) {
        const vt_proc_t *p = vt_model_proc(r->in[order[k]].model);
        const char *key = vt_proc_verdict(p, 1), *w = key;
        for (size_t i = 0; i < sizeof words / sizeof *words; i++)
            if (!strcmp(words[i].key, key))
                w = words[i].words;
        uint64_t peak = 0;
        for (int d = 0; d < p->ndevs; d++)
            peak += p->devs[d].mem.peak_bytes;
        char when[32], a[VT_SIZE_BUF], exe[64], mod[64];
        const char *model = model_arg(p);
        vt_fmt_wall(when, p->wall_start_ns, r->opts.utc);
        /* "MM-DD HH:MM:SS": the year is the header's. */
        const char *e = vt_fit_elide(exe, sizeof exe, p->exe ? vt_text(vt_base(p->exe)) : "?", 12);
        /* The file name without ".gguf": the part that tells models apart. */
        char stem[64];
        snprintf(stem, sizeof stem, "%s", model ? vt_text(model) : "-");
        size_t sl = strlen(stem);
        if (sl > 5 && !strcmp(stem + sl - 5, ".gguf"))
            stem[sl - 5] = 0;
        const char *mo = vt_fit_elide(mod, sizeof mod, stem, 14);
        /* Padded by display columns: an elided name's "…" is 3 bytes. */
        fprintf(o, "  %-14s  %-7" PRIu64 " %s%*s %s%*s %9s  %s\n", when + 5, p->pid, e,
                (int)(12 - vt_fit_cols(e, strlen(e))), "", mo, (int)(14 - vt_fit_cols(mo, strlen(mo))), "",
                vt_fmt_bytes(a, peak), w);
    }
    fputc('\n', o);
    free(order);
}

static void report_all(const vt_report_t *r, FILE *o)
{
    vt_text_raw = r->opts.raw_strings;
    if (r->nin >= 3)
        process_index(r, o);
    for (int i = 0; i < r->nin; i++) {
        if (i)
            fprintf(o, "\n");
        process_section(o, r, &r->in[i]);
    }
    for (int i = 0; i < r->nbad; i++)
        fprintf(o, "\n== %s: NOT REPORTED: offset %" PRIu64 ": %s\n", vt_text(r->bad[i].path), r->bad[i].offset,
                vt_text(r->bad[i].reason));
    if (r->nin < 2 || !r->ngpus)
        return;
    char a[VT_SIZE_BUF], b[VT_SIZE_BUF], t[VT_SIZE_BUF], uuid[48];
    fprintf(o, "\n== GPUs across all %d processes\n", r->nin);
    for (int g = 0; g < r->ngpus; g++) {
        const vt_gpu_t *gp = &r->gpus[g];
        vt_uuid_str(gp->uuid, uuid);
        fprintf(o, "\n%s  %s  total %s\n", gp->name[0] ? vt_text(gp->name) : "GPU", uuid, vt_fmt_bytes(a, gp->total));
        /* Each process's times count from its own first CUDA call; this
         * one, across processes, from the first process's: said, so one
         * moment does not read as two. */
        fprintf(o, "  combined peak %s at %s after the first process started; least free %s\n",
                vt_fmt_bytes(a, gp->peak_bytes), vt_fmt_time(t, gp->peak_time_abs > r->t0 ? gp->peak_time_abs - r->t0 : 0),
                gp->have_min ? vt_fmt_bytes(b, gp->min_free) : "unknown");
        for (int k = 0; k < VT_MAX_TAGS && k < vt_rules_tag_count(r->rules); k++)
            if (gp->peak_by_tag[k] || k < VT_TAG_BUILTIN_COUNT)
                fprintf(o, "    %-18s %*s\n", vt_text(vt_rules_tag_name(r->rules, k)), W, vt_fmt_bytes(a, gp->peak_by_tag[k]));
        int idle = 0;
        for (int k = 0; k < gp->nprocs; k++) {
            const vt_proc_t *p = vt_model_proc(gp->procs[k]);
            if (vt_proc_allocated_nothing(p)) { /* a probe: one line for all of them */
                idle++;
                continue;
            }
            fprintf(o, "    pid %-8" PRIu64 " %-16s %*s at the combined peak, own peak %s\n", p->pid, vt_text(vt_base(p->exe)), W,
                    vt_fmt_bytes(a, gp->peak_contrib[k]), vt_fmt_bytes(b, p->devs[gp->dev_index[k]].mem.peak_bytes));
        }
        if (idle)
            fprintf(o, "    and %d process%s that allocated nothing\n", idle, idle == 1 ? "" : "es");
    }
}

void vt_report_text(const vt_report_t *r, FILE *out)
{
    vt_fit_t fit;
    color = r->opts.color > 0;
    width = r->opts.wide ? 0 : VT_FIT_COLUMNS;
    report_all(r, vt_fit_begin(&fit, out, width));
    vt_fit_end(&fit);
}
