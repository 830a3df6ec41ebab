/* u64 -> u32 open-addressing map (see u64map.h; the hash and the
 * lookups are inline there). */
#include "u64map.h"

#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

#include "errors.h"

#define MIN_CAP_LOG2 6
/* The golden ratio's 64-bit fraction, odd: consecutive keys land far apart. */
#define FIXED_MUL 0x9e3779b97f4a7c15ull

void vt_map_init(vt_map_t *m)
{
    m->slots = NULL;
    m->cap = m->count = 0;
    m->mul = FIXED_MUL;
    m->shift = 64;
    m->keyed = 0;
}

void vt_map_free(vt_map_t *m)
{
    free(m->slots);
    vt_map_init(m);
}

/* Places a key known to be absent; the map has room.
 * @return how far past its home slot it went. */
static size_t place(vt_map_t *m, uint64_t key, uint32_t val)
{
    size_t mask = m->cap - 1;
    uint64_t h = vt_map_hash(m, key);
    size_t home = (size_t)(h >> m->shift), i = home;
    while (m->slots[i].tag)
        i = (i + 1) & mask;
    m->slots[i] = (vt_map_slot_t){ key, val, vt_map_tag(m, h) };
    m->count++;
    return (i - home) & mask;
}

/* The map again at ncap (a power of two) under mul. */
static int rebuild(vt_map_t *m, size_t ncap, uint64_t mul)
{
    int log2 = 0;
    while (((size_t)1 << log2) < ncap)
        log2++;
    /* calloc: a zero tag is a free slot */
    vt_map_t n = { calloc(ncap, sizeof(vt_map_slot_t)), ncap, 0, mul, (uint8_t)(64 - log2), m->keyed };
    if (!n.slots)
        return VT_E_NOMEM;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].tag)
            place(&n, m->slots[i].key, m->slots[i].val);
    free(m->slots);
    *m = n;
    return 0;
}

/* A map zeroed by its owner's calloc instead of vt_map_init has mul 0: it
 * takes the fixed one at its first growth, before any lookup uses it. */
static int grow(vt_map_t *m)
{
    return rebuild(m, m->cap ? m->cap * 2 : (size_t)1 << MIN_CAP_LOG2, m->mul ? m->mul : FIXED_MUL);
}

/* A run longer than honest keys make: the keys were chosen against the
 * fixed multiplier. Rebuilt once under one drawn from the kernel (or,
 * without getrandom, from the clock and this map's address, still out of
 * a trace's reach). Out of memory keeps the map as it is: slow, not
 * wrong. */
static void after_place(vt_map_t *m, size_t run)
{
    if (run <= VT_MAP_LONG_RUN || m->keyed)
        return;
    uint64_t mul = 0;
    if (getrandom(&mul, sizeof mul, GRND_NONBLOCK) != (ssize_t)sizeof mul) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        mul = ((uint64_t)t.tv_nsec ^ (uint64_t)t.tv_sec << 32 ^ (uint64_t)(uintptr_t)m) * FIXED_MUL;
    }
    m->keyed = 1;
    rebuild(m, m->cap, mul | 1);
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
    after_place(m, place(m, key, val));
    return 0;
}

int vt_map_put_hole(vt_map_t *m, size_t hole, uint64_t key, uint32_t val)
{
    /* The hole is where place() would put key, unless the map must grow
     * first (put_new's rule, so the layout is the same either way). */
    if (hole == SIZE_MAX || (m->count + 1) * 2 > m->cap)
        return vt_map_put_new(m, key, val);
    m->slots[hole] = (vt_map_slot_t){ key, val, vt_map_tag(m, vt_map_hash(m, key)) };
    m->count++;
    after_place(m, (hole - vt_map_home(m, key)) & (m->cap - 1));
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
        size_t home = vt_map_home(m, m->slots[j].key);
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
