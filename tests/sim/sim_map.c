/* sim_map.c: a sorted array of non-overlapping extents over a fixed range.
 *
 * Contract:
 *  - Holes are implicit (the gaps between extents), so freeing an extent
 *    coalesces with its neighbours for free.
 *  - sim_map_fit is first-fit from the low end of the range: deterministic,
 *    and it fragments the way tests need (a request can fail while the sum
 *    of the holes is larger).
 *  - O(log n) lookup, O(n) insert/remove/fit: enough for test workloads.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

void sim_map_init(sim_map_t *m, uint64_t base, uint64_t end)
{
    free(m->v);
    memset(m, 0, sizeof *m);
    m->base = base;
    m->end = end;
}

/* Index of the first extent whose start is > addr. */
static size_t upper(const sim_map_t *m, uint64_t addr)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->v[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

sim_ext_t *sim_map_find(sim_map_t *m, uint64_t addr)
{
    size_t i = upper(m, addr);
    if (i == 0)
        return NULL;
    sim_ext_t *e = &m->v[i - 1];
    return addr - e->start < e->size ? e : NULL;
}

int sim_map_fit(const sim_map_t *m, uint64_t size, uint64_t align, uint64_t *out)
{
    uint64_t prev = m->base;
    if (size == 0 || size > m->end - m->base)
        return -1;
    for (size_t i = 0;; i++) {
        uint64_t limit = i < m->n ? m->v[i].start : m->end;
        uint64_t at = sim_round_up(prev, align);
        if (at >= prev && at <= limit && limit - at >= size) {
            *out = at;
            return 0;
        }
        if (i == m->n)
            return -1;
        prev = m->v[i].start + m->v[i].size;
    }
}

int sim_map_overlaps(const sim_map_t *m, uint64_t start, uint64_t size)
{
    uint64_t end = start + size;
    size_t i = upper(m, start);
    if (i > 0 && m->v[i - 1].start + m->v[i - 1].size > start)
        return 1;
    return i < m->n && m->v[i].start < end;
}

sim_ext_t *sim_map_insert(sim_map_t *m, const sim_ext_t *e)
{
    if (e->size == 0 || e->start < m->base || e->start + e->size < e->start ||
        e->start + e->size > m->end || sim_map_overlaps(m, e->start, e->size))
        return NULL;
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        sim_ext_t *v = realloc(m->v, cap * sizeof *v);
        if (!v)
            return NULL;
        m->v = v;
        m->cap = cap;
    }
    size_t i = upper(m, e->start);
    memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof *e);
    m->v[i] = *e;
    m->n++;
    return &m->v[i];
}

void sim_map_remove(sim_map_t *m, sim_ext_t *e)
{
    size_t i = (size_t)(e - m->v);
    memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof *e);
    m->n--;
}
