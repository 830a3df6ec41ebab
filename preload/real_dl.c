/* real_dl.c: the loader's own dlsym, dlclose and dlopen, for the shim's
 * lookups and trampolines.
 *
 * The shim exports dlsym, dlopen and dlclose (dl_hooks.c), so a plain call from
 * here would reach ours. glibc's dlsym comes from dlvsym (GLIBC_2.34 first,
 * then 2.2.5), since asking for "dlsym" from inside this library would find
 * ourselves; glibc's dlclose is the next one after ours (RTLD_NEXT).
 * A leaf: calls no other file of the shim.
 */
#include <dlfcn.h>
#include <stdatomic.h>

#include "shim.h"

void *vt_next_dlsym;
void *vt_next_dlopen;

typedef void *(*dlsym_fn)(void *, const char *);

/* glibc's definition of name past ours, at the version glibc 2.34 gave it
 * (libc) or the one before (libdl), into *next once found. Not
 * instrumented: dl_hooks.c's routes call it before ASan or TSan have their
 * shadow memory (they call dlsym and dlopen while setting themselves up). */
__attribute__((no_sanitize("address", "undefined", "thread"))) static void resolve_next(void **next,
                                                                                      const char *name)
{
    if (__atomic_load_n(next, __ATOMIC_ACQUIRE))
        return;
    void *fn = dlvsym(RTLD_NEXT, name, "GLIBC_2.34");
    if (!fn)
        fn = dlvsym(RTLD_NEXT, name, "GLIBC_2.2.5");
    __atomic_store_n(next, fn, __ATOMIC_RELEASE);
}

__attribute__((no_sanitize("address", "undefined", "thread"))) void vt_real_dlsym_resolve(void)
{
    resolve_next(&vt_next_dlsym, "dlsym");
}

/* glibc's dlopen, for dl_hooks.c's trampoline. */
__attribute__((no_sanitize("address", "undefined", "thread"))) void vt_real_dlopen_resolve(void)
{
    resolve_next(&vt_next_dlopen, "dlopen");
}

void *vt_real_dlsym(void *handle, const char *name)
{
    vt_real_dlsym_resolve();
    dlsym_fn fn = (dlsym_fn)vt_next_dlsym;
    return fn ? fn(handle, name) : NULL;
}

typedef int (*dlclose_fn)(void *);
static _Atomic(dlclose_fn) next_dlclose;

/* Our own export would be found from here by name: RTLD_NEXT skips it. */
int vt_real_dlclose(void *handle)
{
    dlclose_fn fn = atomic_load_explicit(&next_dlclose, memory_order_acquire);
    if (!fn) {
        fn = (dlclose_fn)vt_real_dlsym(RTLD_NEXT, "dlclose");
        if (!fn)
            return -1; /* no libc dlclose: unloading nothing is safe */
        atomic_store_explicit(&next_dlclose, fn, memory_order_release);
    }
    return fn(handle);
}
