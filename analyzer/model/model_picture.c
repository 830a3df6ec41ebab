/* model_picture.c: the picture of where the model ran, from the buffers
 * and tensors model_placement.c kept (model.h, "Placement"; the
 * contract of the placement is model_placement.c's module comment).
 *
 * vt_m_placement_finish picks the moment (the fullest of the latest load
 * with layers or KV cache in host memory, else of the run) and sums the
 * buffers and parts live then into m->p.placement: by place, by block,
 * llama.cpp's layer count. Where models were loaded side by side, the
 * sums are of one of them and the others are summed apart
 * (picture_at). Every figure is summed afresh, so finishing again after
 * more records gives what one finish would.
 */
#include <stdlib.h>
#include <string.h>

#include "model_placement_state.h"
#include "sort.h"

static int content_of(const gbuf_t *b)
{
    if (b->usage == VT_GGML_USAGE_WEIGHTS)
        return C_WEIGHTS;
    if (b->usage == VT_GGML_USAGE_COMPUTE)
        return C_COMPUTE;
    if (b->named_kv && !b->named_weights)
        return C_KV;
    if (b->named_weights && !b->named_kv)
        return C_WEIGHTS;
    return C_OTHER;
}

static void add_place(vt_place_bytes_t *pb, const gbuf_t *b, uint64_t bytes)
{
    switch (b->place) {
    case VT_PLACE_GPU:
        pb->gpu += bytes;
        if (b->gpu >= 0)
            pb->gpu_by_dev[b->gpu] += bytes;
        break;
    case VT_PLACE_PINNED:
        pb->pinned += bytes;
        break;
    case VT_PLACE_MAPPED:
        pb->mapped += bytes;
        break;
    default:
        pb->pageable += bytes;
        break;
    }
}

typedef struct edge {
    uint64_t t;
    uint32_t buf;
    int8_t delta;   /* +1 start, -1 end */
} edge_t;

static int edge_cmp(const void *a, const void *b)
{
    const edge_t *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->delta - y->delta;   /* ends before starts at one time */
}

/* The moments a picture may be taken at (times of start edges): the one
 * when the most weights + KV bytes were live over the whole run, and the
 * fullest of each load, the latest MAX_LOADS of them. A load begins where
 * a weights buffer starts after one ended: the model loaded again, whether
 * its earlier buffers were freed or replaced (a KV cache made again alone,
 * a new context, is not a load). */
#define MAX_LOADS 64
typedef struct moments {
    uint64_t fullest;
    int have;                 /* 0: no weights or KV buffer at all */
    uint64_t load[MAX_LOADS]; /* oldest first */
    int nloads;
} moments_t;

static int find_moments(vt_placement_state_t *s, moments_t *mo)
{
    edge_t *e = malloc(2 * s->nbuf * sizeof *e + 1);
    if (!e)
        return VT_E_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < s->nbuf; i++) {
        int c = content_of(&s->buf[i]);
        if (c != C_WEIGHTS && c != C_KV)
            continue;
        e[n++] = (edge_t){ s->buf[i].t_start, (uint32_t)i, 1 };
        if (s->buf[i].t_end != UINT64_MAX)
            e[n++] = (edge_t){ s->buf[i].t_end, (uint32_t)i, -1 };
    }
    vt_sort(e, n, sizeof *e, edge_cmp);
    uint64_t cur = 0, best = 0, load_best = 0;
    int ended = 0;
    memset(mo, 0, sizeof *mo);
    for (size_t i = 0; i < n; i++) {
        uint64_t sz = s->buf[e[i].buf].size;
        if (e[i].delta < 0) {
            cur -= sz < cur ? sz : cur;
            ended = 1;
            continue;
        }
        cur += sz;
        if ((ended && content_of(&s->buf[e[i].buf]) == C_WEIGHTS) || !mo->nloads) {
            /* A new load: the one before keeps its fullest moment. */
            if (mo->nloads == MAX_LOADS)
                memmove(mo->load, mo->load + 1, (MAX_LOADS - 1) * sizeof *mo->load), mo->nloads--;
            mo->nloads++;
            load_best = 0;
            ended = 0;
        }
        if (cur > load_best) {
            load_best = cur;
            mo->load[mo->nloads - 1] = e[i].t;
        }
        if (cur > best) {
            best = cur;
            mo->fullest = e[i].t;
            mo->have = 1;
        }
    }
    free(e);
    return 0;
}

/* Live at moment at: started at or before it, not ended by it. */
static void live_at(const vt_placement_state_t *s, uint64_t at, uint8_t *live)
{
    for (size_t i = 0; i < s->nbuf; i++)
        live[i] = s->buf[i].t_start <= at && (s->buf[i].t_end == UINT64_MAX || s->buf[i].t_end > at);
}

typedef struct block_acc {
    uint64_t gpu, host, kv_gpu, kv_host;
    uint64_t experts_gpu, experts_host;   /* of gpu and host: its experts' */
    int16_t dev;   /* GPU of most of its weights, -1 none */
    uint64_t dev_bytes;
} block_acc_t;

/* Which model a part or a buffer belongs to, at a picture: a weights
 * model's number, or the model its KV cache goes with (kv_model); -1 for
 * a buffer no named part spoke for. */
typedef struct model_filter {
    int want;                    /* -1: every model */
    uint8_t kv_model[MAX_MODELS];
} model_filter_t;

static int of_model(const model_filter_t *f, int model, int kv)
{
    if (f->want < 0 || model < 0)
        return 1;
    return (kv ? f->kv_model[model] : model) == f->want;
}

static int picture(vt_model_t *m, const uint8_t *live, const model_filter_t *f);
static int picture_at(vt_model_t *m, const uint8_t *live);

/* The picture: the latest load whose layers or KV cache were partly in
 * host memory (a later full load does not hide an earlier partial one's
 * slowness), or else the run's fullest moment. */
int vt_m_placement_finish(vt_model_t *m)
{
    vt_placement_state_t *s = m->placement;
    vt_placement_t *pl = &m->p.placement;
    if (!s || !s->nbuf)
        return 0;
    /* Every figure below is summed afresh from the buffers and parts, so
     * finishing again after more records gives what one finish would:
     * only the counts the records themselves keep stay. */
    const vt_placement_t fed = *pl;
    memset(pl, 0, sizeof *pl);
    pl->ggml_records = fed.ggml_records;
    pl->tensors = fed.tensors;
    pl->tensors_unattributed = fed.tensors_unattributed;
    pl->lost = fed.lost;
    pl->placed_again = fed.placed_again;
    pl->records_over_bounds = s->dropped;
    moments_t mo = { 0 };
    uint8_t *live = malloc(s->nbuf);
    int rc = live ? find_moments(s, &mo) : VT_E_NOMEM;
    const vt_placement_t before = *pl;
    for (int k = mo.nloads - 1; !rc && k >= 0 && mo.nloads > 1; k--) {
        pl->at_ns = mo.load[k];
        live_at(s, pl->at_ns, live);
        rc = picture_at(m, live);
        /* A load is one whose moment holds the model's layers. */
        if (rc || (pl->offloaded && pl->layers_known))
            break;
        *pl = before;
    }
    if (!rc && !pl->offloaded) {
        pl->at_ns = mo.have ? mo.fullest : 0;
        if (mo.have)
            live_at(s, pl->at_ns, live);
        else
            memset(live, 0, s->nbuf);
        rc = picture_at(m, live);
    }
    free(live);
    if (rc)
        return rc;
    vt_m_placement_advise(m);
    return 0;
}

/* The picture at a moment of models loaded at once: of the one with most
 * layers in host memory (then most layer weights there), else of the one
 * with most layer weights; the others summed up beside it. A KV cache
 * goes with the model of its block count where only one has that count,
 * else with the model of its own number (the order their contexts were
 * made in). */
static int picture_at(vt_model_t *m, const uint8_t *live)
{
    vt_placement_state_t *s = m->placement;
    vt_placement_t *pl = &m->p.placement;
    model_filter_t f = { .want = -1 };
    int blocks[2][MAX_MODELS], present[2][MAX_MODELS] = { { 0 } }, models = 0;
    for (int k = 0; k < MAX_MODELS; k++)
        blocks[0][k] = blocks[1][k] = -1, f.kv_model[k] = (uint8_t)k;
    for (size_t i = 0; i < s->npart; i++) {
        const part_t *pt = &s->part[i];
        int kv = pt->content == C_KV;
        if (!live[pt->buffer] || (!kv && pt->input))
            continue;
        present[kv][pt->model] = 1;
        if (pt->block > blocks[kv][pt->model])
            blocks[kv][pt->model] = pt->block;
    }
    for (int k = 0; k < MAX_MODELS; k++)
        models += present[0][k];
    if (models <= 1) {
        pl->models_at_once = (uint32_t)models;
        return picture(m, live, &f);
    }
    for (int c = 0; c < MAX_MODELS; c++) {
        int match = -1, matches = 0;
        for (int w = 0; w < MAX_MODELS && present[1][c]; w++)
            if (present[0][w] && blocks[0][w] == blocks[1][c])
                match = w, matches++;
        if (matches == 1)
            f.kv_model[c] = (uint8_t)match;
    }
    /* Each model pictured once; the chosen one's picture is kept. */
    const vt_placement_t base = *pl;
    vt_placement_t kept = base;
    struct vt_other_model sum[MAX_MODELS];
    int chosen = -1;
    for (int k = 0; k < MAX_MODELS; k++) {
        if (!present[0][k])
            continue;
        *pl = base;
        f.want = k;
        int rc = picture(m, live, &f);
        if (rc)
            return rc;
        sum[k] = (struct vt_other_model){ pl->layers_total, pl->layers_gpu, pl->layer_weights, pl->layer_weights_host,
                                          vt_place_host(&pl->kv) };
        int better = chosen < 0;
        if (!better) {
            const struct vt_other_model *c = &sum[chosen], *n = &sum[k];
            /* Most layers in host memory, then most layer weights there,
             * then most KV cache there, then the most layer weights. */
            uint64_t key_c[4] = { c->layers_total - c->layers_gpu, c->layer_weights_host, c->kv_host, c->layer_weights };
            uint64_t key_n[4] = { n->layers_total - n->layers_gpu, n->layer_weights_host, n->kv_host, n->layer_weights };
            int i = 0;
            while (i < 3 && key_n[i] == key_c[i])
                i++;
            better = key_n[i] > key_c[i];
        }
        if (better) {
            chosen = k;
            kept = *pl;
        }
    }
    *pl = kept;
    pl->models_at_once = (uint32_t)models;
    for (int k = 0, o = 0; k < MAX_MODELS && o < VT_MAX_OTHER_MODELS; k++)
        if (present[0][k] && k != chosen)
            pl->other_models[o++] = sum[k];
    return 0;
}

/* Fills the placement from the buffers live[] says were live at its
 * moment (pl->at_ns), of the models f names. */
static int picture(vt_model_t *m, const uint8_t *live, const model_filter_t *f)
{
    vt_placement_state_t *s = m->placement;
    vt_placement_t *pl = &m->p.placement;
    /* Compute buffers: each live one counts, the largest picture of them
     * while the model was loaded (graph reservations are replaced, not
     * added): the most bytes in one place any one reservation had. */
    for (size_t i = 0; i < s->nbuf; i++) {
        const gbuf_t *b = &s->buf[i];
        int c = content_of(b);
        if (!of_model(f, b->model, b->model_kv))
            continue;   /* another model's */
        if (c == C_COMPUTE) {
            if (b->t_end == UINT64_MAX || b->t_end > pl->at_ns)
                add_place(&pl->compute, b, b->size);
            continue;
        }
        if (!live[i]) {
            /* A model's buffer that lived before or after the picture: a
             * reload, or a load freed; what it held is not in the picture. */
            pl->buffers_outside += (c == C_WEIGHTS || c == C_KV) && (b->named_weights || b->named_kv);
            continue;
        }
        pl->buffers++;
        add_place(c == C_WEIGHTS ? &pl->weights : c == C_KV ? &pl->kv : &pl->other, b, b->size);
    }
    /* Blocks: weight and KV bytes per block, by the place of their buffer. */
    int maxblock = -1;
    for (size_t i = 0; i < s->npart; i++)
        if (live[s->part[i].buffer] && of_model(f, s->part[i].model, s->part[i].content == C_KV) &&
            s->part[i].block > maxblock)
            maxblock = s->part[i].block;
    block_acc_t *acc = calloc((size_t)maxblock + 2, sizeof *acc);
    if (!acc)
        return VT_E_NOMEM;
    /* A model with tied embeddings has no output.weight: its output layer
     * reads the token embeddings, and llama.cpp loads a copy of them on
     * the output layer's device (TENSOR_DUPLICATED) while the input's
     * stay in host memory. Only then are token embeddings on a GPU the
     * output layer's (an -ot could put the input's there too). */
    int output_matrix = 0;
    for (size_t i = 0; i < s->npart; i++)
        output_matrix |= live[s->part[i].buffer] && of_model(f, s->part[i].model, 0) && s->part[i].output_matrix;
    uint64_t out_gpu = 0, out_host = 0;
    uint32_t kv_all_cells = 0, kv_stream_cells = 0;
    int have_output = 0;
    for (size_t i = 0; i < s->npart; i++) {
        const part_t *pt = &s->part[i];
        if (!live[pt->buffer] || !of_model(f, pt->model, pt->content == C_KV))
            continue;
        const gbuf_t *b = &s->buf[pt->buffer];
        int on_gpu = b->place == VT_PLACE_GPU;
        if (pt->input && (!on_gpu || output_matrix)) {
            if (!on_gpu)
                pl->input_host += pt->bytes;
            continue;
        }
        if (pt->content == C_WEIGHTS)
            add_place(&pl->layer_weights_at, b, pt->bytes);
        if (pt->output || pt->input) {
            have_output = 1;
            *(on_gpu ? &out_gpu : &out_host) += pt->bytes;
            continue;
        }
        if (pt->block < 0)
            continue;
        block_acc_t *a = &acc[pt->block];
        if (pt->content == C_KV && pt->cells > kv_all_cells) {
            kv_all_cells = pt->cells;
            kv_stream_cells = pt->stream_cells;
        }
        if (pt->content == C_KV) {
            *(on_gpu ? &a->kv_gpu : &a->kv_host) += pt->bytes;
        } else {
            *(on_gpu ? &a->gpu : &a->host) += pt->bytes;
            if (pt->experts)
                *(on_gpu ? &a->experts_gpu : &a->experts_host) += pt->bytes;
            if (on_gpu && b->gpu >= 0 && pt->bytes > a->dev_bytes) {
                a->dev = b->gpu;
                a->dev_bytes = pt->bytes;
            }
        }
    }
    /* The largest cache's streams: its tensors' rows over its views'
     * (kv_size x n_stream over kv_size), where the views divide them. */
    if (kv_stream_cells && kv_stream_cells <= kv_all_cells && kv_all_cells % kv_stream_cells == 0) {
        pl->kv_cells = kv_stream_cells;
        pl->kv_streams = kv_all_cells / kv_stream_cells;
    } else {
        pl->kv_cells = kv_all_cells;
    }
    uint64_t block_weights = 0, block_kv = 0, blocks_with_kv = 0, block_experts = 0;
    for (int i = 0; i <= maxblock; i++) {
        block_acc_t *a = &acc[i];
        if (!a->gpu && !a->host)
            continue;
        pl->blocks++;
        block_weights += a->gpu + a->host;
        block_experts += a->experts_gpu + a->experts_host;
        if (a->kv_gpu + a->kv_host) {
            block_kv += a->kv_gpu + a->kv_host;
            blocks_with_kv++;
            pl->kv_blocks++;
            pl->kv_blocks_gpu += a->kv_gpu >= a->kv_host;
        }
        /* Where the block runs: where most of its weights are, its experts
         * aside where it has others (module comment, model_placement.c). */
        uint64_t rest_gpu = a->gpu - a->experts_gpu, rest_host = a->host - a->experts_host;
        int home_gpu = rest_gpu + rest_host ? rest_gpu >= rest_host : a->gpu >= a->host;
        if (home_gpu) {
            pl->blocks_gpu++;
            if (a->dev_bytes && a->dev >= 0)
                pl->layers_by_dev[a->dev]++;
            if (a->experts_host) {
                pl->expert_blocks_host++;
                pl->experts_host += a->experts_host;
            }
            if (a->kv_host) {
                pl->kv_blocks_host++;
                pl->kv_host_of_gpu_blocks += a->kv_host;
            }
            if (rest_host) {
                pl->part_blocks_host++;
                pl->part_host += rest_host;
            }
        } else if (a->kv_gpu > a->kv_host) {
            /* In host memory with its KV cache on a GPU: llama.cpp places a
             * layer's KV cache on the device -ngl gave the layer, so an
             * override moved its weights. */
            pl->override_blocks++;
            pl->override_host += a->host;
        }
    }
    if (pl->blocks) {
        pl->layers_known = 1;
        pl->output_layer = have_output ? (out_gpu >= out_host ? 1 : 0) : -1;
        pl->output_bytes = out_gpu + out_host;
        /* In host memory, a tied output layer shares the token embeddings
         * with the input; on the GPU it would bring its copy of them. */
        if (pl->output_layer == 0 && !output_matrix)
            pl->output_bytes += pl->input_host;
        pl->layers_total = pl->blocks + (have_output ? 1 : 0);
        pl->layers_gpu = pl->blocks_gpu + (pl->output_layer == 1 ? 1 : 0);
        pl->block_weight_bytes = block_weights / pl->blocks;
        pl->block_rest_bytes = (block_weights - block_experts) / pl->blocks;
        pl->block_kv_bytes = blocks_with_kv ? block_kv / blocks_with_kv : 0;
    }
    for (int i = 0; i <= maxblock; i++)
        pl->layer_weights_host += acc[i].host, pl->layer_weights += acc[i].gpu + acc[i].host;
    pl->layer_weights_host += out_host;
    pl->layer_weights += out_gpu + out_host;
    pl->offloaded = pl->layer_weights_host > 0 || vt_place_host(&pl->kv) > 0;
    pl->known = 1;
    free(acc);
    return 0;
}
