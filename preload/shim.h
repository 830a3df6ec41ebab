/* Internal declarations of the shim (libvramtrace.so), grouped by the file
 * that defines them, each group opening with that file's contract. Nothing
 * here is exported: the shim is built with -fvisibility=hidden and a
 * version script that exports only the wrapped CUDA entry points, dlsym,
 * dlopen, dlclose, the exec family and _exit.
 *
 * The files in layers, top first. A file calls only files listed after it,
 * so the calls go one way and there is no circle (tests/t/56-shim-graph.t
 * reads this list and checks it on the objects). What must reach upward is
 * done by the upper file itself: dlclose (dl_hooks.c) has the writer name
 * a library's frames and the stacks drop its cached rules, and the wrappers
 * (hooks.c) hand out the pointer for what a lookup found.
 * layer entry: the wrappers the program calls in place of CUDA's, ggml's
 * and the loader's functions
 *   dl_hooks.c   dlsym, dlopen and dlclose: lookups routed, loads and unloads noticed
 *   deepbind.c   a library loaded with RTLD_DEEPBIND: its CUDA imports pointed at the wrappers
 *   exec_hooks.c the exec family, _exit and abort: the trace ends before the image does
 *   ggml_buffers.c  ggml's buffer API; may start the shim without CUDA
 *   hooks.c      one wrapper per entrypoints.def line; fills a vt_event_t
 * layer record: what a call records
 *   record.c     the recording API the wrappers call, and the shim's
 *                lifecycle: start-up, fork, device facts, pools, samples
 * layer trace: the writer's side
 *   writer.c     background thread: encode, compress, write the trace file
 *   symbols.c    module map and symbol names (writer thread only)
 *   elf_symtab.c an ELF file's symbols, for symbols.c
 * layer stacks: what a stack is made of
 *   stacks.c     unwinding and calling-context-tree interning
 *   unwind_fds.c libunwind's memory checks kept out of the program's descriptors
 *   pyframes.c   CPython frames merged into stacks as pseudo frames
 *   ranges.c     annotation API and NVTX injection: range pseudo frames
 *   unwind_cfi.c the .eh_frame rules stacks.c caches
 * layer driver: the real driver, asked on the shim's own account
 *   driver.c     device facts, samples, where memory was placed
 * layer resolve: which function is the real one
 *   resolve.c    the real function for a caller, what a lookup found
 * layer base: what everything shares
 *   livemap.c    live device bytes per pointer, for peak-triggered samples
 *   ring.c       the event queue between the wrappers and the writer
 *   ggml_queue.c the GGML_* records waiting for the writer
 *   real_dl.c    the loader's own dlsym, dlclose and dlopen, past ours
 *   got.c        a loaded object's relocation slots, read and rewritten
 *   loader_lock.c  the shim's dl_iterate_phdr calls, kept out of fork's way; an object's span
 *   options.c    VRAMTRACE_* environment, parsed once
 *   state.c      the state word, the thread guard, device facts, warnings,
 *                readable memory, wait deadlines
 * Hooks never aggregate, symbolize or allocate; everything costly happens on
 * the writer thread.
 */
#ifndef VT_PRELOAD_SHIM_H
#define VT_PRELOAD_SHIM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "loader_lock.h"
#include "vramtrace/entrypoints.h"
#include "vramtrace/trace_format.h"

/* Every name declared here is the shim's own: hidden on the declaration
 * too, so another file's variable is addressed directly, not through the
 * GOT, as a static of its own would be (vt_state, vt_ring on the hot path). */
#pragma GCC visibility push(hidden)

#define VT_EXPORT __attribute__((visibility("default")))
#define VT_MAX_DEVICES 64

/* ---- options.c ---- */
typedef struct vt_options {
    char dir[512];      /* VRAMTRACE_DIR */
    int depth;          /* VRAMTRACE_DEPTH: frames per stack, 0 = none */
    int flush_ms;       /* VRAMTRACE_FLUSH_MS */
    int sample_ms;      /* VRAMTRACE_SAMPLE_MS: meminfo rate limit */
    int time_res_us;    /* VRAMTRACE_TIME_RES_US: event time precision */
    uint32_t ring;      /* VRAMTRACE_RING: events buffered, power of two */
    int disable;        /* VRAMTRACE_DISABLE */
    int unwind;         /* VRAMTRACE_UNWIND: one of VT_UNWIND_* */
    char unwind_check_path[256]; /* VRAMTRACE_UNWIND=check:FILE, "" for stderr: where mismatches go */
} vt_options_t;
enum { VT_UNWIND_CFI, VT_UNWIND_LIBUNWIND, VT_UNWIND_FP, VT_UNWIND_CHECK };

extern vt_options_t vt_opt;
/* Parses the environment into vt_opt. Bad values warn once and keep the
 * default. No allocation. */
void vt_options_load(void);
/* A boolean variable's value: 1/0, yes/no, true/false, on/off in any case.
 * Returns 1 or 0, or -1 for anything else (the caller decides whether to
 * warn). Reads only its argument, so it is safe in a constructor. */
int vt_options_bool(const char *text);

/* ---- record.c ----
 * The recording API every wrapper calls, and the shim's lifecycle.
 *  - Nothing happens before the first intercepted call: that call starts
 *    the shim (options, ring, stacks, writer thread, trace file). A process
 *    that never touches CUDA starts no thread and writes no file.
 *  - The hot path (vt_call_begin/vt_call_end) takes no lock and does not
 *    allocate. Start-up, device facts and samples are out of line.
 *  - fork: the child forgets the parent's ring and file and starts its own
 *    trace lazily, on its own first CUDA call (each file's atfork_child).
 *    The handlers are registered before start-up begins, and a fork while
 *    another thread starts the shim waits for it (bounded).
 *  - Exit: every call that returns to the program is in the trace or in
 *    END's dropped count (ring.c, vt_ring_close), and exit never waits
 *    without a bound for a thread of the program (writer.c, join_writer).
 *    exec and _exit end the process image without exit handlers or our
 *    destructor: their wrappers end the trace the same way first
 *    (vt_record_image_ends), within a bound. */
typedef struct vt_call {
    vt_event_t ev;
    void *slot;           /* ring slot held across a release call */
    uint64_t slot_pos;    /* its position: the slot may be passed over meanwhile */
    uint8_t kind, space, runtime;
    uint8_t hot;          /* record.c's per-api facts (its HOT_* bits), looked up once */
    uint8_t recording;    /* 0 pass-through, 1 record, 2 fold nested calls only */
} vt_call_t;

/* Starts recording a call. Returns 0 when the call must pass through
 * untraced (shim disabled, nested call, failure). Release kinds claim their
 * ring slot here, before the real call, so a free is always ordered before
 * the allocation that reuses its address. linked: 1 for the exported
 * wrapper, which only the program's own code reaches (a runtime's lookups
 * get slot wrappers: vt_hand_out), 0 for a slot wrapper. A driver call
 * inside a runtime call is folded into the runtime's event only through a
 * slot wrapper; through the export it is a signal handler's own call
 * (interrupting the runtime's body), and is recorded. */
int vt_call_begin(vt_call_t *call, unsigned api, int linked);
/* Completes the event with the result, captures the stack and publishes. */
void vt_call_end(vt_call_t *call, uint32_t result);
/* A context teardown's describe step (after the real call, before
 * vt_call_end): names the allocations of other contexts that survived it,
 * and its device when it named a context (record.c). */
void vt_call_teardown(vt_event_t *ev, uint32_t result);
/* Starts the shim for a process that loads a ggml model without a CUDA
 * call (a runner whose CUDA backend did not load: ggml_buffers.c), so its
 * trace says it ran on the CPU. Returns 1 when the shim records. Not from
 * a signal handler, nor inside the shim. */
int vt_start_for_model(void);
/* exec, _exit and abort, before the real call: ends the trace as exit
 * would, how (VT_END_EXEC, VT_END_EXIT_NOW, VT_END_ABORT) going into END,
 * with note in a NOTE before it. Does nothing in a process this shim does not trace, inside
 * the shim, or in a vfork child (which shares the parent's memory: it
 * only reads). */
void vt_record_image_ends(enum vt_end_how how, const char *note);
/* After an exec that returned (it failed): the trace ended for it, so the
 * process goes on untraced; says so once, with note, at its next CUDA
 * call. */
void vt_record_image_goes_on(const char *note);

/* ---- state.c ----
 * What every file shares. A leaf: calls no other file of the shim. */
typedef struct vt_tls {
    int guard;            /* > 0 while inside the shim: nested calls pass through */
    int runtime_depth;    /* > 0 inside a cuda* wrapper: driver calls fold into it */
    int ggml_hook_depth;  /* > 0 inside a ggml hook (ggml_buffers.c): stacks leave the shim's frames out */
    uint32_t tid;
    int defer_say;        /* the writer thread: what it says waits for a thread of the program (vt_say) */
} vt_tls_t;

extern __thread vt_tls_t vt_tls __attribute__((tls_model("initial-exec")));

/* IDLE until the first call, OFF for good once disabled, ENDED once the
 * trace is finished at exit (ring.c: calls then wait for the process to
 * end, bounded, since no trace can count them); a fork child that was
 * ACTIVE or ENDED goes back to IDLE. */
enum vt_state { VT_ST_IDLE, VT_ST_STARTING, VT_ST_ACTIVE, VT_ST_OFF, VT_ST_ENDED };
extern _Atomic int vt_state;
/* Says msg on stderr once per process, prefixed "vramtrace: ". No lock, no
 * allocation: one write(2). */
void vt_warn_once(_Atomic int *flag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Turns the shim into a pass-through for the rest of the process. */
void vt_disable(const char *why);
/* Writes len bytes of a message to stderr (fd 2), or, on a thread with
 * vt_tls.defer_say (the writer, whose descriptor table holds no stderr),
 * keeps it for the next vt_say_pending of a thread of the program. */
void vt_say(const char *text, size_t len);
/* Says what the writer thread kept (vt_say), on this thread's stderr; the
 * ones a parent kept are dropped in a fork child. Cold paths only. */
void vt_say_pending(void);
/* At start-up, before fds 0-2 are held: notes whether fd 2 is open. When
 * it was closed, nothing the shim says is written there (vt_stderr_ours 0):
 * the program may open its own file on that number later. */
void vt_say_start(void);
int vt_stderr_ours(void);
/* 1 when the n bytes at addr (at least one) can be read at this instant,
 * asked of the kernel: no fault, no descriptor, no signal handler. Memory
 * another thread unmaps right after may still fault a read that follows. */
int vt_readable(const void *addr, size_t n);
/* The clock's now plus ms: the deadline of a timed wait
 * (pthread_mutex_timedlock and pthread_timedjoin_np read CLOCK_REALTIME). */
struct timespec vt_deadline_in(clockid_t clock, uint64_t ms);

static inline uint64_t vt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Per-device facts: record.c captures them on a device's first use, the
 * writer emits them. state goes 0 -> 1 (one thread captures) -> 2 (ready,
 * published with release) -> 3 (written); a failed capture goes back to 0,
 * and a fork child sets 3 back to 2 so its own trace has them too. */
typedef struct vt_device_slot {
    _Atomic int state;    /* 0 unseen, 1 capturing, 2 ready, 3 emitted */
    uint64_t time_ns, total, free_at_first;
    uint8_t uuid[16];
    char name[128];
} vt_device_slot_t;
extern vt_device_slot_t vt_devices[VT_MAX_DEVICES];

/* ---- ring.c ----
 * The queue of events between the program's threads (many producers) and
 * the writer (one consumer). Producers take no lock and allocate nothing;
 * their half is inline here so the hot path calls nothing. A full ring
 * drops the event and counts it, except the shim's own samples, so trace +
 * dropped = the program's calls exactly. */
typedef struct vt_ring_slot {
    /* The slot's seq (ring.c) less the slot's index, modulo 2^64: the
     * mapping's zero pages are then a ring whose slot i is free at lap 0
     * (seq i), so start-up touches none of it (writing every seq faulted
     * in the whole ring: 4.5 MiB at the default size, and most of the
     * first call's 5 ms). Read and written through vt_slot_seq_* below;
     * vt_ring_publish adds 1 to it directly. */
    _Atomic uint64_t seq_less_index;
    vt_event_t ev;
} vt_ring_slot_t;
/* A slot's seq while a release holds it across its call (ring.c). */
#define VT_RING_SEQ_HELD (1ull << 63)
/* In the tail once the ring is closed at exit (vt_ring_close): every claim
 * then fails. Positions never reach it. */
#define VT_RING_CLOSED (1ull << 62)
/* In a lost[] counter once END has read it (vt_ring_seal_lost). */
#define VT_LOST_SEALED (1ull << 63)
typedef struct vt_ring {
    vt_ring_slot_t *slots; /* mapped once, by the first vt_ring_init */
    uint64_t mask;         /* slots - 1; VRAMTRACE_RING is a power of two */
    _Atomic uint64_t tail; /* next position to claim */
    uint64_t head;         /* next position to read; writer thread only */
    /* The program's events lost, by vt_lost_reason; the writer adds
     * VT_LOST_UNWRITTEN itself. */
    _Atomic uint64_t lost[VT_LOST_REASONS];
    /* Held slots passed over whose release has not published since:
     * dropped unless it returns before stop. */
    _Atomic uint64_t held_passed;
    /* The held slot at the head and when the writer first found it there;
     * writer thread only. */
    uint64_t held_head_pos, held_head_since;
} vt_ring_t;
extern vt_ring_t vt_ring;

/* The seq of the slot at index (its position & mask). */
static inline uint64_t vt_slot_seq_load(vt_ring_slot_t *slot, uint64_t index, memory_order order)
{
    return atomic_load_explicit(&slot->seq_less_index, order) + index;
}

static inline void vt_slot_seq_store(vt_ring_slot_t *slot, uint64_t index, uint64_t seq, memory_order order)
{
    atomic_store_explicit(&slot->seq_less_index, seq - index, order);
}

/* compare_exchange_strong on the seq; *expected gets the seq found on failure. */
static inline int vt_slot_seq_cas(vt_ring_slot_t *slot, uint64_t index, uint64_t *expected, uint64_t desired,
                                  memory_order success, memory_order failure)
{
    uint64_t found = *expected - index;
    int done = atomic_compare_exchange_strong_explicit(&slot->seq_less_index, &found, desired - index, success, failure);
    *expected = found + index;
    return done;
}

/* A claim found the ring full, or closed: counts the drop (count_drop), and
 * when the trace's END can no longer count it (closed, sealed) waits for
 * the process to end instead (vt_ring_park). Out of line: the hot path
 * only branches to it. */
void vt_ring_full(int count_drop, uint64_t pos);

/* count_drop = 0 for the shim's own samples: "dropped" counts only events
 * the program made. */
static inline vt_ring_slot_t *vt_ring_claim_at(int count_drop, uint64_t *claimed_pos)
{
    uint64_t pos = atomic_load_explicit(&vt_ring.tail, memory_order_relaxed);
    for (;;) {
        uint64_t index = pos & vt_ring.mask;
        vt_ring_slot_t *slot = &vt_ring.slots[index];
        uint64_t seq = vt_slot_seq_load(slot, index, memory_order_acquire);
        if (seq == pos) {
            if (atomic_compare_exchange_weak_explicit(&vt_ring.tail, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                *claimed_pos = pos;
                return slot;
            }
        } else if ((int64_t)((seq & ~VT_RING_SEQ_HELD) - pos) < 0) {
            /* Still used a lap behind (published and unread, or held across
             * a call): full. A slot held for pos itself was just claimed by
             * another thread, and pos is stale: read the tail again. A
             * closed ring (pos has VT_RING_CLOSED) lands here too. */
            vt_ring_full(count_drop, pos);
            return NULL;
        } else {
            pos = atomic_load_explicit(&vt_ring.tail, memory_order_relaxed);
        }
    }
}

/* A slot to fill and publish at once; NULL (counted as dropped) when full. */
static inline vt_ring_slot_t *vt_ring_claim(void)
{
    uint64_t pos;
    return vt_ring_claim_at(1, &pos);
}

/* The same for an event the shim takes on its own account (a sample): NULL
 * when full, not counted, since the program lost nothing. */
static inline vt_ring_slot_t *vt_ring_claim_uncounted(void)
{
    uint64_t pos;
    return vt_ring_claim_at(0, &pos);
}

/* A slot held across a call (a release, ordered before any allocation that
 * reuses its address); *pos gets its position for vt_ring_publish_held. */
static inline vt_ring_slot_t *vt_ring_claim_held(uint64_t *pos)
{
    vt_ring_slot_t *slot = vt_ring_claim_at(1, pos);
    if (slot)
        vt_slot_seq_store(slot, *pos & vt_ring.mask, *pos | VT_RING_SEQ_HELD, memory_order_release);
    return slot;
}

static inline void vt_ring_publish(vt_ring_slot_t *slot)
{
    /* seq + 1, which is seq_less_index + 1: no index needed. */
    uint64_t claimed = atomic_load_explicit(&slot->seq_less_index, memory_order_relaxed);
    atomic_store_explicit(&slot->seq_less_index, claimed + 1, memory_order_release);
}

/* An event the program made that is not in the ring (a wrapper entered
 * from a signal handler inside the shim). */
void vt_ring_count_drop(void);

/* Maps the ring at the first start and empties it; -1 when it cannot be
 * mapped. */
int vt_ring_init(void);
void vt_ring_atfork_child(void);
/* Publishes ev in its held slot or, when the writer passed over the slot
 * meanwhile, in a fresh one. */
void vt_ring_publish_held(vt_ring_slot_t *slot, uint64_t pos, const vt_event_t *ev);
/* Writer side: copies up to max published events in order; stops at the
 * first unpublished slot, unless it is a slot held across a call for long
 * (ring.c, HELD_WAIT_NS): that one is passed over. */
size_t vt_ring_drain(vt_event_t *out, size_t max);
/* The same at stop, passing over every unpublished slot: those and the
 * held slots passed over whose call never returned are counted as dropped. */
size_t vt_ring_drain_final(vt_event_t *out, size_t max);
/* Program events lost so far, by vt_lost_reason (the ring's reasons;
 * VT_LOST_UNWRITTEN is the writer's and 0 here). A held slot passed over
 * counts only at stop: until then its call may still return. */
void vt_ring_lost(uint64_t lost[VT_LOST_REASONS]);
/* Exit, on the exiting thread: closes the ring for good. Claims from now
 * on fail; the exiting thread's own calls pass through, the others' wait
 * in vt_ring_park. */
void vt_ring_close(void);
/* Writer, at stop after the final drain: the losses for END, read so that
 * a drop counted after this reading waits in vt_ring_park instead of
 * returning to the program uncounted. */
void vt_ring_seal_lost(uint64_t lost[VT_LOST_REASONS]);
/* A call that no trace can count any more (its drop came after END read
 * the losses, or it began after the trace ended): waits for the process to
 * end, at most PARK_MS, so the program never sees it return uncounted.
 * Returns at once on the thread that closed the ring (it is exiting), and
 * once one wait has run its course (ring.c). */
void vt_ring_park(void);
/* The process outlived its trace for good (an exec that failed): from now
 * on vt_ring_park returns at once. */
void vt_ring_park_end(void);

/* ---- stacks.c ---- */
/* Captures the caller's stack (skipping `skip` shim frames) and returns its
 * interned leaf node id, 0 if stacks are off or lost. Lock-free unless the
 * stack has a frame sequence never seen before. */
uint32_t vt_stack_capture(int skip);
/* Writer side: node count published so far, and a node's fields. */
uint32_t vt_stack_count(void);
void vt_stack_node(uint32_t id, uint32_t *parent, uint64_t *ip);
uint64_t vt_stacks_lost(void);
/* A library was unloaded: stacks captured from now on get a new load epoch
 * in their native ips (trace_format.h, VT_REC_STACK) and the unwinder's
 * cached rules are dropped. subs: the loader's count of unloads now. */
void vt_stacks_unloaded(unsigned long long subs);
int vt_stacks_init(void);
/* The loader's count of unloaded modules as the shim last saw it (at a
 * dlclose, or a rule lookup): the writer's final naming refreshes its
 * module map when this moved. */
unsigned long long vt_stacks_subs(void);
/* 1 when stacks wanted libunwind and vt_stacks_init could not load it. */
int vt_stacks_without_libunwind(void);
void vt_stacks_atfork_child(void);

/* ---- unwind_fds.c ---- */
/* Points libunwind's (the library behind handle) pipe, read, write, close
 * and syscall imports at functions that make and use no descriptor, before
 * its first unwind. 1: it can no longer make a descriptor of its own; 0:
 * it still can (not x86-64, or a layout not understood). */
int vt_unwind_fds_redirect(void *handle);

/* ---- unwind_cfi.c (x86-64) ---- */
/* How to step from the frame that returns to an address to its caller,
 * packed in one word so a cache slot is two atomics: bits 0-1 the kind,
 * 2 CFA is rbp (else rsp) + cfa_off, 3 the caller's rbp is saved at
 * CFA + rbp_off (else unchanged), 4-19 rbp_off, 20-35 the return address's
 * offset from the CFA, 36-63 cfa_off (signed). */
#define VT_CFI_UNKNOWN 1u /* not a shape modelled: libunwind does the stack */
#define VT_CFI_STEP 2u
#define VT_CFI_END 3u /* return address undefined: the outermost frame */
#define VT_CFI_CFA_RBP 4u
#define VT_CFI_RBP_SAVED 8u
#define VT_CFI_RBP_OFF(r) ((int64_t)(int16_t)((r) >> 4))
#define VT_CFI_RA_OFF(r) ((int64_t)(int16_t)((r) >> 20))
#define VT_CFI_CFA_OFF(r) ((int64_t)(r) >> 36)
/* The rule for ra from its module's .eh_frame; *subs gets the loader's
 * count of unloaded modules as seen during the lookup. */
uint64_t vt_cfi_rule(uintptr_t ra, unsigned long long *subs);
/* The loader's count of unloaded modules (dl_iterate_phdr's dlpi_subs). */
unsigned long long vt_cfi_module_subs(void);

/* ---- livemap.c ---- */
/* Tracks live device bytes per pointer so a free knows its size. Returns the
 * device's tracked total after the change, or -1 when not tracked. */
int64_t vt_live_add(uint64_t key, uint64_t bytes, int device, int handle);
int64_t vt_live_remove(uint64_t key, int *device);
void vt_live_teardown(int (*still_known)(uint64_t ptr), uint64_t freed[VT_MAX_DEVICES]);
void vt_live_each_pointer(int device, void (*fn)(uint64_t ptr, void *arg), void *arg);
int vt_live_init(void);
/* Forgets every pointer and total: the child traces from its own calls. */
void vt_live_atfork_child(void);

/* ---- deepbind.c ---- (contract: deepbind.c)
 * dlopen notes a load with RTLD_DEEPBIND; the next dlsym settles it, while
 * vt_deepbind_pending is not 0. */
extern _Atomic unsigned long long vt_deepbind_pending;
void vt_deepbind_note(void);
/* The shim's own dlsym, dlopen and dlclose (dl_hooks.c's entries). */
typedef struct vt_loader_entries {
    void *dlsym, *dlopen, *dlclose;
} vt_loader_entries_t;
void vt_deepbind_settle(const vt_loader_entries_t *loader);

/* ---- got.c ---- (contract: got.c) */
struct link_map;
typedef struct vt_got vt_got_t;
typedef void (*vt_got_fn)(vt_got_t *g, const char *name, int undefined, void **slot, void *arg);
int vt_got_rewrite(const struct link_map *lm, vt_got_fn fn, void *arg);
/* 1 when value is now in slot (NULL: not a slot of a kind that holds one). */
int vt_got_store(vt_got_t *g, void **slot, void *value);

/* ---- hooks.c ---- */
/* What a lookup (dlsym, cuGetProcAddress) from caller (a return address)
 * hands the program for real, the definition of entry point api it found:
 * the wrapper that calls real (vt_resolve_slot says which), or real
 * itself, untraced, once every slot of api is taken. A runtime's lookups
 * always get a slot wrapper, never the linked export: see
 * vt_call_begin's linked. */
void *vt_hand_out(unsigned api, void *real, const void *caller);

/* ---- driver.c ----
 * The real driver on the shim's own account (device facts, samples), never
 * through a wrapper. Each returns -1 when the driver is not loaded or says
 * no. */
int vt_driver_current_device(void);
/* The device the driver placed ptr on, -1 unknown. */
int vt_driver_pointer_device(uint64_t ptr);
/* Whether device dev's primary context is active (1) or not (0). */
int vt_driver_primary_active(int dev);
/* Whether stream is capturing into a CUDA graph (0 on any error). */
int vt_driver_stream_capturing(void *stream, int per_thread);
void vt_driver_capture_began(void);
/* Stream captures begun and not yet ended, as the shim saw them (hooks.c
 * counts them): while 0, in every process that captures nothing, the
 * capture checks cost one load. A capture never ended (its stream
 * destroyed while capturing) keeps them on, never off. */
extern _Atomic unsigned vt_captures_open;
/* Set once the process has begun a capture or added a graph memory node:
 * from then on a sample asks for the driver's graph pool too. */
extern _Atomic unsigned vt_graphs_seen;
/* The shim's own driver queries go between these: while a capture may be
 * open, the thread is in relaxed capture mode in between (driver.c). */
int vt_driver_relax(void);
void vt_driver_unrelax(int token);
int vt_driver_meminfo(uint64_t *free_bytes, uint64_t *total_bytes);
int vt_driver_device_facts(int device, vt_device_slot_t *out);
/* A pool's RESERVED_MEM_CURRENT and USED_MEM_CURRENT; 0 on success. */
int vt_driver_pool_usage(uint64_t pool, uint64_t *reserved, uint64_t *used);
/* The device's graph pool: CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT and
 * USED_MEM_CURRENT; 0 on success. */
int vt_driver_graph_pool_usage(int device, uint64_t *reserved, uint64_t *used);
/* The device's current mempool (what cuMemAllocAsync draws from); 0 on
 * success. */
int vt_driver_device_pool(int device, uint64_t *pool);

/* ---- resolve.c ----
 * Which function is the real one, for a caller or for a lookup. A leaf
 * above the base: it never calls a wrapper, the recording API or the
 * writer, and what it found is dropped when a library goes (dl_hooks.c
 * calls vt_real_forget). */
/* The real function behind an entry point for a linked call from caller
 * (a return address): the definition the caller would bind to without the
 * shim (resolve.c says how). NULL when the driver/runtime lacks it. The
 * hot path is one load and a branch: vt_real_fn holds the answer when it
 * is the same for every caller. */
extern _Atomic(void *) vt_real_fn[VT_API_COUNT];
void *vt_real_scoped(unsigned api, const void *caller);
static inline void *vt_real_for(unsigned api, const void *caller)
{
    void *fn = atomic_load_explicit(&vt_real_fn[api], memory_order_acquire);
    return __builtin_expect(fn != NULL, 1) ? fn : vt_real_scoped(api, caller);
}
/* The same from the shim's own point of view (samples, device facts). */
void *vt_real(unsigned api);
/* Pointers that dlsym and cuGetProcAddress handed out: slot k of an entry
 * point is what one lookup found, called by its slot wrapper (hooks.c). */
#define VT_SLOTS 4
extern _Atomic(void *) vt_slot_fn[VT_API_COUNT][VT_SLOTS];
/* Which wrapper calls real, a definition of api a lookup found: slot k
 * (< VT_SLOTS, claimed for real if it had none), VT_SLOT_LINKED for the
 * linked export (real is what every caller's linked call gets), or
 * VT_SLOT_NONE when every slot holds another definition (said once). */
enum { VT_SLOT_LINKED = VT_SLOTS, VT_SLOT_NONE };
unsigned vt_resolve_slot(unsigned api, void *real, int linked_ok);
/* caller (a return address) lies in a CUDA runtime (libcudart*). */
int vt_caller_is_runtime(const void *caller);
/* The entry point a pointer cuGetProcAddress returned is (the driver's own
 * definition of it), VT_API_COUNT when none of the table's or the shim's
 * own. */
unsigned vt_resolve_procaddr(void *fn);
/* The entry point of the table named name, VT_API_COUNT for none. */
unsigned vt_resolve_api_named(const char *name);
/* p lies in the shim itself: one of its wrappers, never a real function. */
int vt_in_shim(const void *p);
/* What dlsym(handle, name) from caller (a return address) should answer:
 * VT_LOOKUP_FORWARD, glibc's dlsym answers untouched (not an entry point
 * of the table, RTLD_NEXT, the driver's own lookup, inside the shim);
 * VT_LOOKUP_MISSING, NULL (RTLD_DEFAULT and nothing but the shim defines
 * it); VT_LOOKUP_FOUND, *api was found at *real. Not instrumented: it runs
 * for every dlsym, the sanitizers' own included. */
enum { VT_LOOKUP_FORWARD, VT_LOOKUP_MISSING, VT_LOOKUP_FOUND };
int vt_resolve_dlsym(void *handle, const char *name, void *caller, unsigned *api, void **real);
/* A library was unloaded: every real function is found again (dlclose).
 * vt_unload_gen counts these, for caches kept elsewhere (ggml_buffers.c). */
void vt_real_forget(void);
/* A dlopen is about to load (dl_hooks.c): the runtime answers kept as
 * everyone's are dropped, for its constructors' calls. */
void vt_resolve_loading(void);
extern _Atomic unsigned vt_unload_gen;
/* 1 when another copy of the shim precedes this one in the global scope. */
int vt_shim_shadowed(void);
/* The process's libcuda handle (RTLD_NOLOAD), or NULL. */
void *vt_libcuda(void);

/* ---- pyframes.c, ranges.c: pseudo frames (trace_format.h) ---- */
typedef void (*vt_emit_fn)(uint8_t type, const uint8_t *payload, size_t len);
#define VT_MAX_RANGE_FRAMES 16
/* Rewrites a native stack (ips[0..n), innermost first) into out: Python
 * frames replace the interpreter's eval frames, open ranges go at the outer
 * end. Returns the number of frames in out (<= cap), or -1 when there is
 * nothing to merge and ips stand as they are (out untouched). Lock-free and
 * allocation-free unless a Python call site or range name is new. */
int vt_pseudo_merge(const uint64_t *ips, int n, uint64_t *out, int cap);
/* Writer side: the name of a pseudo ip, valid for the process's life. */
const char *vt_pseudo_name(uint64_t ip);
const char *vt_range_name(uint32_t id);
/* Writer side: pending NOTE and RANGE records, each through emit. */
void vt_pseudo_records(vt_emit_fn emit);
void vt_ranges_records(vt_emit_fn emit);
/* Writer side, at stop: a NOTE saying how many RANGE records were lost to
 * their full buffer, when any were. */
void vt_ranges_lost_note(vt_emit_fn emit);
/* ---- ggml_queue.c: ggml's records waiting for the writer ---- */
#define VT_GGML_NAME_LEN 64u
typedef struct vt_ggml_note {
    uint8_t type;      /* VT_REC_GGML_BUFFER, _TENSOR or _FREE */
    uint8_t host;      /* BUFFER: 0 not stated, 1 device, 2 host memory */
    uint32_t usage;    /* BUFFER: vt_ggml_usage */
    uint64_t time_ns, buffer;
    uint64_t addr;     /* BUFFER: its base (0 for a multi-buffer); TENSOR: its data */
    uint64_t size;     /* bytes */
    uint64_t rows;     /* TENSOR: ggml_nrows, 0 not known */
    char name[VT_GGML_NAME_LEN];  /* the buffer's or the tensor's, NUL-terminated */
} vt_ggml_note_t;
/* Queues one record (copied); any thread, before or after start-up.
 * Returns 1 when this record filled the queue to a quarter: the writer
 * should drain it now (vt_writer_wake) rather than at its next look; -1
 * when the queue is full, the record then counted as lost only if
 * count_if_full (the caller may wait for the writer and try again). */
int vt_ggml_queue(const vt_ggml_note_t *note, int count_if_full);
/* Writer side: the pending records, through emit. */
void vt_ggml_records(vt_emit_fn emit);
/* This thread's open ranges as pseudo ips, innermost first. */
int vt_ranges_frames(uint64_t *out, int cap);
/* Whether this thread has a range open: what vt_ranges_frames would say
 * without copying anything. */
int vt_ranges_open(void);

/* ---- real_dl.c ----
 * The loader's own dlsym, dlclose and dlopen. A leaf: every file that looks a
 * symbol up or closes a handle it opened goes through these, never through
 * the shim's exports (dl_hooks.c), which would route the lookup again. */
/* dlsym that bypasses our own interposition. */
void *vt_real_dlsym(void *handle, const char *name);
/* libc's dlclose, not our export. */
int vt_real_dlclose(void *handle);
/* glibc's dlsym, found on first use; NULL until vt_real_dlsym_resolve (or
 * when glibc has none). dl_hooks.c's dlsym trampoline jumps through it. */
extern void *vt_next_dlsym;
void vt_real_dlsym_resolve(void);
/* glibc's dlopen, for dl_hooks.c's trampoline; NULL until
 * vt_real_dlopen_resolve (or when glibc has none). */
extern void *vt_next_dlopen;
void vt_real_dlopen_resolve(void);

/* ---- loader_lock.c: loader_lock.h ---- */

/* ---- writer.c ---- */
/* Opens the trace file and starts the writer thread. 0 on success. */
int vt_writer_start(void);
/* Flushes everything and writes the END record, the process ending its
 * image as how says (END's how): end_note (NULL: none) goes in a NOTE just
 * before END. The wait for the writer is bounded by bound_ms (0: only
 * while it waits for a module walk), past which the calling thread ends
 * the trace itself. */
void vt_writer_stop(enum vt_end_how how, const char *end_note, unsigned bound_ms);
/* 1 when this process's writer runs and the caller is not that thread: a
 * vfork child, or one made without the fork handlers, gets 0. Reads
 * only, so a vfork child may ask. */
int vt_writer_ours(void);
/* Asks the writer thread to write and name everything captured so far,
 * waiting at most timeout_ms for it; 0 when it did. No-op (-1) on the
 * writer thread itself or when no writer runs. */
int vt_writer_sync(unsigned timeout_ms);
/* Asks the writer thread to drain now, without waiting for it and without
 * blocking: the writer looks at the ring as often as CUDA's events need,
 * so a burst of ggml records with few CUDA calls would otherwise wait up
 * to VRAMTRACE_FLUSH_MS and overflow their queue. A no-op when no writer
 * runs. Not from a signal handler. */
void vt_writer_wake(void);
void vt_writer_atfork_prepare(void);
void vt_writer_atfork_parent(void);
void vt_writer_atfork_child(void);

#pragma GCC visibility pop

#endif
