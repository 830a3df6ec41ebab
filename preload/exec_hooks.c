/* exec_hooks.c: the calls that end a process image without exit(): the
 * exec family, _exit, quick_exit and abort. None runs exit handlers or
 * our destructor, and exec ends every other thread, the writer with it: a
 * process that allocated for less than a flush interval and then exec'd
 * left a trace with no event and no END, whose report said it used no GPU
 * memory (tests/t/74-fault-exec.t). Each wrapper ends the trace as exit
 * would (record.c, vt_record_image_ends), with a NOTE saying how the
 * process ended, then calls libc's function.
 *
 *  - glibc's exec functions reach the kernel through its internal
 *    __execve, which no preload sees, so each public one is wrapped; the
 *    execl family is turned into its execv sibling here, as glibc does.
 *  - An exec that fails returns and the process goes on, its trace
 *    already ended: its later calls pass through, said once on stderr at
 *    the next one (record.c). Restarting the trace in the same file would
 *    need its END taken back.
 *  - END says which call ended the image (VT_END_EXEC, VT_END_EXIT_NOW,
 *    VT_END_ABORT), so the report does not say the process exited.
 *  - All are async-signal-safe and called from vfork children (Python's
 *    subprocess, a shell's): the trace ends only in the process that
 *    traces, never inside the shim, and a vfork child, which shares its
 *    parent's memory, only reads (vt_writer_ours).
 *  - quick_exit ends the trace as _exit does, before its handlers run:
 *    glibc's calls its own _exit inside.
 *  - abort, and assert's __assert_fail (glibc's calls abort inside, where
 *    no preload sees it): ggml's CUDA_CHECK aborts when its pool's
 *    cudaMalloc fails mid-inference (ggml_cuda_error -> GGML_ABORT), as
 *    does std::terminate. The trace lost the last flush interval, the
 *    failed request with it, and the report said NO SPILL or NO GPU
 *    MEMORY USED (tests/t/74-fault-abort.t). A SIGABRT handler that
 *    longjmps out leaves the process going on with its trace ended, as
 *    after a failed exec, said at its next CUDA call.
 *  - A program reaching the kernel itself (Go's syscall.Exec, a raw
 *    syscall) is not seen: its trace ends as after SIGKILL.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

enum {
    REAL_EXECVE, REAL_EXECV, REAL_EXECVP, REAL_EXECVPE, REAL_FEXECVE, REAL_EXECVEAT, REAL_EXIT, REAL_EXIT2,
    REAL_QUICK_EXIT, REAL_ABORT, REAL_ASSERT_FAIL, REALS
};
static const char *const real_names[REALS] = {
    [REAL_EXECVE] = "execve", [REAL_EXECV] = "execv",         [REAL_EXECVP] = "execvp", [REAL_EXECVPE] = "execvpe",
    [REAL_FEXECVE] = "fexecve", [REAL_EXECVEAT] = "execveat", [REAL_EXIT] = "_exit",    [REAL_EXIT2] = "_Exit",
    [REAL_QUICK_EXIT] = "quick_exit", [REAL_ABORT] = "abort", [REAL_ASSERT_FAIL] = "__assert_fail",
};
static void *_Atomic reals[REALS];

/* libc's function, past ours; NULL where this libc has none (execveat
 * before glibc 2.34). Looked up on first use, as a lazy PLT slot would be. */
static void *real(int which)
{
    void *fn = atomic_load_explicit(&reals[which], memory_order_acquire);
    if (!fn) {
        fn = vt_real_dlsym(RTLD_NEXT, real_names[which]);
        atomic_store_explicit(&reals[which], fn, memory_order_release);
    }
    return fn;
}

static int tracing(void)
{
    return atomic_load_explicit(&vt_state, memory_order_acquire) == VT_ST_ACTIVE;
}

/* what: "exec", "execvp" (a PATH search), ...; target: the file. */
static void exec_begins(const char *what, const char *target)
{
    if (!tracing())
        return;
    char note[300];
    snprintf(note, sizeof note, "%s %s: the trace ends at this call, which replaces the process image", what,
             target ? target : "(null)");
    vt_record_image_ends(VT_END_EXEC, note);
}

/* After the real call returned: it failed, with errno, which the program
 * gets back as it was. */
static int exec_failed(const char *what, const char *target)
{
    int err = errno;
    if (atomic_load_explicit(&vt_state, memory_order_acquire) == VT_ST_ENDED) {
        char note[300];
        snprintf(note, sizeof note, "%s %s failed (%s)", what, target ? target : "(null)", strerror(err));
        vt_record_image_goes_on(note);
    }
    errno = err;
    return -1;
}

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);

static int no_real(void)
{
    errno = ENOSYS;
    return -1;
}

static int run_execve(int which, const char *what, const char *file, char *const argv[], char *const envp[])
{
    execve_fn fn = (execve_fn)real(which);
    if (!fn)
        return no_real();
    exec_begins(what, file);
    fn(file, argv, envp);
    return exec_failed(what, file);
}

static int run_execv(int which, const char *what, const char *file, char *const argv[])
{
    execv_fn fn = (execv_fn)real(which);
    if (!fn)
        return no_real();
    exec_begins(what, file);
    fn(file, argv);
    return exec_failed(what, file);
}

VT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    return run_execve(REAL_EXECVE, "exec", path, argv, envp);
}

VT_EXPORT int execv(const char *path, char *const argv[])
{
    return run_execv(REAL_EXECV, "exec", path, argv);
}

VT_EXPORT int execvp(const char *file, char *const argv[])
{
    return run_execv(REAL_EXECVP, "execvp", file, argv);
}

VT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    return run_execve(REAL_EXECVPE, "execvp", file, argv, envp);
}

VT_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    fexecve_fn fn = (fexecve_fn)real(REAL_FEXECVE);
    if (!fn)
        return no_real();
    char target[32];
    snprintf(target, sizeof target, "fd %d", fd);
    exec_begins("fexecve", target);
    fn(fd, argv, envp);
    return exec_failed("fexecve", target);
}

VT_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
    execveat_fn fn = (execveat_fn)real(REAL_EXECVEAT);
    if (!fn)
        return no_real();
    exec_begins("execveat", path);
    fn(dirfd, path, argv, envp, flags);
    return exec_failed("execveat", path);
}

/* ---- the execl family: argument lists made vectors ----
 * The vector lives on the caller's stack, one pointer an argument, as in
 * glibc's own execl. arg0 is taken even when NULL, and the terminating NULL
 * after it is looked for as glibc does. */

/* Counts the arguments, the first included, up to their NULL; -1 past
 * INT_MAX. Through a pointer: where va_list is a struct (aarch64) a copy
 * would not advance the caller's, and execle reads on after the list. */
static long count_args(va_list *ap)
{
    long argc = 1;
    while (va_arg(*ap, const char *))
        if (++argc == 0x7fffffff)
            return -1;
    return argc;
}

static void fill_args(const char **argv, long argc, const char *first, va_list *ap)
{
    argv[0] = first;
    for (long i = 1; i <= argc; i++)
        argv[i] = va_arg(*ap, const char *);
}

static int too_many_args(void)
{
    errno = E2BIG;
    return -1;
}

/* Runs which with the list after arg made a vector on this frame's stack,
 * and the environment that follows the list's NULL when with_envp. */
static int run_list(int which, const char *what, const char *file, const char *arg, va_list *ap, int with_envp)
{
    va_list fill;
    va_copy(fill, *ap);
    long argc = count_args(ap);
    if (argc < 0) {
        va_end(fill);
        return too_many_args();
    }
    const char *argv[argc + 1];
    fill_args(argv, argc, arg, &fill);
    char *const *envp = with_envp ? va_arg(fill, char *const *) : NULL;
    va_end(fill);
    if (with_envp)
        return run_execve(which, what, file, (char *const *)argv, envp);
    return run_execv(which, what, file, (char *const *)argv);
}

/* execl, execlp and execle: one body, the list made a vector by run_list. */
#define VT_EXEC_LIST(name, which, what, with_envp)                                                               \
    VT_EXPORT int name(const char *file, const char *arg, ...)                                                   \
    {                                                                                                            \
        va_list ap;                                                                                              \
        va_start(ap, arg);                                                                                       \
        int rc = run_list(which, what, file, arg, &ap, with_envp);                                               \
        va_end(ap);                                                                                              \
        return rc;                                                                                               \
    }
VT_EXEC_LIST(execl, REAL_EXECV, "exec", 0)
VT_EXEC_LIST(execlp, REAL_EXECVP, "execvp", 0)
VT_EXEC_LIST(execle, REAL_EXECVE, "exec", 1)

/* ---- _exit ---- */

typedef void (*exit_fn)(int);

static __attribute__((noreturn)) void run_exit(int which, int status)
{
    if (tracing()) {
        char note[80];
        snprintf(note, sizeof note, "%s(%d): the process ended without exit handlers", real_names[which], status);
        vt_record_image_ends(VT_END_EXIT_NOW, note);
    }
    exit_fn fn = (exit_fn)real(which);
    if (fn)
        fn(status);
    for (;;)
        syscall(SYS_exit_group, status);
}

VT_EXPORT void _exit(int status)
{
    run_exit(REAL_EXIT, status);
}

VT_EXPORT void _Exit(int status)
{
    run_exit(REAL_EXIT2, status);
}

/* glibc's quick_exit runs the at_quick_exit handlers, then its own _exit,
 * which no preload sees: the trace ends first, so what those handlers
 * free (rare) passes through untraced. */
VT_EXPORT void quick_exit(int status)
{
    run_exit(REAL_QUICK_EXIT, status);
}

/* ---- abort ---- */

typedef void (*abort_fn)(void);
typedef void (*assert_fail_fn)(const char *, const char *, unsigned, const char *);

/* The trace ends before the signal: SIGABRT's default action leaves no
 * destructor to run. A handler of the program's that longjmps out finds
 * its calls passed through (vt_record_image_goes_on at the next one). */
static void abort_begins(const char *note)
{
    if (tracing())
        vt_record_image_ends(VT_END_ABORT, note);
}

/* libc's abort does not return; where it is missing (never, in glibc) the
 * process still dies as abort would have it. */
static __attribute__((noreturn)) void then_abort(void)
{
    abort_fn fn = (abort_fn)real(REAL_ABORT);
    if (fn)
        fn();
    for (;;)
        __builtin_trap();
}

VT_EXPORT void abort(void)
{
    abort_begins("abort(): the process aborted (SIGABRT)");
    then_abort();
}

VT_EXPORT void __assert_fail(const char *assertion, const char *file, unsigned line, const char *function)
{
    if (tracing()) {
        char note[300];
        snprintf(note, sizeof note, "assertion failed: %s (%s:%u, %s): the process aborted (SIGABRT)",
                 assertion ? assertion : "(null)", file ? file : "(null)", line, function ? function : "(null)");
        abort_begins(note);
    }
    assert_fail_fn fn = (assert_fail_fn)real(REAL_ASSERT_FAIL);
    if (fn)
        fn(assertion, file, line, function);
    then_abort();
}
