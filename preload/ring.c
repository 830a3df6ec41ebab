/* ring.c: the queue of events between the program's threads (many
 * producers) and the writer thread (one consumer).
 *
 * Contract:
 *  - A leaf: reads the options and calls no other file of the shim.
 *  - Producers take no lock and allocate nothing: a CAS to claim a slot, a
 *    store to publish it. Their half (vt_ring_claim, vt_ring_publish,
 *    vt_ring_claim_held) is inline in shim.h, so the recording API's hot
 *    path calls nothing; this file holds the rest.
 *  - A full ring drops the event and counts it (vt_ring_lost), except a
 *    shim's own sample (vt_ring_claim_uncounted): trace + dropped = the
 *    program's calls exactly.
 *  - The ring is mapped once, at start-up, and not touched then: its zero
 *    pages are an empty ring (shim.h, seq_less_index), paged in as events
 *    fill it. A fork child keeps the mapping and empties it back to zero
 *    pages (vt_ring_init at its own start-up).
 *
 * A slot at position pos goes: seq == pos free; claimed (the tail moved
 * past pos), seq still pos while its event is copied in, nanoseconds; or
 * seq == pos | VT_RING_SEQ_HELD while a release holds it across the real call;
 * seq == pos + 1 published; pos + ring size read, free for the next lap.
 *
 * A held slot can stay held for seconds (cudaFree waits behind a running
 * kernel) or for ever (its thread cancelled inside the driver), and the
 * writer reads in order: it passes over a slot held HELD_WAIT_NS at the
 * head, taking it with a CAS the returning release then loses. That release
 * publishes in a fresh slot, after the events made during its call; one
 * that never returns is counted as dropped at stop.
 */
#include <errno.h>
#include <sys/mman.h>
#include <time.h>

#include "shim.h"

/* Far above a release's own time in the driver (microseconds, when no
 * kernel is waited for) and a preempted thread's wait, far below what a
 * live reader notices: chunks land every VRAMTRACE_FLUSH_MS (100 ms). */
#define HELD_WAIT_NS 250000000ull

vt_ring_t vt_ring = { .held_head_pos = UINT64_MAX };

int vt_ring_init(void)
{
    size_t bytes = (size_t)vt_opt.ring * sizeof(vt_ring_slot_t);
    if (!vt_ring.slots) {
        /* Zero pages: every slot free at lap 0 (shim.h, seq_less_index). */
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return -1;
        vt_ring.slots = p;
        vt_ring.mask = vt_opt.ring - 1;
    } else if (madvise(vt_ring.slots, (size_t)(vt_ring.mask + 1) * sizeof(vt_ring_slot_t), MADV_DONTNEED) != 0) {
        /* A fork child's start: the parent's slots are emptied back to
         * zero pages, or by hand where madvise is refused. */
        for (uint64_t i = 0; i <= vt_ring.mask; i++)
            atomic_store_explicit(&vt_ring.slots[i].seq_less_index, 0, memory_order_relaxed);
    }
    atomic_store(&vt_ring.tail, 0);
    vt_ring.head = 0;
    atomic_store(&vt_ring.held_passed, 0);
    vt_ring.held_head_pos = UINT64_MAX;
    return 0;
}

/* The parent's losses are in the parent's trace; the slots are reset by
 * vt_ring_init at the child's own start-up. */
void vt_ring_atfork_child(void)
{
    for (int i = 0; i < VT_LOST_REASONS; i++)
        atomic_store(&vt_ring.lost[i], 0);
    atomic_store(&vt_ring.held_passed, 0);
}

/* Takes one passed-over release back from the count stop would drop;
 * 0 when stop has counted it already. */
static int take_held_passed(void)
{
    uint64_t n = atomic_load_explicit(&vt_ring.held_passed, memory_order_relaxed);
    while (n && !atomic_compare_exchange_weak_explicit(&vt_ring.held_passed, &n, n - 1, memory_order_relaxed,
                                                       memory_order_relaxed))
        ;
    return n != 0;
}

void vt_ring_publish_held(vt_ring_slot_t *slot, uint64_t pos, const vt_event_t *ev)
{
    uint64_t held = pos | VT_RING_SEQ_HELD;
    uint64_t index = pos & vt_ring.mask;
    if (vt_slot_seq_cas(slot, index, &held, pos, memory_order_acquire, memory_order_relaxed)) {
        slot->ev = *ev;
        vt_slot_seq_store(slot, index, pos + 1, memory_order_release);
        return;
    }
    /* Passed over: the slot is another event's now. Published late, the
     * free still comes before any allocation that reuses its address and
     * returns after this one publishes; one that returned between the
     * driver's release and here comes before it, so the event says it was
     * passed over (VT_EF_LATE) and the analyzer does not take it for the
     * reusing allocation's free. */
    if (!take_held_passed())
        return;
    vt_ring_slot_t *late = vt_ring_claim();
    if (late) {
        late->ev = *ev;
        late->ev.flags |= VT_EF_LATE;
        vt_ring_publish(late);
    }
}

/* Passes over the held slot at the head once it has been held wait_ns
 * there. Returns 1 when it did, 0 when it waits or its release is
 * publishing it right now. */
static int pass_held_head(vt_ring_slot_t *slot, uint64_t wait_ns)
{
    if (wait_ns) {
        uint64_t now = vt_now_ns();
        if (vt_ring.held_head_pos != vt_ring.head) {
            vt_ring.held_head_pos = vt_ring.head;
            vt_ring.held_head_since = now;
        }
        if (now - vt_ring.held_head_since < wait_ns)
            return 0;
    }
    uint64_t held = vt_ring.head | VT_RING_SEQ_HELD;
    if (!vt_slot_seq_cas(slot, vt_ring.head & vt_ring.mask, &held, vt_ring.head + vt_ring.mask + 1, memory_order_relaxed,
                         memory_order_relaxed))
        return 0;
    atomic_fetch_add_explicit(&vt_ring.held_passed, 1, memory_order_relaxed);
    vt_ring.head++;
    return 1;
}

static size_t ring_drain(vt_event_t *out, size_t max, uint64_t held_wait_ns)
{
    size_t n = 0;
    while (n < max) {
        uint64_t index = vt_ring.head & vt_ring.mask;
        vt_ring_slot_t *slot = &vt_ring.slots[index];
        uint64_t seq = vt_slot_seq_load(slot, index, memory_order_acquire);
        if (seq != vt_ring.head + 1) {
            if (seq == (vt_ring.head | VT_RING_SEQ_HELD) && pass_held_head(slot, held_wait_ns))
                continue;
            break;
        }
        out[n++] = slot->ev;
        vt_slot_seq_store(slot, index, vt_ring.head + vt_ring.mask + 1, memory_order_release);
        vt_ring.head++;
    }
    return n;
}

size_t vt_ring_drain(vt_event_t *out, size_t max)
{
    return ring_drain(out, max, HELD_WAIT_NS);
}

/* At stop: held slots are passed over at once, and a slot claimed but
 * never published (its thread cancelled between claim and publish) is
 * counted as dropped and passed over, left as it is, so a late publish
 * writes only into a slot nobody reads. Releases passed over that never
 * came back are dropped now. */
size_t vt_ring_drain_final(vt_event_t *out, size_t max)
{
    size_t n = ring_drain(out, max, 0);
    uint64_t tail = atomic_load_explicit(&vt_ring.tail, memory_order_acquire) & ~VT_RING_CLOSED;
    while (n < max && vt_ring.head < tail) {
        uint64_t index = vt_ring.head & vt_ring.mask;
        vt_ring_slot_t *slot = &vt_ring.slots[index];
        uint64_t seq = vt_slot_seq_load(slot, index, memory_order_acquire);
        if (seq == vt_ring.head + 1 || seq == (vt_ring.head | VT_RING_SEQ_HELD)) {
            n += ring_drain(out + n, max - n, 0);
            continue;
        }
        atomic_fetch_add_explicit(&vt_ring.lost[VT_LOST_UNRETURNED], 1, memory_order_relaxed);
        vt_ring.head++;
    }
    atomic_fetch_add_explicit(&vt_ring.lost[VT_LOST_UNRETURNED], atomic_exchange(&vt_ring.held_passed, 0),
                              memory_order_relaxed);
    return n;
}

void vt_ring_lost(uint64_t lost[VT_LOST_REASONS])
{
    for (int i = 0; i < VT_LOST_REASONS; i++)
        lost[i] = atomic_load_explicit(&vt_ring.lost[i], memory_order_relaxed) & ~VT_LOST_SEALED;
}

/* ---- exit: every call the program sees return is in the trace or in
 * END's dropped count ----
 * Program threads go on calling while exit() finishes the trace. Before,
 * an event published after the final drain, and a call made after stop
 * (passed through), returned to the program and were in neither: 104-192
 * calls in 44,000 (tests/t/74-fault-exitrace.t). Now the exiting thread
 * closes the ring first (a claim fails from then on), the final drain
 * takes every slot claimed before (one never published counts as
 * dropped), and END reads the losses with a seal: a drop counted after the
 * seal, a claim on the closed ring and a call begun after the trace ended
 * are calls no trace can count, so they wait for the process to end
 * (bounded: a destructor that runs after ours and waits for such a thread
 * gets it back after PARK_MS, untraced). */
#define PARK_MS 1000

static __thread int closed_here __attribute__((tls_model("initial-exec")));
/* Set once a wait ran its course: the process outlived its trace by
 * PARK_MS, so later calls pass through at once (a destructor that joins a
 * thread making many calls waits PARK_MS in all, not per call). */
static _Atomic int park_expired;

void vt_ring_close(void)
{
    closed_here = 1;
    atomic_fetch_or(&vt_ring.tail, VT_RING_CLOSED);
}

void vt_ring_seal_lost(uint64_t lost[VT_LOST_REASONS])
{
    for (int i = 0; i < VT_LOST_REASONS; i++)
        lost[i] = atomic_fetch_or(&vt_ring.lost[i], VT_LOST_SEALED) & ~VT_LOST_SEALED;
}

/* In steps, so an exec that failed (vt_ring_park_end) lets the waiting
 * calls go at once instead of after PARK_MS. */
#define PARK_STEP_MS 10

void vt_ring_park(void)
{
    if (closed_here)
        return;
    for (int waited = 0; waited < PARK_MS && !atomic_load(&park_expired); waited += PARK_STEP_MS) {
        struct timespec left = { 0, PARK_STEP_MS * 1000000L };
        while (nanosleep(&left, &left) != 0 && errno == EINTR)
            ;
    }
    atomic_store(&park_expired, 1);
}

void vt_ring_park_end(void)
{
    atomic_store(&park_expired, 1);
}

static void count_lost(int reason)
{
    if (atomic_fetch_add(&vt_ring.lost[reason], 1) & VT_LOST_SEALED)
        vt_ring_park();
}

void vt_ring_full(int count_drop, uint64_t pos)
{
    if (pos & VT_RING_CLOSED) {
        if (count_drop)
            vt_ring_park();
        return;
    }
    if (count_drop)
        count_lost(VT_LOST_RING_FULL);
}

void vt_ring_count_drop(void)
{
    count_lost(VT_LOST_IN_HANDLER);
}

