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
 *    leaf), so a repeated allocation site skips the tree walk.
 *  - Tables are mmap'ed once (virtual; pages are touched as nodes appear),
 *    so memory grows with unique stacks only. When full, stacks are cut at
 *    the deepest known node and the loss is counted in the trace.
 *  - libunwind is loaded with dlopen on first use, not linked: a process
 *    that never calls CUDA never loads it. Without it, glibc's backtrace()
 *    is the fallback.
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

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

static node_t *nodes;
static _Atomic uint32_t *table;
static _Atomic uint32_t node_count;
static _Atomic uint64_t stacks_lost;
static pthread_mutex_t insert_lock = PTHREAD_MUTEX_INITIALIZER;

typedef int (*unw_backtrace_fn)(void **buffer, int size);
static unw_backtrace_fn unw_backtrace_ptr;

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

int vt_stacks_init(void)
{
    if (!nodes) {
        void *n = mmap(NULL, NODE_CAP * sizeof(node_t), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        void *t = mmap(NULL, TABLE_SIZE * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (n == MAP_FAILED || t == MAP_FAILED)
            return -1;
        nodes = n;
        table = t;
    }
    if (!unw_backtrace_ptr && vt_opt.depth > 0) {
        void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
        if (h) {
            unw_backtrace_fn fn = (unw_backtrace_fn)vt_real_dlsym(h, "unw_backtrace");
            /* Per-thread caching avoids the global lock libunwind takes
             * around its shared cache of frame descriptions. */
            typedef int (*set_policy_fn)(void *, int);
            set_policy_fn set_policy = (set_policy_fn)vt_real_dlsym(h, "_ULx86_64_set_caching_policy");
            void **as = (void **)vt_real_dlsym(h, "_ULx86_64_local_addr_space");
            if (set_policy && as && *as)
                set_policy(*as, 2 /* UNW_CACHE_PER_THREAD */);
            unw_backtrace_ptr = fn;
        }
    }
    return 0;
}

void vt_stacks_atfork_child(void)
{
    pthread_mutex_init(&insert_lock, NULL);
    memset(stack_cache, 0, sizeof stack_cache);
}

uint32_t vt_stack_count(void)
{
    return atomic_load_explicit(&node_count, memory_order_acquire);
}

void vt_stack_node(uint32_t id, uint32_t *parent, uint64_t *ip)
{
    *parent = nodes[id].parent;
    *ip = nodes[id].ip;
}

uint64_t vt_stacks_lost(void)
{
    return atomic_load_explicit(&stacks_lost, memory_order_relaxed);
}

/* Returns the child of parent with this ip, inserting it if needed; 0 when
 * the tables are full. */
static uint32_t child_of(uint32_t parent, uint64_t ip)
{
    uint64_t h = mix(mix(0, parent), ip);
    for (int attempt = 0; attempt < 2; attempt++) {
        uint32_t i = (uint32_t)h & (TABLE_SIZE - 1);
        for (uint32_t probe = 0; probe < 64; probe++, i = (i + 1) & (TABLE_SIZE - 1)) {
            uint32_t id = atomic_load_explicit(&table[i], memory_order_acquire);
            if (id == 0)
                break;
            if (nodes[id].parent == parent && nodes[id].ip == ip)
                return id;
        }
        if (attempt == 1)
            break;
        /* Not found lock-free: insert under the lock, re-checking since
         * another thread may have inserted the same node meanwhile. */
        pthread_mutex_lock(&insert_lock);
        uint32_t found = 0;
        i = (uint32_t)h & (TABLE_SIZE - 1);
        for (uint32_t probe = 0; probe < 64; probe++, i = (i + 1) & (TABLE_SIZE - 1)) {
            uint32_t id = atomic_load_explicit(&table[i], memory_order_relaxed);
            if (id == 0) {
                uint32_t n = atomic_load_explicit(&node_count, memory_order_relaxed) + 1;
                if (n >= NODE_CAP)
                    break;
                nodes[n].parent = parent;
                nodes[n].ip = ip;
                atomic_store_explicit(&node_count, n, memory_order_release);
                atomic_store_explicit(&table[i], n, memory_order_release);
                found = n;
                break;
            }
            if (nodes[id].parent == parent && nodes[id].ip == ip) {
                found = id;
                break;
            }
        }
        pthread_mutex_unlock(&insert_lock);
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

__attribute__((noinline)) uint32_t vt_stack_capture(int skip)
{
    if (vt_opt.depth <= 0)
        return 0;
    /* uint64_t, not void *: the merged and the native stack are read the
     * same way below. The unwinders that fill it live in other objects. */
    uint64_t ips[VT_MAX_STACK_DEPTH + 8];
    int want = vt_opt.depth + skip + 1;
    if (want > (int)(sizeof ips / sizeof ips[0]))
        want = (int)(sizeof ips / sizeof ips[0]);
    int n;
    if (vt_opt.unwind_fp)
        n = fp_backtrace(ips, want);
    else
        n = unw_backtrace_ptr ? unw_backtrace_ptr((void **)ips, want) : backtrace((void **)ips, want);
    /* ips[0] is this function; then the shim's own frames. */
    int first = skip + 1;
    if (n <= first)
        return 0;

    /* Python frames and open ranges join the native ones (pyframes.c)
     * before the cache lookup: the same native stack serves many Python
     * call sites. Without either, the native array is used in place. */
    uint64_t merged[VT_MAX_STACK_DEPTH];
    const uint64_t *frames = merged;
    int native = n - first;
    n = vt_pseudo_merge(ips + first, native, merged, VT_MAX_STACK_DEPTH);
    if (n < 0) {
        frames = ips + first;
        n = native < (int)VT_MAX_STACK_DEPTH ? native : (int)VT_MAX_STACK_DEPTH;
    }

    uint64_t h = 0;
    for (int i = 0; i < n; i++)
        h = mix(h, frames[i]);
    cache_entry_t *c = &stack_cache[h & (CACHE_SIZE - 1)];
    if (c->hash == h && c->leaf)
        return c->leaf;

    /* Walk from the outermost frame inwards, so shared callers share nodes. */
    uint32_t id = 0;
    for (int i = n - 1; i >= 0; i--) {
        uint32_t next = child_of(id, frames[i]);
        if (!next) {
            atomic_fetch_add_explicit(&stacks_lost, 1, memory_order_relaxed);
            return id;
        }
        id = next;
    }
    c->hash = h;
    c->leaf = id;
    return id;
}
