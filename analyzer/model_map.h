/* Hash map from a 64-bit key (address, handle, ip) to a 32-bit value (an
 * index into the owner's array). Used by the model for live allocations and
 * by stacks for ip -> frame.
 *
 * Contract:
 *  - Open addressing, linear probing, power-of-two capacity, deletion by
 *    backward shift (no tombstones), so memory and probe lengths depend only
 *    on the live entries: the map is bounded by what is live, not by how
 *    many insertions a long trace made. Capacity doubles when the map
 *    would be more than half full (13 bytes per slot, 2-4 slots per live
 *    entry) and never shrinks; get and del never allocate, put allocates
 *    only when it doubles.
 *  - Any 64-bit key is allowed, 0 included.
 *  - Functions returning int return 0 or VT_E_NOMEM.
 *  - used[i] is 0 for a free slot and nonzero (0x80 | 7 bits of the key's
 *    hash) for an occupied one; probes compare those hash bits before
 *    touching keys[], so a miss rarely reads keys[] at all.
 */
#ifndef VT_MODEL_MAP_H
#define VT_MODEL_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct vt_map {
    uint64_t *keys;
    uint32_t *vals;
    uint8_t *used;
    size_t cap;    /* power of two, or 0 */
    size_t count;
} vt_map_t;

void vt_map_init(vt_map_t *m);
void vt_map_free(vt_map_t *m);
/* Sets key -> val, replacing an existing value. */
int vt_map_put(vt_map_t *m, uint64_t key, uint32_t val);
/* @return 1 with *val set, or 0 if absent. */
int vt_map_get(const vt_map_t *m, uint64_t key, uint32_t *val);
/* @return 1 with *val set (if val) when the key was present and removed. */
int vt_map_del(vt_map_t *m, uint64_t key, uint32_t *val);

/* Iteration: for (size_t i = 0; i < m->cap; i++) if (m->used[i]) ...
 * (keys[i], vals[i]). Order is unspecified; no put/del during a walk. */

#endif
