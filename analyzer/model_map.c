/* u64 -> u32 open-addressing map (see model_map.h).
 *
 * Keys are mixed because device addresses share their low and high bits
 * (512-byte alignment, one VA range). One multiply by an odd constant, its
 * high half folded onto its low half: every key bit below 32 + log2(cap)
 * reaches the home slot (the low bits of the mix), the top 7 bits are the
 * slot's tag, so a probe past another key rarely compares keys. A 64-bit
 * finalizer (two multiplies, three shifts) mixed better but was on every
 * lookup's path to its cache miss: 5M events of the big bench shape took
 * ~8 % longer with it. Hash quality only changes speed, never results;
 * neither mix is keyed, so a hostile trace could force long probes with
 * either. */
#include "model_map.h"

#include <stdlib.h>

#include "errors.h"

#define MIN_CAP 64u

static inline uint64_t mix(uint64_t k)
{
    k *= 0x9e3779b97f4a7c15ull;
    return k ^ k >> 32;
}

/* Nonzero whatever the hash, so it doubles as the occupied flag. */
static inline uint8_t tag_of(uint64_t h)
{
    return (uint8_t)(0x80u | (h >> 57));
}

void vt_map_init(vt_map_t *m)
{
    m->slots = NULL;
    m->cap = m->count = 0;
}

void vt_map_free(vt_map_t *m)
{
    free(m->slots);
    vt_map_init(m);
}

/* Places a key known to be absent; the map has room. */
static void place(vt_map_t *m, uint64_t key, uint32_t val)
{
    size_t mask = m->cap - 1;
    uint64_t h = mix(key);
    size_t i = h & mask;
    while (m->slots[i].tag)
        i = (i + 1) & mask;
    m->slots[i] = (vt_map_slot_t){ key, val, tag_of(h) };
    m->count++;
}

static int grow(vt_map_t *m)
{
    size_t ncap = m->cap ? m->cap * 2 : MIN_CAP;
    /* calloc: a zero tag is a free slot */
    vt_map_t n = { calloc(ncap, sizeof(vt_map_slot_t)), ncap, 0 };
    if (!n.slots)
        return VT_E_NOMEM;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].tag)
            place(&n, m->slots[i].key, m->slots[i].val);
    vt_map_free(m);
    *m = n;
    return 0;
}

size_t vt_map_find(const vt_map_t *m, uint64_t key)
{
    if (!m->cap)
        return SIZE_MAX;
    size_t mask = m->cap - 1;
    uint64_t h = mix(key);
    uint8_t t = tag_of(h);
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const vt_map_slot_t *s = &m->slots[i];
        if (!s->tag)
            return SIZE_MAX;
        if (s->tag == t && s->key == key)
            return i;
    }
}

int vt_map_put(vt_map_t *m, uint64_t key, uint32_t val)
{
    size_t i = vt_map_find(m, key);
    if (i != SIZE_MAX) {
        m->slots[i].val = val;
        return 0;
    }
    return vt_map_put_new(m, key, val);
}

int vt_map_put_new(vt_map_t *m, uint64_t key, uint32_t val)
{
    /* At most half full: linear probing's miss cost grows with
     * 1/(1-load)^2, every allocation event starts with a miss, and with
     * short runs the probe loop's branches stay predictable (measured: 10k
     * live addresses, get+del+get+put 70 ns at load 0.61, 39 ns at 0.31). */
    if ((m->count + 1) * 2 > m->cap) {
        int rc = grow(m);
        if (rc)
            return rc;
    }
    place(m, key, val);
    return 0;
}

int vt_map_get(const vt_map_t *m, uint64_t key, uint32_t *val)
{
    size_t i = vt_map_find(m, key);
    if (i == SIZE_MAX)
        return 0;
    *val = m->slots[i].val;
    return 1;
}

void vt_map_del_slot(vt_map_t *m, size_t i)
{
    size_t mask = m->cap - 1, j = i;
    m->slots[i].tag = 0;
    m->count--;
    /* Backward shift: move later entries of the run into the hole when
     * their home slot is not cyclically within (hole, their position]. */
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slots[j].tag)
            break;
        size_t home = mix(m->slots[j].key) & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->slots[i] = m->slots[j];
            m->slots[j].tag = 0;
            i = j;
        }
    }
}

int vt_map_del(vt_map_t *m, uint64_t key, uint32_t *val)
{
    size_t i = vt_map_find(m, key);
    if (i == SIZE_MAX)
        return 0;
    if (val)
        *val = m->slots[i].val;
    vt_map_del_slot(m, i);
    return 1;
}

void vt_map_prefetch(const vt_map_t *m, uint64_t key)
{
    if (m->cap)
        __builtin_prefetch(&m->slots[mix(key) & (m->cap - 1)]);
}
