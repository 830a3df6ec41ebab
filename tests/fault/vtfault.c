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
 *
 * Being first in LD_PRELOAD, its write is what the shim's calls bind to.
 * The real write is the raw syscall: no dlsym, which the shim interposes.
 * At exit it says on stderr how many faults it injected, so a test can
 * prove the faults really happened.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static long eintr_every = -1, enospc_after = -1;
static int short_writes = -1;
static atomic_long calls, total, n_eintr, n_short, n_enospc;

static long env_long(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? atol(v) : 0;
}

static int is_trace_fd(int fd)
{
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
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

__attribute__((destructor)) static void report(void)
{
    char msg[160];
    int len = snprintf(msg, sizeof msg, "vtfault: eintr=%ld short=%ld enospc=%ld bytes=%ld\n",
                       atomic_load(&n_eintr), atomic_load(&n_short), atomic_load(&n_enospc),
                       atomic_load(&total));
    raw_write(2, msg, (size_t)len);
}
