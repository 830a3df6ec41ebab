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
 */
#ifndef VT_MODEL_MAP_H
#define VT_MODEL_MAP_H

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
} vt_map_t;

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
size_t vt_map_find(const vt_map_t *m, uint64_t key);
void vt_map_del_slot(vt_map_t *m, size_t slot);
/* Starts loading the slot where a probe for key begins (a hint only). */
void vt_map_prefetch(const vt_map_t *m, uint64_t key);

/* Iteration: for (size_t i = 0; i < m->cap; i++) if (m->slots[i].tag) ...
 * (slots[i].key, slots[i].val). Order is unspecified; no put/del during a
 * walk. */

#endif
