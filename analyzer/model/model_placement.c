/* model_placement.c: where the model runs, from what ggml said about its
 * buffers and tensors (GGML_BUFFER, GGML_TENSOR, GGML_FREE, GGML_LOST;
 * the contract is in model.h, "Placement").
 *
 * A buffer's place is what ggml says of it: is_host from the shim, then
 * its buffer type's name for the kind of host memory ("CUDA_Host" is
 * ggml-cuda's pinned type, "CPU_Mapped" ggml-backend's type for memory
 * the program mapped, a GGUF file: ggml-cuda.cu, ggml-backend.cpp). Its
 * content is its usage mark (WEIGHTS, COMPUTE), else the names of the
 * tensors in it: llama.cpp names every weight after its GGUF tensor
 * ("blk.N.*", "token_embd.weight", "output.weight") and its KV cache
 * "cache_k_lN" / "cache_v_lN" (llama-kv-cache.cpp). Nothing else is
 * guessed: a buffer no mark or name speaks for is "other".
 *
 * Layers are counted as llama.cpp's "offloaded N/M layers" counts them:
 * the blocks blk.0 .. blk.(n-1) and the output layer (output.weight,
 * output_norm.weight) as one more. A block is where most of its weight
 * bytes are.
 *
 * The picture is taken at one moment: the fullest (most weights and KV
 * cache bytes live at once) of the latest load whose layers or KV cache
 * were partly in host memory, else of the whole run (vt_m_placement_finish):
 * a program that loads, frees and loads again is never summed.
 *
 * Where ggml's frees are not seen (ggml linked into one object with
 * llama.cpp, whose free is a direct call) a buffer still ends: a device or
 * pinned one with the allocation at its base, whose free the trace holds;
 * a host one when a tensor it holds is placed again under the same name
 * (a model's tensor names are unique within it: the model loaded again;
 * each run of one block's tensors in a buffer is looked up by its first),
 * as the buffer taking its place begins. Else every reload would be
 * summed with the loads before it (seen: a full load, then a partial one,
 * reported as 8 blocks with half their weights in host memory).
 *
 * Two models live at once (llama.cpp's draft model beside the target of
 * speculative decoding; node-llama-cpp and llama.node load several in one
 * process) name their tensors alike. A name placed again while a buffer
 * on a GPU or in pinned memory (whose end the trace would hold) of the
 * load that placed it before still lives is another model's, not a
 * reload: its parts get a model number no loaded model has, and the run
 * before stays; a reload keeps its model's number. Seen on real llama.cpp: a
 * 4-block model on the GPU and a 6-block one with 5 of 7 layers in host
 * memory were summed into one of 6 blocks with 1 layer in host memory.
 * KV caches are numbered the same way, by the order their contexts were
 * made; a cache whose block count matches one model's alone is that
 * model's. The picture is then of one model (vt_m_placement_finish).
 */
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "model_internal.h"
#include "sort.h"

/* A hostile trace can hold any number of records; what is kept is bounded. */
#define MAX_BUFFERS 65536u
#define MAX_PARTS (1u << 20)
#define MAX_BLOCK 4095
#define MAX_MODELS (VT_MAX_OTHER_MODELS + 1)

enum content { C_OTHER, C_WEIGHTS, C_KV, C_COMPUTE };

/* The bytes of one buffer's tensors for one block (block -1: none) and
 * content, merged while tensors come in a row. */
typedef struct part {
    uint32_t buffer;   /* index in buffers */
    int16_t block;     /* -1: not a block's (token_embd, output, ...) */
    uint8_t content;   /* C_WEIGHTS or C_KV */
    uint8_t input;     /* token embeddings: llama.cpp keeps them in host memory */
    uint8_t output;    /* the output layer's */
    uint8_t model;     /* weights: the model's number; KV: its cache's (module comment) */
    uint64_t bytes;
} part_t;

typedef struct gbuf {
    uint64_t id, size, base, t_start, t_end;  /* t_end UINT64_MAX while live */
    uint8_t usage, host, place, named_kv, named_weights;
    uint8_t replaced;                         /* t_end set by a reload (supersede) */
    int16_t gpu;                              /* ordinal for VT_PLACE_GPU */
    int8_t model;                             /* of its first named part, -1 before */
    uint8_t model_kv;                         /* that part was KV cache: model is a cache's number */
    uint8_t gen;                              /* which load of that model (each reload is the next) */
    uint64_t last_data;                       /* dedupe a tensor and its views */
    char name[32];
} gbuf_t;

struct vt_placement_state {
    gbuf_t *buf;
    size_t nbuf, buf_cap;
    part_t *part;
    size_t npart, part_cap;
    vt_map_t live_by_id;    /* buffer identity -> index of its entry, until ggml frees it or
                             * the identity names another buffer: its records
                             * still come after its memory was freed */
    /* The latest run of each block's weights and KV cache (and of the
     * token embeddings, the output layer): its first tensor's name and
     * its buffer. Indexed by run_slot. */
    struct run_key { uint64_t name; uint32_t buffer; } *runs;
    size_t runs_cap;
    vt_map_t live_by_base;     /* a device or pinned buffer's base -> its index */
    uint8_t loading[2];        /* the model (0) and KV cache (1) numbers the latest parts had */
    /* Per model (and per KV cache) number: its first buffers on a GPU or
     * in pinned memory, whose ends the trace holds. A model with one live
     * at a moment was loaded then. */
#define MAX_RESIDENT 16
    uint32_t resident[2][MAX_MODELS][MAX_RESIDENT];
    uint8_t nresident[2][MAX_MODELS];
    uint8_t gen[2][MAX_MODELS];   /* the latest load of each */
    uint64_t dropped;       /* records over the bounds */
};

static uint64_t rel_time(const vt_model_t *m, uint64_t t)
{
    return t > m->p.mono_start_ns ? t - m->p.mono_start_ns : 0;
}

static int state_of(vt_model_t *m)
{
    if (m->placement)
        return 0;
    m->placement = calloc(1, sizeof *m->placement);
    if (!m->placement)
        return VT_E_NOMEM;
    vt_map_init(&m->placement->live_by_id);
    vt_map_init(&m->placement->live_by_base);
    return 0;
}

/* The trailing digits of a device buffer type's name ("CUDA0", "ROCm1"),
 * -1 without. */
static int gpu_of_name(const char *name)
{
    size_t n = strlen(name), i = n;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
        i--;
    if (i == n || n - i > 3)
        return -1;
    return atoi(name + i);
}

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

static void classify(gbuf_t *b)
{
    /* host 0: a shim before is_host was written: the type's name alone. */
    int host = b->host == 2 || (b->host == 0 && (!strncmp(b->name, "CPU", 3) || ends_with(b->name, "_Host")));
    b->gpu = -1;
    if (!host) {
        b->place = VT_PLACE_GPU;
        b->gpu = (int16_t)gpu_of_name(b->name);
        if (b->gpu < 0 || b->gpu >= VT_MAX_DEVICES)
            b->gpu = -1;
    } else if (ends_with(b->name, "_Host")) {
        b->place = VT_PLACE_PINNED;
    } else if (ends_with(b->name, "_Mapped")) {
        b->place = VT_PLACE_MAPPED;
    } else {
        b->place = VT_PLACE_PAGEABLE;
    }
}

int vt_m_placement_buffer(vt_model_t *m, const vt_rec_ggml_buffer_t *g)
{
    if (state_of(m))
        return VT_E_NOMEM;
    vt_placement_state_t *s = m->placement;
    m->p.placement.ggml_records++;
    uint32_t idx;
    gbuf_t *b;
    int found = vt_map_get(&s->live_by_id, g->buffer, &idx);
    if (found && g->base && s->buf[idx].base && g->base != s->buf[idx].base) {
        /* Another buffer at a freed one's address, whose free the trace
         * does not hold (module comment): the old one ended. */
        s->buf[idx].t_end = rel_time(m, g->time_ns);
        vt_map_del(&s->live_by_id, g->buffer, NULL);
        found = 0;
    }
    if (found) {
        b = &s->buf[idx];   /* marked again, or marked after its tensors came */
    } else {
        if (s->nbuf >= MAX_BUFFERS) {
            s->dropped++;
            return 0;
        }
        if (vt_grow((void **)&s->buf, &s->buf_cap, s->nbuf + 1, sizeof *s->buf, 16))
            return VT_E_NOMEM;
        idx = (uint32_t)s->nbuf++;
        b = &s->buf[idx];
        memset(b, 0, sizeof *b);
        b->id = g->buffer;
        b->model = -1;
        b->t_start = rel_time(m, g->time_ns);
        b->t_end = UINT64_MAX;
        if (vt_map_put(&s->live_by_id, g->buffer, idx))
            return VT_E_NOMEM;
    }
    if (g->usage == VT_GGML_USAGE_WEIGHTS || g->usage == VT_GGML_USAGE_COMPUTE || !b->usage)
        b->usage = (uint8_t)(g->usage < VT_GGML_USAGES ? g->usage : 0);
    if (g->size > b->size)
        b->size = g->size;
    if (g->base)
        b->base = g->base;
    if (g->host <= 2 && (g->host || !b->host))
        b->host = (uint8_t)g->host;
    size_t n = g->name.len < sizeof b->name - 1 ? g->name.len : sizeof b->name - 1;
    memcpy(b->name, g->name.data, n);
    b->name[n] = 0;
    classify(b);
    /* Device and pinned buffers end with the allocation at their base.
     * The shim queues ggml's records apart from the events, so within a
     * drain either may be read first: that allocation may be freed
     * already, or not yet seen. */
    if (b->base && (b->place == VT_PLACE_GPU || b->place == VT_PLACE_PINNED) && b->t_end == UINT64_MAX) {
        int freed = 0;
        if (vt_map_find(&m->by_ptr, b->base) == SIZE_MAX) {
            /* Not live: freed already (the latest free of that address,
             * if among the last ones and after the buffer began), or its
             * allocation's event is still to come. */
            for (uint32_t k = 1; k <= VT_RECENT_FREES && k <= m->recent_next; k++) {
                uint32_t r = (m->recent_next - k) % VT_RECENT_FREES;
                if (m->recent_frees[r].addr != b->base)
                    continue;
                uint64_t end = rel_time(m, m->recent_frees[r].time_ns);
                if (end >= b->t_start) {
                    b->t_end = end;
                    freed = 1;
                }
                break;
            }
        }
        if (!freed && vt_map_put(&s->live_by_base, b->base, idx))
            return VT_E_NOMEM;
    }
    return 0;
}

/* "blk.12.attn_q.weight" -> 12; "cache_k_l3" -> 3 (kv); else -1. */
static int block_of(const char *name, size_t len, int *kv)
{
    const char *digits = NULL;
    *kv = 0;
    if (len > 4 && !memcmp(name, "blk.", 4)) {
        digits = name + 4;
    } else if (len > 9 && !memcmp(name, "cache_", 6) && name[7] == '_' && name[8] == 'l' && name[6] &&
               strchr("kvrs", name[6])) {   /* strchr finds a NUL too: the terminator */
        digits = name + 9;
        *kv = 1;
    } else {
        return -1;
    }
    long v = 0;
    const char *end = name + len, *p = digits;
    while (p < end && *p >= '0' && *p <= '9' && v <= MAX_BLOCK)
        v = v * 10 + (*p++ - '0');
    if (p == digits || v > MAX_BLOCK)
        return -1;
    if (!*kv && (p == end || *p != '.'))
        return -1;
    return (int)v;
}

/* FNV-1a: names are the key's only input, and a collision between two
 * names of one model only ends a buffer early in the picture's sweep. */
static uint64_t name_hash(const char *name, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)name[i]) * 0x100000001b3ull;
    return h;
}

/* A weight or KV tensor named as one a live buffer already holds: that
 * buffer's placement ended (module comment). */
/* Where a run of tensors keeps its key: token embeddings 0, the output
 * layer 1, block N's weights 2 + 2N and its KV cache 3 + 2N. */
static size_t run_slot(int block, int kv, int input)
{
    return block < 0 ? (input ? 0 : 1) : 2 + 2 * (size_t)block + (size_t)kv;
}

/* The load of a model (or KV cache) a buffer holds was still loaded at
 * moment t: one of that load's buffers whose end the trace holds lived
 * then (module comment). By time, not by what was read so far: ggml's
 * records and the events are queued apart, so a buffer's end may be read
 * before a later tensor. */
static int loaded_at(const vt_placement_state_t *s, const gbuf_t *b, uint64_t t)
{
    if (b->model < 0)
        return 0;
    for (unsigned i = 0; i < s->nresident[b->model_kv][b->model]; i++) {
        const gbuf_t *x = &s->buf[s->resident[b->model_kv][b->model][i]];
        if (x->gen == b->gen && x->t_start <= t && (x->t_end == UINT64_MAX || x->t_end > t))
            return 1;
    }
    return 0;
}

/* One of the buffers on a GPU or in pinned memory of model (or KV cache)
 * number k lives at moment t. */
static int number_live(const vt_placement_state_t *s, int kv, int k, uint64_t t)
{
    for (unsigned i = 0; i < s->nresident[kv][k]; i++) {
        const gbuf_t *x = &s->buf[s->resident[kv][k][i]];
        if (x->t_start <= t && (x->t_end == UINT64_MAX || x->t_end > t))
            return 1;
    }
    return 0;
}

/* A number no model (or KV cache) other than except has at moment t. */
static uint8_t unused_number(const vt_placement_state_t *s, int kv, uint64_t t, int except)
{
    for (int k = 0; k < MAX_MODELS; k++)
        if (k != except && !number_live(s, kv, k, t))
            return (uint8_t)k;
    return MAX_MODELS - 1;
}

/* Models whose weights have a buffer on a GPU or in pinned memory live at t. */
static int models_loaded_at(const vt_placement_state_t *s, uint64_t t)
{
    int n = 0;
    for (int k = 0; k < MAX_MODELS; k++)
        n += number_live(s, 0, k, t);
    return n;
}

/* *model: the number of the model (or KV cache) the part belongs to: the
 * run before's, for a reload; where that run's load lives on, the number
 * of the model the parts before this one began (a model's tensors come in
 * a row), or a number no loaded model has for the first of them. */
static int supersede(vt_model_t *m, uint32_t idx, size_t slot, const char *name, size_t len, uint64_t t, int kv,
                     uint8_t *model)
{
    vt_placement_state_t *s = m->placement;
    if (slot >= s->runs_cap) {
        size_t old_cap = s->runs_cap;
        if (vt_grow((void **)&s->runs, &s->runs_cap, slot + 1, sizeof *s->runs, 64))
            return VT_E_NOMEM;
        memset(s->runs + old_cap, 0, (s->runs_cap - old_cap) * sizeof *s->runs);
    }
    struct run_key *r = &s->runs[slot];
    uint64_t key = name_hash(name, len) | 1;   /* 0: no run yet */
    uint32_t old = r->buffer;
    int again = r->name == key;
    r->name = key;
    r->buffer = idx;
    *model = s->loading[kv];
    if (!again)
        return 0;   /* the first run of this slot, or another one beside it (CPU_REPACK) */
    gbuf_t *b = &s->buf[old];
    uint64_t end = s->buf[idx].t_start < t ? s->buf[idx].t_start : t;
    /* A KV cache in host memory says nothing of its end; while models are
     * loaded side by side, its names again are another model's context
     * (a context made again beside one model is a reload). */
    int beside = kv && b->place != VT_PLACE_GPU && b->place != VT_PLACE_PINNED && models_loaded_at(s, end) > 1;
    if (old != idx && (loaded_at(s, b, end) || beside)) {
        /* Another model's (or cache's), loaded while this one lives. */
        if (s->loading[kv] == b->model) {
            *model = unused_number(s, kv, end, b->model);
            if (s->gen[kv][*model] < UINT8_MAX)
                s->gen[kv][*model]++;   /* a new model: none of that number's earlier buffers is its */
        }
        return 0;
    }
    if (b->model >= 0 && old != idx) {
        /* The same model loaded again: its next load, which this part
         * begins unless an earlier part of it did. */
        *model = (uint8_t)b->model;
        uint8_t *g = &s->gen[kv][b->model];
        if (*g == b->gen && *g < UINT8_MAX)
            ++*g;
    }
    /* It ended when the buffer that takes its place began, at the latest:
     * at no moment are both in the picture. */
    if (old == idx || b->t_start > end)
        return 0;
    if (b->t_end != UINT64_MAX) {
        /* Replaced already, by a buffer that began later than this one. */
        if (b->replaced && end < b->t_end)
            b->t_end = end;
        return 0;
    }
    b->t_end = end;
    b->replaced = 1;
    m->p.placement.placed_again++;
    return 0;
}

static int starts(const char *name, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && !memcmp(name, prefix, n);
}

int vt_m_placement_tensor(vt_model_t *m, const vt_rec_ggml_tensor_t *t)
{
    if (state_of(m))
        return VT_E_NOMEM;
    vt_placement_state_t *s = m->placement;
    vt_placement_t *pl = &m->p.placement;
    pl->ggml_records++;
    uint32_t idx;
    const char *name = t->name.data;
    size_t len = t->name.len;
    /* ggml names a view "NAME (view)": the same bytes again. */
    if (len >= 7 && !memcmp(name + len - 7, " (view)", 7))
        return 0;
    if (!vt_map_get(&s->live_by_id, t->buffer, &idx)) {
        pl->tensors_unattributed++;
        return 0;
    }
    gbuf_t *b = &s->buf[idx];
    if (t->data == b->last_data && t->data)
        return 0;
    b->last_data = t->data;
    pl->tensors++;
    int kv;
    int block = block_of(name, len, &kv);
    int input = starts(name, len, "token_embd.");
    int output = starts(name, len, "output.") || starts(name, len, "output_norm.");
    if (kv)
        b->named_kv = 1;
    else if (block >= 0 || input || output)
        b->named_weights = 1;
    else
        return 0;   /* a tensor no name speaks for: its buffer's content decides */
    uint8_t content = kv ? C_KV : C_WEIGHTS;
    if (s->npart) {
        part_t *last = &s->part[s->npart - 1];
        if (last->buffer == idx && last->block == block && last->content == content && last->input == input &&
            last->output == output) {
            last->bytes += t->nbytes;
            return 0;
        }
    }
    /* A part's first tensor names it for a reload: the same block placed
     * again begins with the same name, and one name per part keeps the
     * map small (a 70B model: about 170 names). */
    uint8_t model = 0;
    if (supersede(m, idx, run_slot(block, kv, input), name, len, rel_time(m, t->time_ns), kv, &model))
        return VT_E_NOMEM;
    s->loading[kv] = model;
    if (b->model < 0) {
        b->model = (int8_t)model;
        b->model_kv = (uint8_t)kv;
        b->gen = s->gen[kv][model];
        uint8_t *n = &s->nresident[kv][model];
        if (b->place == VT_PLACE_GPU || b->place == VT_PLACE_PINNED) {
            /* Full: an earlier load's entry makes room (reloads add their
             * buffers for ever). */
            unsigned slot = *n;
            for (unsigned i = 0; slot == MAX_RESIDENT && i < MAX_RESIDENT; i++)
                if (s->buf[s->resident[kv][model][i]].gen != b->gen)
                    slot = i;
            if (slot < MAX_RESIDENT) {
                s->resident[kv][model][slot] = idx;
                *n += slot == *n;
            }
        }
    }
    if (s->npart >= MAX_PARTS) {
        s->dropped++;
        return 0;
    }
    if (vt_grow((void **)&s->part, &s->part_cap, s->npart + 1, sizeof *s->part, 64))
        return VT_E_NOMEM;
    s->part[s->npart++] = (part_t){ idx, (int16_t)block, content, (uint8_t)input, (uint8_t)output, model, t->nbytes };
    return 0;
}

int vt_m_placement_free(vt_model_t *m, const vt_rec_ggml_free_t *f)
{
    vt_placement_state_t *s = m->placement;
    uint32_t idx;
    if (!s || !vt_map_get(&s->live_by_id, f->buffer, &idx))
        return 0;   /* a buffer ggml never described: a 0-byte probe */
    s->buf[idx].t_end = rel_time(m, f->time_ns);
    vt_map_del(&s->live_by_id, f->buffer, NULL);
    return 0;
}

void vt_m_placement_memory_freed(vt_model_t *m, uint64_t addr, uint64_t t)
{
    vt_placement_state_t *s = m->placement;
    uint32_t idx;
    if (!vt_map_get(&s->live_by_base, addr, &idx))
        return;
    gbuf_t *b = &s->buf[idx];
    uint64_t end = rel_time(m, t);
    if (end < b->t_start)
        return;   /* an earlier allocation's free, read after this buffer's record */
    vt_map_del(&s->live_by_base, addr, NULL);
    if (b->t_end != UINT64_MAX)
        return;
    b->t_end = end;
}

void vt_m_placement_lost(vt_model_t *m, const vt_rec_ggml_lost_t *l)
{
    if (l->lost_total > m->p.placement.lost)
        m->p.placement.lost = l->lost_total;
}

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
    const vt_placement_t base = *pl;
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
        if (chosen < 0) {
            chosen = k;
            continue;
        }
        const struct vt_other_model *c = &sum[chosen], *n = &sum[k];
        /* Most layers in host memory, then most layer weights there, then
         * most KV cache there, then the most layer weights. */
        uint64_t key_c[4] = { c->layers_total - c->layers_gpu, c->layer_weights_host, c->kv_host, c->layer_weights };
        uint64_t key_n[4] = { n->layers_total - n->layers_gpu, n->layer_weights_host, n->kv_host, n->layer_weights };
        int better = 0;
        for (int i = 0; i < 4 && !better; i++) {
            if (key_n[i] != key_c[i]) {
                better = key_n[i] > key_c[i];
                break;
            }
        }
        if (better)
            chosen = k;
    }
    *pl = base;
    f.want = chosen;
    int rc = picture(m, live, &f);
    pl->models_at_once = (uint32_t)models;
    for (int k = 0, o = 0; k < MAX_MODELS && o < VT_MAX_OTHER_MODELS; k++)
        if (present[0][k] && k != chosen)
            pl->other_models[o++] = sum[k];
    return rc;
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
    uint64_t out_gpu = 0, out_host = 0;
    int have_output = 0;
    for (size_t i = 0; i < s->npart; i++) {
        const part_t *pt = &s->part[i];
        if (!live[pt->buffer] || !of_model(f, pt->model, pt->content == C_KV))
            continue;
        const gbuf_t *b = &s->buf[pt->buffer];
        int on_gpu = b->place == VT_PLACE_GPU;
        if (pt->input) {
            if (!on_gpu)
                pl->input_host += pt->bytes;
            continue;
        }
        if (pt->content == C_WEIGHTS)
            add_place(&pl->layer_weights_at, b, pt->bytes);
        if (pt->output) {
            have_output = 1;
            *(on_gpu ? &out_gpu : &out_host) += pt->bytes;
            continue;
        }
        if (pt->block < 0)
            continue;
        block_acc_t *a = &acc[pt->block];
        if (pt->content == C_KV) {
            *(on_gpu ? &a->kv_gpu : &a->kv_host) += pt->bytes;
        } else {
            *(on_gpu ? &a->gpu : &a->host) += pt->bytes;
            if (on_gpu && b->gpu >= 0 && pt->bytes > a->dev_bytes) {
                a->dev = b->gpu;
                a->dev_bytes = pt->bytes;
            }
        }
    }
    uint64_t block_weights = 0, block_kv = 0, blocks_with_kv = 0;
    for (int i = 0; i <= maxblock; i++) {
        block_acc_t *a = &acc[i];
        if (!a->gpu && !a->host)
            continue;
        pl->blocks++;
        block_weights += a->gpu + a->host;
        if (a->kv_gpu + a->kv_host) {
            block_kv += a->kv_gpu + a->kv_host;
            blocks_with_kv++;
            pl->kv_blocks++;
            pl->kv_blocks_gpu += a->kv_gpu >= a->kv_host;
        }
        if (a->gpu >= a->host) {
            pl->blocks_gpu++;
            if (a->dev_bytes && a->dev >= 0)
                pl->layers_by_dev[a->dev]++;
        }
    }
    if (pl->blocks) {
        pl->layers_known = 1;
        pl->output_layer = have_output ? (out_gpu >= out_host ? 1 : 0) : -1;
        pl->output_bytes = out_gpu + out_host;
        pl->layers_total = pl->blocks + (have_output ? 1 : 0);
        pl->layers_gpu = pl->blocks_gpu + (pl->output_layer == 1 ? 1 : 0);
        pl->block_weight_bytes = block_weights / pl->blocks;
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

void vt_m_placement_reading_done(vt_model_t *m)
{
    if (!m->placement)
        return;
    free(m->placement->runs);
    m->placement->runs = NULL;
    m->placement->runs_cap = 0;
    vt_map_free(&m->placement->live_by_base);
}

void vt_m_placement_free_state(vt_model_t *m)
{
    if (!m->placement)
        return;
    free(m->placement->buf);
    free(m->placement->part);
    vt_map_free(&m->placement->live_by_id);
    free(m->placement->runs);
    m->placement->runs = NULL;
    m->placement->runs_cap = 0;
    vt_map_free(&m->placement->live_by_base);
    free(m->placement);
    m->placement = NULL;
}
