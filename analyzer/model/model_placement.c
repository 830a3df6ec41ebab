/* model_placement.c: where the model runs, from what ggml said about its
 * buffers and tensors (GGML_BUFFER, GGML_TENSOR, GGML_FREE, GGML_LOST;
 * the contract is in model.h, "Placement").
 *
 * A buffer's place is what ggml says of it: is_host from the shim (but
 * the CPU backend's own types are host memory: classify), then its
 * buffer type's name for the kind of host memory ("CUDA_Host" is
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
 * bytes are, its experts aside: llama-server's --cpu-moe and --n-cpu-moe
 * (and -ot) keep a mixture-of-experts block's expert tensors
 * (blk.N.ffn_{gate,up,down,gate_up}_exps, _chexps: llama-arch.cpp) in host
 * memory while the block runs on the GPU, and llama.cpp counts such a
 * block among the offloaded ones; its experts in host memory are counted
 * apart (model_picture.c).
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
#include "model_placement_state.h"
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
    /* ggml-cpu's extra buffer types (CPU_REPACK, CPU_KLEIDIAI, AMX) keep
     * weights in host memory in a layout only the CPU backend reads, so
     * is_host is false for them (ggml-cpu's repack.cpp, amx.cpp); no GPU
     * holds them. Seen: a CPU-only run of a Q4_0 model whose blocks, in
     * CPU_REPACK, read as 4 blocks on the GPU. host 0: a shim before
     * is_host was written, the type's name alone. */
    int cpu_type = !strncmp(b->name, "CPU", 3) || !strcmp(b->name, "AMX");
    int host = b->host == 2 || cpu_type || (b->host == 0 && ends_with(b->name, "_Host"));
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

/* A block's stacked experts: "blk.N.ffn_up_exps.weight", "..._chexps...". */
static int experts_tensor(const char *name, size_t len)
{
    return name && (memmem(name, len, "_exps.", 6) != NULL || memmem(name, len, "_chexps.", 8) != NULL);
}

/* A K or V tensor's rows that count cells: its cells if over one. A
 * llama.cpp before 2025 made each a flat 1-D tensor of n_embd_gqa x
 * kv_size elements, whose one row says nothing of them. */
static uint32_t kv_rows(const char *name, uint64_t rows)
{
    if (name[6] != 'k' && name[6] != 'v')
        return 0;   /* a recurrent model's r and s states: one row per sequence, no context */
    return rows < 2 ? 0 : rows > UINT32_MAX ? UINT32_MAX : (uint32_t)rows;
}

/* llama.cpp makes each K and V tensor [n_embd_gqa, kv_size, n_stream] and
 * then one 2-D view of it per stream, [n_embd_gqa, kv_size]
 * (llama-kv-cache.cpp, "k_stream"), in the same context: right after the
 * layer's K and V, whose part is then the latest. A view's rows are the
 * cells one stream has, the "N cells" llama.cpp's log prints. */
static void note_stream_view(vt_placement_state_t *s, const vt_rec_ggml_tensor_t *t, size_t len)
{
    int kv;
    uint32_t idx;
    const char *name = t->name.data;
    int block = block_of(name, len, &kv);
    if (block < 0 || !kv || !s->npart || !vt_map_get(&s->live_by_id, t->buffer, &idx))
        return;
    part_t *last = &s->part[s->npart - 1];
    uint32_t cells = kv_rows(name, t->rows);
    if (last->buffer == idx && last->content == C_KV && last->block == block && cells > last->stream_cells)
        last->stream_cells = cells;
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
    /* ggml names a view "NAME (view)": the same bytes again, but a KV
     * cache's say how it is split into streams. */
    if (len >= 7 && !memcmp(name + len - 7, " (view)", 7)) {
        note_stream_view(s, t, len - 7);
        return 0;
    }
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
    int matrix = starts(name, len, "output.");
    int output = matrix || starts(name, len, "output_norm.");
    if (kv)
        b->named_kv = 1;
    else if (block >= 0 || input || output)
        b->named_weights = 1;
    else
        return 0;   /* a tensor no name speaks for: its buffer's content decides */
    uint8_t content = kv ? C_KV : C_WEIGHTS;
    uint8_t experts = !kv && block >= 0 && experts_tensor(name, len);
    /* A K or V tensor's rows are its cells over every stream (trace_format.h). */
    uint32_t cells = kv ? kv_rows(name, t->rows) : 0;
    if (s->npart) {
        part_t *last = &s->part[s->npart - 1];
        if (last->buffer == idx && last->block == block && last->content == content && last->input == input &&
            last->output == output && last->experts == experts) {
            last->bytes += t->nbytes;
            last->output_matrix |= (uint8_t)matrix;
            if (cells > last->cells)
                last->cells = cells;
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
    s->part[s->npart++] =
        (part_t){ idx, (int16_t)block, content, (uint8_t)input, (uint8_t)output, (uint8_t)matrix, model, experts, cells, 0, t->nbytes };
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
