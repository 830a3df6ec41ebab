/* Hash map from a 64-bit key (address, handle, ip) to a 32-bit value (an
 * index into the owner's array). Used by the model for live allocations and
 * by stacks for ip -> frame.
 *
 * Contract:
 *  - Open addressing, linear probing, power-of-two capacity, deletion by
 *    backward shift (no tombstones), so memory and probe lengths depend only
 *    on the live entries: the map is bounded by what is live, not by how
 *    many insertions a long trace made. Capacity doubles when the map
 *    would be more than half full (16 bytes per slot, 2-4 slots per live
 *    entry) and never shrinks; get and del never allocate, put allocates
 *    only when it doubles.
 *  - Any 64-bit key is allowed, 0 included.
 *  - Functions returning int return 0 or VT_E_NOMEM.
 *  - A slot's tag is 0 when free and nonzero (0x80 | 7 bits of the key's
 *    hash) when occupied; probes compare those hash bits before the key.
 *  - Hostile keys cost at most one long run: the hash multiplier is fixed
 *    (the same layout every run) until an insertion lands more than
 *    VT_MAP_LONG_RUN slots from its home, which honest keys do not do at
 *    half load; the map is then rebuilt once under a random multiplier no
 *    trace can aim at. Slot order (iteration) then differs between runs.
 */
#ifndef VT_U64MAP_H
#define VT_U64MAP_H

#include <stddef.h>
#include <stdint.h>

/* Key, value and tag share one 16-byte slot: a lookup in a map larger than
 * the cache (the live table, 100k stacks) is one cache miss, where three
 * parallel arrays made it three dependent ones. */
typedef struct vt_map_slot {
    uint64_t key;
    uint32_t val;
    uint8_t tag;
} vt_map_slot_t;

typedef struct vt_map {
    vt_map_slot_t *slots;
    size_t cap;    /* power of two, or 0 */
    size_t count;
    uint64_t mul;  /* odd: the hash is the top bits of key * mul */
    uint8_t shift; /* 64 - log2(cap): home = (key * mul) >> shift */
    uint8_t keyed; /* mul was drawn at random after a long run */
} vt_map_t;

/* Expected longest displacement with linear probing at load 1/2 is about
 * ln(n) / 0.19 (83 slots for 10M keys); four times that is no accident. */
#define VT_MAP_LONG_RUN 320

void vt_map_init(vt_map_t *m);
void vt_map_free(vt_map_t *m);
/* Sets key -> val, replacing an existing value. */
int vt_map_put(vt_map_t *m, uint64_t key, uint32_t val);
/* Adds key -> val where the caller knows key is absent (a get or del just
 * said so, nothing put since): no probe for an existing key. */
int vt_map_put_new(vt_map_t *m, uint64_t key, uint32_t val);
/* @return 1 with *val set, or 0 if absent. */
int vt_map_get(const vt_map_t *m, uint64_t key, uint32_t *val);
/* @return 1 with *val set (if val) when the key was present and removed. */
int vt_map_del(vt_map_t *m, uint64_t key, uint32_t *val);
/* Lookup then removal without a second probe: find gives the slot holding
 * key (or SIZE_MAX), valid until the next put or del; del_slot removes it. */
static inline size_t vt_map_find(const vt_map_t *m, uint64_t key);
void vt_map_del_slot(vt_map_t *m, size_t slot);
/* Lookup then insertion without a second probe: find_hole is find that
 * also sets *hole, when key is absent, to the free slot where it would go
 * (SIZE_MAX for an empty map); put_hole adds key there, or where put_new
 * would when the map must first grow. Nothing may be put or deleted in
 * between. */
static inline size_t vt_map_find_hole(const vt_map_t *m, uint64_t key, size_t *hole);
int vt_map_put_hole(vt_map_t *m, size_t hole, uint64_t key, uint32_t val);
/* Starts loading the slot where a probe for key begins (a hint only). */
static inline void vt_map_prefetch(const vt_map_t *m, uint64_t key);

/* Iteration: for (size_t i = 0; i < m->cap; i++) if (m->slots[i].tag) ...
 * (slots[i].key, slots[i].val). Order is unspecified; no put/del during a
 * walk. */

/* ---- inline: the lookups on every event's path ----
 *
 * Multiply-shift (Knuth's Fibonacci hashing): the home slot is the top
 * log2(cap) bits of key * mul, so every key bit reaches it, the low bits
 * device addresses share (512-byte alignment) and the high ones (one VA
 * range) included; the 7 bits below the home bits are the slot's tag, so
 * a probe past another key rarely compares keys. One multiply and one
 * shift: a 64-bit finalizer (two multiplies, three shifts) mixed no better
 * for these keys and took ~8 % longer on 5M events of the big bench shape.
 * A fixed multiplier can be aimed at (keys i * mul^-1 all share slot 0),
 * hence the random one after a long run; with a random odd mul the family
 * is universal (Dietzfelbinger et al. 1997: two keys collide with
 * probability at most 2 / cap). */
static inline uint64_t vt_map_hash(const vt_map_t *m, uint64_t key)
{
    return key * m->mul;
}

static inline size_t vt_map_home(const vt_map_t *m, uint64_t key)
{
    return (size_t)(vt_map_hash(m, key) >> m->shift);
}

/* Nonzero whatever the hash, so it doubles as the occupied flag. shift is
 * at least 7 (cap <= 2^57). */
static inline uint8_t vt_map_tag(const vt_map_t *m, uint64_t h)
{
    return (uint8_t)(0x80u | ((h >> (m->shift - 7)) & 0x7fu));
}

static inline size_t vt_map_find_hole(const vt_map_t *m, uint64_t key, size_t *hole)
{
    *hole = SIZE_MAX;
    if (!m->cap)
        return SIZE_MAX;
    size_t mask = m->cap - 1;
    uint64_t h = vt_map_hash(m, key);
    uint8_t t = vt_map_tag(m, h);
    for (size_t i = (size_t)(h >> m->shift);; i = (i + 1) & mask) {
        const vt_map_slot_t *s = &m->slots[i];
        if (!s->tag) {
            *hole = i;
            return SIZE_MAX;
        }
        if (s->tag == t && s->key == key)
            return i;
    }
}

static inline size_t vt_map_find(const vt_map_t *m, uint64_t key)
{
    size_t hole;
    return vt_map_find_hole(m, key, &hole);
}

static inline void vt_map_prefetch(const vt_map_t *m, uint64_t key)
{
    if (m->cap)
        __builtin_prefetch(&m->slots[vt_map_home(m, key)]);
}

#endif
