/* loader_lock.h: dl_iterate_phdr and other walks of the loaded modules,
 * under a lock that fork's prepare handler waits out (contract and why:
 * loader_lock.c). Its own header so that symbols.c, which the unit test
 * links without the rest of the shim, can use it too. */
#ifndef VT_PRELOAD_LOADER_LOCK_H
#define VT_PRELOAD_LOADER_LOCK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct dl_phdr_info;
int vt_dl_iterate_phdr(int (*callback)(struct dl_phdr_info *, size_t, void *), void *data);
/* The addresses [*lo, *hi) an object's PT_LOAD segments span, from inside
 * a walk's callback; 0 and 0 when it has none. */
void vt_load_span(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi);
void vt_loader_enter(void);
void vt_loader_leave(void);
/* A page the kernel zeroes in every child of a fork, fork handlers or not
 * (MADV_WIPEONFORK, Linux 4.14), holding 1 in a process whose loader state
 * is its own: the one that started the shim, and a child whose fork
 * handlers ran. A child made by _Fork() or a raw clone finds 0: a thread
 * of its parent may have been inside dl_iterate_phdr at the fork (the
 * writer naming frames), and the loader's lock it inherited held is never
 * released there, so the shim walks nothing in it (its first CUDA call
 * waited for ever, tests/t/74-fault-rawfork.t). NULL before the shim
 * started, or where the kernel lacks it. Published after its byte is set:
 * walks on other threads read it while start-up maps it. */
extern _Atomic(_Atomic uint8_t *) vt_loader_own_state;
static inline int vt_loader_inherited(void)
{
    _Atomic uint8_t *own = atomic_load_explicit(&vt_loader_own_state, memory_order_acquire);
    return own && !atomic_load_explicit(own, memory_order_relaxed);
}
/* At start-up: the page mapped (once per process tree) and set. */
void vt_loader_arm(void);
/* Every fork's handlers: prepare waits out the shim's walks where walks may
 * be under way; the child's returns 1 where its loader state is its own, 0
 * where its parent's was inherited (the child's is then too). */
void vt_loader_atfork_prepare(int walks);
void vt_loader_atfork_parent(void);
int vt_loader_atfork_child(void);
/* The calling thread's walks, from now on, store their start in *since
 * (CLOCK_MONOTONIC ns, 0 between walks): how long a thread has waited for
 * one, as seen from another (writer.c, at exit). */
void vt_loader_watch(_Atomic unsigned long long *since);

#endif
