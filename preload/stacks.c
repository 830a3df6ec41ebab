/* stacks.c: call stacks, unwound on the hot path and interned into a
 * calling-context tree (heaptrack's trace tree) so each unique stack costs
 * its new nodes once and an event carries one leaf id.
 *
 * Contract and invariants:
 *  - Node ids are dense from 1; nodes[id] never changes once id is published
 *    through node_count (release). parent < id. 0 is the root.
 *  - Lookups are lock-free: the hash table maps (parent, ip) to an id, slots
 *    go from 0 to an id exactly once, under insert_lock.
 *  - Each thread keeps a small cache of whole stacks (hash of the ips ->
 *    leaf), so a repeated allocation site skips the tree walk, and a memo
 *    of its last unwind (the words each step read), so a repeated site
 *    checks those words instead of unwinding again; the stack is the same
 *    either way.
 *  - Tables are mmap'ed once (virtual; pages are touched as nodes appear),
 *    so memory grows with unique stacks only. When full, stacks are cut at
 *    the deepest known node and the loss is counted in the trace.
 *  - libunwind is loaded with dlopen on first use, not linked: a process
 *    that never calls CUDA never loads it. Without it (a container image
 *    that lacks it), glibc's backtrace() unwinds what the cached walk
 *    cannot, or every stack where there is no cached walk (not x86-64);
 *    it is said once on stderr and in the trace (PROCESS degraded).
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <ucontext.h>
#include <unistd.h>

#include "shim.h"

#define NODE_CAP (1u << 20)
#define TABLE_BITS 21
#define TABLE_SIZE (1u << TABLE_BITS)
#define CACHE_SIZE 16

typedef struct node {
    uint64_t ip;
    uint32_t parent;
    uint32_t pad;
} node_t;


#define MEMO_SLAB 16 /* walk memos mapped at a time (memo_acquire) */

typedef int (*unw_backtrace_fn)(void **buffer, int size);
/* libunwind's step API, for stacks its backtrace cache can no longer walk
 * (libunwind_backtrace). The cursor is UNW_TDEP_CURSOR_LEN (127) words on
 * x86-64 in every release; the context is a ucontext_t there. */
typedef int (*unw_getcontext_fn)(ucontext_t *uc);
typedef int (*unw_init_local_fn)(void *cursor, ucontext_t *uc);
typedef int (*unw_step_fn)(void *cursor);
typedef int (*unw_get_reg_fn)(void *cursor, int reg, uint64_t *value);
typedef void (*unw_flush_cache_fn)(void *as, uint64_t lo, uint64_t hi);
#define UNW_CURSOR_WORDS 127
#define UNW_X86_64_RIP 16

/* Everything this file keeps process-wide, in one struct so that what fork
 * does to each field is decided in one place (vt_stacks_atfork_child): a
 * field added here is reset in a child unless that function keeps it, by
 * name. Per-thread state (the stack cache, the walk memo, the stack's
 * bounds) is thread-local, below. */
typedef struct stacks {
    /* The calling-context tree (see the contract above). */
    node_t *nodes;
    _Atomic uint32_t *table;
    _Atomic uint32_t node_count;
    _Atomic uint64_t lost;
    /* Load epoch tagged into native ips (trace_format.h, VT_REC_STACK). The
     * tree and the writer's FRAME records are keyed by ip: without it, code
     * of a library mapped where an unloaded one was would share the old
     * one's nodes and names. */
    _Atomic uint32_t ip_epoch;
    pthread_mutex_t insert_lock;

    unw_backtrace_fn unw_backtrace_ptr;
    /* Set only when all of them were found in libunwind, with its address
     * space (the flush's argument). */
    unw_getcontext_fn unw_getcontext_ptr;
    unw_init_local_fn unw_init_local_ptr;
    unw_step_fn unw_step_ptr;
    unw_get_reg_fn unw_get_reg_ptr;
    unw_flush_cache_fn unw_flush_cache_ptr;
    void *unw_as;
    /* The loader's unload count when libunwind's caches were last flushed. */
    _Atomic unsigned long long unw_flushed_subs;
    /* Stacks wanted libunwind and it could not be loaded, or (unsafe) it
     * was and its pipe could not be redirected (unwind_fds.c). */
    int libunwind_missing, libunwind_unsafe;
    _Atomic int warned_libunwind;
    /* The loader's __libc_stack_end (the stack pointer at process entry),
     * looked up at init: naming it here would make the shim need ld.so. */
    void *const *libc_stack_end;

    /* The walk memos' free list and slab (memo_acquire), under memo_lock. */
    pthread_mutex_t memo_lock;
    struct walk_memo *memo_free, *memo_slab;
    unsigned memo_slab_used;
    pthread_key_t memo_key;
    int memo_key_ok;

    /* The cached CFI rules (x86-64). Both generations are under 2^16;
     * user-space addresses on x86-64 are under 2^47. */
    struct rule_slot *rules;
    _Atomic uint64_t rules_gen;
    _Atomic unsigned long long rules_subs;

    /* VRAMTRACE_UNWIND=check: counts for the line written at exit. */
    _Atomic uint64_t check_stacks, check_fallbacks, check_mismatches;
} stacks_t;

#define STACKS_INITIAL                                                                                          \
    {                                                                                                           \
        .insert_lock = PTHREAD_MUTEX_INITIALIZER, .memo_lock = PTHREAD_MUTEX_INITIALIZER,                       \
        .memo_slab_used = MEMO_SLAB, .rules_gen = 1,                                                            \
    }
static stacks_t stacks = STACKS_INITIAL;
static const stacks_t stacks_initial = STACKS_INITIAL;

static void memo_init(void);

typedef struct cache_entry {
    uint64_t hash;
    uint32_t leaf;
} cache_entry_t;
static __thread cache_entry_t stack_cache[CACHE_SIZE] __attribute__((tls_model("initial-exec")));

/* One multiply per frame: this runs over every frame of every event. */
static uint64_t mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

#if defined(__x86_64__)
static void rules_init(void);
#endif


/* The shim's own address range, for stacks taken inside a ggml hook:
 * the hook sits between the program's frames, and the program's stack is
 * shown as it would be without the shim. */
static struct {
    uintptr_t lo, hi;
} shim_text;

static int own_extent(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t base = (uintptr_t)data;
    if (info->dlpi_addr != base)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        shim_text.lo = info->dlpi_addr + ph->p_vaddr;
        shim_text.hi = shim_text.lo + ph->p_memsz;
    }
    return 1;
}

static int drop_own_frames(uint64_t *frames, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (frames[i] < shim_text.lo || frames[i] >= shim_text.hi)
            frames[k++] = frames[i];
    return k;
}

/* The step API, kept only when every part of it is there. */
static void find_unw_step(void *h, void **as)
{
    unw_getcontext_fn getcontext_fn = (unw_getcontext_fn)vt_real_dlsym(h, "_Ux86_64_getcontext");
    unw_init_local_fn init_local = (unw_init_local_fn)vt_real_dlsym(h, "_ULx86_64_init_local");
    unw_step_fn step = (unw_step_fn)vt_real_dlsym(h, "_ULx86_64_step");
    unw_get_reg_fn get_reg = (unw_get_reg_fn)vt_real_dlsym(h, "_ULx86_64_get_reg");
    unw_flush_cache_fn flush = (unw_flush_cache_fn)vt_real_dlsym(h, "_Ux86_64_flush_cache");
    if (!getcontext_fn || !init_local || !step || !get_reg || !flush || !as || !*as)
        return;
    stacks.unw_getcontext_ptr = getcontext_fn;
    stacks.unw_init_local_ptr = init_local;
    stacks.unw_step_ptr = step;
    stacks.unw_get_reg_ptr = get_reg;
    stacks.unw_flush_cache_ptr = flush;
    stacks.unw_as = *as;
    atomic_store_explicit(&stacks.unw_flushed_subs, vt_cfi_module_subs(), memory_order_relaxed);
}

int vt_stacks_init(void)
{
    if (!shim_text.hi) {
        Dl_info info;
        if (dladdr((void *)vt_stacks_init, &info) && info.dli_fbase)
            vt_dl_iterate_phdr(own_extent, info.dli_fbase);
    }
    if (!stacks.nodes) {
        void *n = mmap(NULL, NODE_CAP * sizeof(node_t), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        void *t = mmap(NULL, TABLE_SIZE * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (n == MAP_FAILED || t == MAP_FAILED)
            return -1;
        stacks.nodes = n;
        stacks.table = t;
    }
#if defined(__x86_64__)
    if (vt_opt.depth > 0 && vt_opt.unwind != VT_UNWIND_FP)
        rules_init(); /* without it every stack goes to libunwind */
#endif
    memo_init();
    if (!stacks.libc_stack_end)
        stacks.libc_stack_end = (void *const *)vt_real_dlsym(RTLD_DEFAULT, "__libc_stack_end");
    if (!stacks.unw_backtrace_ptr && vt_opt.depth > 0) {
        void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
#if defined(__x86_64__)
        /* Before its first unwind, which would open its pipe. */
        if (h && !vt_unwind_fds_redirect(h)) {
            vt_real_dlclose(h);
            h = NULL;
            stacks.libunwind_unsafe = 1;
        }
#endif
        if (h) {
            unw_backtrace_fn fn = (unw_backtrace_fn)vt_real_dlsym(h, "unw_backtrace");
            /* Per-thread caching avoids the global lock libunwind takes
             * around its shared cache of frame descriptions. */
            typedef int (*set_policy_fn)(void *, int);
            set_policy_fn set_policy = (set_policy_fn)vt_real_dlsym(h, "_ULx86_64_set_caching_policy");
            void **as = (void **)vt_real_dlsym(h, "_ULx86_64_local_addr_space");
            if (set_policy && as && *as)
                set_policy(*as, 2 /* UNW_CACHE_PER_THREAD */);
            find_unw_step(h, as);
            stacks.unw_backtrace_ptr = fn;
            /* The first unwind sets libunwind up (unwind_fds.c gave it a
             * pipe without descriptors): here, not inside a hook. */
            /* Not under ThreadSanitizer: a libunwind per-thread cache made
             * this early crashed TSan's interceptor in libunwind's thread-exit
             * destructor (make tsan, faultprog pairs: SIGSEGV in
             * __tsan::MutexPreLock); the set-up then comes with the first
             * real unwind. */
            void *first[2];
            if (fn && !dlsym(RTLD_DEFAULT, "__tsan_init"))
                fn(first, 2);
        }
        /* Frame pointers need no library. */
        if (!stacks.unw_backtrace_ptr && vt_opt.unwind != VT_UNWIND_FP) {
            stacks.libunwind_missing = 1;
            vt_warn_once(&stacks.warned_libunwind,
                         stacks.libunwind_unsafe
                             ? "libunwind.so.8 not used: its memory checks could not be kept off the program's "
                               "descriptors; frames the built-in unwinder cannot follow go to glibc's backtrace()"
                             : "libunwind.so.8 could not be loaded: frames the built-in unwinder cannot follow go "
                               "to glibc's backtrace()");
            /* libc's own backtrace(), looked up in libc's scope: a
             * sanitizer in the program intercepts the global one, and its
             * frame would come first in every stack. */
            void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
            unw_backtrace_fn own = libc ? (unw_backtrace_fn)vt_real_dlsym(libc, "backtrace") : NULL;
            stacks.unw_backtrace_ptr = own ? own : backtrace;
            /* glibc loads its unwinder (libgcc_s) on the first backtrace():
             * here, not inside an allocation hook. */
            void *first[2];
            stacks.unw_backtrace_ptr(first, 2);
        }
    }
    return 0;
}

int vt_stacks_without_libunwind(void)
{
    return stacks.libunwind_missing;
}

void vt_stacks_atfork_child(void)
{
    stacks_t parent = stacks;
    stacks = stacks_initial;
    /* What survives: what describes the process's memory, which the child
     * shares, as opposed to the locks, which a parent's thread that does
     * not exist here may have held.
     *  - The tree: the child's writer names it again from node 1, so ids
     *    captured from here on stay valid, and its losses and load epoch
     *    go with it. */
    stacks.nodes = parent.nodes;
    stacks.table = parent.table;
    stacks.node_count = parent.node_count;
    stacks.lost = parent.lost;
    stacks.ip_epoch = parent.ip_epoch;
    /*  - The unwinders found at init: the libraries stay loaded, and what
     *    could not be loaded was said once already. */
    stacks.unw_backtrace_ptr = parent.unw_backtrace_ptr;
    stacks.unw_getcontext_ptr = parent.unw_getcontext_ptr;
    stacks.unw_init_local_ptr = parent.unw_init_local_ptr;
    stacks.unw_step_ptr = parent.unw_step_ptr;
    stacks.unw_get_reg_ptr = parent.unw_get_reg_ptr;
    stacks.unw_flush_cache_ptr = parent.unw_flush_cache_ptr;
    stacks.unw_as = parent.unw_as;
    stacks.unw_flushed_subs = parent.unw_flushed_subs;
    stacks.libunwind_missing = parent.libunwind_missing;
    stacks.libunwind_unsafe = parent.libunwind_unsafe;
    stacks.warned_libunwind = parent.warned_libunwind;
    stacks.libc_stack_end = parent.libc_stack_end;
    /*  - The memo slabs and key. The memos the parent's other threads held
     *    are not given back: those threads do not exist in the child, so
     *    they never exit. */
    stacks.memo_free = parent.memo_free;
    stacks.memo_slab = parent.memo_slab;
    stacks.memo_slab_used = parent.memo_slab_used;
    stacks.memo_key = parent.memo_key;
    stacks.memo_key_ok = parent.memo_key_ok;
    /*  - The CFI rules: the same modules are mapped at the same places. */
    stacks.rules = parent.rules;
    stacks.rules_gen = parent.rules_gen;
    stacks.rules_subs = parent.rules_subs;
    /*  - The check counts: the summary at exit covers the process's life. */
    stacks.check_stacks = parent.check_stacks;
    stacks.check_fallbacks = parent.check_fallbacks;
    stacks.check_mismatches = parent.check_mismatches;
    memset(stack_cache, 0, sizeof stack_cache);
}

uint32_t vt_stack_count(void)
{
    return atomic_load_explicit(&stacks.node_count, memory_order_acquire);
}

void vt_stack_node(uint32_t id, uint32_t *parent, uint64_t *ip)
{
    *parent = stacks.nodes[id].parent;
    *ip = stacks.nodes[id].ip;
}

uint64_t vt_stacks_lost(void)
{
    return atomic_load_explicit(&stacks.lost, memory_order_relaxed);
}

/* Returns the child of parent with this ip, inserting it if needed; 0 when
 * the tables are full. */
static uint32_t child_of(uint32_t parent, uint64_t ip)
{
    uint64_t h = mix(mix(0, parent), ip);
    for (int attempt = 0; attempt < 2; attempt++) {
        uint32_t i = (uint32_t)h & (TABLE_SIZE - 1);
        for (uint32_t probe = 0; probe < 64; probe++, i = (i + 1) & (TABLE_SIZE - 1)) {
            uint32_t id = atomic_load_explicit(&stacks.table[i], memory_order_acquire);
            if (id == 0)
                break;
            if (stacks.nodes[id].parent == parent && stacks.nodes[id].ip == ip)
                return id;
        }
        if (attempt == 1)
            break;
        /* Not found lock-free: insert under the lock, re-checking since
         * another thread may have inserted the same node meanwhile. */
        pthread_mutex_lock(&stacks.insert_lock);
        uint32_t found = 0;
        i = (uint32_t)h & (TABLE_SIZE - 1);
        for (uint32_t probe = 0; probe < 64; probe++, i = (i + 1) & (TABLE_SIZE - 1)) {
            uint32_t id = atomic_load_explicit(&stacks.table[i], memory_order_relaxed);
            if (id == 0) {
                uint32_t n = atomic_load_explicit(&stacks.node_count, memory_order_relaxed) + 1;
                if (n >= NODE_CAP)
                    break;
                stacks.nodes[n].parent = parent;
                stacks.nodes[n].ip = ip;
                atomic_store_explicit(&stacks.node_count, n, memory_order_release);
                atomic_store_explicit(&stacks.table[i], n, memory_order_release);
                found = n;
                break;
            }
            if (stacks.nodes[id].parent == parent && stacks.nodes[id].ip == ip) {
                found = id;
                break;
            }
        }
        pthread_mutex_unlock(&stacks.insert_lock);
        return found;
    }
    return 0;
}

/* VRAMTRACE_UNWIND=fp: walk the frame-pointer chain. About ten times
 * cheaper than libunwind, but frames of code built without frame pointers
 * are skipped or wrong, so it is opt-in. Every read stays inside this
 * thread's stack (bounds taken once per thread) and the chain must grow
 * upwards, so a bogus frame pointer ends the walk, never the process. */
static __thread uintptr_t stack_lo, stack_hi __attribute__((tls_model("initial-exec")));

static void thread_stack_bounds(void)
{
    pthread_attr_t attr;
    void *addr;
    size_t size;
    stack_hi = 1; /* tried: never ask again on this thread */
    /* The process's first thread: glibc's pthread_getattr_np would read
     * /proc/self/maps through stdio (malloc) for it. Its stack ends at
     * __libc_stack_end and is one mapping from there down to this frame;
     * the kernel keeps other mappings at least the stack limit away, so a
     * frame within that limit below it is on this stack. */
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    uintptr_t top = stacks.libc_stack_end ? (uintptr_t)*stacks.libc_stack_end : 0;
    struct rlimit rl;
    if (top && here < top && getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        top - here < rl.rlim_cur) {
        stack_lo = top - rl.rlim_cur;
        stack_hi = top & ~(uintptr_t)7;
        return;
    }
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
        stack_lo = (uintptr_t)addr;
        stack_hi = stack_lo + size;
    }
    pthread_attr_destroy(&attr);
}

static inline __attribute__((always_inline)) int fp_backtrace(uint64_t *ips, int max)
{
    if (!stack_hi)
        thread_stack_bounds();
    uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
    int n = 0;
    ips[n++] = 0; /* stands for this frame, as unw_backtrace's ips[0] does */
    while (n < max) {
        if (fp < stack_lo || fp + 2 * sizeof(uintptr_t) > stack_hi || (fp & (sizeof(uintptr_t) - 1)))
            break;
        uintptr_t next = ((const uintptr_t *)fp)[0];
        uintptr_t ret = ((const uintptr_t *)fp)[1];
        if (!ret)
            break;
        ips[n++] = ret;
        if (next <= fp)
            break;
        fp = next;
    }
    return n;
}

/* The last walk of this thread, step by step, so the next one from the same
 * frame can check each step's result instead of looking its rule up again
 * (allocation sites repeat: a loop allocates from one stack over and over).
 * Two walks that enter a step with the same return address, rsp and rbp
 * (and the same generation of rules) apply the same rule and read the same
 * two words; if those words hold what they held last time, the step left
 * the same state. So a walk that starts where the last one did follows it
 * for as long as each step's words are unchanged, and its stack is the one
 * the rules give, step for step. Every address memoised was bounds-checked
 * against the same stack range (same starting frame, same top), so reading
 * it again stays inside this thread's stack. */
#define MEMO_STEPS 72 /* the default depth, 64, plus the shim's frames */
typedef struct memo_step {
    /* The two words the step read and what they held. A step that leaves
     * rbp unchanged checks its return address twice (rbp_at = ra_at, word
     * = ra): one branch-free check per step. */
    uintptr_t ra_at, rbp_at;
    uintptr_t ra, word;
    uintptr_t cfa, rbp; /* the state it left: the caller's rsp and rbp */
} memo_step_t;
typedef struct walk_memo {
    uint64_t gen; /* 0: nothing memoised */
    uintptr_t fp, hi, ra0, rbp0;
    int n, max;
    uint64_t hash; /* of the frames from ips[hash_first], valid while hash_first */
    int hash_first;
    uint32_t hash_epoch;
    memo_step_t step[MEMO_STEPS]; /* step[i]: from ips[i] to ips[i + 1] */
    struct walk_memo *next_free;
} __attribute__((aligned(64))) walk_memo_t; /* no cache line shared by two threads' memos */

/* A thread's memo is ~3.5 KB. As static TLS, every thread of every process
 * the preload reaches would carry it, CUDA or not: thread start-up zeroes
 * and faults it in, ~2 us a thread (tests/bench, "16 idle threads"). So a
 * thread takes one at its first unwind, from slabs mapped on demand, and
 * gives it back at exit (memo_key's destructor). memo_lock guards the free
 * list and the slab, and is taken once per thread, never per event. */
static __thread walk_memo_t *memo __attribute__((tls_model("initial-exec")));

static void memo_release(void *p)
{
    walk_memo_t *m = p;
    memo = NULL; /* a later unwind on this exiting thread takes a new one */
    pthread_mutex_lock(&stacks.memo_lock);
    m->next_free = stacks.memo_free;
    stacks.memo_free = m;
    pthread_mutex_unlock(&stacks.memo_lock);
}

static void memo_init(void)
{
    if (!stacks.memo_key_ok && pthread_key_create(&stacks.memo_key, memo_release) == 0)
        stacks.memo_key_ok = 1;
}

/* This thread's memo, taken now; NULL if none can be had (no memory): the
 * caller unwinds another way. */
static __attribute__((noinline, cold)) walk_memo_t *memo_acquire(void)
{
    if (!stacks.memo_key_ok)
        return NULL;
    walk_memo_t *m = NULL;
    pthread_mutex_lock(&stacks.memo_lock);
    if (stacks.memo_free) {
        m = stacks.memo_free;
        stacks.memo_free = m->next_free;
    } else {
        if (stacks.memo_slab_used == MEMO_SLAB) {
            void *s = mmap(NULL, MEMO_SLAB * sizeof *m, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (s != MAP_FAILED) {
                stacks.memo_slab = s;
                stacks.memo_slab_used = 0;
            }
        }
        if (stacks.memo_slab_used < MEMO_SLAB)
            m = &stacks.memo_slab[stacks.memo_slab_used++];
    }
    pthread_mutex_unlock(&stacks.memo_lock);
    if (!m)
        return NULL;
    m->gen = 0; /* nothing memoised */
    m->hash_first = 0;
    if (pthread_setspecific(stacks.memo_key, m) != 0) {
        memo_release(m);
        return NULL;
    }
    memo = m;
    return m;
}

/* A module went away: every cached rule may now describe the wrong code.
 * Old-generation slots are reused by later inserts. */
static void rules_saw_subs(unsigned long long subs)
{
    unsigned long long old = atomic_load_explicit(&stacks.rules_subs, memory_order_relaxed);
    if (subs == old || !atomic_compare_exchange_strong(&stacks.rules_subs, &old, subs))
        return;
    uint64_t g = atomic_load_explicit(&stacks.rules_gen, memory_order_relaxed);
    atomic_compare_exchange_strong(&stacks.rules_gen, &g, g >= 0xffff ? 1 : g + 1);
}

#if defined(__x86_64__)
/* ---- cached CFI unwinding (x86-64), the default ----
 * libunwind's unw_backtrace costs ~100 instructions a frame even with its
 * per-thread cache, most of the shim's cost per allocation. This walk does
 * what a DWARF unwinder does, for the common shapes of frame only
 * (unwind_cfi.c reads the rules), and lets libunwind do the whole stack
 * whenever a frame has any other shape, so its stacks are libunwind's
 * (VRAMTRACE_UNWIND=check verifies that, stack by stack):
 *  - Each return address gets its rule once; rules are cached in a
 *    lock-free table keyed by the address and a generation. The rule of an
 *    address holds while its module stays loaded, so the generation moves
 *    when the loader's count of unloaded modules does (seen on every miss,
 *    every RECHECK captures per thread, and at once by the shim's dlclose):
 *    a module loaded where another was unloaded never gets the old
 *    module's rules. Rules are keyed by the bare address, never by an ip
 *    tagged with its load epoch.
 *  - A frame whose return address is undefined ends the stack, as in
 *    libunwind (process and thread entry points).
 *  - Every read is between this frame and the top of the thread's stack,
 *    and the CFA must move up at each step, so a rule that does not fit the
 *    memory it meets falls back instead of reading elsewhere. */
typedef struct rule_slot {
    _Atomic uint64_t key; /* 0 empty, 1 being filled, else ra | gen << 48 */
    _Atomic uint64_t rule;
} rule_slot_t;

#define RULE_BITS 16
#define RULE_SIZE (1u << RULE_BITS)
#define RULE_PROBES 32
#define RECHECK 4096
static __thread unsigned recheck_countdown __attribute__((tls_model("initial-exec")));

static void rules_init(void)
{
    if (stacks.rules)
        return;
    void *r = mmap(NULL, RULE_SIZE * sizeof(rule_slot_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED)
        return;
    atomic_store_explicit(&stacks.rules_subs, vt_cfi_module_subs(), memory_order_relaxed);
    stacks.rules = r;
}

static inline uint32_t rule_hash(uintptr_t ra)
{
    return (uint32_t)((ra * 0x9e3779b97f4a7c15ull) >> (64 - RULE_BITS));
}

static __attribute__((noinline)) uint64_t rule_insert(uintptr_t ra)
{
    unsigned long long subs = 0;
    uint64_t r = vt_cfi_rule(ra, &subs);
    rules_saw_subs(subs);
    uint64_t gen = atomic_load_explicit(&stacks.rules_gen, memory_order_acquire);
    uint64_t key = ra | gen << 48;
    uint32_t i = rule_hash(ra);
    for (int probe = 0; probe < RULE_PROBES; probe++, i = (i + 1) & (RULE_SIZE - 1)) {
        uint64_t k = atomic_load_explicit(&stacks.rules[i].key, memory_order_acquire);
        if (k == key)
            return r; /* another thread got there first */
        /* empty, or left by an older generation */
        if (k == 1 || (k != 0 && k >> 48 == gen))
            continue;
        if (!atomic_compare_exchange_strong_explicit(&stacks.rules[i].key, &k, 1, memory_order_acq_rel,
                                                     memory_order_relaxed))
            continue;
        atomic_store_explicit(&stacks.rules[i].rule, r, memory_order_relaxed);
        atomic_store_explicit(&stacks.rules[i].key, key, memory_order_release);
        return r;
    }
    return r; /* full here: recomputed next time */
}

static inline __attribute__((always_inline)) uint64_t rule_of(uintptr_t ra, uint64_t gen)
{
    uint64_t key = ra | gen << 48;
    uint32_t i = rule_hash(ra);
    for (int probe = 0; probe < RULE_PROBES; probe++, i = (i + 1) & (RULE_SIZE - 1)) {
        uint64_t k = atomic_load_explicit(&stacks.rules[i].key, memory_order_acquire);
        if (k == key) {
            /* A slot of an older generation can be refilled under us:
             * the rule counts only if the key is still ours after it. */
            uint64_t r = atomic_load_explicit(&stacks.rules[i].rule, memory_order_acquire);
            if (atomic_load_explicit(&stacks.rules[i].key, memory_order_relaxed) == key)
                return r;
            break;
        }
        if (k == 0)
            break;
    }
    return rule_insert(ra);
}

/* Checks memoised steps from st to end, copying each return address to
 * out; returns the first step whose words changed, or end. Out of line, so
 * the loop has registers to itself. */
static __attribute__((noinline)) const memo_step_t *memo_check(const memo_step_t *st, const memo_step_t *end,
                                                               uint64_t *out)
{
    for (; st < end; st++, out++) {
        uintptr_t r = *(const uintptr_t *)st->ra_at;
        if ((r ^ st->ra) | (*(const uintptr_t *)st->rbp_at ^ st->word))
            break;
        *out = r;
    }
    return st;
}

/* Fills ips like unw_backtrace (ips[0] stands for this frame); -1 when
 * libunwind must do this stack. *same: 1 when the stack is the memoised
 * one, frame for frame. */
static inline __attribute__((always_inline)) int cfi_backtrace(uint64_t *ips, int max, int *same)
{
    *same = 0;
    if (!stack_hi)
        thread_stack_bounds();
    /* This function keeps a frame pointer (__builtin_frame_address forces
     * one): its caller's registers are read from that frame. Every later
     * read lies above it, so it is the low bound. */
    uintptr_t fp = (uintptr_t)__builtin_frame_address(0), lo = fp, hi = stack_hi;
    if (!stacks.rules || fp < stack_lo || fp + 16 > hi || (fp & 7))
        return -1;
    if (--recheck_countdown >= RECHECK) {
        recheck_countdown = RECHECK - 1;
        rules_saw_subs(vt_cfi_module_subs());
    }
    uint64_t gen = atomic_load_explicit(&stacks.rules_gen, memory_order_acquire);
    uintptr_t ra = ((const uintptr_t *)fp)[1], rbp = ((const uintptr_t *)fp)[0], rsp = fp + 16;
    /* A word at a is readable when a is 8-aligned and lo <= a <= hi - 8:
     * one unsigned compare covers both ends. */
    uintptr_t span = hi - 8 - lo;
    int n = 1;
    ips[0] = 0;
    walk_memo_t *mm = memo;
    if (__builtin_expect(!mm, 0) && !(mm = memo_acquire()))
        return -1;
    if (mm->gen == gen && mm->fp == fp && mm->hi == hi && mm->max == max && mm->ra0 == ra && mm->rbp0 == rbp) {
        const memo_step_t *end = &mm->step[mm->n - 1];
        ips[1] = ra;
        const memo_step_t *st = memo_check(&mm->step[1], end, ips + 2);
        if (st != end) {
            /* Changed: this step is done again from the state the one
             * before it left, which still holds. */
            n = (int)(st - mm->step);
            if (n > 1) {
                ra = st[-1].ra;
                rsp = st[-1].cfa;
                rbp = st[-1].rbp;
            }
            goto walk;
        }
        *same = 1;
        return mm->n;
    }
walk:
    mm->gen = 0; /* rewritten from step n on; valid again only if this walk ends well */
    mm->hash_first = 0;
    while (n < max) {
        if (ra < 4096 || ra >= (1ull << 48))
            return -1;
        ips[n++] = ra;
        if (n == max)
            break;
        uint64_t r = rule_of(ra, gen);
        if ((r & 3) != VT_CFI_STEP) {
            if ((r & 3) == VT_CFI_END)
                break;
            return -1;
        }
        uintptr_t cfa = ((r & VT_CFI_CFA_RBP) ? rbp : rsp) + (uintptr_t)VT_CFI_CFA_OFF(r);
        uintptr_t ra_at = cfa + (uintptr_t)VT_CFI_RA_OFF(r), rbp_at = ra_at;
        if (cfa <= rsp || ra_at - lo > span || (ra_at & 7))
            return -1;
        if (r & VT_CFI_RBP_SAVED) {
            rbp_at = cfa + (uintptr_t)VT_CFI_RBP_OFF(r);
            if (rbp_at - lo > span || (rbp_at & 7))
                return -1;
            rbp = *(const uintptr_t *)rbp_at;
        }
        ra = *(const uintptr_t *)ra_at;
        rsp = cfa;
        if (n - 1 < MEMO_STEPS) {
            memo_step_t *st = &mm->step[n - 1];
            st->ra_at = ra_at;
            st->rbp_at = rbp_at;
            st->ra = ra;
            st->word = rbp_at == ra_at ? ra : rbp;
            st->cfa = cfa;
            st->rbp = rbp;
        }
    }
    if (n <= MEMO_STEPS) {
        mm->fp = fp;
        mm->hi = hi;
        mm->max = max;
        mm->ra0 = (uintptr_t)ips[1];
        mm->rbp0 = ((const uintptr_t *)fp)[0];
        mm->n = n;
        mm->gen = gen;
    }
    return n;
}
#endif

unsigned long long vt_stacks_subs(void)
{
    return atomic_load_explicit(&stacks.rules_subs, memory_order_relaxed);
}

void vt_stacks_unloaded(unsigned long long subs)
{
    uint32_t e = atomic_load_explicit(&stacks.ip_epoch, memory_order_relaxed), next;
    do
        next = e >= VT_IP_EPOCH_MAX ? 1 : e + 1;
    while (!atomic_compare_exchange_weak_explicit(&stacks.ip_epoch, &e, next, memory_order_relaxed,
                                                  memory_order_relaxed));
    /* Now rather than at a thread's next recheck: the next library may
     * already be mapped over the old one's addresses. Without rules too
     * (VRAMTRACE_UNWIND=fp): the count is what vt_stacks_subs tells the
     * writer at the end, whose last naming would otherwise take the
     * modules it knew before the unload for current. */
    rules_saw_subs(subs);
}

/* libunwind's backtrace keeps, per thread, how to step each return
 * address it has seen, keyed by the address alone, and nothing clears it
 * when a library is unloaded (libunwind 1.6 to 1.8, src/x86_64/Gtrace.c).
 * Code loaded where an unloaded library was is then stepped by the old
 * code's rules: a frame of the old one's that used rbp as its frame
 * pointer, over new code where rbp holds data, has libunwind read the
 * return address through that data: SIGSEGV inside unw_backtrace (76-fault-
 * api, "reload"). So a thread whose cache may predate an unload steps
 * frame by frame, through the caches unw_flush_cache does clear, for the
 * rest of its life: the backtrace cache cannot be emptied. */
static __thread unsigned long long unw_trace_subs __attribute__((tls_model("initial-exec")));
static __thread unsigned char unw_trace_used, unw_trace_stale __attribute__((tls_model("initial-exec")));

/* 1 when this thread must step: its backtrace cache may predate an
 * unload. Then the caches unw_flush_cache does clear are flushed first if
 * the loader has unloaded anything since the last flush. It walks the
 * modules itself, so it is called outside vt_loader_enter's bracket,
 * which must not nest. */
static int unw_must_step(void)
{
    unsigned long long subs = vt_cfi_module_subs();
    if (!unw_trace_stale) {
        if (!unw_trace_used) {
            unw_trace_used = 1;
            unw_trace_subs = subs;
        }
        if (subs == unw_trace_subs)
            return 0;
        unw_trace_stale = 1;
    }
    unsigned long long flushed = atomic_load_explicit(&stacks.unw_flushed_subs, memory_order_relaxed);
    if (flushed != subs &&
        atomic_compare_exchange_strong_explicit(&stacks.unw_flushed_subs, &flushed, subs, memory_order_relaxed,
                                                memory_order_relaxed))
        stacks.unw_flush_cache_ptr(stacks.unw_as, 0, 0);
    return 1;
}

/* Fills ips as unw_backtrace does from the same caller: ips[0] is the
 * return address into it. */
static __attribute__((noinline)) int unw_step_backtrace(uint64_t *ips, int want)
{
    ucontext_t uc;
    uint64_t cursor[UNW_CURSOR_WORDS] __attribute__((aligned(16)));
    if (stacks.unw_getcontext_ptr(&uc) < 0 || stacks.unw_init_local_ptr(cursor, &uc) < 0)
        return 0;
    int n = 0;
    uint64_t ip;
    while (n < want && stacks.unw_step_ptr(cursor) > 0 && stacks.unw_get_reg_ptr(cursor, UNW_X86_64_RIP, &ip) >= 0)
        ips[n++] = ip;
    return n;
}

/* What the cached walk stands in for; libc's backtrace() when libunwind
 * could not be loaded. Always inlined: its ips[0] must be the capturing
 * function's frame, as the cached walk's is, whatever the build's inlining. */
static inline __attribute__((always_inline)) int libunwind_backtrace(uint64_t *ips, int want)
{
    int step = stacks.unw_step_ptr && unw_must_step();
    /* Both walk the modules with dl_iterate_phdr (loader_lock.c). */
    vt_loader_enter();
    int n;
    if (step)
        n = unw_step_backtrace(ips, want);
    else
        n = stacks.unw_backtrace_ptr ? stacks.unw_backtrace_ptr((void **)ips, want) : backtrace((void **)ips, want);
    vt_loader_leave();
    return n;
}

static void check_put(char **p, char *end, const char *s)
{
    while (*s && *p < end)
        *(*p)++ = *s++;
}

/* v in radix 10 or 16 (addresses, as 0x...), without stdio: these lines
 * are written from a destructor and a capture. The summary's counts were
 * hex once, with no 0x, and tests/gpu/run.sh summed them as decimal: 10
 * to 15 mismatches ("a" to "f") read as none. */
static void check_num(char **p, char *end, uint64_t v, unsigned radix)
{
    char tmp[24];
    int i = sizeof tmp - 1;
    tmp[i] = 0;
    do {
        tmp[--i] = "0123456789abcdef"[v % radix];
        v /= radix;
    } while (v && i > 2);
    if (radix == 16) {
        tmp[--i] = 'x';
        tmp[--i] = '0';
    }
    check_put(p, end, tmp + i);
}

/* Writes a check line whole, with one write(), so processes appending to
 * one file do not mix: to stderr, or to VRAMTRACE_UNWIND=check:FILE,
 * opened for the line and closed again. */
static void check_write(const char *line, size_t len)
{
    int fd = 2;
    if (!vt_opt.unwind_check_path[0] && !vt_stderr_ours())
        return;
    if (vt_opt.unwind_check_path[0]) {
        fd = open(vt_opt.unwind_check_path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
            return;
    }
    ssize_t w = write(fd, line, len);
    (void)w;
    if (fd != 2)
        close(fd);
}

/* One line per mismatch, both stacks after the shim's frames. */
static __attribute__((noinline, cold)) void check_report(const uint64_t *a, int na, const uint64_t *b, int nb, int first)
{
    char line[4096], *p = line, *end = line + sizeof line - 1;
    check_put(&p, end, "vramtrace: unwind check: pid ");
    check_num(&p, end, (uint64_t)getpid(), 10);
    check_put(&p, end, " cfi");
    for (int i = first; i < na; i++) {
        check_put(&p, end, " ");
        check_num(&p, end, a[i], 16);
    }
    check_put(&p, end, " libunwind");
    for (int i = first; i < nb; i++) {
        check_put(&p, end, " ");
        check_num(&p, end, b[i], 16);
    }
    *p++ = '\n';
    check_write(line, (size_t)(p - line));
}

static __attribute__((destructor)) void check_summary(void)
{
    /* The state first: the options were set by whichever thread started
     * the shim, and this thread (exiting) may never have called CUDA. */
    int st = atomic_load(&vt_state);
    if ((st != VT_ST_ACTIVE && st != VT_ST_ENDED) || vt_opt.unwind != VT_UNWIND_CHECK ||
        !atomic_load(&stacks.check_stacks))
        return;
    char line[256], *p = line, *end = line + sizeof line - 1;
    check_put(&p, end, "vramtrace: unwind check summary: pid ");
    check_num(&p, end, (uint64_t)getpid(), 10);
    check_put(&p, end, " stacks ");
    check_num(&p, end, atomic_load(&stacks.check_stacks), 10);
    check_put(&p, end, " fallbacks ");
    check_num(&p, end, atomic_load(&stacks.check_fallbacks), 10);
    check_put(&p, end, " mismatches ");
    check_num(&p, end, atomic_load(&stacks.check_mismatches), 10);
    *p++ = '\n';
    check_write(line, (size_t)(p - line));
}

__attribute__((noinline)) uint32_t vt_stack_capture(int skip)
{
    if (vt_opt.depth <= 0)
        return 0;
    /* uint64_t, not void *: the merged and the native stack are read the
     * same way below. The unwinders that fill it live in other objects. */
    /* Sized by the depth asked for (64 by default: 0.6 KB, not 2 KB): the
     * stack this runs on may be a 16 KiB fiber's. */
    int want = vt_opt.depth + skip + 1;
    if (want > (int)VT_MAX_STACK_DEPTH + 8)
        want = (int)VT_MAX_STACK_DEPTH + 8;
    uint64_t ips[want];
    int n = -1;
    /* memo: the frames are those of this thread's memoised walk; same:
     * and that walk's stack is the last one's, frame for frame. */
    int memo_ok = 0, same = 0;
    if (vt_opt.unwind == VT_UNWIND_FP) {
        n = fp_backtrace(ips, want);
    } else {
#if defined(__x86_64__)
        /* uncached: the way out if the rule cache ever misreads a module */
        n = vt_opt.unwind == VT_UNWIND_LIBUNWIND ? -1 : cfi_backtrace(ips, want, &same);
        memo_ok = n >= 0 && memo && memo->gen != 0;
        if (__builtin_expect(vt_opt.unwind == VT_UNWIND_CHECK, 0)) {
            /* A VLA in this block: the copy takes stack only when checking.
             * (A helper function would shift libunwind's frames by one.) */
            uint64_t cfi[want];
            int ncfi = n;
            memo_ok = same = 0; /* ips become libunwind's */
            if (ncfi > 0)
                memcpy(cfi, ips, (size_t)ncfi * sizeof ips[0]);
            n = libunwind_backtrace(ips, want);
            atomic_fetch_add_explicit(&stacks.check_stacks, 1, memory_order_relaxed);
            if (ncfi < 0) {
                atomic_fetch_add_explicit(&stacks.check_fallbacks, 1, memory_order_relaxed);
            } else if (ncfi != n || (n > 1 && memcmp(cfi + 1, ips + 1, (size_t)(n - 1) * sizeof ips[0]) != 0)) {
                atomic_fetch_add_explicit(&stacks.check_mismatches, 1, memory_order_relaxed);
                check_report(cfi, ncfi, ips, n, skip + 1);
            }
        }
#endif
        if (n < 0)
            n = libunwind_backtrace(ips, want);
    }
    /* ips[0] is this function; then the shim's own frames. */
    int first = skip + 1;
    if (n <= first)
        return 0;

    /* Python frames and open ranges join the native ones (pyframes.c)
     * before the cache lookup: the same native stack serves many Python
     * call sites. Without either, the native array is used in place. */
    uint64_t merged[VT_MAX_STACK_DEPTH];
    uint64_t *frames = merged;
    int native = n - first;
    n = vt_pseudo_merge(ips + first, native, merged, VT_MAX_STACK_DEPTH);
    int in_place = n < 0;
    if (in_place) {
        frames = ips + first;
        n = native < (int)VT_MAX_STACK_DEPTH ? native : (int)VT_MAX_STACK_DEPTH;
    }
    if (__builtin_expect(vt_tls.ggml_hook_depth > 0, 0)) {
        n = drop_own_frames(frames, n);
        same = memo_ok = 0;
    }
    /* After the merge (it compares addresses) and before the hash, so a
     * stack from after an unload is new to the cache and the tree. Pseudo
     * ips and addresses no user mapping has are left as they are. */
    uint32_t epoch = atomic_load_explicit(&stacks.ip_epoch, memory_order_relaxed);
    if (__builtin_expect(epoch != 0, 0)) {
        uint64_t tag = (uint64_t)epoch << VT_IP_EPOCH_SHIFT;
        for (int i = 0; i < n; i++)
            if (!(frames[i] & ~VT_IP_ADDR_MASK))
                frames[i] |= tag;
    }

    /* The hash is a function of the frames alone: the memoised stack's,
     * unmerged, from the same first frame and epoch, has the last one's. */
    uint64_t h = 0;
    if (same && in_place && memo->hash_first == first && memo->hash_epoch == epoch) {
        h = memo->hash;
    } else {
        for (int i = 0; i < n; i++)
            h = mix(h, frames[i]);
        if (memo_ok && in_place) {
            memo->hash = h;
            memo->hash_first = first;
            memo->hash_epoch = epoch;
        }
    }
    /* A hit trusts the 64-bit hash and does not compare the frames: that
     * would read every node from the leaf up (n scattered loads per event)
     * and give back what the memo saves. The odds of a false hit: the
     * entry in h's slot already shares its low 4 bits, so a stack not in
     * the cache matches it with probability 2^-60 ~ 8.7e-19 (taking mix()
     * as uniform; each step is a bijection of h ^ ip, so two stacks of one
     * length that differ in a single frame never collide). A process
     * making 10 million allocations a second for a year does ~3.2e14
     * lookups: ~3e-4 chance of one false hit, which would charge that one
     * event to another existing stack, nothing worse. */
    cache_entry_t *c = &stack_cache[h & (CACHE_SIZE - 1)];
    if (c->hash == h && c->leaf)
        return c->leaf;

    /* Walk from the outermost frame inwards, so shared callers share nodes. */
    uint32_t id = 0;
    for (int i = n - 1; i >= 0; i--) {
        uint32_t next = child_of(id, frames[i]);
        if (!next) {
            atomic_fetch_add_explicit(&stacks.lost, 1, memory_order_relaxed);
            return id;
        }
        id = next;
    }
    c->hash = h;
    c->leaf = id;
    return id;
}
