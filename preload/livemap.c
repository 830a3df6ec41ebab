/* livemap.c: live device bytes per pointer, so a free knows how many bytes
 * it gave back and the shim can sample cuMemGetInfo at each new peak.
 *
 * Contract and invariants:
 *  - Lock-free open addressing. A slot's key goes EMPTY -> BUSY -> key ->
 *    TOMB -> ... The removal of a freed P runs after the real free, so
 *    another thread's allocation that got P back may add it first: P can
 *    briefly sit in two slots, and the removal takes whichever it finds
 *    first. Totals stay exact; only the timing of peak samples can shift.
 *  - Bounded: a fixed table, mmap'ed on first use. When a probe sequence is
 *    exhausted the allocation is simply not tracked; that only makes peak
 *    sampling coarser, never changes what the program sees.
 *  - Only the analyzer's numbers count: these totals exist to time samples.
 */
#include <sys/mman.h>

#include "shim.h"

#define LIVE_BITS 18
#define LIVE_SIZE (1u << LIVE_BITS)
#define LIVE_PROBES 64
#define KEY_EMPTY 0ull
#define KEY_TOMB 1ull
#define KEY_BUSY 2ull /* claimed, value being written */

typedef struct live_slot {
    _Atomic uint64_t key;
    /* Atomic because a free's removal can race an allocation that already
     * got the same address back from the driver (the removal runs after the
     * real free returns). The only effect is which peak samples are taken. */
    _Atomic uint64_t bytes;
    _Atomic int32_t device;
    /* 1 for a VMM handle (cuMemCreate), which no context teardown frees
     * and the driver's pointer queries do not know. */
    _Atomic int32_t handle;
} live_slot_t;

/* Everything this file keeps process-wide; vt_live_atfork_child decides
 * what of it a child keeps. */
typedef struct live_map {
    live_slot_t *slots; /* mapped once, by vt_live_init */
    _Atomic int64_t device_bytes[VT_MAX_DEVICES];
} live_map_t;
static live_map_t live;

int vt_live_init(void)
{
    if (live.slots)
        return 0;
    void *p = mmap(NULL, LIVE_SIZE * sizeof(live_slot_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    live.slots = p;
    return 0;
}

/* A pointer the parent allocated is, to the child's trace, one allocated
 * before tracing: its free must keep its stack (vt_call_end), and the
 * child's peaks count the child's bytes alone. The table's mapping is kept
 * and its pages dropped: a private anonymous mapping reads back as zeros
 * (EMPTY) after MADV_DONTNEED, and only what the child touches is paged in
 * again. Where that fails the table is left behind, and the child's start
 * maps a fresh one. */
void vt_live_atfork_child(void)
{
    live_slot_t *slots = live.slots;
    live = (live_map_t){ 0 };
    if (slots && madvise(slots, LIVE_SIZE * sizeof(live_slot_t), MADV_DONTNEED) == 0)
        live.slots = slots;
}

static uint32_t slot_of(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (uint32_t)key & (LIVE_SIZE - 1);
}

int64_t vt_live_add(uint64_t key, uint64_t bytes, int device, int handle)
{
    /* Read once: the atomics below would make the compiler read it again
     * on every probe. */
    live_slot_t *slots = live.slots;
    if (!slots || key <= KEY_BUSY || device < 0 || device >= VT_MAX_DEVICES)
        return -1;
    uint32_t i = slot_of(key);
    for (int probe = 0; probe < LIVE_PROBES; probe++, i = (i + 1) & (LIVE_SIZE - 1)) {
        uint64_t k = atomic_load_explicit(&slots[i].key, memory_order_relaxed);
        if (k != KEY_EMPTY && k != KEY_TOMB)
            continue;
        /* Claim, fill, then publish the key: a racing insert into the same
         * slot must not overwrite the value. */
        if (!atomic_compare_exchange_strong(&slots[i].key, &k, KEY_BUSY))
            continue;
        atomic_store_explicit(&slots[i].bytes, bytes, memory_order_relaxed);
        atomic_store_explicit(&slots[i].device, device, memory_order_relaxed);
        atomic_store_explicit(&slots[i].handle, handle, memory_order_relaxed);
        atomic_store_explicit(&slots[i].key, key, memory_order_release);
        return atomic_fetch_add(&live.device_bytes[device], (int64_t)bytes) + (int64_t)bytes;
    }
    return -1;
}

int64_t vt_live_remove(uint64_t key, int *device)
{
    live_slot_t *slots = live.slots;
    if (!slots || key <= KEY_BUSY)
        return -1;
    uint32_t i = slot_of(key);
    for (int probe = 0; probe < LIVE_PROBES; probe++, i = (i + 1) & (LIVE_SIZE - 1)) {
        uint64_t k = atomic_load_explicit(&slots[i].key, memory_order_acquire);
        if (k == KEY_EMPTY)
            return -1;
        if (k != key)
            continue;
        uint64_t bytes = atomic_load_explicit(&slots[i].bytes, memory_order_relaxed);
        int dev = atomic_load_explicit(&slots[i].device, memory_order_relaxed);
        if (!atomic_compare_exchange_strong(&slots[i].key, &k, KEY_TOMB))
            return -1; /* a racing double free: the other one counts it */
        *device = dev;
        return atomic_fetch_sub(&live.device_bytes[dev], (int64_t)bytes) - (int64_t)bytes;
    }
    return -1;
}

/* A context teardown, after the driver returned: every live pointer
 * (not handle) still_known says the driver no longer knows was freed by
 * it and leaves the table; freed[] gets how many on each device. Walks
 * the whole table (6 MiB) and asks once per live pointer: a teardown is
 * rare, and the hot path pays nothing for it. A pointer the driver gave
 * back to another thread meanwhile is still known, and is kept: that
 * thread's allocation holds it. */
void vt_live_teardown(int (*still_known)(uint64_t ptr), uint64_t freed[VT_MAX_DEVICES])
{
    live_slot_t *slots = live.slots;
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        freed[d] = 0;
    if (!slots)
        return;
    for (uint32_t i = 0; i < LIVE_SIZE; i++) {
        uint64_t k = atomic_load_explicit(&slots[i].key, memory_order_acquire);
        if (k <= KEY_BUSY || atomic_load_explicit(&slots[i].handle, memory_order_relaxed) || still_known(k))
            continue;
        int dev;
        if (vt_live_remove(k, &dev) >= 0 && dev >= 0 && dev < VT_MAX_DEVICES)
            freed[dev]++;
    }
}

/* The live pointers (not handles) on device, each passed to fn. */
void vt_live_each_pointer(int device, void (*fn)(uint64_t ptr, void *arg), void *arg)
{
    live_slot_t *slots = live.slots;
    if (!slots)
        return;
    for (uint32_t i = 0; i < LIVE_SIZE; i++) {
        uint64_t k = atomic_load_explicit(&slots[i].key, memory_order_acquire);
        if (k > KEY_BUSY && !atomic_load_explicit(&slots[i].handle, memory_order_relaxed) &&
            atomic_load_explicit(&slots[i].device, memory_order_relaxed) == device)
            fn(k, arg);
    }
}
