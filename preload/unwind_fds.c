/* unwind_fds.c: libunwind kept out of the program's descriptors.
 *
 * While it steps frames, libunwind checks that each address is readable
 * before reading it (every access in its default build, CONSERVATIVE_CHECKS;
 * at least past a frame without unwind information) by writing one byte
 * from it into a pipe of its own (1.6 to 1.8: x86_64/Ginit.c, then
 * mi/Gaddress_validator.c). The pipe's two descriptors sit in the
 * program's table, under numbers libunwind keeps for the process's life. A
 * program that closes every descriptor above 2 and then opens its own
 * files gets those numbers: libunwind's next check reads a byte of the
 * program's pipe, or, finding the number no longer readable, closes it and
 * the other "to reopen the pipe", and the program's next write goes to
 * libunwind's pipe (tests/t/77-fault-fds.t, closefds pipe and close_range:
 * a byte of the program's pipe eaten and one of stack memory added; the
 * program's file closed under it).
 *
 * The shim loads libunwind itself, so it points libunwind's own imports of
 * pipe2, pipe, read, write, close and syscall (its relocation slots, no
 * one else's) at functions that give it a pipe with no descriptors, and
 * its mincore at the same check (unw_mincore):
 * numbers above any a table can hold, on which read finds nothing, close
 * succeeds, and a one-byte write from an address is a check that the
 * address can be read, which fails with EFAULT exactly where the write
 * would (check_readable). Every call on other descriptors
 * and every other system call goes through unchanged.
 *
 * Contract: vt_unwind_fds_redirect(handle) patches the library behind
 * handle before its first unwind; it returns 1 when libunwind can no
 * longer make a descriptor of its own (its pipe imports are ours, or it
 * imports none), 0 when it still can (the caller then does without it).
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

/* Above fs.nr_open's ceiling (1 << 20 by default, 1 << 30 at most): no
 * descriptor table holds these numbers, so a call the shim did not
 * redirect fails with EBADF on them and touches nothing. */
#define FAKE_READ_END 0x7ffffff0
#define FAKE_WRITE_END 0x7ffffff1

static int is_fake(long fd)
{
    return fd == FAKE_READ_END || fd == FAKE_WRITE_END;
}

/* The check the pipe write made, with no descriptor (vt_readable):
 * 1, or -1 with EFAULT exactly where the write would have failed. */
static long check_readable(const void *addr)
{
    if (vt_readable(addr, 1))
        return 1;
    errno = EFAULT;
    return -1;
}

/* libunwind asks mincore whether its stack's page is mapped at start-up,
 * and (1.6 and later, where that worked) whether each page it reads is.
 * The answer comes from vt_readable: systemd's @system-service set lacks
 * mincore, and a unit filtering to it killed the process at libunwind's
 * first use (77-fault-seccomp). A mapped page that cannot be read
 * (PROT_NONE) is answered "not mapped": libunwind must not read it either. */
static int unw_mincore(void *addr, size_t length, unsigned char *vec)
{
    size_t page = (size_t)getpagesize();
    if ((uintptr_t)addr & (page - 1)) {
        errno = EINVAL;
        return -1;
    }
    if (!length)
        return 0;
    if (!vt_readable(addr, length)) {
        errno = ENOMEM;
        return -1;
    }
    memset(vec, 1, (length + page - 1) / page);
    return 0;
}

static int unw_pipe2(int fds[2], int flags)
{
    (void)flags;
    fds[0] = FAKE_READ_END;
    fds[1] = FAKE_WRITE_END;
    return 0;
}

static int unw_pipe(int fds[2])
{
    return unw_pipe2(fds, 0);
}

/* libunwind drains the pipe before each check: empty, and open. */
static ssize_t unw_read(int fd, void *buf, size_t count)
{
    if (!is_fake(fd))
        return read(fd, buf, count);
    errno = EAGAIN;
    return -1;
}

static ssize_t unw_write(int fd, const void *buf, size_t count)
{
    if (fd != FAKE_WRITE_END)
        return write(fd, buf, count);
    return count ? check_readable(buf) : 0;
}

static int unw_close(int fd)
{
    return is_fake(fd) ? 0 : close(fd);
}

/* syscall(2) is variadic; on x86-64 its integer arguments travel in the
 * same registers as fixed ones, so six are taken and passed on as they
 * came. libunwind writes with syscall(SYS_write, ...) so that ASan does
 * not see the read of an unchecked address. */
static long unw_syscall(long number, long a1, long a2, long a3, long a4, long a5, long a6)
{
    if (number == SYS_write && a1 == FAKE_WRITE_END)
        return a3 ? check_readable((const void *)a2) : 0;
    return syscall(number, a1, a2, a3, a4, a5, a6);
}

/* required: an import of name left pointing at libc makes libunwind
 * unusable (a descriptor it can still make, a call a seccomp policy may
 * kill for); imported: relocations that ask for name from elsewhere; done:
 * the slots that now hold to. */
typedef struct redirect {
    const char *name;
    void *to;
    int required, imported, done;
} redirect_t;

static void redirect_slot(vt_got_t *g, const char *name, int undefined, void **slot, void *arg)
{
    for (redirect_t *r = arg; r->name; r++) {
        if (strcmp(name, r->name) != 0)
            continue;
        r->imported += undefined;
        r->done += vt_got_store(g, slot, r->to);
    }
}

int vt_unwind_fds_redirect(void *handle)
{
#if defined(__x86_64__)
    struct link_map *lm = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
        return 0;
    redirect_t redirects[] = {
        { "pipe2", (void *)unw_pipe2, 1, 0, 0 },     { "pipe", (void *)unw_pipe, 1, 0, 0 },
        { "read", (void *)unw_read, 0, 0, 0 },       { "write", (void *)unw_write, 0, 0, 0 },
        { "close", (void *)unw_close, 0, 0, 0 },     { "syscall", (void *)unw_syscall, 0, 0, 0 },
        { "mincore", (void *)unw_mincore, 1, 0, 0 }, { NULL, NULL, 0, 0, 0 },
    };
    if (vt_got_rewrite(lm, redirect_slot, redirects) != 0)
        return 0;
    for (const redirect_t *r = redirects; r->name; r++)
        if (r->required && r->imported && !r->done)
            return 0;
    return 1;
#else
    (void)handle;
    return 0;
#endif
}
