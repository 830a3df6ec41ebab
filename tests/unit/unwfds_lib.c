/* libunwfds_{lazy,now}.so: what libunwind does to check an address (1.6 to
 * 1.8: mi/Gaddress_validator.c), through the same imports: a pipe made
 * with pipe2, drained with read, written with syscall(SYS_write) from the
 * address, reopened with close and pipe2 when a read fails; and the page
 * test libunwind makes with mincore (x86_64/Ginit.c). Built with lazy
 * binding and with -z now (its GOT read-only after relocation), so both
 * ways preload/unwind_fds.c stores into a slot are exercised. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

static int fds[2] = { -1, -1 };

static int open_pipe(void)
{
    if (fds[0] != -1)
        close(fds[0]);
    if (fds[1] != -1)
        close(fds[1]);
    return pipe2(fds, O_CLOEXEC | O_NONBLOCK);
}

/* 1: readable; 0: not. The descriptors it used go to *used. */
int unwfds_check(const void *addr, int used[2])
{
    if (fds[0] == -1 && open_pipe() != 0)
        return 0;
    char byte;
    errno = 0;
    ssize_t got = read(fds[0], &byte, 1);
    if (!(got > 0 || errno == EAGAIN || errno == EWOULDBLOCK))
        open_pipe();
    long rc = syscall(SYS_write, fds[1], addr, 1);
    used[0] = fds[0];
    used[1] = fds[1];
    return rc > 0;
}

/* mincore's answer for the page at addr: 0 mapped, else -errno. */
int unwfds_mincore(void *page)
{
    unsigned char vec[1];
    return mincore(page, (size_t)getpagesize(), vec) == 0 ? 0 : -errno;
}
