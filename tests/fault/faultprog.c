/* faultprog.c: the host programs of the fault tests (tests/t/7x-*.t). Each
 * mode does something a real inference server might, under conditions the
 * shim must survive, and prints only what does not depend on the shim
 * (counts and result codes), so a test compares its stdout and exit status
 * with and without LD_PRELOAD byte for byte.
 *
 * Modes (argv[1]):
 *   pairs N [T]     T threads (default 1) each do N cudaMalloc/cudaFree
 *                   pairs; prints the totals. FAULTPROG_PACE_US=U sleeps U
 *                   microseconds every 1000 pairs
 *   eintr N         N pairs while a 1 kHz SIGALRM itimer interrupts the
 *                   process (handler installed without SA_RESTART); its own
 *                   blocking calls (nanosleep, pipe reads) get EINTR and
 *                   retry, as a careful server's do
 *   forkstorm F     64 threads allocate while another thread forks F times;
 *                   each child allocates once and exits; prints how many
 *                   children succeeded
 *   forkwalk        forks while another thread's first stack is being
 *                   unwound (with VTFAULT_SLOW_PHDR_MS, inside its module
 *                   walk); the child allocates through a call path the
 *                   parent never took; prints "forkwalk child=ok", or
 *                   "hung" when it was still waiting after 10 s
 *   server          allocates, then fork+execs itself as "runner" and waits
 *   runner          allocates and exits (the far end of an exec chain)
 *   badfree         frees what was never allocated, and frees twice, on the
 *                   runtime and driver paths; prints every result code
 *   meminfo         cuMemGetInfo_v2 with NULL for either or both outputs
 *   nov2-call       calls cuMemAllocFromPoolAsync_ptsz by its linked name
 *                   (run on a driver that lacks it: only the shim defines it)
 *   nov2-probe      asks dlsym for entry points the old driver lacks
 *   dlclose DIR [MS] [keep]
 *                   allocates from DIR/libfaultdl_a.so, waits MS ms,
 *                   dlcloses it, then the same with libfaultdl_b.so (likely
 *                   loaded at the same address), which "keep" leaves loaded
 *   reload DIR [MS] [keep]
 *                   the same with libfaultunw_a.so and libfaultunw_b.so:
 *                   one return address, two frame layouts
 *   busy T          T threads allocate and free forever (SIGKILL target);
 *                   prints "ready" after the first allocations
 *   soak N T        N events (alloc+free = 2) from T threads through about
 *                   10,000 distinct call stacks (recursion depth and the
 *                   outer and inner function vary per call); prints the
 *                   counts, and VmRSS/VmHWM to stderr ("rss KB hwm KB")
 *   churn R [T]     R rounds of T threads (default 8) that make 4 pairs
 *                   each and exit; prints the counts, and VmRSS/VmHWM
 *   slowfree N [cancel]  a thread blocks in cuMemFree (run with
 *                   VTSIM_SLOW_FREE_MS) while the main thread makes N
 *                   pairs and exits; "cancel" cancels it inside the driver
 *                   first; prints the counts
 *   slowlive N [cancel]  the same in a process that goes on: after the N
 *                   pairs it prints the counts, waits until the blocked
 *                   free has returned (or, cancelled, as long as it would
 *                   have blocked), prints "slowlive free over", makes N
 *                   pairs more and prints the totals
 *   sigalloc N      N driver pairs while a 10 kHz SIGALRM itimer runs a
 *                   handler that makes a driver pair of its own (run with
 *                   VTSIM_SIGNAL_SAFE=1); prints the main pairs, and the
 *                   handler's pairs to stderr ("sigalloc handler pairs H")
 *   sigrt N         sigalloc with runtime pairs (cudaMalloc/cudaFree) in
 *                   the loop: the handler's driver pairs land inside the
 *                   runtime's calls too ("sigrt handler pairs H")
 *   sigrtlooked N   sigrt with the handler calling the driver through
 *                   pointers it looked up (dlsym on libcuda's handle) before
 *                   any call ("sigrtlooked handler pairs H")
 *   sigrtentry N    the same with pointers the runtime looked up for it
 *                   (cudaGetDriverEntryPointByVersion, as PyTorch gets its
 *                   driver entry points)
 *   vfork N         N pairs, then vfork + exec of "runner", vfork +
 *                   _exit(7) and vfork + exec of a missing file, then N
 *                   pairs more; prints each child's status and the counts
 *   chdirfork DIR   a pair, chdir(DIR), then a child that makes a pair
 *   cancel WHAT     a thread is cancelled 50 ms in, inside the process's
 *                   first CUDA call while another holds the loader's lock
 *                   for 1 s (WHAT "start"), inside a fork that waits for
 *                   such a start-up on another thread (WHAT "fork", with a
 *                   fork handler of the program's own that holds a lock
 *                   across fork; then the main thread forks), or inside
 *                   the dlclose of
 *                   DIR/libfaultdl_a.so, which main allocated from, while
 *                   the writer names its frames (WHAT that DIR; run with
 *                   VTFAULT_SLOW_PHDR_MS); then a pair; prints how it went
 *   image N HOW     N 1 MiB cudaMallocs (kept), two threads making pairs,
 *                   then the image ends by HOW: an exec function (execv,
 *                   execve, execvp, execvpe, execl, execle, execlp,
 *                   fexecve, execveat) running itself as "shown", "search"
 *                   (the threads stopped, an execv that fails, then one
 *                   that works), _exit,
 *                   _Exit or quick_exit (status 3), or "missing": an execv that fails,
 *                   after which the threads make 1000 pairs (the slowest
 *                   call's time to stderr) and the main thread N more
 *                   allocations
 *   shown ARGS      prints its arguments and FAULTPROG_SHOWN, allocates once
 *   oom HOW [fits]  on a 4 GiB card (448 MiB context reserve): three 1 GiB
 *                   cudaMallocs, then one of 2 GiB that fails, after which
 *                   the process ends by HOW, as runtimes do on an OOM:
 *                   abort (ggml's CUDA_CHECK), assert, exit_group (a raw
 *                   exit, as Go's os.Exit), kill (SIGKILL, a supervisor's),
 *                   or longjmp: abort with a SIGABRT handler that jumps out
 *                   of it, after which 100 pairs (the slowest call's time
 *                   to stderr) and an exit; "oom HOW fits": no 2 GiB
 *                   request, 300 ms asleep instead
 *   stdfds          run with fds 0-2 closed: a pair, then writes how many
 *                   of fds 0-2 are open to the file $FAULTPROG_OUT; with
 *                   FAULTPROG_OUT2, then opens that file on fds 0-2 and
 *                   writes "own" through each
 *   sigstart N      sigalloc with the 10 kHz itimer armed before the first
 *                   CUDA call, so handlers land inside the shim's start-up
 *   forkstart R     R rounds, each in a fresh process that has made no CUDA
 *                   call: a thread makes the first one (cuMemGetInfo_v2)
 *                   while the main thread forks; the child makes one
 *                   cuMemGetInfo_v2 and exits; prints how many children
 *                   returned, and how many were still in the call after 5 s
 *   exitrace T MS   T threads make cudaMalloc/cudaFree pairs while the main
 *                   thread calls exit() after MS ms; each thread counts the
 *                   calls it starts and those that returned in
 *                   $FAULTPROG_COUNT_FILE (uint64 words, mapped shared:
 *                   thread i's started at word 16i, returned at 16i + 8)
 *   exitwalk MS [early]  a thread stays MS ms (for ever when MS < 0) in a
 *                   dl_iterate_phdr callback while the main thread, which
 *                   made its first pair 1.5 s before, makes a pair through
 *                   a call path never seen and exits 100 ms later
 *                   (run with VRAMTRACE_FLUSH_MS=1000: the writer then
 *                   looks at the ring about once a second); "early" exits
 *                   1.2 s later instead, once the writer is in its walk
 *   forkslow MS     a thread stays MS ms in a dl_iterate_phdr callback
 *                   while another makes the first CUDA call (cuMemGetInfo_v2)
 *                   and the main thread forks 100 ms later; the child makes
 *                   one call and exits; prints how it ended (child_end).
 *                   FAULTPROG_ITIMER_US=U: a SIGALRM every U us throughout
 *   rangeflood N    after a first pair, N tag pushes and pops as fast as
 *                   they go, more than the range buffer holds between two
 *                   drains (vramtrace_tag_push, none without the shim),
 *                   nested two deep every other time
 *   nvtxfork F      a thread pushes and pops tags with new names
 *                   (vramtrace_tag_push, looked up with dlsym: the shim's,
 *                   or none without it) while the main thread forks F times;
 *                   no CUDA call at all; each child pushes a new name of its
 *                   own; prints how many children returned and how many hung
 */
#include <assert.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

/* Only defined by the shim when the driver lacks it (pre-12.0 drivers). */
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);

#define NOINLINE __attribute__((noinline))

static void die(const char *what)
{
    fprintf(stderr, "faultprog: %s\n", what);
    exit(3);
}

/* ---- pairs ---- */

typedef struct worker {
    pthread_t th;
    long n, allocs, frees, fails;
    int id;
} worker_t;

static long pace_us; /* FAULTPROG_PACE_US: pause every 1000 pairs, so a run spans many chunks */

static void *pairs_main(void *arg)
{
    worker_t *w = arg;
    for (long i = 0; i < w->n; i++) {
        if (pace_us && i % 1000 == 999) {
            struct timespec ts = { pace_us / 1000000, pace_us % 1000000 * 1000 };
            nanosleep(&ts, NULL);
        }
        void *p = NULL;
        if (cudaMalloc(&p, 4096 + (size_t)(i % 7) * 512) != cudaSuccess) {
            w->fails++;
            continue;
        }
        w->allocs++;
        if (cudaFree(p) == cudaSuccess)
            w->frees++;
        else
            w->fails++;
    }
    return NULL;
}

static void run_workers(long n, int t, void *(*fn)(void *), long *allocs, long *frees, long *fails)
{
    worker_t *w = calloc((size_t)t, sizeof *w);
    if (!w)
        die("out of memory");
    for (int i = 0; i < t; i++) {
        w[i].n = n;
        w[i].id = i;
        if (pthread_create(&w[i].th, NULL, fn, &w[i]))
            die("pthread_create");
    }
    *allocs = *frees = *fails = 0;
    for (int i = 0; i < t; i++) {
        pthread_join(w[i].th, NULL);
        *allocs += w[i].allocs;
        *frees += w[i].frees;
        *fails += w[i].fails;
    }
    free(w);
}

static int mode_pairs(long n, int t)
{
    long a, f, x;
    run_workers(n, t, pairs_main, &a, &f, &x);
    printf("pairs allocs=%ld frees=%ld fails=%ld\n", a, f, x);
    return x != 0;
}

/* ---- eintr ---- */

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

static int mode_eintr(long n)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: slow syscalls return EINTR */
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = { { 0, 1000 }, { 0, 1000 } };
    setitimer(ITIMER_REAL, &it, NULL);
    int fds[2];
    if (pipe(fds))
        die("pipe");
    long ok = 0, eintr_seen = 0;
    for (long i = 0; i < n; i++) {
        void *p;
        if (cudaMalloc(&p, 8192) == cudaSuccess && cudaFree(p) == cudaSuccess)
            ok++;
        if (i % 256 == 0) {
            /* A blocking read the itimer interrupts, as in a server's loop. */
            char c;
            if (read(fds[0], &c, 1) < 0 && errno == EINTR)
                eintr_seen++;
        }
    }
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_REAL, &off, NULL);
    printf("eintr pairs=%ld of %ld\n", ok, n);
    fprintf(stderr, "eintr: %ld alarms, %ld reads interrupted\n", (long)alarms, eintr_seen);
    return ok != n;
}

/* ---- forkstorm ---- */

static atomic_int stop_workers;

static void *storm_worker(void *arg)
{
    worker_t *w = arg;
    while (!atomic_load(&stop_workers)) {
        void *p;
        if (cudaMalloc(&p, 4096 * (size_t)(1 + w->id % 5)) == cudaSuccess) {
            w->allocs++;
            cudaFree(p);
        }
    }
    return NULL;
}

static int mode_forkstorm(int forks)
{
    enum { NT = 64 };
    static worker_t w[NT];
    void *warm;
    if (cudaMalloc(&warm, 4096) != cudaSuccess) /* shim and driver up before the storm */
        die("first cudaMalloc");
    for (int i = 0; i < NT; i++) {
        w[i].id = i;
        if (pthread_create(&w[i].th, NULL, storm_worker, &w[i]))
            die("pthread_create");
    }
    int ok = 0;
    for (int i = 0; i < forks; i++) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            /* The driver API: the simulated runtime's lock has no fork
             * handler (neither does the real runtime support CUDA in a
             * forked child), the simulated driver's has. */
            CUdeviceptr d;
            int good = cuMemAlloc_v2(&d, 65536 + 4096) == CUDA_SUCCESS && cuMemFree_v2(d) == CUDA_SUCCESS;
            exit(good ? 0 : 1); /* exit, not _exit: the shim's atexit flush runs */
        }
        int st;
        if (waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
            ok++;
    }
    atomic_store(&stop_workers, 1);
    for (int i = 0; i < NT; i++)
        pthread_join(w[i].th, NULL);
    cudaFree(warm);
    printf("forkstorm children=%d ok=%d\n", forks, ok);
    return ok != forks;
}

/* ---- forkwalk ---- */

/* Only the child calls this: the unwind of its return address is new, so
 * the shim walks the modules for it. */
NOINLINE static int forkwalk_child_alloc(void)
{
    CUdeviceptr d;
    return cuMemAlloc_v2(&d, 81920) == CUDA_SUCCESS && cuMemFree_v2(d) == CUDA_SUCCESS;
}

static void *forkwalk_thread(void *arg)
{
    (void)arg;
    void *p;
    if (cudaMalloc(&p, 8192) == cudaSuccess)
        cudaFree(p);
    return NULL;
}

static int mode_forkwalk(void)
{
    void *warm;
    if (cudaMalloc(&warm, 4096) != cudaSuccess)
        die("first cudaMalloc");
    pthread_t th;
    if (pthread_create(&th, NULL, forkwalk_thread, NULL))
        die("pthread_create");
    /* The thread's first stack: its unwind is in its module walk by now. */
    struct timespec ts = { 0, 100 * 1000000 };
    nanosleep(&ts, NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        alarm(10); /* a child stuck on a lock dies of SIGALRM */
        exit(forkwalk_child_alloc() ? 0 : 1);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
        die("waitpid");
    pthread_join(th, NULL);
    cudaFree(warm);
    const char *how = WIFEXITED(st) ? (WEXITSTATUS(st) == 0 ? "ok" : "failed")
                      : WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? "hung" : "killed";
    printf("forkwalk child=%s\n", how);
    return strcmp(how, "ok") != 0;
}

/* ---- exec chain ---- */

NOINLINE static int server_alloc(void)
{
    void *p;
    int rc = (int)cudaMalloc(&p, 3 * 1048576 + 1);
    return rc == cudaSuccess ? (int)cudaFree(p) : rc;
}

static int mode_server(const char *self)
{
    if (server_alloc())
        die("server cudaMalloc");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "runner", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("server: runner exited %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    return 0;
}

NOINLINE static int runner_alloc(void)
{
    void *p;
    int rc = (int)cudaMalloc(&p, 5 * 1048576 + 1);
    return rc == cudaSuccess ? (int)cudaFree(p) : rc;
}

/* ---- bad frees ---- */

static int mode_badfree(void)
{
    void *p;
    CUdeviceptr d;
    printf("cudaFree(unknown)=%d\n", (int)cudaFree((void *)0x7777000));
    printf("cudaMalloc=%d\n", (int)cudaMalloc(&p, 12289));
    printf("cudaFree=%d\n", (int)cudaFree(p));
    printf("cudaFree(again)=%d\n", (int)cudaFree(p));
    printf("cudaFree(NULL)=%d\n", (int)cudaFree(NULL));
    printf("cuMemFree_v2(unknown)=%d\n", (int)cuMemFree_v2((CUdeviceptr)0x8888000));
    printf("cuMemAlloc_v2=%d\n", (int)cuMemAlloc_v2(&d, 16385));
    printf("cuMemFree_v2=%d\n", (int)cuMemFree_v2(d));
    printf("cuMemFree_v2(again)=%d\n", (int)cuMemFree_v2(d));
    printf("cudaFreeHost(unknown)=%d\n", (int)cudaFreeHost((void *)0x9999000));
    printf("cuMemFreeHost(unknown)=%d\n", (int)cuMemFreeHost((void *)0x9999000));
    return 0;
}

/* ---- meminfo ---- */

static int mode_meminfo(void)
{
    size_t fr = 0, tot = 0;
    void *p;
    if (cudaMalloc(&p, 4096) != cudaSuccess) /* context up */
        die("cudaMalloc");
    printf("meminfo(NULL,&total)=%d total=%zu\n", (int)cuMemGetInfo_v2(NULL, &tot), tot);
    printf("meminfo(&free,NULL)=%d\n", (int)cuMemGetInfo_v2(&fr, NULL));
    printf("meminfo(NULL,NULL)=%d\n", (int)cuMemGetInfo_v2(NULL, NULL));
    printf("cudaMemGetInfo(NULL,&total)=%d\n", (int)cudaMemGetInfo(NULL, &tot));
    cudaFree(p);
    return 0;
}

/* ---- a driver without an entry point ---- */

static int mode_nov2_call(void)
{
    void *p;
    if (cudaMalloc(&p, 4096) != cudaSuccess)
        die("cudaMalloc");
    CUdeviceptr d = 0;
    CUmemoryPool pool = NULL;
    cuDeviceGetDefaultMemPool(&pool, 0);
    CUresult r = cuMemAllocFromPoolAsync_ptsz(&d, 4096, pool, NULL);
    printf("cuMemAllocFromPoolAsync_ptsz=%d ptr=%llu\n", (int)r, (unsigned long long)d);
    cudaFree(p);
    return 0;
}

static int mode_nov2_probe(void)
{
    static const char *const names[] = { "cuMemAllocFromPoolAsync_ptsz", "cuGetProcAddress_v2",
                                         "cuMemAlloc_v2" };
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h)
        die("dlopen libcuda.so.1");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        printf("dlsym(libcuda, %s)=%s dlsym(RTLD_DEFAULT, %s)=%s\n", names[i],
               dlsym(h, names[i]) ? "found" : "NULL", names[i],
               dlsym(RTLD_DEFAULT, names[i]) ? "found" : "NULL");
    return 0;
}

/* ---- dlclose ---- */

/* STEM names the pair: libSTEM_a.so with STEM_a_alloc, then b. */
static int mode_dlclose(const char *dir, const char *stem, long pause_ms, int keep_b)
{
    char path[4096], lib[64], fn_name[64];
    for (int i = 0; i < 2; i++) {
        snprintf(lib, sizeof lib, "lib%s_%c.so", stem, 'a' + i);
        snprintf(fn_name, sizeof fn_name, "%s_%c_alloc", stem, 'a' + i);
        snprintf(path, sizeof path, "%s/%s", dir, lib);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            die(dlerror());
        int (*fn)(void) = (int (*)(void))dlsym(h, fn_name);
        if (!fn)
            die("dlsym");
        printf("%s=%d\n", fn_name, fn());
        Dl_info info;
        dladdr((void *)fn, &info);
        fprintf(stderr, "%s at %p base %p\n", lib, (void *)fn, info.dli_fbase);
        /* Long enough for the writer to name the frames while mapped. */
        struct timespec ts = { pause_ms / 1000, pause_ms % 1000 * 1000000 };
        nanosleep(&ts, NULL);
        if ((i == 0 || !keep_b) && dlclose(h))
            die("dlclose");
    }
    return 0;
}

/* ---- busy (SIGKILL target) ---- */

static void *busy_main(void *arg)
{
    worker_t *w = arg;
    for (long i = 0;; i++) {
        void *p;
        if (cudaMalloc(&p, 4096 + (size_t)((i + w->id) % 64) * 4096) == cudaSuccess)
            cudaFree(p);
        if (i % 64 == 0) {
            struct timespec ts = { 0, 200000 };
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static int mode_busy(int t)
{
    void *p;
    if (cudaMalloc(&p, 4096) != cudaSuccess)
        die("cudaMalloc");
    static worker_t w[64];
    if (t > 64)
        t = 64;
    for (int i = 0; i < t; i++) {
        w[i].id = i;
        pthread_create(&w[i].th, NULL, busy_main, &w[i]);
    }
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
    return 0;
}

/* ---- soak: many distinct stacks ----
 * A stack is thread_main -> outer_I -> descend^D -> inner_J -> cudaMalloc,
 * with I in 0..9, J in 0..19, D in 0..49: 10,000 distinct stacks, all
 * shorter than the shim's default 64 frames so none are cut together. */

typedef int (*inner_fn)(long i);

#define SOAK_INNER(j)                                                  \
    NOINLINE static int inner_##j(long i)                              \
    {                                                                  \
        void *p;                                                       \
        if (cudaMalloc(&p, 4096 + (size_t)(j) * 256) != cudaSuccess)   \
            return 1;                                                  \
        int rc = cudaFree(p) != cudaSuccess;                           \
        __asm__ volatile("" ::: "memory");                             \
        return rc + (int)(i & 0);                                      \
    }
SOAK_INNER(0) SOAK_INNER(1) SOAK_INNER(2) SOAK_INNER(3) SOAK_INNER(4)
SOAK_INNER(5) SOAK_INNER(6) SOAK_INNER(7) SOAK_INNER(8) SOAK_INNER(9)
SOAK_INNER(10) SOAK_INNER(11) SOAK_INNER(12) SOAK_INNER(13) SOAK_INNER(14)
SOAK_INNER(15) SOAK_INNER(16) SOAK_INNER(17) SOAK_INNER(18) SOAK_INNER(19)
static const inner_fn inners[20] = { inner_0, inner_1, inner_2, inner_3, inner_4, inner_5, inner_6,
                                     inner_7, inner_8, inner_9, inner_10, inner_11, inner_12, inner_13,
                                     inner_14, inner_15, inner_16, inner_17, inner_18, inner_19 };

NOINLINE static int descend(int d, inner_fn inner, long i)
{
    int rc = d ? descend(d - 1, inner, i) : inner(i);
    __asm__ volatile("" ::: "memory"); /* no tail call: every level keeps its frame */
    return rc;
}

#define SOAK_OUTER(k)                                                  \
    NOINLINE static int outer_##k(int d, inner_fn inner, long i)       \
    {                                                                  \
        int rc = descend(d, inner, i);                                 \
        __asm__ volatile("" ::: "memory");                             \
        return rc;                                                     \
    }
SOAK_OUTER(0) SOAK_OUTER(1) SOAK_OUTER(2) SOAK_OUTER(3) SOAK_OUTER(4)
SOAK_OUTER(5) SOAK_OUTER(6) SOAK_OUTER(7) SOAK_OUTER(8) SOAK_OUTER(9)
typedef int (*outer_fn)(int, inner_fn, long);
static const outer_fn outers[10] = { outer_0, outer_1, outer_2, outer_3, outer_4,
                                     outer_5, outer_6, outer_7, outer_8, outer_9 };

static void *soak_main(void *arg)
{
    worker_t *w = arg;
    /* Each thread walks all 10,000 stacks in its own order. */
    for (long i = 0; i < w->n; i++) {
        long k = (i * 7919 + w->id * 104729) % 10000;
        int bad = outers[k % 10]((int)(k / 200), inners[(k / 10) % 20], i);
        if (bad)
            w->fails++;
        else {
            w->allocs++;
            w->frees++;
        }
    }
    return NULL;
}

static void print_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long rss = -1, hwm = -1;
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "VmRSS: %ld", &rss);
        sscanf(line, "VmHWM: %ld", &hwm);
    }
    if (f)
        fclose(f);
    fprintf(stderr, "rss %ld hwm %ld\n", rss, hwm);
}

static int mode_soak(long events, int t)
{
    long a, f, x;
    run_workers(events / 2 / t, t, soak_main, &a, &f, &x);
    printf("soak allocs=%ld frees=%ld fails=%ld\n", a, f, x);
    print_rss();
    return x != 0;
}

/* ---- churn ---- */

/* rounds x t short-lived threads, each making 4 pairs then exiting, t at a
 * time: a server that starts a thread per request. The shim's per-thread
 * unwind memo must come back at each exit, so its memory stays that of t
 * threads (tests/t/79-soak.t compares 20 rounds with 200). */
static int mode_churn(long rounds, int t)
{
    long a = 0, f = 0, x = 0;
    for (long r = 0; r < rounds; r++) {
        long ra, rf, rx;
        run_workers(4, t, pairs_main, &ra, &rf, &rx);
        a += ra;
        f += rf;
        x += rx;
    }
    printf("churn threads=%ld allocs=%ld frees=%ld fails=%ld\n", rounds * t, a, f, x);
    print_rss();
    return x != 0;
}

/* ---- attacks on the shim's own machinery ---- */

static void *slowfree_main(void *arg)
{
    (void)arg;
    cuMemFree(0); /* sleeps VTSIM_SLOW_FREE_MS in the driver */
    return NULL;
}

/* One thread blocked in cuMemFree (as cudaFree waits behind a long kernel)
 * while this one makes n pairs; then the process exits with the free still
 * blocked, or after cancelling it inside the driver. */
static int mode_slowfree(long n, int cancel)
{
    pthread_t th;
    long allocs = 0, frees = 0;
    void *p;
    if (cudaFree(0) != cudaSuccess)
        die("cudaFree(0)"); /* the context, before the blocked free */
    if (pthread_create(&th, NULL, slowfree_main, NULL) != 0)
        die("pthread_create");
    struct timespec settle = { 0, 50000000 };
    nanosleep(&settle, NULL);
    if (cancel) {
        pthread_cancel(th);
        pthread_join(th, NULL);
    }
    for (long i = 0; i < n; i++)
        if (cudaMalloc(&p, 4096) == cudaSuccess && ++allocs && cudaFree(p) == cudaSuccess)
            frees++;
    printf("slowfree allocs=%ld frees=%ld\n", allocs, frees);
    exit(0); /* the blocked thread never returns first */
}

/* The free that blocks for VTSIM_SLOW_FREE_MS while the process goes on
 * allocating: a trace read during the block must already hold the pairs
 * made behind it. */
static int mode_slowlive(long n, int cancel)
{
    pthread_t th;
    long allocs = 0, frees = 0;
    void *p;
    const char *slow = getenv("VTSIM_SLOW_FREE_MS");
    long block_ms = slow ? atol(slow) : 0;
    struct timespec began, now;
    if (cudaFree(0) != cudaSuccess)
        die("cudaFree(0)");
    clock_gettime(CLOCK_MONOTONIC, &began);
    if (pthread_create(&th, NULL, slowfree_main, NULL) != 0)
        die("pthread_create");
    struct timespec settle = { 0, 50000000 };
    nanosleep(&settle, NULL);
    if (cancel) {
        pthread_cancel(th);
        pthread_join(th, NULL);
    }
    for (int round = 0; round < 2; round++) {
        for (long i = 0; i < n; i++)
            if (cudaMalloc(&p, 4096) == cudaSuccess && ++allocs && cudaFree(p) == cudaSuccess)
                frees++;
        printf("slowlive allocs=%ld frees=%ld\n", allocs, frees);
        if (round)
            break;
        if (!cancel) {
            pthread_join(th, NULL);
        } else {
            clock_gettime(CLOCK_MONOTONIC, &now);
            long left_ms = block_ms - ((now.tv_sec - began.tv_sec) * 1000 + (now.tv_nsec - began.tv_nsec) / 1000000);
            struct timespec rest = { left_ms > 0 ? left_ms / 1000 : 0, left_ms > 0 ? left_ms % 1000 * 1000000 : 0 };
            nanosleep(&rest, NULL);
        }
        printf("slowlive free over\n");
    }
    return 0;
}

/* ---- a handler that allocates ---- */

static volatile sig_atomic_t handler_pairs, handler_fails;
/* The handler's driver entry points: the linked ones, or (sigrtlooked)
 * what dlsym found on libcuda's handle. */
static CUresult (*handler_alloc)(CUdeviceptr *, size_t) = cuMemAlloc_v2;
static CUresult (*handler_free)(CUdeviceptr) = cuMemFree_v2;

static void on_alarm_alloc(int sig)
{
    (void)sig;
    int saved = errno;
    CUdeviceptr d;
    if (handler_alloc(&d, 12288) == CUDA_SUCCESS && handler_free(d) == CUDA_SUCCESS)
        handler_pairs++;
    else
        handler_fails++;
    errno = saved;
}

/* n allocation pairs (runtime ones when runtime is set) while a 10 kHz
 * timer's handler allocates too (on_alarm_alloc); @return the pairs that
 * succeeded. */
static long pairs_under_alarm(long n, int runtime)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm_alloc;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = { { 0, 100 }, { 0, 100 } };
    setitimer(ITIMER_REAL, &it, NULL);
    long ok = 0;
    for (long i = 0; i < n; i++) {
        CUdeviceptr d;
        void *p;
        if (runtime ? cudaMalloc(&p, 8192) == cudaSuccess && cudaFree(p) == cudaSuccess
                    : cuMemAlloc_v2(&d, 8192) == CUDA_SUCCESS && cuMemFree_v2(d) == CUDA_SUCCESS)
            ok++;
    }
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_REAL, &off, NULL);
    return ok;
}

static int mode_sigalloc(const char *mode, long n, int runtime)
{
    if (!strcmp(mode, "sigrtlooked")) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW);
        handler_alloc = h ? (CUresult(*)(CUdeviceptr *, size_t))dlsym(h, "cuMemAlloc_v2") : NULL;
        handler_free = h ? (CUresult(*)(CUdeviceptr))dlsym(h, "cuMemFree_v2") : NULL;
        if (!handler_alloc || !handler_free)
            die("dlsym(libcuda)");
    }
    if (!strcmp(mode, "sigrtentry")) {
        void *a = NULL, *f = NULL;
        enum cudaDriverEntryPointQueryResult st;
        if (cudaGetDriverEntryPointByVersion("cuMemAlloc", &a, 12000, cudaEnableDefault, &st) != cudaSuccess ||
            cudaGetDriverEntryPointByVersion("cuMemFree", &f, 12000, cudaEnableDefault, &st) != cudaSuccess ||
            !a || !f)
            die("cudaGetDriverEntryPointByVersion");
        handler_alloc = (CUresult(*)(CUdeviceptr *, size_t))a;
        handler_free = (CUresult(*)(CUdeviceptr))f;
    }
    void *warm;
    if (cudaMalloc(&warm, 4096) != cudaSuccess) /* context and shim up */
        die("cudaMalloc");
    long ok = pairs_under_alarm(n, runtime);
    cudaFree(warm);
    printf("%s pairs=%ld of %ld handler fails=%ld\n", mode, ok, n, (long)handler_fails);
    fprintf(stderr, "%s handler pairs %ld\n", mode, (long)handler_pairs);
    return ok != n || handler_fails;
}

/* ---- signals during start-up ---- */

static int mode_sigstart(long n)
{
    /* A context, without a call the shim wraps: the loop's first
     * cuMemAlloc_v2 starts the shim, with the itimer running. */
    if (cudaSetDevice(0) != cudaSuccess)
        die("cudaSetDevice");
    long ok = pairs_under_alarm(n, 0);
    printf("sigstart pairs=%ld of %ld handler fails=%ld\n", ok, n, (long)handler_fails);
    fprintf(stderr, "sigstart handler pairs %ld\n", (long)handler_pairs);
    return ok != n || handler_fails;
}

/* ---- fork while the shim starts ---- */

static atomic_int forkstart_go;

static void *forkstart_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&forkstart_go))
        ;
    size_t free_b, total_b;
    cuMemGetInfo_v2(&free_b, &total_b);
    return NULL;
}

/* How a child that must exit by itself ended: 0 returned, 1 hung (still
 * running after its alarm), 2 anything else. */
static int child_end(pid_t pid)
{
    int st = 0;
    pid_t got;
    while ((got = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
        ;
    if (got != pid)
        die("waitpid");
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? 1 : 2;
}

/* One round: the first CUDA call on a thread, a fork from main a few
 * microseconds (round-dependent) after it starts. Exit status: child_end's. */
static int forkstart_round(int r)
{
    pthread_t th;
    if (pthread_create(&th, NULL, forkstart_thread, NULL))
        die("pthread_create");
    atomic_store(&forkstart_go, 1);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long wait_ns = (long)(r % 40) * 50000;
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < wait_ns);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        alarm(5);
        size_t free_b, total_b;
        cuMemGetInfo_v2(&free_b, &total_b);
        exit(0);
    }
    int end = child_end(pid);
    pthread_join(th, NULL);
    return end;
}

static int mode_forkstart(int rounds)
{
    int ok = 0, hung = 0;
    fflush(stdout);
    for (int r = 0; r < rounds; r++) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0)
            exit(forkstart_round(r));
        int st = 0;
        if (waitpid(pid, &st, 0) != pid)
            die("waitpid");
        int end = WIFEXITED(st) ? WEXITSTATUS(st) : 2;
        ok += end == 0;
        hung += end == 1;
    }
    printf("forkstart rounds=%d ok=%d hung=%d\n", rounds, ok, hung);
    return ok != rounds;
}

/* ---- exit racing allocating threads ---- */

static volatile uint64_t *exit_counts;

static void *exitrace_thread(void *arg)
{
    volatile uint64_t *started = exit_counts + 16 * (intptr_t)arg, *returned = started + 8;
    for (;;) {
        void *p = NULL;
        ++*started;
        cudaError_t rc = cudaMalloc(&p, 4096);
        ++*returned;
        if (rc != cudaSuccess)
            continue;
        ++*started;
        cudaFree(p);
        ++*returned;
    }
    return NULL;
}

static int mode_exitrace(int threads, long ms)
{
    const char *path = getenv("FAULTPROG_COUNT_FILE");
    if (!path || threads < 1 || threads > 256)
        die("exitrace: FAULTPROG_COUNT_FILE and 1-256 threads");
    int f = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (f < 0 || ftruncate(f, 4096 * 8) != 0)
        die("exitrace: count file");
    exit_counts = mmap(NULL, 4096 * 8, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (exit_counts == MAP_FAILED)
        die("exitrace: mmap");
    close(f);
    for (int i = 0; i < threads; i++) {
        pthread_t th;
        if (pthread_create(&th, NULL, exitrace_thread, (void *)(intptr_t)i))
            die("pthread_create");
    }
    struct timespec ts = { ms / 1000, ms % 1000 * 1000000 };
    nanosleep(&ts, NULL);
    printf("exitrace threads=%d\n", threads);
    exit(0);
}

/* ---- exit while a thread is inside a module walk ---- */

static atomic_int walk_go, walk_in;
static long walk_ms;

static int walk_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info, (void)size, (void)arg;
    atomic_store(&walk_in, 1);
    if (walk_ms < 0)
        for (;;)
            pause();
    struct timespec ts = { walk_ms / 1000, walk_ms % 1000 * 1000000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    return 1;
}

static void *exitwalk_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&walk_go))
        ;
    dl_iterate_phdr(walk_cb, NULL);
    return NULL;
}

/* A thread that sits ms in a dl_iterate_phdr callback, holding the
 * loader's lock; returns once it is inside. */
static pthread_t hold_loader_lock(long ms)
{
    walk_ms = ms;
    pthread_t walker;
    if (pthread_create(&walker, NULL, exitwalk_thread, NULL))
        die("pthread_create");
    atomic_store(&walk_go, 1);
    while (!atomic_load(&walk_in))
        ;
    return walker;
}

NOINLINE static void exitwalk_new_path(void)
{
    void *p;
    if (cudaMalloc(&p, 24576) == cudaSuccess)
        cudaFree(p);
}

static int mode_exitwalk(long ms, int early)
{
    walk_ms = ms;
    void *p;
    if (cudaMalloc(&p, 4096) != cudaSuccess)
        die("cudaMalloc");
    cudaFree(p);
    pthread_t th;
    if (pthread_create(&th, NULL, exitwalk_thread, NULL))
        die("pthread_create");
    struct timespec wait = { 1, 500 * 1000000 };
    nanosleep(&wait, NULL);
    exitwalk_new_path();
    atomic_store(&walk_go, 1);
    while (!atomic_load(&walk_in))
        ;
    struct timespec before_exit = { early ? 1 : 0, early ? 200 * 1000000 : 100 * 1000000 };
    nanosleep(&before_exit, NULL);
    printf("exitwalk done\n");
    exit(0);
}

/* ---- a fork that outwaits another thread's start-up ---- */

/* A thread sits MS ms in a dl_iterate_phdr callback (the loader's lock)
 * while another makes the process's first CUDA call: a start-up that loads
 * a library waits for the callback. The main thread forks 100 ms later;
 * the child makes one call and exits. */
static void on_tick(int sig)
{
    (void)sig;
}

static int mode_forkslow(long ms)
{
    /* FAULTPROG_ITIMER_US: an interval timer whose signals (no
     * SA_RESTART) end every nap of the fork's wait early. */
    long tick_us = getenv("FAULTPROG_ITIMER_US") ? atol(getenv("FAULTPROG_ITIMER_US")) : 0;
    if (tick_us > 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_tick;
        sigaction(SIGALRM, &sa, NULL);
        struct itimerval it = { { 0, tick_us }, { 0, tick_us } };
        setitimer(ITIMER_REAL, &it, NULL);
    }
    pthread_t walker = hold_loader_lock(ms), first;
    if (pthread_create(&first, NULL, forkstart_thread, NULL))
        die("pthread_create");
    atomic_store(&forkstart_go, 1);
    struct timespec wait = { 0, 100 * 1000000 };
    while (nanosleep(&wait, &wait) != 0 && errno == EINTR)
        ;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        alarm(10);
        size_t free_b, total_b;
        int rc = cuMemGetInfo_v2(&free_b, &total_b);
        printf("forkslow child call=%d\n", rc);
        exit(0);
    }
    int end = child_end(pid);
    pthread_join(first, NULL);
    pthread_join(walker, NULL);
    printf("forkslow child end=%d\n", end);
    return end;
}

/* ---- NVTX-style tags and fork, no CUDA ---- */

typedef int (*tag_push_fn)(const char *);
typedef int (*tag_pop_fn)(void);
static tag_push_fn tag_push;
static tag_pop_fn tag_pop;
static atomic_int nvtxfork_stop;

static void *nvtxfork_thread(void *arg)
{
    (void)arg;
    char name[32];
    for (unsigned i = 0; !atomic_load(&nvtxfork_stop); i++) {
        snprintf(name, sizeof name, "parent-%u", i);
        if (tag_push) {
            tag_push(name);
            tag_pop();
        }
    }
    return NULL;
}

static int mode_rangeflood(long n)
{
    tag_push = (tag_push_fn)dlsym(RTLD_DEFAULT, "vramtrace_tag_push");
    tag_pop = (tag_pop_fn)dlsym(RTLD_DEFAULT, "vramtrace_tag_pop");
    void *p;
    if (cudaMalloc(&p, 4096) != cudaSuccess)
        die("cudaMalloc");
    cudaFree(p);
    long ops = 0;
    for (long i = 0; i < n; i++) {
        if (!tag_push)
            continue;
        tag_push("flood");
        if (i & 1) {
            tag_push("inner");
            tag_pop();
            ops += 2;
        }
        tag_pop();
        ops += 2;
    }
    printf("rangeflood n=%ld\n", n);
    fprintf(stderr, "rangeflood ops %ld\n", ops);
    return 0;
}

static int mode_nvtxfork(int forks)
{
    tag_push = (tag_push_fn)dlsym(RTLD_DEFAULT, "vramtrace_tag_push");
    tag_pop = (tag_pop_fn)dlsym(RTLD_DEFAULT, "vramtrace_tag_pop");
    pthread_t th;
    if (pthread_create(&th, NULL, nvtxfork_thread, NULL))
        die("pthread_create");
    int ok = 0, hung = 0;
    fflush(stdout);
    for (int i = 0; i < forks; i++) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            alarm(5);
            char name[32];
            snprintf(name, sizeof name, "child-%d", i);
            if (tag_push) {
                tag_push(name);
                tag_pop();
            }
            exit(0);
        }
        int end = child_end(pid);
        ok += end == 0;
        hung += end == 1;
    }
    atomic_store(&nvtxfork_stop, 1);
    pthread_join(th, NULL);
    printf("nvtxfork children=%d ok=%d hung=%d\n", forks, ok, hung);
    return ok != forks;
}

/* ---- vfork children ---- */

/* The child shares the parent's memory and stack until it execs or exits:
 * what runs in it must leave the shim's state, and the parent's, alone.
 * The child never returns from here. */
NOINLINE static pid_t vfork_child(const char *self, int k)
{
    pid_t pid = vfork();
    if (pid == 0) {
        if (k == 0)
            execl(self, self, "runner", (char *)NULL);
        else if (k == 2)
            execl("/nonexistent/faultprog", "faultprog", (char *)NULL);
        _exit(k == 1 ? 7 : 127);
    }
    return pid;
}

static int mode_vfork(const char *self, long n)
{
    long pairs = 0;
    for (int round = 0; round < 2; round++) {
        for (long i = 0; i < n; i++) {
            void *p;
            if (cudaMalloc(&p, 4096 + (size_t)round * 4096) == cudaSuccess && cudaFree(p) == cudaSuccess)
                pairs++;
        }
        if (round)
            break;
        fflush(stdout);
        const char *what[] = { "exec", "exit", "exec-missing" };
        for (int k = 0; k < 3; k++) {
            pid_t pid = vfork_child(self, k);
            int st = 0;
            if (pid < 0 || waitpid(pid, &st, 0) != pid)
                die("vfork");
            printf("vfork %s: status %d\n", what[k], WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        }
    }
    printf("vfork pairs=%ld of %ld\n", pairs, 2 * n);
    return pairs != 2 * n;
}

/* ---- a working directory changed after the first CUDA call ---- */

static int mode_chdirfork(const char *dir)
{
    void *p;
    if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess)
        die("cudaMalloc");
    if (chdir(dir) != 0)
        die("chdir");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        int ok = cudaMalloc(&p, 4096) == cudaSuccess && cudaFree(p) == cudaSuccess;
        exit(!ok);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    printf("chdirfork child %s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "failed");
    return 0;
}

/* ---- pthread_cancel of a thread waiting inside the shim ---- */

static void *wait_for_cancel(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

static int mode_cancel_fork(void);

/* glibc's first pthread_cancel loads libgcc_s (to unwind), which waits for
 * the loader's lock: made once before anything holds it, so a later
 * cancel lands when it is sent. */
static void load_cancel_machinery(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, wait_for_cancel, NULL) || pthread_cancel(t) || pthread_join(t, NULL))
        die("pthread_cancel");
}

static void *cancel_first_call(void *arg)
{
    (void)arg;
    size_t free_b, total_b;
    cuMemGetInfo_v2(&free_b, &total_b);
    return NULL;
}

/* Waits to be cancelled: every run ends the thread the same way, however
 * long its dlclose took. */
static void *cancel_dlclose(void *handle)
{
    dlclose(handle);
    return wait_for_cancel(NULL);
}

/* what "start": a walker holds the loader's lock for 1 s while a thread
 * makes the process's first CUDA call. what a directory: the main thread
 * allocates through DIR/libfaultdl_a.so, and a thread dlcloses it while the
 * writer names its frames in a walk that VTFAULT_SLOW_PHDR_MS holds up
 * (the shim's dlclose waits for that naming first). Either thread is
 * cancelled 50 ms in; then the main thread makes a pair and exits. */
/* Forks while another thread's start-up is held up: the fork waits for
 * it, and the thread is cancelled meanwhile. */
static void *cancel_fork(void *arg)
{
    (void)arg;
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return wait_for_cancel(NULL);
}

static int mode_cancel(const char *what)
{
    if (!strcmp(what, "fork"))
        return mode_cancel_fork();
    int start = !strcmp(what, "start");
    pthread_t walker, victim;
    void *arg = NULL;
    load_cancel_machinery();
    if (start) {
        walker = hold_loader_lock(1000);
    } else {
        char path[4096];
        snprintf(path, sizeof path, "%s/libfaultdl_a.so", what);
        arg = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        int (*fn)(void) = arg ? (int (*)(void))dlsym(arg, "faultdl_a_alloc") : NULL;
        if (!fn)
            die("dlopen");
        fn();
        struct timespec settle = { 0, 20 * 1000000 };
        nanosleep(&settle, NULL);
    }
    if (pthread_create(&victim, NULL, start ? cancel_first_call : cancel_dlclose, arg))
        die("pthread_create");
    struct timespec ts = { 0, 50 * 1000000 };
    nanosleep(&ts, NULL);
    pthread_cancel(victim);
    void *ret;
    pthread_join(victim, &ret);
    if (start)
        pthread_join(walker, NULL);
    void *p;
    int rc = cudaMalloc(&p, 4096) == cudaSuccess && cudaFree(p) == cudaSuccess;
    printf("cancel %s: thread %s, then a pair %s\n", start ? "start" : "dlclose",
           ret == PTHREAD_CANCELED ? "cancelled" : "returned", rc ? "ok" : "failed");
    return !rc;
}

/* The program's own fork handlers, as a library that keeps a lock across
 * fork has: registered after the shim's, so glibc runs its prepare first. */
static pthread_mutex_t program_fork_lock = PTHREAD_MUTEX_INITIALIZER;
static void program_fork_prepare(void)
{
    pthread_mutex_lock(&program_fork_lock);
}
static void program_fork_done(void)
{
    pthread_mutex_unlock(&program_fork_lock);
}

static int mode_cancel_fork(void)
{
    pthread_t first, victim;
    load_cancel_machinery();
    pthread_t walker = hold_loader_lock(1000);
    if (pthread_create(&first, NULL, cancel_first_call, NULL))
        die("pthread_create");
    struct timespec ts = { 0, 20 * 1000000 };
    nanosleep(&ts, NULL);
    pthread_atfork(program_fork_prepare, program_fork_done, program_fork_done);
    if (pthread_create(&victim, NULL, cancel_fork, NULL))
        die("pthread_create");
    ts.tv_nsec = 50 * 1000000;
    nanosleep(&ts, NULL);
    pthread_cancel(victim);
    void *ret;
    pthread_join(victim, &ret);
    pthread_join(first, NULL);
    pthread_join(walker, NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    int st = -1;
    int reaped = pid > 0 && waitpid(pid, &st, 0) == pid;
    printf("cancel fork: thread %s, then a fork %s\n", ret == PTHREAD_CANCELED ? "cancelled" : "returned",
           reaped && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "failed");
    return !reaped;
}

/* ---- exec and _exit: the image ends without exit() ---- */

/* Allocating threads beside the exec: their calls must neither hang the
 * exec nor, after a failed one, wait on a trace that has ended. */
static _Atomic int image_threads_go = 1;
static _Atomic long image_thread_pairs, image_slowest_us;

static void *image_thread_main(void *arg)
{
    (void)arg;
    while (atomic_load(&image_threads_go)) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        void *p;
        if (cudaMalloc(&p, 4096) == cudaSuccess && cudaFree(p) == cudaSuccess)
            atomic_fetch_add(&image_thread_pairs, 1);
        clock_gettime(CLOCK_MONOTONIC, &b);
        long us = (b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000;
        long was = atomic_load(&image_slowest_us);
        while (us > was && !atomic_compare_exchange_weak(&image_slowest_us, &was, us))
            ;
    }
    return NULL;
}

/* how: execv execve execvp execvpe execl execle execlp fexecve execveat
 * (each runs SELF as "shown" with two arguments, one with a space, and
 * FAULTPROG_SHOWN in its environment), missing (execv of a path that does
 * not exist, then the process goes on), _exit or _Exit (status 3). */
static int mode_image(const char *self, long n, const char *how)
{
    for (long i = 0; i < n; i++) {
        void *p;
        if (cudaMalloc(&p, 1 << 20) != cudaSuccess)
            die("cudaMalloc");
    }
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&th[i], NULL, image_thread_main, NULL) != 0)
            die("pthread_create");
    while (atomic_load(&image_thread_pairs) < 100)
        sched_yield();
    printf("image allocs=%ld, then %s\n", n, how);
    fflush(stdout);
    char *argv[] = { "faultprog", "shown", "one two", "three", NULL };
    char *envp[] = { "FAULTPROG_SHOWN=from envp", NULL };
    if (!strcmp(how, "_exit"))
        _exit(3);
    if (!strcmp(how, "_Exit"))
        _Exit(3);
    if (!strcmp(how, "quick_exit"))
        quick_exit(3);
    if (!strcmp(how, "execv"))
        execv(self, argv);
    else if (!strcmp(how, "execve"))
        execve(self, argv, envp);
    else if (!strcmp(how, "execvp"))
        execvp(self, argv);
    else if (!strcmp(how, "execvpe"))
        execvpe(self, argv, envp);
    else if (!strcmp(how, "execl"))
        execl(self, "faultprog", "shown", "one two", "three", (char *)NULL);
    else if (!strcmp(how, "execle"))
        execle(self, "faultprog", "shown", "one two", "three", (char *)NULL, envp);
    else if (!strcmp(how, "execlp"))
        execlp(self, "faultprog", "shown", "one two", "three", (char *)NULL);
    else if (!strcmp(how, "fexecve")) {
        int fd = open(self, O_RDONLY | O_CLOEXEC);
        fexecve(fd, argv, envp);
    } else if (!strcmp(how, "execveat"))
        execveat(AT_FDCWD, self, argv, envp, 0);
    else if (!strcmp(how, "search")) {
        /* A PATH search of its own, as Python's os.execvp makes, with no
         * CUDA call from any thread between its tries. */
        atomic_store(&image_threads_go, 0);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        execv("/nonexistent/faultprog", argv);
        execv(self, argv);
    } else if (!strcmp(how, "missing")) {
        int rc = execv("/nonexistent/faultprog", argv);
        printf("exec missing: rc=%d %s\n", rc, errno == ENOENT ? "ENOENT" : "other");
        atomic_store(&image_thread_pairs, 0);
        atomic_store(&image_slowest_us, 0);
        while (atomic_load(&image_thread_pairs) < 1000)
            sched_yield();
        atomic_store(&image_threads_go, 0);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        /* Not on stdout: a plain run never waits. */
        fprintf(stderr, "faultprog: slowest call after the failed exec %ld ms\n",
                atomic_load(&image_slowest_us) / 1000);
        for (long i = 0; i < n; i++) {
            void *p;
            if (cudaMalloc(&p, 1 << 20) != cudaSuccess)
                die("cudaMalloc");
        }
        printf("went on: allocs=%ld\n", n);
        return 0;
    }
    die(how);
    return 1;
}

/* The far end of mode_image's exec: its arguments and environment as it
 * got them, and one allocation of its own. */
static int mode_shown(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        printf("shown argv[%d]=%s\n", i, argv[i]);
    const char *env = getenv("FAULTPROG_SHOWN");
    printf("shown FAULTPROG_SHOWN=%s\n", env ? env : "(unset)");
    void *p;
    return cudaMalloc(&p, 4096) != cudaSuccess;
}

static sigjmp_buf oom_jump;

static void oom_abort_handler(int sig)
{
    (void)sig;
    siglongjmp(oom_jump, 1);
}

static int mode_oom(const char *how, int fits)
{
    void *p;
    for (int i = 0; i < 3; i++)
        if (cudaMalloc(&p, 1ull << 30) != cudaSuccess)
            die("cudaMalloc");
    cudaError_t err = cudaSuccess;
    if (fits)
        usleep(300 * 1000);
    else
        err = cudaMalloc(&p, 2ull << 30);
    printf("oom allocs=3 failed=%d then %s\n", (int)err, how);
    fflush(stdout);
    if (!strcmp(how, "abort"))
        abort();
    if (!strcmp(how, "assert"))
        assert(err == cudaSuccess && "the pool's allocation");
    if (!strcmp(how, "exit_group"))
        syscall(SYS_exit_group, 1);
    if (!strcmp(how, "kill"))
        kill(getpid(), SIGKILL);
    if (!strcmp(how, "longjmp")) {
        signal(SIGABRT, oom_abort_handler);
        if (!sigsetjmp(oom_jump, 1))
            abort();
        long slowest_us = 0;
        for (int i = 0; i < 100; i++) {
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess)
                die("cudaMalloc");
            clock_gettime(CLOCK_MONOTONIC, &b);
            long us = (b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000;
            if (us > slowest_us)
                slowest_us = us;
        }
        fprintf(stderr, "faultprog: slowest call after the abort %ld ms\n", slowest_us / 1000);
        printf("went on pairs=100\n");
        return 0;
    }
    die(how);
    return 1;
}

static int mode_stdfds(void)
{
    void *p;
    if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess)
        die("cudaMalloc");
    int open_std = 0;
    for (int i = 0; i < 3; i++)
        open_std += fcntl(i, F_GETFD) >= 0;
    /* stdout may be closed: the answer goes to a file the test names */
    FILE *f = fopen(getenv("FAULTPROG_OUT"), "w");
    if (!f)
        die("fopen");
    fprintf(f, "stdfds open=%d\n", open_std);
    if (fclose(f) != 0)
        return 1;
    /* FAULTPROG_OUT2: then the program opens that file three times, so it
     * holds fds 0-2 itself to the end, and writes its own line in each. */
    const char *own = getenv("FAULTPROG_OUT2");
    for (int i = 0; own && i < 3; i++) {
        int fd = open(own, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd < 0 || write(fd, "own\n", 4) != 4)
            die("open");
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    long n = argc > 2 ? atol(argv[2]) : 0;
    int t = argc > 3 ? atoi(argv[3]) : 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULTPROG_PACE_US"))
        pace_us = atol(getenv("FAULTPROG_PACE_US"));
    if (!strcmp(mode, "pairs"))
        return mode_pairs(n, t > 0 ? t : 1);
    if (!strcmp(mode, "eintr"))
        return mode_eintr(n);
    if (!strcmp(mode, "forkstorm"))
        return mode_forkstorm((int)n);
    if (!strcmp(mode, "forkwalk"))
        return mode_forkwalk();
    if (!strcmp(mode, "server"))
        return mode_server(argv[0]);
    if (!strcmp(mode, "runner")) {
        int rc = runner_alloc();
        printf("runner: %d\n", rc);
        return rc != 0;
    }
    if (!strcmp(mode, "badfree"))
        return mode_badfree();
    if (!strcmp(mode, "meminfo"))
        return mode_meminfo();
    if (!strcmp(mode, "nov2-call"))
        return mode_nov2_call();
    if (!strcmp(mode, "nov2-probe"))
        return mode_nov2_probe();
    if (!strcmp(mode, "dlclose"))
        return mode_dlclose(argc > 2 ? argv[2] : ".", "faultdl", argc > 3 ? atol(argv[3]) : 0,
                            argc > 4 && !strcmp(argv[4], "keep"));
    if (!strcmp(mode, "reload"))
        return mode_dlclose(argc > 2 ? argv[2] : ".", "faultunw", argc > 3 ? atol(argv[3]) : 0,
                            argc > 4 && !strcmp(argv[4], "keep"));
    if (!strcmp(mode, "busy"))
        return mode_busy(argc > 2 ? atoi(argv[2]) : 4);
    if (!strcmp(mode, "soak"))
        return mode_soak(n, t > 0 ? t : 16);
    if (!strcmp(mode, "churn"))
        return mode_churn(n, t > 0 ? t : 8);
    if (!strcmp(mode, "stdfds"))
        return mode_stdfds();
    if (!strcmp(mode, "sigalloc") || !strcmp(mode, "sigrt") || !strcmp(mode, "sigrtlooked") ||
        !strcmp(mode, "sigrtentry"))
        return mode_sigalloc(mode, n, strcmp(mode, "sigalloc") != 0);
    if (!strcmp(mode, "chdirfork"))
        return mode_chdirfork(argc > 2 ? argv[2] : "/");
    if (!strcmp(mode, "cancel"))
        return mode_cancel(argc > 2 ? argv[2] : "start");
    if (!strcmp(mode, "image"))
        return mode_image(argv[0], n, argc > 3 ? argv[3] : "");
    if (!strcmp(mode, "shown"))
        return mode_shown(argc, argv);
    if (!strcmp(mode, "oom"))
        return mode_oom(argc > 2 ? argv[2] : "", argc > 3 && !strcmp(argv[3], "fits"));
    if (!strcmp(mode, "vfork"))
        return mode_vfork(argv[0], n);
    if (!strcmp(mode, "sigstart"))
        return mode_sigstart(n);
    if (!strcmp(mode, "forkstart"))
        return mode_forkstart((int)n);
    if (!strcmp(mode, "exitrace"))
        return mode_exitrace((int)n, argc > 3 ? atol(argv[3]) : 0);
    if (!strcmp(mode, "exitwalk"))
        return mode_exitwalk(n, argc > 3 && !strcmp(argv[3], "early"));
    if (!strcmp(mode, "forkslow"))
        return mode_forkslow(n);
    if (!strcmp(mode, "rangeflood"))
        return mode_rangeflood(n);
    if (!strcmp(mode, "nvtxfork"))
        return mode_nvtxfork((int)n);
    if (!strcmp(mode, "slowlive"))
        return mode_slowlive(n, argc > 3 && !strcmp(argv[3], "cancel"));
    if (!strcmp(mode, "slowfree"))
        return mode_slowfree(n, argc > 3 && !strcmp(argv[3], "cancel"));
    fprintf(stderr, "faultprog: unknown mode '%s'\n", mode);
    return 2;
}
