/* vramtrace/annotate.h: tag GPU allocations with the phase that makes them,
 * for runtimes that know better than their call stacks (heaptrack's API
 * for custom allocators plays the same role).
 *
 *     vramtrace_annotate_push("kv");   // every allocation until the pop
 *     alloc_kv_cache();                // is recorded with frame "tag:kv"
 *     vramtrace_annotate_pop();
 *
 * Header-only, nothing to link: the functions are found once with
 * dlsym(RTLD_DEFAULT) in the shim (libvramtrace.so, LD_PRELOAD). Without
 * the shim each call costs one failed lookup the first time and a load and
 * a branch after that, and returns -1. On glibc older than 2.34 link -ldl.
 *
 * Semantics (docs/python.md):
 *  - Tags nest per thread. Each allocation's stack gets the open tags of
 *    its thread as its outermost frames, innermost tag first, so the
 *    built-in rules "tag:weights", "tag:kv" and "tag:scratch" tag whatever
 *    no more specific frame inside claims; a user rule (`mytag tag:NAME`)
 *    names any other tag. At most 16 levels are kept; deeper ones count.
 *  - Names are printable ASCII, at most 123 bytes; others are replaced.
 *  - Each push and pop is also a RANGE record in the trace's timeline.
 *  - push returns the depth of the new tag (0 = outermost), pop the depth
 *    of the tag it closed, -1 without the shim or without an open tag.
 *  - Python: examples/python/vramtrace_annotate.py wraps the same calls in
 *    a context manager.
 */
#ifndef VRAMTRACE_ANNOTATE_H
#define VRAMTRACE_ANNOTATE_H

#include <dlfcn.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int (*vramtrace_tag_push_fn)(const char *tag);
typedef int (*vramtrace_tag_pop_fn)(void);

/* One lookup per process; the flag makes a failed lookup final too.
 * (void *)0 is RTLD_DEFAULT on glibc and musl, without needing
 * _GNU_SOURCE before <dlfcn.h>. */
static inline void *vramtrace_annotate_lookup_(const char *name, void **cache, int *looked)
{
    if (!__atomic_load_n(looked, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(cache, dlsym((void *)0, name), __ATOMIC_RELAXED);
        __atomic_store_n(looked, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(cache, __ATOMIC_RELAXED);
}

static inline int vramtrace_annotate_push(const char *tag)
{
    static void *fn;
    static int looked;
    vramtrace_tag_push_fn push = (vramtrace_tag_push_fn)vramtrace_annotate_lookup_("vramtrace_tag_push", &fn, &looked);
    return push ? push(tag) : -1;
}

static inline int vramtrace_annotate_pop(void)
{
    static void *fn;
    static int looked;
    vramtrace_tag_pop_fn pop = (vramtrace_tag_pop_fn)vramtrace_annotate_lookup_("vramtrace_tag_pop", &fn, &looked);
    return pop ? pop() : -1;
}

#ifdef __cplusplus
}
#endif

#endif
