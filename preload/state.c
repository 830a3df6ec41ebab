/* state.c: what every file of the shim shares and nothing else: the
 * shim's state word, the per-thread guard, the device facts the recording
 * API captures for the writer, and saying a problem once on stderr.
 *
 * Contract:
 *  - A leaf: calls no other file of the shim, so any file may call it,
 *    from any thread, before or after start-up. vt_warn_once takes no lock
 *    and does not allocate: one write(2), never stdio.
 *  - vt_disable is one-way: the shim stays a pass-through for the rest of
 *    the process (a fork child inherits it).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
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
    /* write(2), not stdio: stderr's lock may be held by the host. */
    ssize_t ignored = write(2, buf, len);
    (void)ignored;
}

void vt_disable(const char *why)
{
    atomic_store(&vt_state, VT_ST_OFF);
    vt_warn_once(&warned_disable, "%s; tracing is off, the program runs unchanged", why);
}
