/* state.c: what every file of the shim shares and nothing else: the
 * shim's state word, the per-thread guard, the device facts the recording
 * API captures for the writer, saying a problem once on stderr, asking
 * the kernel whether memory can be read, and the deadlines of timed waits.
 *
 * Contract:
 *  - A leaf: calls no other file of the shim, so any file may call it,
 *    from any thread, before or after start-up. vt_warn_once takes no lock
 *    and does not allocate: one write(2), never stdio.
 *  - vt_disable is one-way: the shim stays a pass-through for the rest of
 *    the process (a fork child inherits it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

__thread vt_tls_t vt_tls __attribute__((tls_model("initial-exec")));
_Atomic int vt_state = VT_ST_IDLE;
vt_device_slot_t vt_devices[VT_MAX_DEVICES];

static _Atomic int warned_disable;

void vt_warn_once(_Atomic int *flag, const char *fmt, ...)
{
    if (atomic_exchange(flag, 1))
        return;
    char buf[512];
    int n = snprintf(buf, sizeof buf, "vramtrace: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = strlen(buf);
    if (len < sizeof buf - 1)
        buf[len++] = '\n';
    vt_say(buf, len);
}

/* What the writer thread says waits here: its descriptor table keeps no
 * copy of the program's stderr, which held a pipe's write end open after
 * the program closed its own (the reader saw EOF only at exit:
 * 77-fault-fds). A slot is 0 free, 1 being filled or emptied, 2 ready;
 * past PENDING_SLOTS, a message is dropped. */
#define PENDING_SLOTS 4
static struct {
    _Atomic int state;
    pid_t pid;
    size_t len;
    char text[512];
} pending[PENDING_SLOTS];

/* Whether fd 2 was open when the shim started: 1, or -1 when it was closed
 * (0 before start). A program started with it closed may open its own file
 * there later, and what the shim says must not land in it. */
static _Atomic int stderr_at_start;

void vt_say_start(void)
{
    int open_now = fcntl(2, F_GETFD) >= 0 || errno != EBADF;
    atomic_store(&stderr_at_start, open_now ? 1 : -1);
}

int vt_stderr_ours(void)
{
    return atomic_load_explicit(&stderr_at_start, memory_order_relaxed) >= 0;
}

void vt_say(const char *text, size_t len)
{
    if (!vt_stderr_ours())
        return;
    if (!vt_tls.defer_say) {
        /* write(2), not stdio: stderr's lock may be held by the host. */
        ssize_t ignored = write(2, text, len);
        (void)ignored;
        return;
    }
    for (int i = 0; i < PENDING_SLOTS; i++) {
        int free_slot = 0;
        if (!atomic_compare_exchange_strong(&pending[i].state, &free_slot, 1))
            continue;
        pending[i].len = len < sizeof pending[i].text ? len : sizeof pending[i].text;
        memcpy(pending[i].text, text, pending[i].len);
        pending[i].pid = getpid();
        atomic_store(&pending[i].state, 2);
        return;
    }
}

void vt_say_pending(void)
{
    if (vt_tls.defer_say)
        return;
    for (int i = 0; i < PENDING_SLOTS; i++) {
        int ready = 2;
        if (atomic_load_explicit(&pending[i].state, memory_order_relaxed) != 2 ||
            !atomic_compare_exchange_strong(&pending[i].state, &ready, 1))
            continue;
        if (pending[i].pid == getpid() && vt_stderr_ours()) {
            ssize_t ignored = write(2, pending[i].text, pending[i].len);
            (void)ignored;
        }
        atomic_store(&pending[i].state, 0);
    }
}

void vt_disable(const char *why)
{
    atomic_store(&vt_state, VT_ST_OFF);
    vt_warn_once(&warned_disable, "%s; tracing is off, the program runs unchanged", why);
}

struct timespec vt_deadline_in(clockid_t clock, uint64_t ms)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + ms * 1000000ull;
    ts.tv_sec += (time_t)(ns / 1000000000ull);
    ts.tv_nsec = (long)(ns % 1000000000ull);
    return ts;
}

/* rt_sigprocmask with an invalid how reads the 8 bytes of its new mask
 * from user memory before it looks at how: EFAULT where they cannot be
 * read, else EINVAL, and the mask is left as it was. It opens no
 * descriptor, and no seccomp policy refuses it (every program that blocks
 * signals makes it). One aligned word a page: it never crosses into the
 * next, so it is readable exactly when its page is. 4 KiB steps are the
 * smallest page, so larger ones are only checked more than once. */
int vt_readable(const void *addr, size_t n)
{
    uintptr_t at = (uintptr_t)addr, last = at + (n ? n - 1 : 0);
    if (last < at)
        return 0;
    int saved = errno, ok = 1;
    for (uintptr_t word = at & ~(uintptr_t)7;; word = (word | 4095) + 1) {
        /* NULL would read as "no new mask" and succeed. */
        if (!word || (syscall(SYS_rt_sigprocmask, -1, (void *)word, NULL, 8) == -1 && errno == EFAULT)) {
            ok = 0;
            break;
        }
        if ((word | 4095) >= last)
            break;
    }
    errno = saved;
    return ok;
}
