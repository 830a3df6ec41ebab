/* record.c: the recording API every wrapper calls, and the shim's
 * lifecycle: start-up on the first call, fork, exit, device facts, pools
 * and the samples taken beside the program's events.
 *
 * Contract:
 *  - Nothing happens before the first intercepted call: that call starts the
 *    shim (options, ring, stacks, writer thread, trace file). A process that
 *    never touches CUDA starts no thread and writes no file.
 *  - The hot path (vt_call_begin/vt_call_end) takes no lock and does not
 *    allocate: a CAS to claim a ring slot (ring.c, inline), the cached CFI
 *    unwind (stacks.c), a lock-free lookup in the stack tree. Only a
 *    never-seen stack takes the stack tree's insert lock. Start-up, device
 *    facts and samples are out of line, so the common path carries none of
 *    their cost.
 *  - A full ring drops the event and counts it; the count is in the trace.
 *  - Any internal failure turns the shim into a pass-through, said once on
 *    stderr (state.c). The program always gets the real function's result
 *    untouched.
 *  - fork: the child forgets the parent's ring and file and starts its own
 *    trace lazily, on its own first CUDA call. Each file that keeps state
 *    says what of it survives, in its own atfork_child. Fork safety holds
 *    from the first instruction of start-up: the handlers are registered
 *    before the state leaves IDLE (start_once).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

/* ---- the file's state ---- */

/* The TSC's relation to CLOCK_MONOTONIC, measured in this process. */
typedef struct event_clock {
    uint64_t tsc_base, tsc_base_ns; /* set by start() when the TSC is invariant */
    _Atomic uint64_t tsc_window;    /* ANCHOR_NS in ticks */
    _Atomic uint64_t tsc_mult;      /* ns per tick, 32.32 fixed point; 0 until measured */
} event_clock_t;

/* Pools whose usage each sample reads: see note_pool. */
#define VT_MAX_POOLS 32

/* Everything this file keeps process-wide, in one struct so that what fork
 * does to each field is decided in one place (record_atfork_child): a field
 * added here is reset in a child unless that function keeps it, by name. */
typedef struct record_state {
    event_clock_t clock;
    /* At start, from the options: VRAMTRACE_SAMPLE_MS in ns, 0 for none,
     * and each api's event flags and hot-path facts (init_api_flags). */
    uint64_t sample_interval_ns;
    uint32_t api_flags[VT_API_COUNT];
    uint8_t api_hot[VT_API_COUNT];
    /* Devices whose facts are captured (vt_devices state 2 or 3, which
     * never goes back to 0): one shared word that every event can read,
     * instead of the device's slot, to know there is nothing to do. */
    _Atomic uint64_t devices_known;
    /* The pools samples read (note_pool), and the devices whose current
     * pool was asked for (track_pools). */
    _Atomic uint64_t pools[VT_MAX_POOLS];
    _Atomic int current_pool_seen[VT_MAX_DEVICES];
    /* When the last sample was taken, and each device's tracked total at
     * its last peak sample (track_device_bytes). */
    _Atomic uint64_t last_sample_ns;
    /* When a failed request may next wait for the writer (failure_on_disk). */
    _Atomic uint64_t next_failure_sync_ns;
    _Atomic int64_t peak_sampled[VT_MAX_DEVICES];
    /* The first of exit, exec, _exit and abort ends the trace; another, on
     * another thread or in a signal handler that interrupted the first,
     * leaves it to that one (a second stop would wait on the lock the
     * first holds). image_end_pid: the process an exec, _exit or abort
     * ended; image_end_how: which. */
    _Atomic int trace_ending;
    _Atomic pid_t image_end_pid;
    _Atomic int image_end_how;
} record_state_t;

static record_state_t rec;
static const record_state_t rec_initial;

/* ---- event times: CLOCK_MONOTONIC, read through the TSC ----
 * clock_gettime was the largest single cost of an event at depth 0 (a
 * quarter of the pair in a VM, where the vDSO's own rdtsc is slow). With an
 * invariant TSC (CPUID says so; otherwise every event reads the clock), an
 * event's time is its thread's last clock reading plus the TSC ticks since,
 * converted at a rate measured against the clock: one rdtsc instead of a
 * clock read. A thread reads the clock again when its reading is more than
 * ANCHOR_NS of ticks old or the TSC went backwards (another core). The
 * error is the rate's over at most ANCHOR_NS (well under a nanosecond with
 * a sane TSC) and can never exceed ANCHOR_NS, whatever the TSCs do; the
 * trace keeps times to VRAMTRACE_TIME_RES_US (1 ms). A thread's event times
 * never go backwards. */
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#define ANCHOR_NS 10000ull       /* a thread reads the clock at least this often */
#define CALIBRATE_NS 10000000ull /* the rate is measured over at least 10 ms */
typedef struct tsc_anchor {
    uint64_t tsc, ns, last;
} tsc_anchor_t;
static __thread tsc_anchor_t anchor __attribute__((tls_model("initial-exec")));

static void event_clock_init(void)
{
    unsigned a, b, c, d;
    if (rec.clock.tsc_base || !__get_cpuid(0x80000007u, &a, &b, &c, &d) || !(d & (1u << 8)))
        return;
    rec.clock.tsc_base_ns = vt_now_ns();
    rec.clock.tsc_base = __rdtsc();
}

/* A clock reading for tick t: the thread's new anchor, and the rate once
 * CALIBRATE_NS have passed since start. */
static __attribute__((noinline)) uint64_t event_clock_slow(uint64_t t)
{
    uint64_t ns = vt_now_ns();
    event_clock_t *c = &rec.clock;
    if (!atomic_load_explicit(&c->tsc_mult, memory_order_relaxed) && ns - c->tsc_base_ns >= CALIBRATE_NS &&
        t > c->tsc_base) {
        /* 128 bits: the first event may come hours after start */
        uint64_t mult = (uint64_t)(((unsigned __int128)(ns - c->tsc_base_ns) << 32) / (t - c->tsc_base));
        if (mult) {
            atomic_store_explicit(&c->tsc_window, (ANCHOR_NS << 32) / mult, memory_order_relaxed);
            atomic_store_explicit(&c->tsc_mult, mult, memory_order_release);
        }
    }
    anchor.tsc = t;
    anchor.ns = ns;
    if (ns < anchor.last)
        ns = anchor.last;
    anchor.last = ns;
    return ns;
}

static inline uint64_t event_now_ns(void)
{
    if (!rec.clock.tsc_base)
        return vt_now_ns();
    uint64_t t = __rdtsc(), d = t - anchor.tsc;
    uint64_t mult = atomic_load_explicit(&rec.clock.tsc_mult, memory_order_acquire);
    if (mult && d < atomic_load_explicit(&rec.clock.tsc_window, memory_order_relaxed)) {
        uint64_t ns = anchor.ns + ((d * mult) >> 32);
        if (ns < anchor.last)
            ns = anchor.last;
        anchor.last = ns;
        return ns;
    }
    return event_clock_slow(t);
}
#else
static void event_clock_init(void)
{
}

static inline uint64_t event_now_ns(void)
{
    return vt_now_ns();
}
#endif

/* ---- start-up, on the first intercepted call ---- */

/* How long fork waits for another thread's start-up to end: it takes
 * milliseconds (the writer thread, the trace file). Past this the fork goes
 * ahead and the child passes its calls through (atfork_child). */
#define START_WAIT_MS 2000

/* Start-up and fork exclude each other: start-up runs holding start_lock,
 * and fork's prepare handler takes it (at most START_WAIT_MS) until the
 * fork is over, so the child inherits a shim started or not, never half of
 * one. Waiting while the state said STARTING left a window: a fork whose
 * prepare handler found the state IDLE went on while another thread began
 * start-up, and its child found it half done (about 1 run in 40 of
 * 74-fault-forkstart under load). Not on the starting thread itself (a
 * signal handler's fork: its guard is up), which would wait for itself. */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int fork_holds_start __attribute__((tls_model("initial-exec")));

static void take_start_lock_for_fork(void)
{
    fork_holds_start = 0;
    if (vt_tls.guard)
        return;
    struct timespec deadline = vt_deadline_in(CLOCK_REALTIME, START_WAIT_MS); /* timedlock's clock */
    fork_holds_start = pthread_mutex_timedlock(&start_lock, &deadline) == 0;
}

/* The forking thread's cancel state, put back after the fork. Its waits
 * here (a start-up in progress, the writer) are not cancellable: a thread
 * cancelled in one left the fork half prepared, and the prepare handlers
 * glibc had run before ours (those registered after ours) kept the locks
 * they take for the fork: every later fork waited for ever
 * (74-fault-cancel). */
static __thread int fork_cancel_state __attribute__((tls_model("initial-exec")));

/* The writer first: it walks the modules only inside a drain, so once it
 * is between drains the loader lock waits for the program's threads alone. */
static void atfork_prepare(void)
{
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &fork_cancel_state);
    take_start_lock_for_fork();
    /* In a process made without the fork handlers the parent's writer
     * does not exist, and its locks may be held for good: nothing to wait
     * out. */
    int walks = atomic_load(&vt_state) == VT_ST_ACTIVE && !vt_loader_inherited();
    if (walks)
        vt_writer_atfork_prepare();
    vt_loader_atfork_prepare(walks);
}

static void atfork_parent(void)
{
    vt_loader_atfork_parent();
    vt_writer_atfork_parent();
    if (fork_holds_start)
        pthread_mutex_unlock(&start_lock);
    pthread_setcancelstate(fork_cancel_state, NULL);
}

/* The child's trace starts from nothing of the parent's: its samples read
 * only the pools it meets and take its own peaks (the parent's pool in the
 * child's samples, and a child's first peak held back under the parent's,
 * were both seen). */
static void record_atfork_child(void)
{
    /* What survives:
     *  - the clock: the child reads the same TSC and CLOCK_MONOTONIC, so
     *    the base and the rate measured against them still hold;
     *  - devices_known: device facts describe the machine, not the process;
     *    the child's writer names the devices again (vt_devices, below).
     * The api facts and the sample interval are reset with the rest: the
     * child's start fills them again before any call reads them. Copied
     * through locals, not a second record_state_t: fork may come on a
     * small stack. */
    event_clock_t clock = rec.clock;
    uint64_t devices_known = atomic_load(&rec.devices_known);
    rec = rec_initial;
    rec.clock = clock;
    atomic_store(&rec.devices_known, devices_known);
    /* A device whose facts a parent's thread was taking (state 1) is taken
     * again: that thread does not exist here to finish. */
    for (int i = 0; i < VT_MAX_DEVICES; i++) {
        int st = atomic_load(&vt_devices[i].state);
        if (st == 1)
            atomic_store(&vt_devices[i].state, 0);
        else if (st == 3)
            atomic_store(&vt_devices[i].state, 2);
    }
}

/* Set in a child forked while its parent's start-up outlasted
 * START_WAIT_MS, until its first CUDA call says it is not traced (then 2).
 * Not in rec: it outlives the start-up that rec belongs to, and a child of
 * such a child is told to say so too. */
static _Atomic int fork_unstarted;

/* Off the hot path: only a call that finds the shim OFF comes here. Said
 * at the first CUDA call, not at fork, so a child that never calls CUDA
 * (a fork+exec helper) writes nothing. */
static __attribute__((noinline, cold)) void say_fork_unstarted(void)
{
    static _Atomic int warned;
    int one = 1;
    if (atomic_compare_exchange_strong(&fork_unstarted, &one, 2))
        vt_warn_once(&warned,
                     "pid %d is not traced: forked while another thread of its parent was starting the shim, "
                     "which had not finished after %d ms; its CUDA calls pass through",
                     (int)getpid(), START_WAIT_MS);
}

static void atfork_child(void)
{
    pthread_setcancelstate(fork_cancel_state, NULL);
    /* Held by this thread's parent copy, or by a thread the child does not
     * have: fresh either way. */
    pthread_mutex_init(&start_lock, NULL);
    vt_tls.tid = 0;
    int own_loader = vt_loader_atfork_child();
    int st = atomic_load(&vt_state);
    if (!own_loader) {
        /* Forked from a process made without the fork handlers: the
         * loader's lock may be held here as there, so this one passes its
         * calls through as that one does (forked_without_handlers). */
        atomic_store(&vt_state, VT_ST_OFF);
        return;
    }
    if (st == VT_ST_OFF && atomic_load(&fork_unstarted))
        atomic_store(&fork_unstarted, 1);
    if (st == VT_ST_OFF || st == VT_ST_IDLE)
        return;
    if (st == VT_ST_STARTING) {
        /* Another thread of the parent was starting the shim and did not
         * finish within START_WAIT_MS: what it had set up is half done and
         * its thread is not here to finish. The child passes its calls
         * through and says so at the first (say_fork_unstarted). It does
         * not start afresh: a start-up that slow waits for something, such
         * as the loader's write lock a module walk holds, which the child
         * inherits held and glibc does not reset, so a start of its own
         * could wait for ever (tests/t/74-fault-forkslow.t). */
        atomic_store(&fork_unstarted, 1);
        atomic_store(&vt_state, VT_ST_OFF);
        return;
    }
    /* The parent's writer thread and file do not exist here; the child
     * traces itself from its own first CUDA call on. */
    vt_writer_atfork_child();
    vt_stacks_atfork_child();
    record_atfork_child();
    vt_live_atfork_child();
    vt_ring_atfork_child();
    atomic_store(&vt_state, VT_ST_IDLE);
}

/* At exit the trace is finished from the shim's ELF destructor, not an
 * atexit handler: _dl_fini, which runs destructors, is the first exit
 * handler registered (by ld.so), so it runs after every atexit handler and
 * static destructor of the program, even those registered before its first
 * CUDA call, whose frees are then traced too. */
static void end_trace_once(enum vt_end_how how, const char *note, unsigned bound_ms);

static __attribute__((destructor)) void shim_exit(void)
{
    if (atomic_load(&vt_state) == VT_ST_ACTIVE)
        end_trace_once(VT_END_EXIT, NULL, 0);
}

/* How long an exec or _exit waits for the writer's last chunk before it
 * ends the trace itself. Either may come from a signal handler that
 * interrupted the program in malloc, whose lock the writer's last chunk
 * may need; but the last chunk names every frame not yet named, which
 * takes a large process (PyTorch's libraries) a good part of a second,
 * and a trace ended without it has frames without names. */
#define IMAGE_END_WAIT_MS 5000

static void end_trace_once(enum vt_end_how how, const char *note, unsigned bound_ms)
{
    if (atomic_exchange(&rec.trace_ending, 1))
        return;
    vt_tls.guard++;
    vt_writer_stop(how, note, bound_ms);
    vt_tls.guard--;
}

void vt_record_image_ends(enum vt_end_how how, const char *note)
{
    /* Inside the shim (a signal handler's exec) this thread may hold what
     * stopping needs; a vfork child reads only, and returns here. */
    if (vt_tls.guard || atomic_load(&vt_state) != VT_ST_ACTIVE || !vt_writer_ours())
        return;
    atomic_store(&rec.image_end_how, how);
    atomic_store(&rec.image_end_pid, getpid());
    end_trace_once(how, note, IMAGE_END_WAIT_MS);
}

/* The words of an image end the process outlived (a failed exec, an abort
 * a SIGABRT handler jumped out of), said at the process's next CUDA call
 * (not at the exec: a program that searches PATH itself, as Python's
 * os.execvp does, fails several before one replaces it, and makes no call
 * between). Written once, before the flag that publishes it. */
static char goes_on_note[300];
static _Atomic int goes_on_said;

void vt_record_image_goes_on(const char *note)
{
    pid_t ended = atomic_load(&rec.image_end_pid);
    if (!ended || vt_tls.guard || getpid() != ended)
        return;
    /* The other threads' calls now pass through at once: they would wait
     * for an end that is not coming. */
    vt_ring_park_end();
    int never = 0;
    if (atomic_load(&goes_on_said) == 0 && note) {
        snprintf(goes_on_note, sizeof goes_on_note, "%s", note);
        atomic_compare_exchange_strong(&goes_on_said, &never, 1);
    }
}

static __attribute__((noinline, cold)) void say_goes_on(void)
{
    int pending = 1;
    if (atomic_compare_exchange_strong(&goes_on_said, &pending, 2)) {
        static _Atomic int warned;
        vt_warn_once(&warned,
                     "%s; the trace ended before it, so this process's CUDA calls from here on are not traced",
                     goes_on_note);
    }
}

/* A call after the trace ended. It waits for the process to end
 * (vt_ring_park: at once on the thread that ended the trace, else at
 * most 1 s); a process still here after an abort had a SIGABRT handler
 * jump out of it and goes on, as after a failed exec. */
static __attribute__((noinline, cold)) void call_after_end(void)
{
    if (atomic_load_explicit(&goes_on_said, memory_order_relaxed) == 1)
        say_goes_on();
    vt_ring_park();
    if (atomic_load(&rec.image_end_how) == VT_END_ABORT && !atomic_load(&goes_on_said)) {
        vt_record_image_goes_on("abort() returned to the program (a SIGABRT handler jumped out of it)");
        say_goes_on();
    }
}

static void init_api_flags(void);

/* Closed standard fds are held on /dev/null while the shim starts: what it
 * opens then must never become the program's stdin, stdout or stderr (the
 * program read its own stdout back). Returns the fds held. */
static unsigned hold_std_fds(void)
{
    unsigned held = 0;
    for (int i = 0; i < 3; i++) {
        if (fcntl(i, F_GETFD) >= 0 || errno != EBADF)
            continue;
        int f = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (f == i)
            held |= 1u << i;
        else if (f >= 0)
            close(f);
    }
    return held;
}

static void release_std_fds(unsigned held)
{
    for (int i = 0; i < 3; i++)
        if (held >> i & 1)
            close(i);
}

static int start_held(void);

static int start(void)
{
    vt_say_start();
    unsigned held = hold_std_fds();
    int rc = start_held();
    release_std_fds(held);
    return rc;
}

static int start_held(void)
{
    vt_options_load();
    init_api_flags();
    rec.sample_interval_ns = vt_opt.sample_ms > 0 ? (uint64_t)vt_opt.sample_ms * 1000000ull : 0;
    if (vt_opt.disable)
        return -1;
    if (vt_shim_shadowed()) {
        vt_disable("another copy of the shim, loaded first, records this process");
        return -1;
    }
    event_clock_init();
    if (vt_ring_init() != 0) {
        vt_disable("cannot map the event buffer");
        return -1;
    }
    if (vt_stacks_init() != 0 || vt_live_init() != 0) {
        vt_disable("cannot map the stack tables");
        return -1;
    }
    if (vt_writer_start() != 0)
        return -1; /* the writer said why */
    vt_loader_arm();
    return 0;
}

static void register_fork_handlers(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* A child made without the fork handlers (_Fork(), a raw clone) may have
 * been made while another thread of the parent held a lock the shim takes
 * (the loader's, in a module walk: its first stack waited for ever), and
 * it has no writer thread: it traces nothing, and says nothing, since its
 * output must stay the program's. */
static __attribute__((noinline, cold)) int forked_without_handlers(void)
{
    atomic_store(&vt_state, VT_ST_OFF);
    return 0;
}

/* The first call, or one racing it: out of line so that the wrappers'
 * common path does not carry start-up's registers. */
static __attribute__((noinline, cold)) int start_once(int st)
{
    if (st == VT_ST_OFF) {
        if (atomic_load_explicit(&fork_unstarted, memory_order_relaxed) == 1)
            say_fork_unstarted();
        return 0;
    }
    if (st == VT_ST_ENDED) {
        /* The trace is finished (exit, abort, or an exec that failed): no
         * trace can count this call. */
        call_after_end();
        return 0;
    }
    /* Made without the fork handlers from a process that had not started
     * the shim (a child of a traced parent, before its first call). */
    if (vt_loader_inherited())
        return forked_without_handlers();
    /* The fork handlers come first, before the state leaves IDLE: a fork
     * on another thread at any instant of start-up runs them (a child
     * forked before they were registered found STARTING and waited for
     * ever). pthread_once: every thread that gets past it finds them
     * registered, and a child inherits them. */
    static pthread_once_t fork_handlers = PTHREAD_ONCE_INIT;
    pthread_once(&fork_handlers, register_fork_handlers);
    /* The guard goes up before the state says STARTING: a signal handler
     * that calls CUDA on this thread then passes through, counted as
     * dropped, instead of waiting for a start-up it interrupted. */
    vt_tls.guard++;
    /* Not while a fork is under way (take_start_lock_for_fork); after it,
     * the state is looked at again. */
    pthread_mutex_lock(&start_lock);
    int idle = VT_ST_IDLE;
    if (atomic_compare_exchange_strong(&vt_state, &idle, VT_ST_STARTING)) {
        /* Not cancellable: a thread cancelled in start-up's waits went
         * with the writer's lock held and the state STARTING, and every
         * other thread's next call waited for ever (74-fault-cancel). */
        int cancel_state;
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
        int ok = start() == 0;
        /* Every failure is for good (VRAMTRACE_DISABLE, or vt_disable). The
         * state is set before the guard comes down, for the same reason. */
        atomic_store(&vt_state, ok ? VT_ST_ACTIVE : VT_ST_OFF);
        pthread_mutex_unlock(&start_lock);
        pthread_setcancelstate(cancel_state, NULL);
        vt_tls.guard--;
        return ok;
    }
    pthread_mutex_unlock(&start_lock);
    vt_tls.guard--;
    /* Another thread is starting the shim: it takes microseconds. */
    while ((st = atomic_load(&vt_state)) == VT_ST_STARTING)
        sched_yield();
    return st == VT_ST_ACTIVE;
}

/* Returns 1 when the shim records, 0 when calls must pass through. */
static inline int ensure_started(void)
{
    int st = atomic_load_explicit(&vt_state, memory_order_acquire);
    if (st != VT_ST_ACTIVE)
        return start_once(st);
    if (__builtin_expect(vt_loader_inherited(), 0))
        return forked_without_handlers();
    return 1;
}

/* ---- per-call recording ---- */

static uint32_t current_tid(void)
{
    if (!vt_tls.tid)
        vt_tls.tid = (uint32_t)syscall(SYS_gettid);
    return vt_tls.tid;
}

static int is_release(unsigned kind)
{
    return kind == VT_KIND_FREE || kind == VT_KIND_VMM_RELEASE || kind == VT_KIND_VMM_UNMAP ||
           kind == VT_KIND_VA_FREE || kind == VT_KIND_UNREGISTER || kind == VT_KIND_POOL_DESTROY;
}

/* Device facts once per device, taken while a context is current. */
static __attribute__((noinline)) void capture_device(int device, uint64_t give_back)
{
    if (device < 0 || device >= VT_MAX_DEVICES)
        return;
    vt_device_slot_t *d = &vt_devices[device];
    int unseen = 0;
    if (atomic_load_explicit(&d->state, memory_order_relaxed) != 0 ||
        !atomic_compare_exchange_strong(&d->state, &unseen, 1))
        return;
    int relaxed = vt_driver_relax();
    int failed = vt_driver_device_facts(device, d) != 0;
    vt_driver_unrelax(relaxed);
    if (failed) {
        atomic_store(&d->state, 0);
        return;
    }
    /* When the first thing we saw was an allocation that created the
     * context, free memory is measured after it: add it back so the reserve
     * is the context's alone. */
    d->free_at_first += give_back;
    d->time_ns = vt_now_ns();
    atomic_store_explicit(&d->state, 2, memory_order_release);
    atomic_fetch_or_explicit(&rec.devices_known, 1ull << device, memory_order_relaxed);
}

static inline int device_known(int device)
{
    return (unsigned)device < VT_MAX_DEVICES &&
           (atomic_load_explicit(&rec.devices_known, memory_order_relaxed) >> device & 1);
}

/* Pools the program allocates from, so each sample can say what they hold
 * beyond what is allocated (pool slack). Slots are claimed with a CAS and
 * never freed (a destroyed pool's queries just fail): a fixed table, no
 * lock, no allocation. Programs use a handful of pools; past VT_MAX_POOLS
 * the rest go unsampled. */
/* A slot holds the handle in its low 48 bits and device + 1 above, so one
 * CAS publishes both: two threads first meeting two pools cannot pair one's
 * handle with the other's device. Handles are driver pointers (user space,
 * below 2^47); one that is not is left unsampled. */
#define POOL_HANDLE_MASK ((1ull << 48) - 1)

static void note_pool(uint64_t pool, int device)
{
    if (!pool || (pool & ~POOL_HANDLE_MASK) || device < -1 || device >= VT_MAX_DEVICES)
        return;
    uint64_t entry = pool | (uint64_t)(device + 1) << 48;
    for (int i = 0; i < VT_MAX_POOLS; i++) {
        uint64_t seen = atomic_load_explicit(&rec.pools[i], memory_order_acquire);
        if (!seen && atomic_compare_exchange_strong(&rec.pools[i], &seen, entry))
            return;
        if ((seen & POOL_HANDLE_MASK) == pool)
            return;
    }
}

static int is_current_pool_alloc(unsigned api)
{
    return api == VT_API_cuMemAllocAsync || api == VT_API_cuMemAllocAsync_ptsz ||
           api == VT_API_cudaMallocAsync || api == VT_API_cudaMallocAsync_ptsz;
}

/* Called for successful events only. The device's current pool is asked for
 * once per device, at its first stream-ordered allocation, not per call. */
static void track_pools(const vt_event_t *ev, unsigned kind)
{
    if (kind == VT_KIND_POOL_CREATE) {
        note_pool(ev->ptr, ev->device);
    } else if (kind == VT_KIND_ALLOC && vt_api_allocates_from_pool(ev->api)) {
        note_pool(ev->aux, ev->device);
    } else if (kind == VT_KIND_ALLOC && is_current_pool_alloc(ev->api) && ev->device >= 0 &&
               ev->device < VT_MAX_DEVICES &&
               !atomic_load_explicit(&rec.current_pool_seen[ev->device], memory_order_relaxed) &&
               !atomic_exchange(&rec.current_pool_seen[ev->device], 1)) {
        uint64_t pool;
        int relaxed = vt_driver_relax();
        int got = vt_driver_device_pool(ev->device, &pool) == 0;
        vt_driver_unrelax(relaxed);
        if (got)
            note_pool(pool, ev->device);
    }
}

/* One event the shim writes itself; 0 on success. counted: a full buffer
 * counts it as dropped, as it stands for something the program did (a
 * teardown's mark); otherwise it is the shim's own (flag VT_EF_SAMPLE) and
 * a full buffer loses nothing of the program's. */
static int push_event_at(int counted, uint64_t time_ns, unsigned api, int device, uint64_t ptr, uint64_t size,
                         uint64_t aux, uint32_t flags, uint32_t tid, uint32_t stack)
{
    vt_ring_slot_t *slot = counted ? vt_ring_claim() : vt_ring_claim_uncounted();
    if (!slot)
        return -1;
    vt_event_t *ev = &slot->ev;
    memset(ev, 0, sizeof *ev);
    ev->time_ns = time_ns;
    ev->api = (uint16_t)api;
    ev->device = (int16_t)device;
    ev->ptr = ptr;
    ev->size = size;
    ev->aux = aux;
    ev->flags = flags;
    ev->tid = tid;
    ev->stack = stack;
    vt_ring_publish(slot);
    return 0;
}

static int push_shim_event_at(uint64_t time_ns, unsigned api, int device, uint64_t ptr, uint64_t size, uint64_t aux,
                              uint32_t flags, uint32_t tid, uint32_t stack)
{
    return push_event_at(0, time_ns, api, device, ptr, size, aux, flags, tid, stack);
}

static int push_shim_event(unsigned api, int device, uint64_t ptr, uint64_t size, uint64_t aux, uint32_t flags,
                           uint32_t tid, uint32_t stack)
{
    return push_shim_event_at(vt_now_ns(), api, device, ptr, size, aux, flags, tid, stack);
}

/* The device's graph pool, once the process has used graphs: the memory
 * its launches took, which no allocation event holds. */
static int push_graph_pool_sample(int device, uint32_t flags, uint32_t tid, uint32_t stack)
{
    uint64_t reserved, used;
    if (!atomic_load_explicit(&vt_graphs_seen, memory_order_relaxed) ||
        vt_driver_graph_pool_usage(device, &reserved, &used) != 0)
        return 0;
    if (push_shim_event(VT_API_cuDeviceGetGraphMemAttribute, device, 0, reserved, VT_GRAPH_ATTR_RESERVED_CURRENT,
                        flags, tid, stack))
        return -1;
    return push_shim_event(VT_API_cuDeviceGetGraphMemAttribute, device, 0, used, VT_GRAPH_ATTR_USED_CURRENT, flags,
                           tid, stack);
}

/* The graph pool of the sampled device, then every stream-ordered pool
 * seen, each on its own device. */
static void push_pool_samples(int sampled, uint32_t flags, uint32_t tid, uint32_t stack)
{
    if (push_graph_pool_sample(sampled, flags, tid, stack))
        return;
    for (int i = 0; i < VT_MAX_POOLS; i++) {
        uint64_t entry = atomic_load_explicit(&rec.pools[i], memory_order_acquire), reserved, used;
        if (!entry)
            break;
        uint64_t pool = entry & POOL_HANDLE_MASK;
        int device = (int)(entry >> 48) - 1;
        if (vt_driver_pool_usage(pool, &reserved, &used) != 0)
            continue;
        if (push_shim_event(VT_API_cuMemPoolGetAttribute, device, pool, reserved, VT_POOL_ATTR_RESERVED_CURRENT,
                            flags, tid, stack) ||
            push_shim_event(VT_API_cuMemPoolGetAttribute, device, pool, used, VT_POOL_ATTR_USED_CURRENT, flags,
                            tid, stack))
            return;
    }
}

static void push_sample(int device, uint32_t why, uint32_t stack)
{
    /* A cold path a running program keeps taking: where what the writer
     * thread had to say (a write that failed) reaches stderr. */
    vt_say_pending();
    uint64_t free_b, total_b;
    int relaxed = vt_driver_relax();
    /* cuMemGetInfo answers for the current device: an allocation placed on
     * another one (a stream or pool of that device) gets no sample rather
     * than the current device's free memory under its name. */
    if (vt_driver_current_device() == device && vt_driver_meminfo(&free_b, &total_b) == 0) {
        uint32_t tid = current_tid();
        if (push_shim_event(VT_API_cuMemGetInfo_v2, device, 0, free_b, total_b, VT_EF_SAMPLE | why, tid, stack) == 0)
            push_pool_samples(device, VT_EF_SAMPLE | why, tid, stack);
    }
    vt_driver_unrelax(relaxed);
}

/* What the hot path asks of an api's kind and space, answered once at
 * start (api_hot) so each call tests one bit, not a chain of compares. */
enum {
    HOT_ASK_DEVICE = 1,     /* ask the driver for the current device before the call */
    HOT_RELEASE = 2,        /* claims its ring slot before the call (is_release) */
    HOT_DEVICE_RELEASE = 4, /* frees device memory the live map knows */
    HOT_DEVICE_SPACE = 8,   /* device or managed memory: the event names a device */
    HOT_TRACK_BYTES = 16,   /* moves the device's tracked bytes (track_device_bytes) */
    HOT_POOLS = 32,         /* may name a pool to sample (track_pools) */
};

static int is_device_release_kind(unsigned kind)
{
    return kind == VT_KIND_FREE || kind == VT_KIND_VMM_RELEASE;
}

static void init_api_flags(void)
{
    for (unsigned i = 0; i < VT_API_COUNT; i++) {
        const vt_api_info_t *info = vt_api_info(i);
        rec.api_flags[i] = (info->runtime ? VT_EF_RUNTIME : 0) | (strstr(info->name, "_ptsz") ? VT_EF_PTSZ : 0);
        unsigned kind = info->kind, space = info->space, hot = 0;
        int device_space = space == VT_SPACE_DEVICE || space == VT_SPACE_MANAGED;
        if (device_space && !is_device_release_kind(kind))
            hot |= HOT_ASK_DEVICE;
        if (is_release(kind))
            hot |= HOT_RELEASE;
        if (space == VT_SPACE_DEVICE && is_device_release_kind(kind))
            hot |= HOT_DEVICE_RELEASE;
        if (device_space)
            hot |= HOT_DEVICE_SPACE;
        if (space == VT_SPACE_DEVICE && kind != VT_KIND_POOL_CREATE && kind != VT_KIND_POOL_DESTROY &&
            kind != VT_KIND_POOL_TRIM && kind != VT_KIND_POOL_USAGE)
            hot |= HOT_TRACK_BYTES;
        if (kind == VT_KIND_POOL_CREATE ||
            (kind == VT_KIND_ALLOC && (vt_api_allocates_from_pool(i) || is_current_pool_alloc(i))))
            hot |= HOT_POOLS;
        rec.api_hot[i] = (uint8_t)hot;
    }
}

int vt_start_for_model(void)
{
    if (vt_tls.guard || atomic_load(&vt_state) == VT_ST_ENDED)
        return 0;
    return ensure_started();
}

int vt_call_begin(vt_call_t *call, unsigned api, int linked)
{
    const vt_api_info_t *info = vt_api_info(api);
    call->recording = 0;
    if (vt_tls.guard) {
        /* Only a signal handler enters a wrapper while its thread is in
         * the shim: the shim calls the real functions, never the wrappers.
         * Recording here could wait on a lock the interrupted code holds
         * (the stack tree's insert lock), so the call goes through
         * unrecorded and is counted as dropped: the report must not say
         * nothing was lost. From the first instant of start-up on: a
         * handler landing in this thread's start-up is counted too. */
        if (info && atomic_load_explicit(&vt_state, memory_order_relaxed) != VT_ST_OFF)
            vt_ring_count_drop();
        return 0;
    }
    if (!info)
        return 0;
    /* Folded into the enclosing cuda* call's event: the runtime reaches
     * the driver through slot wrappers only (vt_hand_out), so a linked
     * call here is a signal handler's own, interrupting the runtime's
     * body, and is recorded (tests/t/78-fault-sigalloc.t). */
    if (vt_tls.runtime_depth && !info->runtime && !linked)
        return 0;
    if (!ensure_started())
        return 0;
    vt_tls.guard++;
    memset(&call->ev, 0, sizeof call->ev);
    call->ev.api = (uint16_t)api;
    call->ev.device = -1;
    call->ev.flags = rec.api_flags[api];
    call->kind = info->kind;
    call->space = info->space;
    call->runtime = info->runtime;
    call->hot = rec.api_hot[api];
    call->slot = NULL;
    /* A release names its device through the live map in vt_call_end: the
     * pointer's own device, and one driver query per pair instead of two
     * (a quarter of the shim's cost at depth 0). */
    if (call->hot & HOT_ASK_DEVICE) {
        int dev = vt_driver_current_device();
        if (dev >= 0) {
            if (!device_known(dev))
                capture_device(dev, 0);
            /* Kept for vt_call_end: one driver query per event, not two. A
             * call that creates the context still finds -1 and asks again. */
            call->ev.device = (int16_t)dev;
        }
    }
    if (call->hot & HOT_RELEASE) {
        call->slot = vt_ring_claim_held(&call->slot_pos);
        if (!call->slot && !call->runtime) {
            vt_tls.guard--;
            return 0;
        }
    }
    /* A runtime release whose slot was dropped (counted once, by the ring)
     * still folds the driver calls under it, or they would be recorded or
     * dropped a second time. */
    call->recording = call->slot || !(call->hot & HOT_RELEASE) ? 1 : 2;
    if (call->runtime)
        vt_tls.runtime_depth++;
    vt_tls.guard--;
    return 1;
}

/* A failed device request is often the process's last act: a loader that
 * gives up and exits through a raw exit_group (Go's os.Exit, as ollama's
 * runner does), a supervisor's SIGKILL after the error reached it, a crash.
 * Each lost the last flush interval, the failure with it, and the report
 * said NO GPU MEMORY USED or NO SPILL (tests/t/74-fault-abort.t). So the
 * failure and its sample are written before the call returns: the writer
 * drains at once, waited for at most FAILURE_SYNC_MS (it may need a lock
 * this thread holds: the loader's, in a constructor). A program that
 * fails request after request (a probe searching for the largest size
 * that fits) waits once per FAILURE_SYNC_GAP_MS after the last wait ended,
 * once a second after one that ran out; the failures between only wake
 * the writer. */
#define FAILURE_SYNC_MS 100
#define FAILURE_SYNC_GAP_MS 100
#define FAILURE_SYNC_STUCK_GAP_MS 1000
#define FAILURE_SYNC_BUSY UINT64_MAX

static void failure_on_disk(uint64_t now)
{
    uint64_t next = atomic_load_explicit(&rec.next_failure_sync_ns, memory_order_relaxed);
    if (now < next || !atomic_compare_exchange_strong(&rec.next_failure_sync_ns, &next, FAILURE_SYNC_BUSY)) {
        vt_writer_wake();
        return;
    }
    int rc = vt_writer_sync(FAILURE_SYNC_MS);
    uint64_t gap_ms = rc == 0 ? FAILURE_SYNC_GAP_MS : FAILURE_SYNC_STUCK_GAP_MS;
    atomic_store(&rec.next_failure_sync_ns, vt_now_ns() + gap_ms * 1000000ull);
}

/* released_dev: for a device release, the device vt_call_end found the
 * pointer on (it takes it out of the live map before the stack). */
static void track_device_bytes(vt_call_t *call, uint32_t result, int released_dev)
{
    vt_event_t *ev = &call->ev;
    int64_t total = -1;
    int dev = ev->device;
    if (result == 0 && (call->kind == VT_KIND_ALLOC || call->kind == VT_KIND_VMM_CREATE) &&
        call->space == VT_SPACE_DEVICE && !(ev->flags & VT_EF_CAPTURED))
        total = vt_live_add(ev->ptr, ev->reserved ? ev->reserved : ev->size, dev, call->kind == VT_KIND_VMM_CREATE);
    else if (call->kind == VT_KIND_FREE || call->kind == VT_KIND_VMM_RELEASE)
        dev = released_dev;
    if (dev < 0 || dev >= VT_MAX_DEVICES)
        return;

    uint32_t why = 0;
    uint64_t now = ev->time_ns;
    if (result != 0 && call->kind != VT_KIND_MEMINFO) {
        why = VT_EF_AFTER_FAILURE;
    } else if (total >= 0) {
        /* A new peak at least a granule above the last peak sample: every
         * 2 MiB step of a model load, not every small allocation. */
        int64_t seen = atomic_load_explicit(&rec.peak_sampled[dev], memory_order_relaxed);
        if (total >= seen + (2 << 20) &&
            atomic_compare_exchange_strong(&rec.peak_sampled[dev], &seen, total))
            why = VT_EF_AT_PEAK;
    }
    if (!why && rec.sample_interval_ns && call->kind != VT_KIND_MEMINFO) {
        uint64_t last = atomic_load_explicit(&rec.last_sample_ns, memory_order_relaxed);
        if (now - last >= rec.sample_interval_ns &&
            atomic_compare_exchange_strong(&rec.last_sample_ns, &last, now))
            why = VT_EF_SAMPLE;
    }
    if (why) {
        atomic_store_explicit(&rec.last_sample_ns, now, memory_order_relaxed);
        push_sample(dev, why & ~(uint32_t)VT_EF_SAMPLE, ev->stack);
        if (why == VT_EF_AFTER_FAILURE)
            failure_on_disk(now);
    }
}

static int driver_still_knows(uint64_t ptr)
{
    return vt_driver_pointer_device(ptr) >= 0;
}

typedef struct teardown_mark {
    const vt_event_t *teardown;
    uint64_t time_ns;
    uint32_t tid;
    int waited; /* the buffer was full once: the writer was asked to empty it */
} teardown_mark_t;

/* How long a teardown waits for the writer to empty a full event buffer:
 * a mark lost would have the reader count a live allocation of another
 * context as freed with this one, and a teardown is rare and slow itself
 * (cudaDeviceReset takes milliseconds). */
#define TEARDOWN_SYNC_MS 1000

/* A mark that finds the buffer full waits for the writer once, then is
 * tried again, counted as dropped if it still finds no room: the report
 * then says events were lost rather than a wrong live figure alone
 * (76-fault-driver, teardown-many: 3,098 of 4,096 marks had gone, and the
 * teardown's own event). */
static void mark_other_context(uint64_t ptr, void *arg)
{
    teardown_mark_t *m = arg;
    uint32_t flags = VT_EF_SAMPLE | VT_EF_OTHER_CONTEXT;
    if (push_event_at(0, m->time_ns, m->teardown->api, m->teardown->device, ptr, 0, 0, flags, m->tid, 0) == 0)
        return;
    m->waited = 1;
    vt_writer_sync(TEARDOWN_SYNC_MS);
    push_event_at(1, m->time_ns, m->teardown->api, m->teardown->device, ptr, 0, 0, flags, m->tid, 0);
}

/* A context teardown that succeeded freed what its context made, and only
 * that: the trace does not say which context made an allocation, so the
 * driver is asked now which of the device's live pointers it still knows.
 * Those belong to another context (a cuCtxCreate'd one beside the primary)
 * and are written just before the teardown's event, flagged
 * VT_EF_OTHER_CONTEXT, for the reader to keep; the others leave the live
 * map. cuCtxDestroy names a context, not a device: when every pointer it
 * freed was on one device, that is the event's device (the current one
 * may be another). Off the hot path: the CTX_RESET entry points' describe
 * helpers call it (hooks.c), between the real call and vt_call_end. */
void vt_call_teardown(vt_event_t *ev, uint32_t result)
{
    if (result != 0)
        return;
    vt_tls.guard++;
    uint64_t freed[VT_MAX_DEVICES];
    int relaxed = vt_driver_relax();
    vt_live_teardown(driver_still_knows, freed);
    vt_driver_unrelax(relaxed);
    int only = -1;
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        if (freed[d])
            only = only == -1 ? d : -2;
    if (only >= 0)
        ev->device = (int16_t)only;
    teardown_mark_t mark = { ev, vt_now_ns(), current_tid(), 0 };
    if (ev->device >= 0)
        vt_live_each_pointer(ev->device, mark_other_context, &mark);
    /* Room for the teardown's own event, claimed next (vt_call_end). */
    if (mark.waited)
        vt_writer_sync(TEARDOWN_SYNC_MS);
    vt_tls.guard--;
}

/* noinline keeps the frame layout fixed: the stack skips exactly this
 * function and the wrapper. */
__attribute__((noinline)) void vt_call_end(vt_call_t *call, uint32_t result)
{
    if (!call->recording)
        return;
    if (call->recording == 2) { /* folding only: the event was dropped */
        vt_tls.runtime_depth--;
        return;
    }
    vt_tls.guard++;
    if (call->runtime)
        vt_tls.runtime_depth--;
    vt_event_t *ev = &call->ev;
    ev->result = result;
    ev->time_ns = event_now_ns();
    ev->tid = current_tid();
    /* A successful free of an allocation we saw needs no stack: the analyzer
     * charges it to the allocation's site, and the unwind is half of a
     * pair's cost. Frees of unknown pointers (double frees, allocations made
     * before tracing) and failed frees keep theirs. */
    int released_dev = -1, known = 0;
    /* A free captured into a graph frees nothing yet: what it names stays
     * live (trace_format.h, VT_EF_CAPTURED); so does the shim's count. */
    if ((call->hot & HOT_DEVICE_RELEASE) && !(ev->flags & VT_EF_CAPTURED)) {
        known = vt_live_remove(ev->ptr, &released_dev) >= 0;
        if (known && ev->device == -1)
            ev->device = (int16_t)released_dev;
    }
    if (ev->device == -1 && (call->hot & HOT_DEVICE_SPACE))
        ev->device = (int16_t)vt_driver_current_device();
    if (!known)
        released_dev = ev->device;
    if (ev->device >= 0 && !device_known(ev->device))
        capture_device(ev->device,
                       result == 0 && call->kind == VT_KIND_ALLOC && call->space == VT_SPACE_DEVICE &&
                               !(ev->flags & VT_EF_CAPTURED)
                           ? ev->size
                           : 0);
    /* Depth 0 is tested here, not only in vt_stack_capture: the call alone
     * is a tenth of an event's cost at that depth. */
    ev->stack = (known && result == 0) || vt_opt.depth <= 0 ? 0 : vt_stack_capture(2);

    vt_ring_slot_t *slot;
    if (call->slot) {
        vt_ring_publish_held(call->slot, call->slot_pos, ev);
    } else if ((slot = vt_ring_claim())) {
        slot->ev = *ev;
        vt_ring_publish(slot);
    }
    if (result == 0 && (call->hot & HOT_POOLS))
        track_pools(ev, call->kind);
    if (call->hot & HOT_TRACK_BYTES)
        track_device_bytes(call, result, released_dev);
    vt_tls.guard--;
}
