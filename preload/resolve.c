/* resolve.c: which function is the real one. For each entry point of the
 * table it finds the definition a caller would reach without the shim, and
 * it decides what a lookup (dlsym, cuGetProcAddress) has found; the
 * wrappers (hooks.c) and the loader's entry points (dl_hooks.c) hand the
 * program what it decides. A leaf of the shim: it calls only real_dl.c,
 * loader_lock.c and state.c, never a wrapper, the recording API or the
 * writer, so an answer never depends on what is being recorded.
 *
 * Three paths reach an entry point:
 *  1. A linked call binds to our export (LD_PRELOAD comes first in lookup
 *     order). The real function is what the caller would bind to without
 *     us: the next definition in the global scope, else one in the caller's
 *     own scope (below, "whose definition").
 *  2. dlopen("libcuda.so.1") + dlsym(handle, name): our dlsym returns a
 *     wrapper for exact table names that calls exactly what the real dlsym
 *     found (a slot wrapper, hooks.c), never the linked calls' pointer.
 *  3. cuGetProcAddress(_v2): libcudart >= 11.3 and PyTorch's
 *     cudaGetDriverEntryPoint fetch every driver entry point this way. The
 *     pointer the driver returns is mapped to its exact ABI name (so the
 *     version and _ptsz flavour are the driver's choice, not ours) and
 *     swapped for a wrapper that calls that pointer. Pointers we don't
 *     wrap pass untouched.
 * A lookup that finds what linked calls get is given the linked export, so
 * &cuMemAlloc_v2 and dlsym agree as they do without the shim
 * (vt_resolve_slot).
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

#include "shim.h"

/* Linked calls: the real function when every caller in the process gets
 * the same one (shim.h, vt_real_for), else NULL and the answer depends on
 * the caller (real_scoped). */
_Atomic(void *) vt_real_fn[VT_API_COUNT];
/* Pointers handed out by dlsym and cuGetProcAddress: each slot wrapper
 * (hooks.c) calls exactly what the lookup that made it found. */
_Atomic(void *) vt_slot_fn[VT_API_COUNT][VT_SLOTS];

static unsigned api_by_name(const char *name)
{
    if (!name || name[0] != 'c' || name[1] != 'u')
        return VT_API_COUNT;
    for (unsigned i = 0; i < VT_API_COUNT; i++)
        if (strcmp(vt_api_info(i)->name, name) == 0)
            return i;
    return VT_API_COUNT;
}

/* A pointer into the shim itself: one of its wrappers (hooks.c), which is
 * never the real function of anything. The linker marks the object's
 * bounds, so telling a wrapper from a definition needs no list of the
 * wrappers: one compare each way, where hooks.c's tables took a scan. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char _end[] __attribute__((visibility("hidden")));

int vt_in_shim(const void *p)
{
    return p && (uintptr_t)p >= (uintptr_t)__ehdr_start && (uintptr_t)p < (uintptr_t)_end;
}
#define in_shim vt_in_shim

unsigned vt_resolve_api_named(const char *name)
{
    return api_by_name(name);
}

/* ---- the libraries behind the wrappers ---- */

static _Atomic(void *) libcuda_handle;

static void *noload_handle_of(void *fn)
{
    Dl_info info;
    if (!fn || !dladdr(fn, &info) || !info.dli_fname)
        return NULL;
    return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
}

void *vt_libcuda(void)
{
    void *h = atomic_load(&libcuda_handle);
    if (h)
        return h;
    /* The library that served cuGetProcAddress or any wrapped driver call
     * is the driver, whatever its file name. */
    for (unsigned i = 0; i < VT_API_COUNT && !h; i++)
        if (!vt_api_info(i)->runtime && atomic_load(&vt_real_fn[i]))
            h = noload_handle_of(atomic_load(&vt_real_fn[i]));
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h)
        atomic_store(&libcuda_handle, h);
    return h;
}

static void *runtime_lookup(const char *name)
{
    static const char *const sonames[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                                           "libcudart.so" };
    for (size_t i = 0; i < sizeof sonames / sizeof sonames[0]; i++) {
        void *h = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            void *fn = vt_real_dlsym(h, name);
            vt_real_dlclose(h);
            if (fn)
                return fn;
        }
    }
    return NULL;
}

/* ---- whose definition: the caller's ----
 *
 * Without the shim, a call from library X to cudaMalloc binds to the first
 * definition in the global scope, else in X's own local scope (X and its
 * dependencies: a library dlopen'ed RTLD_LOCAL with its own runtime, a
 * PyTorch wheel's renamed libcudart-<hash>.so). A symbol version the
 * reference asks for (libcudart.so.12 vs .so.13) passes over a global
 * definition of another version. The shim, preloaded, is that first global
 * definition for everyone, so it answers as the caller would have been
 * answered without it:
 *  - next: dlsym(RTLD_NEXT) from here, the global scope past the shim (a
 *    quota interposer preloaded after us, a runtime the program links);
 *  - own: what X's own handle finds, X and its dependencies.
 * next wins, as the loader's global-first order does, unless next is a
 * runtime with symbol versions and own is another runtime (the reference's
 * version passes over next). When every caller must get next (it carries
 * no versions, or no other runtime is loaded) it is kept in vt_real_fn and
 * the hot path is one load and a branch; otherwise each call site's answer
 * is cached by its return address (caller_cache). Either cache is dropped
 * when a library is unloaded (vt_real_forget), so a runtime dlclosed and
 * loaded again elsewhere is never called at its old address. A second
 * runtime loaded after a first call, while the first is in the global
 * scope, is noticed when its dlopen starts (vt_resolve_loading), before
 * its constructors run, and at the next dlsym (recheck_runtimes) where it
 * came in some other way. */

/* The file's dynamic section defines symbol versions. */
static int has_versions(const void *fn)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!fn || !dladdr1(fn, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_ld)
        return 0;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_VERDEF)
            return 1;
    return 0;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

typedef struct other_rt {
    const char *except; /* the file of the runtime already found */
    int found;
} other_rt_t;

/* A dl_iterate_phdr callback: it runs under the loader's write lock, so it
 * calls nothing that takes the loader's own lock (dladdr, dlopen). */
static int find_other_runtime(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    other_rt_t *o = data;
    if (!info->dlpi_name || !strstr(base_name(info->dlpi_name), "cudart"))
        return 0;
    if (o->except && strcmp(o->except, info->dlpi_name) == 0)
        return 0;
    o->found = 1;
    return 1;
}

/* The definition of name a call from caller's object would bind to in that
 * object's own scope (it and its dependencies); NULL for the main program
 * (its scope is the global one) or the shim itself. */
static void *own_definition(const void *caller, const char *name)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!caller || !dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_name ||
        !lm->l_name[0])
        return NULL;
    void *h = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return NULL;
    void *fn = vt_real_dlsym(h, name);
    vt_real_dlclose(h);
    return in_shim(fn) ? NULL : fn;
}

/* The next definition past the shim in the global scope; never ours, nor
 * that of another copy of the shim that lets us record (it passes the call
 * on to the same place). */
static void *next_definition(const char *name)
{
    void *fn = vt_real_dlsym(RTLD_NEXT, name);
    return in_shim(fn) ? NULL : fn;
}

/* A runtime with symbol versions kept as everyone's answer: one loaded
 * later may be some callers' own (their references ask for its version).
 * Every dlopen drops the answer before it loads (vt_resolve_loading); a
 * library loaded some other way (a dependency of one loaded before the
 * answer was kept) is looked into with dlsym (PyInit_*,
 * napi_register_module_v1, ctypes): each dlsym checks whether the loader
 * added anything since, and if so the runtime entry points are found again
 * (recheck_runtimes). */
static _Atomic int runtime_uniform;
static _Atomic unsigned long long adds_seen;

static int count_adds(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_adds;
    return 1;
}

static unsigned long long loader_adds(void)
{
    unsigned long long adds = 0;
    vt_dl_iterate_phdr(count_adds, &adds);
    return adds;
}

/* A library is about to be loaded (dl_hooks.c's dlopen). A runtime it
 * brings may be its callers' own, and its constructors call it inside this
 * dlopen, before any dlsym: the answers kept as everyone's go now, and the
 * next call of each finds its answer again (resolve_for), by then seeing
 * the new runtime. Nothing to do while no versioned runtime is kept as
 * everyone's (an unversioned one is every caller's whatever loads). */
/* The runtime answers kept as everyone's go: each is found again at its
 * next call (resolve_for). */
static void drop_runtime_answers(void)
{
    for (unsigned i = 0; i < VT_API_COUNT; i++)
        if (vt_api_info(i)->runtime)
            atomic_store_explicit(&vt_real_fn[i], NULL, memory_order_release);
}

void vt_resolve_loading(void)
{
    int expected = 1;
    if (atomic_compare_exchange_strong_explicit(&runtime_uniform, &expected, 0, memory_order_acq_rel,
                                                memory_order_acquire))
        drop_runtime_answers();
}

static __attribute__((noinline, cold)) void recheck_runtimes(void)
{
    unsigned long long adds = loader_adds();
    if (adds == atomic_load_explicit(&adds_seen, memory_order_acquire))
        return;
    atomic_store_explicit(&runtime_uniform, 0, memory_order_release);
    drop_runtime_answers();
}

/* What a call from caller would run; *uniform = 1 when every caller in the
 * process gets the same. */
static void *resolve_for(unsigned api, const void *caller, int *uniform)
{
    const vt_api_info_t *info = vt_api_info(api);
    void *next = next_definition(info->name);
    *uniform = 0;
    if (next && (!info->runtime || !has_versions(next))) {
        *uniform = 1;
        return next;
    }
    void *own = own_definition(caller, info->name);
    if (next) {
        if (own && own != next)
            return own;
        unsigned long long adds = loader_adds();
        Dl_info di;
        other_rt_t o = { dladdr(next, &di) ? di.dli_fname : NULL, 0 };
        vt_dl_iterate_phdr(find_other_runtime, &o);
        *uniform = !o.found;
        if (*uniform) {
            atomic_store_explicit(&adds_seen, adds, memory_order_release);
            atomic_store_explicit(&runtime_uniform, 1, memory_order_release);
        }
        return next;
    }
    if (own)
        return own;
    void *fn = NULL;
    if (!info->runtime && vt_libcuda())
        fn = vt_real_dlsym(vt_libcuda(), info->name);
    if (!fn && info->runtime)
        fn = runtime_lookup(info->name);
    if (!fn && !info->runtime) {
        /* A program linked against libcuda always has it loaded; one that
         * only calls us (it linked the shim's names) gets the driver now. */
        void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (h)
            fn = vt_real_dlsym(h, info->name);
    }
    if (in_shim(fn))
        fn = NULL;
    /* A driver entry point found by name is the driver's for everyone; a
     * runtime found only by its usual soname may not be the caller's. */
    *uniform = fn && !info->runtime;
    return fn;
}

/* Call sites whose answer is their own, by return address. A reader takes
 * no lock; a writer that finds another writing skips caching. */
#define CALLER_CACHE 512
typedef struct caller_entry {
    _Atomic(uintptr_t) ra;
    _Atomic(unsigned) tag; /* api + 1 | generation << 9 */
    _Atomic(void *) fn;
} caller_entry_t;
static caller_entry_t caller_cache[CALLER_CACHE];
_Atomic unsigned vt_unload_gen;
static atomic_flag cache_writing = ATOMIC_FLAG_INIT;
_Static_assert(VT_API_COUNT < 511, "api ids fit the tag");

static inline unsigned caller_slot(uintptr_t ra)
{
    return (unsigned)((ra >> 2) ^ (ra >> 11)) & (CALLER_CACHE - 1);
}

static void *cached_for(unsigned tag, uintptr_t ra)
{
    caller_entry_t *e = &caller_cache[caller_slot(ra)];
    if (atomic_load_explicit(&e->ra, memory_order_acquire) != ra ||
        atomic_load_explicit(&e->tag, memory_order_acquire) != tag)
        return NULL;
    /* fn is loaded with acquire: the check below reads after it. */
    void *fn = atomic_load_explicit(&e->fn, memory_order_acquire);
    if (atomic_load_explicit(&e->ra, memory_order_acquire) != ra ||
        atomic_load_explicit(&e->tag, memory_order_acquire) != tag)
        return NULL;
    return fn;
}

static void cache_for(unsigned tag, uintptr_t ra, void *fn)
{
    if (atomic_flag_test_and_set_explicit(&cache_writing, memory_order_acquire))
        return;
    caller_entry_t *e = &caller_cache[caller_slot(ra)];
    /* Release stores: a reader that sees the new tag or fn sees ra 0 or
     * the new ra, never the old one with them. */
    atomic_store_explicit(&e->ra, 0, memory_order_relaxed);
    atomic_store_explicit(&e->tag, tag, memory_order_release);
    atomic_store_explicit(&e->fn, fn, memory_order_release);
    atomic_store_explicit(&e->ra, ra, memory_order_release);
    atomic_flag_clear_explicit(&cache_writing, memory_order_release);
}

/* Out of line: the lookup's calls would otherwise make every wrapper's
 * vt_real_for save and restore registers for a load. */
__attribute__((noinline, cold)) void *vt_real_scoped(unsigned api, const void *caller)
{
    unsigned tag = (api + 1) | atomic_load_explicit(&vt_unload_gen, memory_order_acquire) << 9;
    void *fn = caller ? cached_for(tag, (uintptr_t)caller) : NULL;
    if (fn)
        return fn;
    int uniform;
    fn = resolve_for(api, caller, &uniform);
    if (!fn)
        return NULL;
    if (uniform) {
        void *expected = NULL;
        atomic_compare_exchange_strong(&vt_real_fn[api], &expected, fn);
    } else if (caller) {
        cache_for(tag, (uintptr_t)caller, fn);
    }
    return fn;
}

void *vt_real(unsigned api)
{
    return vt_real_for(api, NULL);
}

/* Which wrapper hands the program's calls to real, a pointer a lookup
 * found: the linked export where it calls the same for everyone, else a
 * slot wrapper of its own, claimed here. */
unsigned vt_resolve_slot(unsigned api, void *real, int linked_ok)
{
    if (linked_ok && atomic_load_explicit(&vt_real_fn[api], memory_order_acquire) == real)
        return VT_SLOT_LINKED;
    for (unsigned k = 0; k < VT_SLOTS; k++)
        if (atomic_load_explicit(&vt_slot_fn[api][k], memory_order_acquire) == real)
            return k;
    for (unsigned k = 0; k < VT_SLOTS; k++) {
        void *expected = NULL;
        if (atomic_compare_exchange_strong(&vt_slot_fn[api][k], &expected, real) || expected == real)
            return k;
    }
    static _Atomic int warned;
    vt_warn_once(&warned, "more than %d definitions of %s looked up; calls through the later ones are not traced",
                 VT_SLOTS, vt_api_info(api)->name);
    return VT_SLOT_NONE;
}

/* A library went: what was found may have gone with it. The linked answers
 * are found again on their next call; a looked-up pointer whose library
 * went answers "not found" instead of jumping into the unmapped copy. */
void vt_real_forget(void)
{
    for (unsigned i = 0; i < VT_API_COUNT; i++) {
        atomic_store_explicit(&vt_real_fn[i], NULL, memory_order_release);
        for (unsigned k = 0; k < VT_SLOTS; k++) {
            Dl_info info;
            void *fn = atomic_load_explicit(&vt_slot_fn[i][k], memory_order_acquire);
            if (fn && !dladdr(fn, &info))
                atomic_compare_exchange_strong(&vt_slot_fn[i][k], &fn, NULL);
        }
    }
    atomic_fetch_add_explicit(&vt_unload_gen, 1, memory_order_acq_rel);
}

/* Another copy of the shim, at another path, comes before this one in the
 * global scope: it records, this one passes through (one trace a process).
 * A copy is an object that defines the annotation API and the NVTX
 * injection entry point itself; a program that defines its own
 * vramtrace_tag_push is not one. */
static int defines_here(void *handle, const char *name, const void *base)
{
    Dl_info info;
    void *fn = vt_real_dlsym(handle, name);
    return fn && dladdr(fn, &info) && info.dli_fbase == base;
}

int vt_shim_shadowed(void)
{
    void *first = vt_real_dlsym(RTLD_DEFAULT, "vramtrace_tag_push");
    Dl_info mine, theirs;
    struct link_map *lm = NULL;
    if (!first || !dladdr((void *)vt_shim_shadowed, &mine) ||
        !dladdr1(first, &theirs, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_name || !lm->l_name[0] ||
        mine.dli_fbase == theirs.dli_fbase)
        return 0;
    void *h = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    int copy = defines_here(h, "vramtrace_tag_pop", theirs.dli_fbase) &&
               defines_here(h, "InitializeInjectionNvtx2", theirs.dli_fbase) &&
               defines_here(h, "cuGetProcAddress_v2", theirs.dli_fbase);
    vt_real_dlclose(h);
    return copy;
}

/* ---- what cuGetProcAddress returned ---- */

static void *driver_addr[VT_API_COUNT];
static pthread_once_t driver_addr_once = PTHREAD_ONCE_INIT;

static void build_driver_addr(void)
{
    void *h = vt_libcuda();
    if (!h)
        return;
    for (unsigned i = 0; i < VT_API_COUNT; i++)
        if (!vt_api_info(i)->runtime)
            driver_addr[i] = vt_real_dlsym(h, vt_api_info(i)->name);
}

unsigned vt_resolve_procaddr(void *fn)
{
    if (!fn || in_shim(fn))
        return VT_API_COUNT;
    pthread_once(&driver_addr_once, build_driver_addr);
    for (unsigned i = 0; i < VT_API_COUNT; i++) {
        if (driver_addr[i] == fn) {
            vt_real(i);
            return i;
        }
    }
    /* A driver whose table entries are not its exported symbols: trust an
     * exact symbol match only. */
    Dl_info info;
    if (dladdr(fn, &info) && info.dli_saddr == fn && info.dli_sname) {
        unsigned api = api_by_name(info.dli_sname);
        if (api < VT_API_COUNT && !vt_api_info(api)->runtime) {
            vt_real(api);
            return api;
        }
    }
    return VT_API_COUNT;
}

/* ---- dlsym ---- */

/* ---- who is looking up ---- */

/* What a lookup's caller is: libcuda itself (its own lookups are never
 * routed), a runtime (libcudart.so.13, or a vendored copy a wheel renamed,
 * libcudart-1a2b3c4d.so.11.0, as find_other_runtime tells them: it gets
 * slot wrappers), or anything else. */
enum { CALLER_OTHER, CALLER_DRIVER, CALLER_RUNTIME };

typedef struct caller_span {
    uintptr_t where, lo, hi;
    int kind;
} caller_span_t;

/* A dl_iterate_phdr callback: the loaded span and the kind of the object
 * holding where. Under the loader's lock: calls nothing that takes it. */
static int find_caller(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    caller_span_t *s = data;
    uintptr_t lo, hi;
    vt_load_span(info, &lo, &hi);
    if (s->where < lo || s->where >= hi)
        return 0;
    const char *base = base_name(info->dlpi_name ? info->dlpi_name : "");
    s->lo = lo, s->hi = hi;
    s->kind = !strncmp(base, "libcuda.so", 10) ? CALLER_DRIVER : strstr(base, "cudart") ? CALLER_RUNTIME : CALLER_OTHER;
    return 1;
}

/* A runtime asks for hundreds of entry points from one library, and
 * dladdr costs about 3 us a call (it looks for the nearest symbol): the
 * last caller's library, its span and kind, is kept per thread until a
 * library is unloaded. */
static int caller_kind(const void *caller)
{
    static __thread uintptr_t last_lo, last_hi;
    static __thread unsigned last_gen;
    static __thread int last_kind;
    uintptr_t p = (uintptr_t)caller;
    unsigned gen = atomic_load_explicit(&vt_unload_gen, memory_order_acquire);
    if (p >= last_lo && p < last_hi && gen == last_gen)
        return last_kind;
    caller_span_t s = { p, 0, 0, CALLER_OTHER };
    if (!p || !vt_dl_iterate_phdr(find_caller, &s))
        return CALLER_OTHER;
    last_lo = s.lo, last_hi = s.hi, last_gen = gen, last_kind = s.kind;
    return s.kind;
}

int vt_caller_is_runtime(const void *caller)
{
    return caller_kind(caller) == CALLER_RUNTIME;
}

/* Not instrumented: ASan and TSan call dlsym(RTLD_NEXT) while setting
 * themselves up, before their shadow memory exists, so this must touch
 * nothing before it knows the lookup is not ours. */
__attribute__((no_sanitize("address", "undefined", "thread"))) int vt_resolve_dlsym(void *handle, const char *name,
                                                                                    void *caller, unsigned *api,
                                                                                    void **real)
{
    if (atomic_load_explicit(&runtime_uniform, memory_order_relaxed) && !vt_tls.guard)
        recheck_runtimes();
    if (handle == RTLD_NEXT || !name || name[0] != 'c' || name[1] != 'u')
        return VT_LOOKUP_FORWARD;
    *api = api_by_name(name);
    if (*api == VT_API_COUNT || vt_tls.guard || caller_kind(caller) == CALLER_DRIVER)
        return VT_LOOKUP_FORWARD;
    /* The linked answer first: a lookup that finds the same gets the
     * linked wrapper, as the program's own references do. */
    vt_real(*api);
    if (handle == RTLD_DEFAULT) {
        /* From here RTLD_DEFAULT would find our own export first: answer
         * as the caller would be answered without us. */
        int uniform;
        *real = resolve_for(*api, caller, &uniform);
        /* Nothing but us defines it (a driver without this entry point):
         * forwarding would answer with our own export, and the program
         * would think the driver has it. */
        if (!*real)
            return VT_LOOKUP_MISSING;
    } else {
        *real = vt_real_dlsym(handle, name);
    }
    if (!*real || in_shim(*real))
        return VT_LOOKUP_FORWARD; /* the real lookup answers, dlerror() and all */
    return VT_LOOKUP_FOUND;
}
