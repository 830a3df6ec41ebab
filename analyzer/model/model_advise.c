/* model_advise.c: the offload estimate (docs/report.md, "Offload
 * estimate"): from the placement's picture (model_placement.c) and the
 * free memory at the lowest on the GPU holding most of the model, how many
 * layers of this run's size would fit above the margin. The same
 * arithmetic answers `replay --capacity` (vt_model_advise), so report and
 * replay cannot disagree. */
#include <string.h>

#include "model_internal.h"

/* No card holds this much (256 TiB): a device or a layer said to be
 * larger is a hostile trace's, and the int64 arithmetic over up to 4096
 * layers would overflow on it. */
#define MAX_CARD_BYTES (1ull << 48)

/* The offload arithmetic: how many layers of this run's size fit in the
 * room the card had above the margin. An estimate, said as one: it
 * assumes a layer costs what this run's layers cost on average and that
 * the compute buffers stay as they were. From a->total, unmet, per_layer
 * and the free memory at the lowest, which may be below 0 on a card
 * smaller than what the run used (vt_model_advise); known stays as it was. */
static void estimate(const vt_placement_t *pl, double margin_frac, int64_t free_lowest, struct vt_advice *a)
{
    a->margin = (uint64_t)(margin_frac * (double)a->total);
    a->room = free_lowest - (int64_t)a->margin - (int64_t)a->unmet;
    uint32_t host_blocks = pl->blocks - pl->blocks_gpu;
    int out_host = pl->output_layer == 0;
    uint64_t output_cost = out_host ? pl->output_bytes : 0;
    uint64_t whole_layer = pl->block_weight_bytes + pl->block_kv_bytes;
    a->need_all = (uint64_t)host_blocks * whole_layer + output_cost + pl->experts_host + pl->kv_host_of_gpu_blocks;
    /* Every block in host memory an override's, and blocks on the GPU
     * with part of their weights in host memory, and nothing else there:
     * their KV cache is on the GPU already, their host weights are what
     * would move. */
    a->of_override = pl->override_blocks == host_blocks && !out_host &&
                     (pl->override_blocks || (pl->part_blocks_host && !pl->expert_blocks_host && !pl->kv_blocks_host));
    a->override_blocks_fit = 0;
    a->override_n = 0, a->override_bytes = 0;
    if (a->of_override) {
        a->override_n = pl->override_blocks + pl->part_blocks_host;
        a->override_bytes = pl->override_host + pl->part_host;
        a->need_all = a->override_bytes;
        uint64_t per_block = a->override_bytes / a->override_n;
        uint64_t fit = a->room > 0 && per_block ? (uint64_t)a->room / per_block : 0;
        a->override_blocks_fit = fit < a->override_n ? (uint32_t)fit : a->override_n;
    }
    a->short_all = (int64_t)a->need_all - a->room;
    /* Blocks on the GPU with their experts in host memory, and nothing
     * else there: the experts are what would move, block by block. */
    a->expert_blocks_fit = 0;
    a->of_experts = pl->expert_blocks_host && !host_blocks && !out_host;
    if (a->of_experts && a->room > 0) {
        uint64_t per_block = pl->experts_host / pl->expert_blocks_host;
        uint64_t fit = per_block ? (uint64_t)a->room / per_block : 0;
        a->expert_blocks_fit = fit < pl->expert_blocks_host ? (uint32_t)fit : pl->expert_blocks_host;
    }
    /* Every layer on the GPU, their KV cache in host memory: llama.cpp
     * offloads all of it or none (--no-kv-offload), so it fits or not. */
    a->of_kv = pl->kv_blocks_host && !pl->expert_blocks_host && !host_blocks && !out_host;
    a->kv_fits = a->of_kv && a->room >= (int64_t)pl->kv_host_of_gpu_blocks;
    int64_t layers = (int64_t)pl->layers_gpu;
    if (a->room >= 0) {
        int64_t room = a->room;
        /* llama.cpp offloads the output layer first, then blocks from the last. */
        if (out_host && room >= (int64_t)output_cost) {
            room -= (int64_t)output_cost;
            layers++;
        } else if (out_host) {
            room = -1;
        }
        if (room > 0) {
            int64_t more = room / (int64_t)a->per_layer;
            layers += more < host_blocks ? more : host_blocks;
        }
    } else {
        int64_t fewer = (-a->room + (int64_t)a->per_layer - 1) / (int64_t)a->per_layer;
        layers = layers > fewer ? layers - fewer : 0;
    }
    a->gpu_layers = (uint32_t)layers;
}

void vt_m_placement_advise(vt_model_t *m)
{
    vt_placement_t *pl = &m->p.placement;
    if (!pl->layers_known)
        return;
    /* Layers on several GPUs (llama.cpp's -sm layer): a layer more could
     * go to any of them, and the arithmetic below counts one card's room;
     * the sum of the rooms is no better (a layer is not split). No
     * estimate rather than a wrong one. */
    uint32_t gpus = 0;
    for (int i = 0; i < VT_MAX_DEVICES; i++)
        gpus += pl->layer_weights_at.gpu_by_dev[i] > 0;
    if (gpus > 1) {
        pl->advice_withheld_gpus = gpus;
        return;
    }
    /* The layers on one GPU or none, but others in use: with -sm layer
     * (llama.cpp's default) a larger -ngl spreads all the offloaded layers
     * over every GPU, by their free memory at load or -ts, and each takes
     * compute buffers of its own. One card's room says neither more nor
     * fewer; this process's devices are those it made a context on. */
    uint32_t used = 0;
    for (int i = 0; i < m->p.ndevs; i++)
        used += m->p.devs[i].have_info;
    if (used > 1 && !vt_proc_one_gpu(&m->p)) {
        pl->advice_withheld_devices = used;
        return;
    }
    int best = -1;
    uint64_t most = 0;
    for (int i = 0; i < VT_MAX_DEVICES; i++) {
        uint64_t here = pl->weights.gpu_by_dev[i] + pl->kv.gpu_by_dev[i] + pl->compute.gpu_by_dev[i];
        if (vt_model_dev_index(m, i) >= 0 && (best < 0 || here > most)) {
            best = i;
            most = here;
        }
    }
    int di = best >= 0 ? vt_model_dev_index(m, best) : -1;
    if (di < 0)
        return;
    const vt_dev_t *d = &m->p.devs[di];
    if (!d->have_min || !d->total)
        return;
    struct vt_advice *a = &pl->advice;
    a->device = best;
    a->total = d->total;
    a->free_lowest = d->min_free;
    /* A failed request the run did without (a compute buffer that did not
     * fit) needs room too. */
    const vt_proc_t *p = &m->p;
    if (p->tip.valid && p->tip_kind == VT_SPILL_OOM && p->tip.device == best && (p->failed_tags & (1u << p->tip.tag)))
        a->unmet = p->tip.bytes;
    a->per_layer = pl->block_weight_bytes + pl->block_kv_bytes;
    a->per_layer_kv = pl->block_kv_bytes;
    if (pl->override_blocks &&
        (pl->override_blocks < pl->blocks - pl->blocks_gpu || pl->output_layer == 0 || pl->expert_blocks_host ||
         pl->kv_blocks_host)) {
        pl->advice_withheld_override = 1;
        return;
    }
    if (pl->expert_blocks_host && pl->blocks_gpu < pl->blocks) {
        if (pl->expert_blocks_host < pl->blocks_gpu) {
            pl->advice_withheld_experts = 1;
            return;
        }
        a->per_layer = pl->block_rest_bytes + pl->block_kv_bytes;
        a->experts_kept = 1;
    }
    /* With no block on the GPU, none shows where a block's KV cache would
     * go; the options do where they say --no-kv-offload. */
    int kv_stays = !pl->blocks_gpu && vt_place_host(&pl->kv) && vt_proc_no_kv_offload(&m->p);
    if (pl->kv_blocks_host || kv_stays) {
        int layers_host = pl->blocks_gpu < pl->blocks || pl->output_layer == 0;
        if (layers_host ? pl->kv_blocks_host < pl->blocks_gpu : pl->expert_blocks_host > 0) {
            pl->advice_withheld_kv = layers_host ? VT_WITHHELD_KV_SOME : VT_WITHHELD_KV_AND_EXPERTS;
            return;
        }
        if (layers_host) {
            a->per_layer -= pl->block_kv_bytes;
            a->per_layer_kv = 0;
            a->kv_kept = 1;
        }
    }
    if (!a->per_layer)
        return;
    if (a->total > MAX_CARD_BYTES || a->free_lowest > MAX_CARD_BYTES || a->unmet > MAX_CARD_BYTES ||
        pl->block_weight_bytes > MAX_CARD_BYTES || pl->block_kv_bytes > MAX_CARD_BYTES ||
        pl->output_bytes > MAX_CARD_BYTES || pl->experts_host > MAX_CARD_BYTES ||
        pl->kv_host_of_gpu_blocks > MAX_CARD_BYTES || pl->override_host > MAX_CARD_BYTES ||
        pl->part_host > MAX_CARD_BYTES)
        return;   /* sizes no card has: no estimate */
    estimate(pl, m->margin_frac, (int64_t)d->min_free, a);
    a->known = 1;
}

int vt_model_advise(const vt_model_t *m, uint64_t total, int64_t free_lowest, struct vt_advice *out)
{
    const vt_placement_t *pl = &m->p.placement;
    if (!pl->advice.known)
        return 0;
    *out = pl->advice;
    out->total = total;
    out->free_lowest = free_lowest > 0 ? (uint64_t)free_lowest : 0;
    estimate(pl, m->margin_frac, free_lowest, out);
    return 1;
}
