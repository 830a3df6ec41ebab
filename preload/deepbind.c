/* deepbind.c: the CUDA imports of a library loaded with RTLD_DEEPBIND.
 *
 * Why: RTLD_DEEPBIND makes the loaded object look in its own scope (itself
 * and its dependencies) before the global one, LD_PRELOAD included. A
 * library so loaded that links libcuda or libcudart bound its calls
 * straight to them: the trace never saw its allocations, and the report
 * judged the run without them (tests/t/76-fault-interpose.t, deepbind).
 * OpenGL interposers met the same (VirtualGL strips the flag, which
 * changes how the program's own symbols bind; the shim must not).
 *
 * What, instead: each slot of a name of the table (entrypoints.def) in the
 * objects that load added, left where the object's own scope bound it,
 * gets what a lookup of that definition by the object hands out
 * (vt_hand_out): a wrapper that calls exactly what the slot held. A slot
 * not bound yet (lazy binding) gets the wrapper of what the object's own
 * scope defines (dlsym on its handle, where the loader would look first).
 * Its dlsym, dlopen and dlclose, which its own scope bound to libc's, get
 * the shim's, so that a driver it opens and looks into by hand, or a
 * runtime finding its driver, goes through the shim as without the flag.
 * The object's other imports, and any name the object defines itself (a
 * runtime's calls to its own entry points), stay as the loader bound them.
 *
 * When: the load itself is the loader's (dlopen's trampoline jumps into
 * glibc, which returns to the program), so dlopen only notes it
 * (vt_deepbind_note); the next dlsym, on any thread, settles it before its
 * own lookup (vt_deepbind_settle): a program reaches what it loaded so
 * through dlsym (ctypes, JNI, plugins). Calls the library makes before
 * that, in its constructors inside dlopen, pass unseen (docs/limits.md).
 * x86-64 only, as dlopen's trampoline and got.c are.
 *
 * Which objects: the loader's count of objects added is read at the note;
 * at the settle the objects added since are the last ones of the loader's
 * list (dl_iterate_phdr goes in load order), the library first. Another
 * thread's load in between adds objects that are settled too: a slot bound
 * to our export is left alone, and one not bound yet gets the wrapper the
 * loader would have bound it to. An object in another namespace (dlmopen)
 * is left alone.
 */
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "shim.h"

/* The loader's count of objects added when the first unsettled
 * RTLD_DEEPBIND load began, + 1 (0: none pending). */
_Atomic unsigned long long vt_deepbind_pending;

/* At most this many objects are settled at once: the library and the
 * first of its dependencies, in load order (the rest of a larger group is
 * left as bound). */
#define MAX_SETTLED 64

typedef struct added {
    unsigned long long adds_now;
    size_t total, first, n;  /* objects listed; the first to settle, how many */
    struct {
        uintptr_t addr, lo, hi;
    } obj[MAX_SETTLED];
} added_t;

static int count_adds(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_adds;
    return 1;
}

void vt_deepbind_note(void)
{
    unsigned long long adds = 0;
    vt_dl_iterate_phdr(count_adds, &adds);
    unsigned long long none = 0;
    atomic_compare_exchange_strong(&vt_deepbind_pending, &none, adds + 1);
}

static int count_objects(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    added_t *a = data;
    a->adds_now = info->dlpi_adds;
    a->total++;
    return 0;
}

static int list_objects(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    added_t *a = data;
    size_t i = a->total++;
    if (i < a->first || i - a->first >= a->n)
        return 0;
    size_t k = i - a->first;
    a->obj[k].addr = info->dlpi_addr;
    vt_load_span(info, &a->obj[k].lo, &a->obj[k].hi);
    return 0;
}

typedef struct object {
    struct link_map *lm;
    uintptr_t lo, hi;
    const vt_loader_entries_t *loader;
} object_t;

static int inside(const object_t *o, const void *p)
{
    return (uintptr_t)p >= o->lo && (uintptr_t)p < o->hi;
}

/* The loader's entry points the shim wraps, for an object whose own
 * scope bound them to libc's: its lookups of CUDA names (a driver opened
 * and looked into by hand, a runtime finding its driver) and its loads
 * and unloads then go through the shim as everyone else's do. */
static void *loader_entry(const object_t *o, const char *name)
{
    if (!strcmp(name, "dlsym"))
        return o->loader->dlsym;
    if (!strcmp(name, "dlopen"))
        return o->loader->dlopen;
    if (!strcmp(name, "dlclose"))
        return o->loader->dlclose;
    return NULL;
}

static void settle_slot(vt_got_t *g, const char *name, int undefined, void **slot, void *arg)
{
    const object_t *o = arg;
    if (!slot || !undefined)
        return;
    if (name[0] == 'd') {
        void *ours = loader_entry(o, name);
        if (ours && !vt_in_shim(__atomic_load_n(slot, __ATOMIC_ACQUIRE)))
            vt_got_store(g, slot, ours);
        return;
    }
    if (name[0] != 'c' || name[1] != 'u')
        return;
    unsigned api = vt_resolve_api_named(name);
    if (api >= VT_API_COUNT)
        return;
    void *bound = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (vt_in_shim(bound))
        return;   /* it reached the preload: nothing went around it */
    /* Not bound yet: the lazy stub lies in the object's own PLT. */
    void *real = inside(o, bound) ? vt_real_dlsym(o->lm, name) : bound;
    if (!real || vt_in_shim(real) || inside(o, real))
        return;   /* only the global scope has it (it binds to us), or the object's own */
    vt_got_store(g, slot, vt_hand_out(api, real, slot));
}

void vt_deepbind_settle(const vt_loader_entries_t *loader)
{
    unsigned long long pending = atomic_exchange(&vt_deepbind_pending, 0);
    if (!pending)
        return;
    unsigned long long adds_before = pending - 1;
    added_t a = { 0 };
    vt_dl_iterate_phdr(count_objects, &a);
    unsigned long long added = a.adds_now > adds_before ? a.adds_now - adds_before : 0;
    size_t n = added < a.total ? (size_t)added : a.total;
    a.first = a.total - n;
    a.n = n < MAX_SETTLED ? n : MAX_SETTLED;
    a.total = 0;
    vt_dl_iterate_phdr(list_objects, &a);
    for (size_t k = 0; k < a.n && k < a.total; k++) {
        object_t o = { NULL, a.obj[k].lo, a.obj[k].hi, loader };
        Dl_info info;
        Lmid_t ns = LM_ID_BASE + 1;
        /* The object at that address now (not one unloaded meanwhile), in
         * the program's namespace. */
        if (!o.hi || !dladdr1((void *)o.lo, &info, (void **)&o.lm, RTLD_DL_LINKMAP) || !o.lm ||
            o.lm->l_addr != a.obj[k].addr || dlinfo(o.lm, RTLD_DI_LMID, &ns) != 0 || ns != LM_ID_BASE)
            continue;
        vt_got_rewrite(o.lm, settle_slot, &o);
    }
}
