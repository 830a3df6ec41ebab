/* vtfault.c: libvtfault.so, a fault injector LD_PRELOADed in front of the
 * shim. It wraps write(2) and, for file descriptors whose path ends in
 * ".vtrace" only (the host's own output is never touched), makes writes
 * fail the ways disks and signals make them fail:
 *
 *   VTFAULT_EINTR=N         every Nth trace write fails with EINTR first
 *   VTFAULT_SHORT=1         trace writes write at most half their bytes
 *   VTFAULT_ENOSPC_AFTER=B  after B bytes in all, trace writes are cut at
 *                           the limit and then fail with ENOSPC (a disk
 *                           that fills in the middle of a chunk)
 *   VTFAULT_SLOW_PHDR_MS=N  dl_iterate_phdr, called from any thread but the
 *                           main one, sleeps N ms in its first callback with
 *                           the loader's lock held: a fork from the main
 *                           thread then lands inside a walk (loader_lock.c)
 *   VTFAULT_EXIT_WAIT=FILE  at exit, after the shim's destructor (preload
 *                           it after the shim: it is finalized later), waits
 *                           up to 5 s until the call counters faultprog's
 *                           exitrace keeps in FILE stand still for 300 ms:
 *                           every thread of the program is then waiting in
 *                           a call, and the counts are final
 *
 *   VTFAULT_NO_THREADS=shim|all  pthread_create fails with EAGAIN, as when
 *                           a cgroup's pids.max or RLIMIT_NPROC is reached:
 *                           for threads the shim starts (the caller's
 *                           object is libvramtrace.so), or for every caller
 *
 * Being first in LD_PRELOAD, its write is what the shim's calls bind to.
 * The real write is the raw syscall: no dlsym, which the shim interposes;
 * the real dl_iterate_phdr comes from dlvsym, which it does not.
 * At exit it says on stderr how many faults it injected, so a test can
 * prove the faults really happened.
 */
#define _GNU_SOURCE /* dlvsym, RTLD_NEXT, struct dl_phdr_info */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <time.h>
#include <unistd.h>

static long eintr_every = -1, enospc_after = -1;
static int short_writes = -1;
static atomic_long calls, total, n_eintr, n_short, n_enospc, n_slow_walks, n_no_threads;

static long env_long(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? atol(v) : 0;
}

static int is_trace_fd(int fd)
{
    char link[64], target[4096];
    /* thread-self: the shim writes from a thread with a table of its own. */
    snprintf(link, sizeof link, "/proc/thread-self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 7)
        return 0;
    target[n] = 0;
    return !strcmp(target + n - 7, ".vtrace");
}

static ssize_t raw_write(int fd, const void *buf, size_t n)
{
    return syscall(SYS_write, fd, buf, n);
}

__attribute__((visibility("default"))) ssize_t write(int fd, const void *buf, size_t n)
{
    if (eintr_every < 0) {
        eintr_every = env_long("VTFAULT_EINTR");
        enospc_after = getenv("VTFAULT_ENOSPC_AFTER") ? env_long("VTFAULT_ENOSPC_AFTER") : -1;
        short_writes = (int)env_long("VTFAULT_SHORT");
    }
    if (fd <= 2 || !n || !is_trace_fd(fd))
        return raw_write(fd, buf, n);
    long k = atomic_fetch_add(&calls, 1) + 1;
    if (eintr_every > 0 && k % eintr_every == 0) {
        atomic_fetch_add(&n_eintr, 1);
        errno = EINTR;
        return -1;
    }
    size_t want = n;
    if (short_writes && want > 1) {
        want /= 2;
        atomic_fetch_add(&n_short, 1);
    }
    if (enospc_after >= 0) {
        long room = enospc_after - atomic_load(&total);
        if (room <= 0) {
            atomic_fetch_add(&n_enospc, 1);
            errno = ENOSPC;
            return -1;
        }
        if ((long)want > room)
            want = (size_t)room;
    }
    ssize_t w = raw_write(fd, buf, want);
    if (w > 0)
        atomic_fetch_add(&total, w);
    return w;
}

typedef int (*phdr_cb_t)(struct dl_phdr_info *, size_t, void *);
typedef int (*phdr_iter_t)(phdr_cb_t, void *);
typedef struct slow_walk {
    phdr_cb_t cb;
    void *data;
    long ms;   /* VTFAULT_SLOW_PHDR_MS; 0 once slept */
} slow_walk_t;

static int slow_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    slow_walk_t *w = arg;
    if (w->ms > 0) {
        struct timespec ts = { w->ms / 1000, (w->ms % 1000) * 1000000 };
        w->ms = 0;
        nanosleep(&ts, NULL);
        atomic_fetch_add(&n_slow_walks, 1);
    }
    return w->cb(info, size, w->data);
}

__attribute__((visibility("default"))) int dl_iterate_phdr(phdr_cb_t cb, void *data)
{
    static _Atomic(phdr_iter_t) real;
    phdr_iter_t f = atomic_load(&real);
    if (!f) {
        f = (phdr_iter_t)dlvsym(RTLD_NEXT, "dl_iterate_phdr", "GLIBC_2.2.5");
        if (!f)
            return 0;
        atomic_store(&real, f);
    }
    long ms = env_long("VTFAULT_SLOW_PHDR_MS");
    if (ms <= 0 || syscall(SYS_gettid) == getpid())
        return f(cb, data);
    slow_walk_t w = { cb, data, ms };
    return f(slow_cb, &w);
}

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static int made_by_shim(const void *caller)
{
    Dl_info info;
    return dladdr(caller, &info) && info.dli_fname && strstr(info.dli_fname, "libvramtrace");
}

__attribute__((visibility("default"))) int pthread_create(pthread_t *t, const pthread_attr_t *attr,
                                                          void *(*fn)(void *), void *arg)
{
    static _Atomic(create_fn) real;
    create_fn f = atomic_load(&real);
    if (!f) {
        f = (create_fn)dlvsym(RTLD_NEXT, "pthread_create", "GLIBC_2.34");
        if (!f)
            f = (create_fn)dlvsym(RTLD_NEXT, "pthread_create", "GLIBC_2.2.5");
        if (!f)
            return EAGAIN;
        atomic_store(&real, f);
    }
    const char *how = getenv("VTFAULT_NO_THREADS");
    if (how && (!strcmp(how, "all") || (!strcmp(how, "shim") && made_by_shim(__builtin_return_address(0))))) {
        atomic_fetch_add(&n_no_threads, 1);
        return EAGAIN;
    }
    return f(t, attr, fn, arg);
}

/* VTFAULT_EXIT_WAIT: FILE holds uint64 words, faultprog's exitrace
 * counters; their sum stands still once every thread waits in a call. */
static void exit_wait(void)
{
    const char *path = getenv("VTFAULT_EXIT_WAIT");
    if (!path)
        return;
    int f = open(path, O_RDONLY);
    if (f < 0)
        return;
    enum { WORDS = 4096 };
    volatile uint64_t *w = mmap(NULL, WORDS * 8, PROT_READ, MAP_SHARED, f, 0);
    close(f);
    if (w == MAP_FAILED)
        return;
    uint64_t last = ~0ull;
    int still_ms = 0;
    for (int waited_ms = 0; waited_ms < 5000 && still_ms < 300; waited_ms += 10) {
        uint64_t sum = 0;
        for (int i = 0; i < WORDS; i++)
            sum += w[i];
        still_ms = sum == last ? still_ms + 10 : 0;
        last = sum;
        struct timespec ts = { 0, 10 * 1000000 };
        nanosleep(&ts, NULL);
    }
}

__attribute__((destructor)) static void report(void)
{
    exit_wait();
    char msg[192];
    int len = snprintf(msg, sizeof msg, "vtfault: eintr=%ld short=%ld enospc=%ld bytes=%ld slow_walks=%ld no_threads=%ld\n",
                       atomic_load(&n_eintr), atomic_load(&n_short), atomic_load(&n_enospc),
                       atomic_load(&total), atomic_load(&n_slow_walks), atomic_load(&n_no_threads));
    raw_write(2, msg, (size_t)len);
}
