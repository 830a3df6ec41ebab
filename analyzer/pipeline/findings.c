/* findings.c: what the report finds beside the verdict (verdict.c), decided
 * once, below the output room: the tipping event's device and the free
 * memory it met, the later spills, how much more VRAM the process needed
 * and what that bound rests on, and each device's headroom: its context
 * reserve, untracked bytes, margin and how free memory crossed it. The
 * text, JSON and HTML reports, `top`, `serve`, `diff` and `replay` read
 * them from here (contracts in report.h) and only print them, so no two
 * views can disagree on them. Each is a pure function of the finished
 * model: nothing here allocates or keeps state. */
#include <string.h>

#include "report.h"
#include "sizes.h"

uint64_t vt_dev_reserve(const vt_dev_t *d)
{
    return d->have_info && d->total >= d->first_free ? d->total - d->first_free : 0;
}

uint64_t vt_dev_untracked(const vt_dev_t *d)
{
    if (!d->have_free || d->total < d->last_free)
        return 0;
    /* used - reserve - tracked, floored at 0, in unsigned steps: hostile
     * sizes must not overflow a signed subtraction. */
    uint64_t used = d->total - d->last_free, reserve = vt_dev_reserve(d);
    if (used <= reserve)
        return 0;
    used -= reserve;
    return used > d->tracked_at_sample ? used - d->tracked_at_sample : 0;
}

uint64_t vt_margin_bytes(double margin_pct, uint64_t total)
{
    return (uint64_t)(margin_pct / 100.0 * (double)total);
}

uint64_t vt_dev_free_now(const vt_dev_t *d)
{
    /* The model's estimate (the driver's last word less this process's
     * allocations since), in unsigned steps as there, floored at 0. */
    int64_t est = (int64_t)(d->last_free - (d->mem.tracked - d->tracked_at_sample));
    return est > 0 ? (uint64_t)est : 0;
}

void vt_dev_headroom(const vt_model_t *m, const vt_dev_t *d, vt_headroom_t *out)
{
    const vt_proc_t *p = vt_model_proc(m);
    out->reserve = vt_dev_reserve(d);
    out->untracked = vt_dev_untracked(d);
    /* A CUDA context takes a few hundred MiB (448 MiB on the simulator,
     * about 500 MiB on an H100): above 1 GiB the rest was held by others. */
    out->reserve_by_others = out->reserve > (1ull << 30);
    /* Free memory as the driver reports it leaves out managed memory,
     * which it pages into the card when touched: with more managed than
     * the card can hold beside this process's own, no room is claimed. */
    out->managed_over = p->managed.peak_bytes && p->managed.peak_bytes + d->mem.peak_bytes > d->total;
    out->margin_bytes = vt_margin_bytes(vt_model_margin(m), d->total);
    out->crossed = VT_MARGIN_ABOVE;
    if (d->below_margin.valid) {
        const vt_api_info_t *bm = vt_api_info(d->below_margin.api);
        out->crossed = bm && bm->kind == VT_KIND_MEMINFO ? VT_MARGIN_CROSSED_BY_REPORT : VT_MARGIN_CROSSED_BY_ALLOCATION;
    }
    out->outside = d->below_margin_outside;
    out->spare = d->min_free - out->margin_bytes;
}

uint64_t vt_view_free(const vt_event_view_t *v)
{
    return v->free_est > 0 ? (uint64_t)v->free_est : 0;
}

int vt_proc_tip_dev(const vt_model_t *m)
{
    const vt_proc_t *p = vt_model_proc(m);
    return p->tip.valid ? vt_model_dev_index(m, p->tip.device) : -1;
}

int vt_proc_tip_on_device(const vt_proc_t *p, int ordinal)
{
    return p->tip.valid && p->tip.device == ordinal && p->tip_kind != VT_SPILL_HOST_FALLBACK;
}

int vt_proc_tip_in_host(const vt_proc_t *p)
{
    return p->tip.valid && p->tip_kind == VT_SPILL_HOST_FALLBACK;
}

const char *vt_spill_what(char *buf, size_t n, int kind, unsigned api, uint64_t bytes, const char *tag)
{
    char a[VT_SIZE_BUF];
    if (kind == VT_SPILL_GRAPH_LAUNCH)
        snprintf(buf, n, "%s of a CUDA graph (its allocations' size not in the trace)", vt_api_name(api));
    else
        snprintf(buf, n, "%s of %s%s%s", vt_api_name(api), vt_fmt_bytes(a, bytes), tag ? " for " : "", tag ? tag : "");
    return buf;
}

uint64_t vt_proc_later_spills(const vt_proc_t *p, int kind)
{
    return p->spill_count[kind] - (kind == p->tip_kind);
}

uint64_t vt_proc_more_vram(const vt_proc_t *p)
{
    uint64_t more = p->oom_shortfall;
    if (p->fallback_peak > more)
        more = p->fallback_peak;
    if (p->oversub_excess > more)
        more = p->oversub_excess;
    return more;
}

void vt_more_vram(const vt_model_t *m, vt_more_vram_t *out)
{
    const vt_proc_t *p = vt_model_proc(m);
    const vt_event_view_t *v = &p->tip;
    *out = (vt_more_vram_t){ vt_proc_more_vram(p), VT_MORE_UNSAID, 0, 0, 0 };
    uint64_t more = out->bytes;
    if (!more)
        return;
    if (more == p->oom_shortfall && p->tip_kind == VT_SPILL_OOM && v->bytes >= more) {
        out->why = VT_MORE_FAILED_REQUEST;
        out->free_then = v->bytes - more;
        /* What the run allocated after the failure that it did not hold
         * then: a program that took another path (fewer layers, a smaller
         * cache) shows what the full path would have needed on top. */
        int di = vt_proc_tip_dev(m);
        const vt_dev_t *d = di >= 0 ? &p->devs[di] : NULL;
        for (int t = 0; d && t < vt_rules_tag_count(vt_model_rules(m)); t++) {
            if (t == v->tag || v->dev_by_tag[t] || !d->mem.peak_by_tag[t])
                continue;
            out->later += d->mem.peak_by_tag[t];
            out->later_tags |= 1u << t;
        }
    } else if (more == p->fallback_peak) {
        out->why = VT_MORE_FALLBACK;
    } else if (more == p->oversub_excess) {
        out->why = VT_MORE_OVERSUB;
    }
}

void vt_other_models_sentence(char *buf, size_t len, const vt_placement_t *pl)
{
    char a[VT_SIZE_BUF];
    size_t at = 0;
    int n;
    if (len)
        buf[0] = 0;
    if (!pl->known || pl->models_at_once < 2)
        return;
    unsigned others = pl->models_at_once - 1 < VT_MAX_OTHER_MODELS ? pl->models_at_once - 1 : VT_MAX_OTHER_MODELS;
    n = snprintf(buf, len,
                 "%u models were loaded at once: their tensors were named alike while the first one's GPU buffers "
                 "lived (a draft model for speculative decoding, or models side by side in one process). The "
                 "figures above are of the one with the most %s; the other%s: ",
                 pl->models_at_once,
                 pl->offloaded ? "in host memory (layers, then layer weights, then KV cache)" : "layer weights",
                 others == 1 ? "" : "s");
    for (unsigned i = 0; n > 0 && (size_t)n < len - at && i < others; i++) {
        at += (size_t)n;
        const struct vt_other_model *o = &pl->other_models[i];
        char k[VT_SIZE_BUF];
        n = snprintf(buf + at, len - at, "%s%u layers with %s of layer weights, %u on the GPU%s%s%s", i ? "; " : "",
                     o->layers_total, vt_fmt_bytes(a, o->layer_weights), o->layers_gpu,
                     o->kv_host ? ", its KV cache " : "", o->kv_host ? vt_fmt_bytes(k, o->kv_host) : "",
                     o->kv_host ? " in host memory" : "");
    }
    if (n > 0 && (size_t)n < len - at) {
        at += (size_t)n;
        snprintf(buf + at, len - at, ".");
    }
}

void vt_advice_withheld_sentence(char *buf, size_t len, const vt_placement_t *pl)
{
    if (pl->advice_withheld_gpus > 1)
        snprintf(buf, len,
                 "No estimate of the layers that fit: the layers are on %u GPUs, and a layer more could go to any of "
                 "them (the estimate counts one card's room).",
                 pl->advice_withheld_gpus);
    else if (pl->advice_withheld_devices > 1)
        snprintf(buf, len,
                 "No estimate of the layers that fit: this process used %u GPUs, and llama.cpp spreads the layers it "
                 "offloads over all of them (-sm layer, its default), in shares set by their free memory or -ts "
                 "(the estimate counts one card's room; -sm none, -dev with one GPU or a -ts with one share would keep it to one).",
                 pl->advice_withheld_devices);
    else if (pl->advice_withheld_experts)
        snprintf(buf, len,
                 "No estimate of the layers that fit: %u of the %u blocks on the GPU have their experts in host "
                 "memory, so what a layer more would bring depends on which it is.",
                 pl->expert_blocks_host, pl->blocks_gpu);
    else if (pl->advice_withheld_override)
        snprintf(buf, len,
                 "No estimate of the layers that fit: %u of the %u blocks in host memory %s there by an override, "
                 "beside what else is, and which a change would move the trace cannot say.",
                 pl->override_blocks, pl->blocks - pl->blocks_gpu, pl->override_blocks == 1 ? "is" : "are");
    else if (pl->advice_withheld_kv == VT_WITHHELD_KV_SOME)
        snprintf(buf, len,
                 "No estimate of the layers that fit: %u of the %u blocks on the GPU have their KV cache in host "
                 "memory, so what a layer more would bring depends on which it is.",
                 pl->kv_blocks_host, pl->blocks_gpu);
    else if (pl->advice_withheld_kv == VT_WITHHELD_KV_AND_EXPERTS)
        snprintf(buf, len,
                 "No estimate of what fits: both the experts and the KV cache of blocks on the GPU are in host "
                 "memory, and which of them would move first is the program's choice.");
    else if (len)
        buf[0] = 0;
}

/* --fit's options into fit, buf emptied: 1 when --fit ran and buf has room
 * for a sentence of it. */
static int fit_sentence_start(const vt_proc_t *p, vt_llama_fit_t *fit, char *buf, size_t len)
{
    vt_proc_llama_fit(p, fit);
    if (!len)
        return 0;
    buf[0] = 0;
    return fit->ran;
}

void vt_kv_cells_words(char *buf, size_t len, const vt_placement_t *pl)
{
    if (!pl->kv_cells)
        snprintf(buf, len, "%s", "");
    else if (pl->kv_streams > 1)
        snprintf(buf, len, "%u sequences of %u cells each", pl->kv_streams, pl->kv_cells);
    else
        snprintf(buf, len, "%u cells", pl->kv_cells);   /* never 1: kv_rows */
}

/* A stream is one sequence's own cache where there are several
 * (llama-kv-cache.cpp: n_stream is n_seq_max unless unified). */
const char *vt_kv_cells_scope(const vt_placement_t *pl)
{
    if (pl->kv_streams > 1)
        return "tokens of context, each sequence's own: -np without --kv-unified";
    if (pl->kv_streams == 1)
        return "tokens of context, one cache every sequence shares";
    return "tokens of context, over all sequences";
}

void vt_llama_context_sentence(char *buf, size_t len, const vt_proc_t *p)
{
    vt_llama_fit_t fit;
    char cells[VT_KV_CELLS_WORDS_MAX];
    vt_kv_cells_words(cells, sizeof cells, &p->placement);
    if (!fit_sentence_start(p, &fit, buf, len) || fit.ctx || !cells[0])
        return;
    char floor[128];
    if (fit.fit_ctx)
        snprintf(floor, sizeof floor, "--fit-ctx %.64s (%s)", fit.fit_ctx,
                 fit.fit_ctx_from == VT_FROM_ENV ? "from LLAMA_ARG_FIT_CTX" : "from the command line");
    else
        snprintf(floor, sizeof floor, "--fit-ctx (4096 by default%s)",
                 fit.env_recorded ? "" : ", unless LLAMA_ARG_FIT_CTX set another");
    /* common/fit.cpp sizes the context before it counts layers, -ngl given
     * or not: this holds for every --fit that ran. It starts from the
     * trained context times the streams (v0.4.0) or the sequences (v0.5.0),
     * and its floor is --fit-ctx times the streams; -c is the context of
     * all sequences together (llama-context.cpp: n_ctx_seq is n_ctx over
     * the sequences unless unified). */
    const char *how = p->placement.kv_streams > 1
                          ? "--fit starts from the model's trained context for each sequence and shrinks it, as far "
                            "as %s for each, before it leaves any layer in host memory; -c sets the context of all "
                            "sequences together, and -c 0 gives them the trained context to share out."
                          : "--fit starts from the model's trained context (llama.cpp v0.5.0: that times the "
                            "sequences, -np) and shrinks it, as far as %s, before it leaves any layer in host "
                            "memory; -c sets it, and -c 0 keeps the trained context whole.";
    char rest[VT_FIT_SENTENCE_MAX];
    snprintf(rest, sizeof rest, how, floor);
    snprintf(buf, len, "No -c was given%s, so llama.cpp's --fit chose the context%s: the KV cache has %s (%s). %s",
             fit.env_recorded ? "" : " on the command line",
             fit.env_recorded ? "" : " unless LLAMA_ARG_CTX_SIZE set it (this trace does not record the environment)",
             cells, vt_kv_cells_scope(&p->placement), rest);
}

void vt_llama_fit_sentence(char *buf, size_t len, const vt_proc_t *p)
{
    vt_llama_fit_t fit;
    if (!fit_sentence_start(p, &fit, buf, len))
        return;
    if (fit.ngl) {
        snprintf(buf, len,
                 "llama.cpp's --fit ran (its free-memory queries are in the trace, from common_fit_params), but "
                 "-ngl %.64s was given %s: --fit leaves that as given.",
                 fit.ngl, fit.ngl_from == VT_FROM_ENV ? "by LLAMA_ARG_N_GPU_LAYERS" : "on the command line");
        return;
    }
    if (fit.override || fit.split) {
        /* Quoted as given: "-ot blk...", "--cpu-moe", "LLAMA_ARG_CPU_MOE=1". */
        int env = (fit.override ? fit.override_from : fit.split_from) == VT_FROM_ENV;
        const char *name = fit.override ? fit.override : fit.split;
        const char *value = fit.override ? fit.override_value : fit.split_value;
        snprintf(buf, len,
                 "llama.cpp's --fit ran (its free-memory queries are in the trace, from common_fit_params), but "
                 "%s%s%.64s%s was given %s: %s, --fit leaves the split as given.",
                 name, !value ? "" : env ? "=" : " ", value ? value : "", value && strlen(value) > 64 ? "..." : "",
                 env ? "in the environment" : "on the command line",
                 fit.override ? "with a tensor override set" : "with more than one GPU");
        return;
    }
    char target[96];
    if (fit.target_bytes)
        snprintf(target, sizeof target, "%llu MiB", (unsigned long long)(fit.target_bytes >> 20));
    else
        snprintf(target, sizeof target, "%.64s MiB by device", fit.target);
    const char *from = fit.target_from == VT_FROM_ARGV  ? "--fit-target, from the command line"
                       : fit.target_from == VT_FROM_ENV ? "--fit-target, from LLAMA_ARG_FIT_TARGET"
                       : fit.env_recorded
                           ? "--fit-target: llama.cpp's default, which neither the command line nor the environment sets"
                           : "--fit-target: llama.cpp's default, unless LLAMA_ARG_FIT_TARGET set another";
    /* An -ngl or an override in an unrecorded environment would have
     * made --fit leave the split: then "chose" is conditional. */
    snprintf(buf, len,
             "llama.cpp's --fit chose this split%s: its free-memory queries are in the trace (from common_fit_params), "
             "and %s. It offloads only as much as leaves %s free on each GPU (%s); an -ngl, which "
             "--fit then leaves as given, or a smaller --fit-target puts more there.",
             fit.env_recorded ? "" : " unless the environment set an -ngl or a tensor override",
             fit.env_recorded ? "neither an -ngl nor a tensor override was given"
                              : "its command line gives neither (this trace does not record the environment)",
             target, from);
}
