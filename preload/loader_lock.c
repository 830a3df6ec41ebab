/* loader_lock.c: the shim's walks of the loaded modules, kept out of fork's
 * way.
 *
 * Why: dl_iterate_phdr runs its callback under the dynamic loader's lock,
 * and glibc's fork does not reset that lock in the child (2.36, Debian
 * 12's: JuliaLang/julia#57017 met the same). A fork that lands while
 * another thread is inside leaves the child's next dl_iterate_phdr waiting
 * forever: its first CUDA call through the shim, or its own C++ exception
 * unwinding. The shim walks the modules from the program's threads (a
 * return address the CFI cache has not seen, the periodic check for
 * unloaded modules, libunwind's fallback, dlclose), so without this guard
 * a forking server could hang its children: the fork storm of tests/t/74
 * did, about once in 100 runs on a loaded machine. The writer's walks
 * (symbols.c) are inside a drain, which fork waits out first (writer.c's
 * work_lock), but that wait is bounded too, so they take this lock as well.
 *
 * Contract:
 *  - vt_dl_iterate_phdr is dl_iterate_phdr under a shared lock, and
 *    vt_loader_enter/leave bracket anything else that walks the modules
 *    (libunwind, backtrace). The bracketed code must not enter again: a
 *    fork waiting in between would deadlock it.
 *  - fork's prepare handler (vt_loader_atfork_prepare) takes the lock
 *    exclusively, waiting at most 2 s for the walks in progress (each is
 *    microseconds); past that it forks anyway, as it would without us. The
 *    parent then releases it, the child re-creates it.
 *  - Writers are preferred: walks that start while a fork waits wait too,
 *    so a stream of them from many threads cannot starve it.
 *  - In a child made without the fork handlers (vt_loader_inherited), and
 *    in every process forked from one, no walk happens:
 *    vt_dl_iterate_phdr returns 0 as if nothing matched.
 *    What a walk decides is then decided without it: a caller's own
 *    runtime, where two are loaded, is taken to be the first one
 *    (docs/limits.md).
 */
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>

#include "loader_lock.h"

static pthread_rwlock_t loader_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static int fork_holds_loader_lock;
static __thread _Atomic unsigned long long *watch __attribute__((tls_model("initial-exec")));

void vt_loader_watch(_Atomic unsigned long long *since)
{
    watch = since;
}

void vt_loader_enter(void)
{
    if (watch) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        atomic_store(watch, (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
    }
    pthread_rwlock_rdlock(&loader_lock);
}

void vt_loader_leave(void)
{
    pthread_rwlock_unlock(&loader_lock);
    if (watch)
        atomic_store(watch, 0);
}

_Atomic(_Atomic uint8_t *) vt_loader_own_state;

/* The byte is set before the page is published: a walk that finds the
 * page finds it set. */
static void own_state_is_mine(void)
{
    _Atomic uint8_t *own = atomic_load_explicit(&vt_loader_own_state, memory_order_acquire);
    if (own)
        atomic_store_explicit(own, 1, memory_order_relaxed);
}

/* A page already there is one this process inherited, with its byte as
 * the fork left it: a start-up does not make inherited state its own. */
void vt_loader_arm(void)
{
    if (atomic_load_explicit(&vt_loader_own_state, memory_order_acquire))
        return;
    void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return;
    if (madvise(page, 4096, MADV_WIPEONFORK) != 0) {
        munmap(page, 4096);
        return;
    }
    atomic_store_explicit((_Atomic uint8_t *)page, 1, memory_order_relaxed);
    atomic_store_explicit(&vt_loader_own_state, (_Atomic uint8_t *)page, memory_order_release);
}

int vt_dl_iterate_phdr(int (*callback)(struct dl_phdr_info *, size_t, void *), void *data)
{
    if (vt_loader_inherited())
        return 0;
    vt_loader_enter();
    int rc = dl_iterate_phdr(callback, data);
    vt_loader_leave();
    return rc;
}

void vt_load_span(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi)
{
    *lo = UINTPTR_MAX, *hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        *lo = a < *lo ? a : *lo;
        *hi = a + ph->p_memsz > *hi ? a + ph->p_memsz : *hi;
    }
    if (*hi == 0)
        *lo = 0;
}

/* Whether the forking process's loader state is its own, noted by each
 * fork's prepare handler: the child of a child made without the handlers
 * inherits the loader's lock as its parent did, whatever its own fork
 * handlers do (its walks waited for ever, tests/t/74-fault-rawfork.t). */
static _Atomic int fork_from_own_state = 1;

void vt_loader_atfork_prepare(int walks)
{
    atomic_store(&fork_from_own_state, !vt_loader_inherited());
    fork_holds_loader_lock = 0;
    if (!walks)
        return;
    /* pthread_rwlock_timedwrlock measures against CLOCK_REALTIME. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 2;
    fork_holds_loader_lock = pthread_rwlock_timedwrlock(&loader_lock, &deadline) == 0;
}

void vt_loader_atfork_parent(void)
{
    if (fork_holds_loader_lock) {
        fork_holds_loader_lock = 0;
        pthread_rwlock_unlock(&loader_lock);
    }
}

int vt_loader_atfork_child(void)
{
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&loader_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    fork_holds_loader_lock = 0;
    /* The fork handlers ran: fork waited out the shim's walks, so the
     * loader's state here is the child's own, unless its parent's was not. */
    if (!atomic_load(&fork_from_own_state))
        return 0;
    own_state_is_mine();
    return 1;
}
