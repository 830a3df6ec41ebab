/* model_witness.c: ggml's buffer marks matched to the allocations they
 * name (the contract is in model.h, "ggml's buffer marks").
 *
 * A GGML_BUFFER record says: at time_ns, the buffer [base, base+size) was
 * marked WEIGHTS or COMPUTE. The allocation it names is the one live at
 * base then, at least size bytes long. A mark's time is exact; event times
 * are rounded down to the trace's grain, so that allocation's event time
 * is not later than the mark's, and its free's event time is later than
 * the mark's minus one grain. An allocation at a base no mark names is
 * never looked at.
 *
 * Two allocations at one base, one freed and the other made within one
 * grain of the mark, both fit: nothing in the trace tells which one ggml
 * marked, and the mark is counted unmatched rather than guessed.
 */
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "model_internal.h"
#include "sort.h"

/* A hostile trace can hold any number of marks; what is kept is bounded. */
#define MAX_MARKS 65536
#define OPEN UINT64_MAX
/* When a trace does not state its grain (older shims): theirs was 1 ms. */
#define DEFAULT_GRAIN_NS 1000000ull

int vt_m_mark_for(vt_model_t *m)
{
    const vt_marks_t *g = m->marks_given;
    uint64_t ordinal = m->p.events.total;
    while (m->marks_next < g->n && g->v[m->marks_next].ordinal < ordinal)
        m->marks_next++;
    return m->marks_next < g->n && g->v[m->marks_next].ordinal == ordinal ? g->v[m->marks_next].usage : 0;
}

int vt_m_ggml_record(vt_model_t *m, const vt_rec_ggml_buffer_t *g)
{
    if (g->usage != VT_GGML_USAGE_WEIGHTS && g->usage != VT_GGML_USAGE_COMPUTE)
        return 0;   /* USAGE_ANY says nothing about the content */
    m->p.ggml.marks++;
    if (m->marks_given)
        return 0;   /* matched before this reading */
    if (m->nseen >= MAX_MARKS) {
        m->p.ggml.unmatched++;
        return 0;
    }
    if (vt_grow((void **)&m->seen, &m->seen_cap, m->nseen + 1, sizeof *m->seen, 16))
        return VT_E_NOMEM;
    m->seen[m->nseen++] = (vt_seen_mark_t){ g->base, g->size, g->time_ns, (uint8_t)g->usage };
    return 0;
}

void vt_m_marks_free(vt_model_t *m)
{
    vt_marks_free(m->marks_given);
    free(m->seen);
}

size_t vt_model_marks_seen(const vt_model_t *m)
{
    return m->nseen;
}

/* ---- matching ---------------------------------------------------------- */

/* One allocation at a marked base: [t_alloc, t_free) in event times,
 * t_free OPEN while live. */
typedef struct span {
    uint64_t base, ordinal, t_alloc, t_free, size;
} span_t;

typedef struct matcher {
    vt_seen_mark_t *marks;   /* by base, then time */
    size_t nmarks;
    uint64_t grain;
    vt_map_t latest;          /* base -> index in spans of its latest span, UINT32_MAX none */
    span_t *spans;
    size_t nspans, cap;
} matcher_t;

static int cmp_seen(const void *a, const void *b)
{
    const vt_seen_mark_t *x = a, *y = b;
    if (x->base != y->base)
        return x->base < y->base ? -1 : 1;
    return (x->time_ns > y->time_ns) - (x->time_ns < y->time_ns);
}

/* The first mark at base with time >= t, or nmarks. */
static size_t first_mark(const matcher_t *mt, uint64_t base, uint64_t t)
{
    size_t lo = 0, hi = mt->nmarks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const vt_seen_mark_t *k = &mt->marks[mid];
        if (k->base < base || (k->base == base && k->time_ns < t))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A mark at the span's base falls in its lifetime. */
static int fits(const span_t *s, const vt_seen_mark_t *k, uint64_t grain)
{
    return k->base == s->base && k->time_ns >= s->t_alloc && (s->t_free == OPEN || k->time_ns < s->t_free + grain);
}

static int span_useful(const matcher_t *mt, const span_t *s)
{
    size_t i = first_mark(mt, s->base, s->t_alloc);
    return i < mt->nmarks && fits(s, &mt->marks[i], mt->grain);
}

/* Keeps only spans some mark can fall in, so memory follows the marks,
 * not the allocations a long trace makes at one address. */
static int compact(matcher_t *mt)
{
    size_t n = 0;
    for (size_t i = 0; i < mt->nspans; i++)
        if (mt->spans[i].t_free == OPEN || span_useful(mt, &mt->spans[i]))
            mt->spans[n++] = mt->spans[i];
    mt->nspans = n;
    for (size_t i = 0; i < mt->nmarks; i++)
        if (vt_map_put(&mt->latest, mt->marks[i].base, UINT32_MAX))
            return VT_E_NOMEM;
    for (size_t i = 0; i < n; i++)
        if (vt_map_put(&mt->latest, mt->spans[i].base, (uint32_t)i))
            return VT_E_NOMEM;
    return 0;
}

static void close_span(matcher_t *mt, uint32_t last, uint64_t t)
{
    if (last != UINT32_MAX && mt->spans[last].t_free == OPEN)
        mt->spans[last].t_free = t;
}

static int on_event(matcher_t *mt, const vt_event_t *ev, uint64_t ordinal)
{
    uint32_t last;
    if (ev->result != 0 || (ev->flags & VT_EF_CAPTURED) || !vt_map_get(&mt->latest, ev->ptr, &last))
        return 0;
    const vt_api_info_t *info = vt_api_info(ev->api);
    if (!info)
        return 0;
    if (info->kind == VT_KIND_FREE || info->kind == VT_KIND_UNREGISTER) {
        close_span(mt, last, ev->time_ns);
        return 0;
    }
    if (info->kind != VT_KIND_ALLOC && info->kind != VT_KIND_REGISTER)
        return 0;
    close_span(mt, last, ev->time_ns);   /* a live address allocated again: the old one is gone (model.h) */
    if (mt->nspans == mt->cap && mt->nspans >= 64) {
        if (compact(mt))
            return VT_E_NOMEM;
    }
    if (vt_grow((void **)&mt->spans, &mt->cap, mt->nspans + 1, sizeof *mt->spans, 64))
        return VT_E_NOMEM;
    mt->spans[mt->nspans] = (span_t){ ev->ptr, ordinal, ev->time_ns, OPEN, ev->size };
    return vt_map_put(&mt->latest, ev->ptr, (uint32_t)mt->nspans++);
}

static int cmp_span(const void *a, const void *b)
{
    const span_t *x = a, *y = b;
    if (x->base != y->base)
        return x->base < y->base ? -1 : 1;
    return (x->t_alloc > y->t_alloc) - (x->t_alloc < y->t_alloc);
}

static int add_mark(vt_marks_t *t, uint64_t ordinal, uint8_t usage, uint32_t seq)
{
    if (vt_grow((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v, 16))
        return VT_E_NOMEM;
    t->v[t->n++] = (vt_mark_t){ ordinal, seq, usage };
    return 0;
}

/* Each mark to the one span it falls in (marks and spans both by base,
 * then time). */
static int resolve(matcher_t *mt, vt_marks_t *out)
{
    vt_sort(mt->spans, mt->nspans, sizeof *mt->spans, cmp_span);
    size_t s0 = 0;
    for (size_t i = 0; i < mt->nmarks; i++) {
        const vt_seen_mark_t *k = &mt->marks[i];
        while (s0 < mt->nspans && mt->spans[s0].base < k->base)
            s0++;
        const span_t *hit = NULL;
        int hits = 0;
        for (size_t j = s0; j < mt->nspans && mt->spans[j].base == k->base && mt->spans[j].t_alloc <= k->time_ns; j++)
            if (fits(&mt->spans[j], k, mt->grain) && mt->spans[j].size >= k->size) {
                hit = &mt->spans[j];
                hits++;
            }
        if (hits != 1) {
            out->unmatched++;
            continue;
        }
        out->matched++;
        if (add_mark(out, hit->ordinal, k->usage, (uint32_t)i))
            return VT_E_NOMEM;
    }
    return 0;
}

static int cmp_mark(const void *a, const void *b)
{
    const vt_mark_t *x = a, *y = b;
    if (x->ordinal != y->ordinal)
        return x->ordinal < y->ordinal ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* By ordinal, one per allocation: of two marks on it the later in time
 * wins (seq is the position in time order within a base), and a second
 * mark with another usage is counted. */
static void settle(vt_marks_t *t)
{
    vt_sort(t->v, t->n, sizeof *t->v, cmp_mark);
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (n && t->v[n - 1].ordinal == t->v[i].ordinal) {
            t->remarked += t->v[n - 1].usage != t->v[i].usage;
            n--;
        }
        t->v[n++] = t->v[i];
    }
    t->n = n;
}

vt_marks_t *vt_marks_match(const vt_model_t *m, vt_reader_t *reader, vt_error_t *err)
{
    matcher_t mt = { 0 };
    vt_marks_t *out = calloc(1, sizeof *out);
    mt.nmarks = m->nseen;
    mt.marks = mt.nmarks ? malloc(mt.nmarks * sizeof *mt.marks) : NULL;
    mt.grain = m->p.time_res_ns ? m->p.time_res_ns : DEFAULT_GRAIN_NS;
    vt_map_init(&mt.latest);
    int rc = out && (mt.marks || !mt.nmarks) ? 0 : VT_E_NOMEM;
    if (!rc) {
        memcpy(mt.marks, m->seen, mt.nmarks * sizeof *mt.marks);
        vt_sort(mt.marks, mt.nmarks, sizeof *mt.marks, cmp_seen);
        rc = compact(&mt);   /* every marked base, no span yet */
    }
    uint64_t ordinal = 0;
    while (!rc) {
        vt_record_t rec;
        int got = vt_reader_next(reader, &rec, err);
        if (got == 0 || got == VT_E_TRUNCATED)
            break;   /* a partial last chunk: the readings stop there too */
        if (got < 0) {
            rc = got;
            break;
        }
        if (rec.type == VT_REC_EVENT)
            rc = on_event(&mt, &rec.u.event, ++ordinal);
    }
    if (!rc)
        rc = resolve(&mt, out);
    free(mt.marks);
    free(mt.spans);
    vt_map_free(&mt.latest);
    if (rc) {
        if (rc == VT_E_NOMEM)
            err->code = VT_E_NOMEM;
        vt_marks_free(out);
        return NULL;
    }
    settle(out);
    out->marks = m->p.ggml.marks;
    out->unmatched += m->p.ggml.unmatched;   /* over the bound, never kept */
    return out;
}

void vt_model_give_marks(vt_model_t *m, vt_marks_t *marks)
{
    vt_marks_free(m->marks_given);
    m->marks_given = marks;
    m->marks_next = 0;
    m->p.ggml.marks = 0;   /* counted again as this reading meets them */
    m->p.ggml.matched = marks->matched;
    m->p.ggml.unmatched = marks->unmatched;
    m->p.ggml.remarked = marks->remarked;
}

void vt_marks_free(vt_marks_t *marks)
{
    if (!marks)
        return;
    free(marks->v);
    free(marks);
}
