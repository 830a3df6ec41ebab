/* cmd_record.c: `vramtrace record [-o DIR] [--lib PATH] [--] CMD ARGS...`
 *
 * Runs CMD under the shim, like `heaptrack CMD` or `nsys profile CMD`, so a
 * user can trace their own server without learning LD_PRELOAD:
 *  - the shim is --lib, else libvramtrace.so next to this executable, else
 *    ../lib/vramtrace/ or ../lib/ relative to it (an installed prefix);
 *    it is prepended to any LD_PRELOAD already set;
 *  - every process CMD starts writes its trace into DIR (VRAMTRACE_DIR),
 *    default ./vramtrace-YYYYmmdd-HHMMSS/, created 0700: traces hold
 *    command lines and host names;
 *  - SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to record are passed on to
 *    CMD, so `kill` or a service manager stopping record stops the server
 *    cleanly and its traces end with END records. A Ctrl-C typed at the
 *    terminal already reaches CMD (same process group): it is not sent twice;
 *  - the exit status is CMD's (128+N when a signal N killed it; 127 when it
 *    could not be run), whatever the report says;
 *  - afterwards it prints the verdict part of the report on DIR and the
 *    command for the full report.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"

/* Declared in commands.h once main.c dispatches `record`. */
int vt_cmd_record(int argc, char **argv);

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define N_FORWARDED (int)(sizeof forwarded / sizeof forwarded[0])

static volatile pid_t child_pid;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: vramtrace record [-o DIR] [--lib PATH] [--] CMD [ARGS...]\n"
            "\n"
            "Runs CMD with the vramtrace shim preloaded, so every process it starts\n"
            "writes a trace of its GPU allocations into DIR, then prints the verdict\n"
            "of `vramtrace report DIR`. Example: vramtrace record ollama serve\n"
            "\n"
            "options:\n"
            "  -o, --output DIR  trace directory (default ./vramtrace-YYYYmmdd-HHMMSS/,\n"
            "                    created mode 0700)\n"
            "  --lib PATH        the shim (default: libvramtrace.so next to vramtrace,\n"
            "                    then ../lib/vramtrace/ and ../lib/ relative to it)\n"
            "\n"
            "SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed on to CMD, so stopping\n"
            "record stops CMD cleanly and leaves complete traces.\n"
            "Exit status: CMD's (128+N if signal N killed it, 127 if it could not be\n"
            "run); 2 for bad usage.\n");
}

/* Terminal-generated signals (si_code SI_KERNEL) went to CMD's process group
 * too; only signals some process sent to record alone are passed on. */
static void forward(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    pid_t pid = child_pid;
    if (pid > 0 && si && si->si_code <= 0 && si->si_pid != pid)
        kill(pid, sig);
}

static int exists(const char *path)
{
    return access(path, R_OK) == 0;
}

/* The directory this executable is in. */
static int self_dir(char self[PATH_MAX])
{
    ssize_t len = readlink("/proc/self/exe", self, PATH_MAX - 1);
    if (len <= 0)
        return -1;
    self[len] = 0;
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = 0;
    return 0;
}

/* The shim: next to this executable, or in the install prefix's lib. */
static int find_shim(char *out, size_t n)
{
    char self[PATH_MAX];
    if (self_dir(self) != 0)
        return -1;
    static const char *const rel[] = {"libvramtrace.so", "../lib/vramtrace/libvramtrace.so",
                                      "../lib/libvramtrace.so"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char cand[PATH_MAX];
        if (snprintf(cand, sizeof cand, "%s/%s", self, rel[i]) >= (int)sizeof cand)
            continue;
        if (exists(cand) && realpath(cand, out) && strlen(out) < n)
            return 0;
    }
    return -1;
}

/* DIR given: created if missing (one level), reused if it exists. Default:
 * a new timestamped directory, never an existing one. *created says whether
 * record made it, and so may remove it again when no trace lands there. */
static int make_dir(const char *want, char *out, size_t n, int *created)
{
    *created = 0;
    char name[64];
    if (!want) {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(name, sizeof name, "vramtrace-%Y%m%d-%H%M%S", &tm);
        size_t base = strlen(name);
        for (int i = 2; mkdir(name, 0700) != 0; i++) {
            if (errno != EEXIST || i > 99) {
                fprintf(stderr, "vramtrace record: cannot create %s: %s\n", name, strerror(errno));
                return -1;
            }
            snprintf(name + base, sizeof name - base, "-%d", i);
        }
        want = name;
        *created = 1;
    } else if (mkdir(want, 0700) == 0) {
        *created = 1;
    } else if (errno != EEXIST) {
        fprintf(stderr, "vramtrace record: cannot create %s: %s\n", want, strerror(errno));
        return -1;
    }
    struct stat st;
    char abs[PATH_MAX];
    if (stat(want, &st) != 0 || !S_ISDIR(st.st_mode) || !realpath(want, abs) || strlen(abs) >= n) {
        fprintf(stderr, "vramtrace record: %s is not a usable directory\n", want);
        return -1;
    }
    /* The shim would only warn and write nothing: said here, before CMD
     * runs, as the cause it is. */
    if (access(abs, W_OK | X_OK) != 0) {
        fprintf(stderr, "vramtrace record: cannot write traces into %s: %s\n", abs, strerror(errno));
        if (*created)
            rmdir(abs);
        return -1;
    }
    strcpy(out, abs);
    return 0;
}

static int set_preload(const char *shim)
{
    /* ld.so splits LD_PRELOAD at spaces and colons. */
    if (strpbrk(shim, " :\t\n")) {
        fprintf(stderr, "vramtrace record: the shim's path '%s' has a space or colon; LD_PRELOAD cannot carry it\n",
                shim);
        return -1;
    }
    const char *old = getenv("LD_PRELOAD");
    if (!old || !*old)
        return setenv("LD_PRELOAD", shim, 1);
    size_t n = strlen(shim) + 1 + strlen(old) + 1;
    char *v = malloc(n);
    if (!v)
        return -1;
    snprintf(v, n, "%s:%s", shim, old);
    int rc = setenv("LD_PRELOAD", v, 1);
    free(v);
    return rc;
}

/* The simulated driver of a build tree (build/sim/libcuda.so.1 beside
 * build/vramtrace), for the hint when CMD made no CUDA call: the examples
 * find the runtime through their RUNPATH, but the runtime dlopens
 * libcuda.so.1 through the library path alone, as the real one does. */
static int find_sim_driver(char *out, size_t n)
{
    char self[PATH_MAX], cand[PATH_MAX];
    if (self_dir(self) != 0)
        return -1;
    if (snprintf(cand, sizeof cand, "%s/sim/libcuda.so.1", self) >= (int)sizeof cand || !exists(cand))
        return -1;
    if (snprintf(out, n, "%s/sim", self) >= (int)n)
        return -1;
    return 0;
}

static void explain_no_traces(const char *dir, int removed, const char *cmd)
{
    fprintf(stderr, "vramtrace record: no traces%s%s: no CUDA call of %s or its children reached the shim (no CUDA "
                    "driver found, or the shim did not load).\n",
            removed ? "" : " in ", removed ? "" : dir, cmd);
    fprintf(stderr, "  Is libcuda.so.1 (the NVIDIA driver) on the library path? ldconfig -p | grep libcuda\n");
    char sim[PATH_MAX];
    if (find_sim_driver(sim, sizeof sim) == 0)
        fprintf(stderr, "  For the simulated GPU of this build: LD_LIBRARY_PATH=%s VTSIM_DEVICES=24GiB %s record ...\n",
                sim, program_invocation_name);
    if (removed)
        fprintf(stderr, "  (the empty %s was removed)\n", dir);
}

static int count_traces(const char *dir)
{
    char pat[PATH_MAX + 16];
    snprintf(pat, sizeof pat, "%s/*.vtrace", dir);
    glob_t g;
    int n = glob(pat, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    globfree(&g);
    return n;
}

/* The report's verdict: each process's "== ..." heading and the paragraph
 * that follows, plus the combined per-GPU section. The report runs in a child
 * so a crash in it cannot change record's exit status. */
static void print_verdict(const char *dir)
{
    int fds[2];
    fflush(stdout);
    fflush(stderr);
    if (pipe(fds) != 0)
        return;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 1);
        close(fds[1]);
        char *args[] = {"report", (char *)dir, NULL};
        extern int optind;
        optind = 0;
        _exit(vt_cmd_report(2, args) == VT_EXIT_OK ? 0 : 1);
    }
    close(fds[1]);
    FILE *f = fdopen(fds[0], "r");
    char line[4096];
    int in_verdict = 0, in_gpus = 0, printed = 0;
    while (f && fgets(line, sizeof line, f)) {
        /* The combined per-GPU section closes the report and is short:
         * all of it, or its heading would stand alone. */
        if (!strncmp(line, "== GPUs across all ", 19))
            in_gpus = 1;
        if (in_gpus) {
            if (line[0] != '\n')
                fputs(line, stdout);
            continue;
        }
        if (!strncmp(line, "== ", 3)) {
            in_verdict = 1;
        } else if (line[0] == '\n') {
            if (in_verdict)
                fputs("\n", stdout);
            in_verdict = 0;
            continue;
        }
        if (in_verdict) {
            fputs(line, stdout);
            printed++;
        }
    }
    if (f)
        fclose(f);
    else
        close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    if (!printed)
        fprintf(stderr, "vramtrace record: the report on %s printed no verdict\n", dir);
}

int vt_cmd_record(int argc, char **argv)
{
    const char *out = NULL, *lib = NULL;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return VT_EXIT_OK;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--lib")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "vramtrace record: %s needs an argument\n", a);
                return VT_EXIT_BAD_INPUT;
            }
            *(strcmp(a, "--lib") ? &out : &lib) = argv[++i];
        } else if (!strncmp(a, "--output=", 9)) {
            out = a + 9;
        } else if (!strncmp(a, "--lib=", 6)) {
            lib = a + 6;
        } else if (!strncmp(a, "-o", 2)) {
            out = a + 2;
        } else if (a[0] == '-') {
            return vt_usage_error("record", "unknown option '%s'", a);
        } else {
            break;
        }
    }
    if (i >= argc) {
        return vt_usage_error("record", "no command to run (vramtrace record [-o DIR] -- CMD [ARGS...])");
    }
    char **cmd = argv + i;

    char shim[PATH_MAX];
    if (lib) {
        if (!exists(lib) || !realpath(lib, shim)) {
            fprintf(stderr, "vramtrace record: --lib %s: %s\n", lib, strerror(errno ? errno : ENOENT));
            return VT_EXIT_BAD_INPUT;
        }
    } else if (find_shim(shim, sizeof shim) != 0) {
        fprintf(stderr, "vramtrace record: libvramtrace.so not found next to vramtrace or in ../lib; use --lib PATH\n");
        return VT_EXIT_BAD_INPUT;
    }
    char dir[PATH_MAX];
    int created;
    if (make_dir(out, dir, sizeof dir, &created) != 0)
        return VT_EXIT_BAD_INPUT;
    if (set_preload(shim) != 0 || setenv("VRAMTRACE_DIR", dir, 1) != 0)
        return VT_EXIT_BAD_INPUT;
    fprintf(stderr, "vramtrace record: tracing %s into %s\n", cmd[0], dir);

    /* Handlers go in before the fork so no signal is lost in between; the
     * child gets back the dispositions record itself was started with
     * (nohup's ignored SIGHUP stays ignored). */
    struct sigaction sa, saved[N_FORWARDED];
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    /* No SA_RESTART: waitpid below returns EINTR and the loop calls it
     * again. Under ThreadSanitizer a handler runs only when an intercepted
     * call returns; restarted in the kernel, waitpid never did, and a
     * SIGTERM to record was never passed on (61-record.t hung). */
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigset_t block, old;
    sigemptyset(&block);
    for (int k = 0; k < N_FORWARDED; k++)
        sigaddset(&block, forwarded[k]);
    sigprocmask(SIG_BLOCK, &block, &old);
    for (int k = 0; k < N_FORWARDED; k++)
        sigaction(forwarded[k], &sa, &saved[k]);
    fflush(stdout);
    fflush(stderr);
    /* A close-on-exec pipe tells an exec that failed from a CMD that
     * exits 126 or 127 itself: only the former gets no diagnosis of its
     * missing traces. */
    int exec_pipe[2];
    if (pipe2(exec_pipe, O_CLOEXEC) != 0)
        exec_pipe[0] = exec_pipe[1] = -1;
    pid_t pid = fork();
    if (pid == 0) {
        for (int k = 0; k < N_FORWARDED; k++)
            sigaction(forwarded[k], &saved[k], NULL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (exec_pipe[0] >= 0)
            close(exec_pipe[0]);
        execvp(cmd[0], cmd);
        int e = errno;
        fprintf(stderr, "vramtrace record: cannot run %s: %s\n", cmd[0], strerror(e));
        if (exec_pipe[1] >= 0) {
            ssize_t w = write(exec_pipe[1], &e, sizeof e);
            (void)w;
        }
        _exit(e == ENOENT ? 127 : 126);
    }
    int exec_failed = 0;
    if (exec_pipe[1] >= 0) {
        close(exec_pipe[1]);
        int e;
        ssize_t got;
        while ((got = read(exec_pipe[0], &e, sizeof e)) < 0 && errno == EINTR)
            ;
        exec_failed = got == (ssize_t)sizeof e;
        close(exec_pipe[0]);
    }
    if (pid < 0) {
        fprintf(stderr, "vramtrace record: fork: %s\n", strerror(errno));
        sigprocmask(SIG_SETMASK, &old, NULL);
        return VT_EXIT_BAD_INPUT;
    }
    child_pid = pid;
    sigprocmask(SIG_SETMASK, &old, NULL);

    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    child_pid = 0;
    for (int k = 0; k < N_FORWARDED; k++)
        sigaction(forwarded[k], &saved[k], NULL);
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;

    if (WIFSIGNALED(st))
        fprintf(stderr, "vramtrace record: %s was killed by signal %d\n", cmd[0], WTERMSIG(st));
    else
        fprintf(stderr, "vramtrace record: %s exited with status %d\n", cmd[0], status);
    int n = count_traces(dir);
    if (n == 0 && exec_failed) {
        /* "cannot run" was said; the empty directory goes. */
        if (created)
            rmdir(dir);
        return status;
    }
    if (n == 0) {
        /* rmdir removes only an empty directory: whatever else CMD wrote
         * there stays. */
        explain_no_traces(dir, created && rmdir(dir) == 0, cmd[0]);
        return status;
    }
    print_verdict(dir);
    printf("%d trace%s in %s\nFull report: %s report %s\n", n, n == 1 ? "" : "s", dir,
           program_invocation_name, dir);
    fflush(stdout);
    return status;
}
