/* options.c: every VRAMTRACE_* variable, in one table.
 *
 * Contract: parsed once, on the first intercepted CUDA call (never at load
 * time: a process that never touches CUDA pays nothing). No allocation. A bad
 * value gets one warning on stderr and the default; the host program never
 * sees an error because of our environment. The README's table is checked
 * against this one by tests/t/53-shim-env.t.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "shim.h"

vt_options_t vt_opt;

/* name, field, default, min, max, help */
#define VT_INT_OPTIONS(X)                                                          \
    X("VRAMTRACE_DEPTH", depth, 64, 0, (int)VT_MAX_STACK_DEPTH,                     \
      "frames recorded per allocation stack (0 = none)")                          \
    X("VRAMTRACE_FLUSH_MS", flush_ms, 100, 1, 60000,                              \
      "the longest an event waits before it is on disk; bounds what SIGKILL loses") \
    X("VRAMTRACE_SAMPLE_MS", sample_ms, 10, 0, 60000,                             \
      "least interval between cuMemGetInfo samples while allocations flow")       \
    X("VRAMTRACE_TIME_RES_US", time_res_us, 1000, 1, 1000000,                     \
      "precision of event times in the trace (finer costs trace size)")

/* name, field, default, help */
#define VT_BOOL_OPTIONS(X) \
    X("VRAMTRACE_DISABLE", disable, 0, "1, yes, true or on: pass every call through untraced")

static long parse_long(const char *name, const char *text, long def, long lo, long hi)
{
    if (!text || !*text)
        return def;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        fprintf(stderr, "vramtrace: ignoring %s=%.64s (want an integer %ld..%ld); using %ld\n", name,
                text, lo, hi, def);
        return def;
    }
    return v;
}

int vt_options_bool(const char *text)
{
    static const char *const yes[] = { "1", "yes", "true", "on" }, *const no[] = { "0", "no", "false", "off" };
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (!strcasecmp(text, yes[i]))
            return 1;
        if (!strcasecmp(text, no[i]))
            return 0;
    }
    return -1;
}

/* A misspelt boolean must not pass silently: VRAMTRACE_DISABLE=yes once
 * meant "trace on" because only "1" was read as true. */
static int parse_bool(const char *name, const char *text, int def)
{
    if (!text || !*text)
        return def;
    int v = vt_options_bool(text);
    if (v < 0) {
        fprintf(stderr, "vramtrace: ignoring %s=%.64s (want 1/0, yes/no, true/false or on/off); using %d\n", name,
                text, def);
        return def;
    }
    return v;
}

void vt_options_load(void)
{
    /* A secure-execution process (setuid, setgid, file capabilities) runs
     * with privileges its caller lacks, and VRAMTRACE_DIR is the caller's
     * to choose: tracing would create files there as the privileged user.
     * The loader drops LD_PRELOAD paths there itself, but the shim can still
     * arrive as a dependency or through /etc/ld.so.preload; it stays a
     * silent pass-through, whatever the environment says. */
    if (getauxval(AT_SECURE)) {
        vt_opt.disable = 1;
        return;
    }
#define VT_LOAD_INT(name, field, def, lo, hi, help) \
    vt_opt.field = (int)parse_long(name, getenv(name), def, lo, hi);
    VT_INT_OPTIONS(VT_LOAD_INT)
#undef VT_LOAD_INT
#define VT_LOAD_BOOL(name, field, def, help) vt_opt.field = parse_bool(name, getenv(name), def);
    VT_BOOL_OPTIONS(VT_LOAD_BOOL)
#undef VT_LOAD_BOOL

    /* The ring is a power of two so the index is a mask. */
    long ring = parse_long("VRAMTRACE_RING", getenv("VRAMTRACE_RING"), 1L << 16, 1L << 10, 1L << 24);
    uint32_t pow2 = 1u << 10;
    while (pow2 < (uint32_t)ring)
        pow2 <<= 1;
    vt_opt.ring = pow2;

    /* VRAMTRACE_UNWIND: libunwind (the default) gives libunwind's stacks,
     * most frames served from a cache of .eh_frame rules (stacks.c);
     * uncached asks libunwind for every frame, without the cache; fp
     * walks frame pointers; check[:FILE] unwinds every stack both ways,
     * records libunwind's, and reports each difference on stderr or
     * appended to FILE, with a count at exit. */
    const char *unwind = getenv("VRAMTRACE_UNWIND");
    vt_opt.unwind = VT_UNWIND_CFI;
    vt_opt.unwind_check_path[0] = 0;
    if (unwind && strcmp(unwind, "fp") == 0) {
        vt_opt.unwind = VT_UNWIND_FP;
    } else if (unwind && strcmp(unwind, "uncached") == 0) {
        vt_opt.unwind = VT_UNWIND_LIBUNWIND;
    } else if (unwind && strncmp(unwind, "check", 5) == 0 && (!unwind[5] || unwind[5] == ':')) {
        vt_opt.unwind = VT_UNWIND_CHECK;
        /* Opened for each line (they are rare), never kept: a descriptor
         * held in the program's table for the process's life is one a
         * program that closes every descriptor and opens its own file
         * would have had our lines written into. */
        if (unwind[5] && unwind[6]) {
            int fd = strlen(unwind + 6) < sizeof vt_opt.unwind_check_path
                         ? open(unwind + 6, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)
                         : -1;
            if (fd >= 0) {
                close(fd);
                snprintf(vt_opt.unwind_check_path, sizeof vt_opt.unwind_check_path, "%s", unwind + 6);
            } else {
                fprintf(stderr, "vramtrace: VRAMTRACE_UNWIND: cannot open %.200s; reporting on stderr\n",
                        unwind + 6);
            }
        }
    } else if (unwind && *unwind && strcmp(unwind, "libunwind") != 0) {
        fprintf(stderr,
                "vramtrace: ignoring VRAMTRACE_UNWIND=%.64s (want libunwind, uncached, fp or check[:FILE]); using libunwind\n",
                unwind);
    }

    const char *dir = getenv("VRAMTRACE_DIR");
    if (!dir || !*dir)
        dir = ".";
    if (strlen(dir) >= sizeof vt_opt.dir - 64) {
        fprintf(stderr, "vramtrace: ignoring VRAMTRACE_DIR (longer than %zu bytes); using .\n",
                sizeof vt_opt.dir - 64);
        dir = ".";
    }
    /* A relative directory is taken from where the process was at its
     * first CUDA call, and a fork child keeps its parent's (the memory it
     * inherits says which): a child the program makes after a chdir (a
     * daemon's chdir("/")) writes beside the parent's trace, not into a
     * directory it creates under the program's new working directory. */
    static char resolved_from[sizeof vt_opt.dir];
    size_t len = strlen(dir), room = sizeof vt_opt.dir - 64;
    if (dir[0] != '/' && vt_opt.dir[0] == '/' && strcmp(dir, resolved_from) == 0)
        return;
    snprintf(resolved_from, sizeof resolved_from, "%s", dir);
    if (dir[0] != '/' && len + 2 < room && getcwd(vt_opt.dir, room - len - 1) && vt_opt.dir[0] == '/') {
        if (strcmp(dir, ".") != 0) {
            size_t at = strlen(vt_opt.dir);
            if (at > 1)
                vt_opt.dir[at++] = '/';
            memcpy(vt_opt.dir + at, dir, len + 1);
        }
        return;
    }
    snprintf(vt_opt.dir, sizeof vt_opt.dir, "%s", dir);
}
