/* hotpath.c: the allocation loop `make bench` times with and without a
 * tracer (our shim, heaptrack), so the difference is the tracer's cost per
 * alloc+free pair.
 *
 *   hotpath MODE PAIRS [depth=20] [live=64] [threads=1] [stacks=1]
 *           [sizes=fixed|random] [seed=1] [warmup=1000] [settle_ms=200]
 *
 * MODE: cu (cuMemAlloc_v2/cuMemFree_v2, linked), rt (cudaMalloc/cudaFree),
 * malloc (malloc/free: heaptrack's shape of the same program), none (no
 * allocator at all: prints the thread count only, for the no-CUDA checks),
 * launch (cuGraphLaunch, linked, of a graph capturing one 1 MiB allocation
 * and its free: a "pair" is one launch, the per-token call of a server
 * that runs its decode as a CUDA graph).
 *
 * Each thread descends `depth` noinline recursive frames, then keeps `live`
 * allocations in a ring: every pair frees the oldest and allocates a new
 * one, so the tracer sees a steady state and never a growing heap. With
 * stacks=K > 1, every pair re-descends along one of K distinct paths (a
 * random path index picks between two frame functions per level), so the
 * tracer sees K distinct call stacks. sizes=random draws each size at random
 * (trace-size measurement: sizes that compress like real ones do).
 *
 * Before the timed loop every thread runs `warmup` pairs and then sleeps
 * settle_ms: a tracer's one-time work (our writer's first symbolization,
 * heaptrack_interpret resolving debug info while the program blocks on its
 * pipe) finishes there, so the loop measures the steady per-pair cost.
 *
 * Output, one line: `threads=T pairs=N wall_ns=W cpu_ns=C tasks=K`, where
 * wall_ns covers only the timed loop (from the first worker's start to the
 * last worker's end; all are released together), cpu_ns is the CPU time of
 * every thread of the process (a tracer's own threads included) from the
 * release to settle_ms after the loop's end, so a tracer's writer that
 * catches up after the loop is counted, and tasks is /proc/self/task
 * counted while every worker is alive (so a tracer that starts its own
 * thread shows up).
 */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#define NOINLINE __attribute__((noinline))

enum { M_CU, M_RT, M_MALLOC, M_NONE, M_LAUNCH };

static int mode, depth = 20, live = 64, nthreads = 1, random_sizes, settle_ms = 200;
static long warmup = 1000;
static long pairs, nstacks = 1;
static uint64_t seed = 1;
static CUcontext ctx;
static CUstream launch_stream;
static CUgraphExec launch_exec;
static pthread_barrier_t start_line, go_line, end_line;

typedef struct worker {
    uint64_t rng;
    void **ring;
    long done;
    int failed;
    int pos;
    uint64_t t0, t1;    /* this worker's timed loop */
} worker_t;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: cheap enough not to show in the baseline. */
static uint64_t next_rand(worker_t *w)
{
    w->rng ^= w->rng >> 12;
    w->rng ^= w->rng << 25;
    w->rng ^= w->rng >> 27;
    return w->rng * 0x2545f4914f6cdd1dull;
}

static size_t pick_size(worker_t *w, long i)
{
    if (random_sizes)
        return 1 + (size_t)(next_rand(w) % (256u << 10));
    /* A handful of page multiples: the shape of a server's buffers. */
    return (size_t)(1 + i % 16) * 4096u;
}

static void release(void *p)
{
    if (!p)
        return;
    if (mode == M_CU)
        cuMemFree_v2((CUdeviceptr)(uintptr_t)p);
    else if (mode == M_RT)
        cudaFree(p);
    else
        free(p);
}

static void *acquire(size_t size)
{
    void *p = NULL;
    if (mode == M_CU) {
        CUdeviceptr d = 0;
        if (cuMemAlloc_v2(&d, size) == CUDA_SUCCESS)
            p = (void *)(uintptr_t)d;
    } else if (mode == M_RT) {
        if (cudaMalloc(&p, size) != cudaSuccess)
            p = NULL;
    } else {
        p = malloc(size);
        if (p)
            *(volatile char *)p = 1; /* a real use, so the pair is never elided */
    }
    return p;
}

/* One pair at the current stack. */
NOINLINE static void pair(worker_t *w)
{
    if (mode == M_LAUNCH) {
        w->failed += cuGraphLaunch(launch_exec, launch_stream) != CUDA_SUCCESS;
        w->done++;
        return;
    }
    void **slot = &w->ring[w->pos];
    w->pos = (w->pos + 1) % live;
    release(*slot);
    *slot = acquire(pick_size(w, w->done));
    if (!*slot)
        w->failed++;
    w->done++;
}

/* Two frame functions per level: a path through them is one stack. The
 * barrier after each call keeps the frames real (no tail calls, no loops). */
NOINLINE static void path_b(worker_t *w, int d, uint64_t path);
NOINLINE static void path_a(worker_t *w, int d, uint64_t path)
{
    if (d == 0)
        pair(w);
    else if ((path >> (d % 20)) & 1)
        path_b(w, d - 1, path);
    else
        path_a(w, d - 1, path);
    __asm__ volatile("" ::: "memory");
}

NOINLINE static void path_b(worker_t *w, int d, uint64_t path)
{
    if (d == 0)
        pair(w);
    else if ((path >> (d % 20)) & 1)
        path_b(w, d - 1, path);
    else
        path_a(w, d - 1, path);
    __asm__ volatile("" ::: "memory");
}

/* The fixed-stack loop at the bottom of `depth` frames. */
NOINLINE static void loop_at_depth(worker_t *w, int d, long n)
{
    if (d > 0) {
        loop_at_depth(w, d - 1, n);
        __asm__ volatile("" ::: "memory");
        return;
    }
    for (long i = 0; i < n; i++)
        pair(w);
}

static void run_pairs(worker_t *w, long n)
{
    if (nstacks <= 1) {
        loop_at_depth(w, depth, n);
        return;
    }
    for (long i = 0; i < n; i++)
        path_a(w, depth, next_rand(w) % (uint64_t)nstacks);
}

static int count_tasks(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static int tasks_seen;

static uint64_t process_cpu_ns(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

static void nap_ms(int ms)
{
    struct timespec nap = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&nap, NULL);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    if ((mode == M_CU || mode == M_LAUNCH) && cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        w->failed++;
    /* Warm-up: the tracer's first call starts it (thread, file, tables);
     * that is start-up cost, not per-pair cost. Frees everything after. */
    if (mode != M_NONE) {
        run_pairs(w, warmup > live ? warmup : live);
        for (int i = 0; i < live; i++) {
            release(w->ring[i]);
            w->ring[i] = NULL;
        }
        w->pos = 0;
        w->done = 0;
        nap_ms(settle_ms);
    }
    pthread_barrier_wait(&start_line);
    pthread_barrier_wait(&go_line); /* the main thread reads its CPU clock between the two */
    /* Each worker times itself: the main thread may be descheduled right
     * after the barrier on a busy machine, which would shorten the span. */
    w->t0 = now_ns();
    if (mode != M_NONE)
        run_pairs(w, pairs);
    w->t1 = now_ns();
    pthread_barrier_wait(&end_line);
    /* Every worker is alive here: the main thread counts tasks now. */
    pthread_barrier_wait(&end_line);
    for (int i = 0; i < live; i++)
        release(w->ring[i]);
    return NULL;
}

static void usage(void)
{
    fprintf(stderr, "usage: hotpath cu|rt|malloc|none|launch PAIRS [depth=N] [live=N] [threads=N] [stacks=N] "
                    "[sizes=fixed|random] [seed=N] [warmup=N] [settle_ms=N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        usage();
    if (!strcmp(argv[1], "cu"))
        mode = M_CU;
    else if (!strcmp(argv[1], "rt"))
        mode = M_RT;
    else if (!strcmp(argv[1], "malloc"))
        mode = M_MALLOC;
    else if (!strcmp(argv[1], "none"))
        mode = M_NONE;
    else if (!strcmp(argv[1], "launch"))
        mode = M_LAUNCH;
    else
        usage();
    pairs = atol(argv[2]);
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "depth=", 6))
            depth = atoi(a + 6);
        else if (!strncmp(a, "live=", 5))
            live = atoi(a + 5);
        else if (!strncmp(a, "threads=", 8))
            nthreads = atoi(a + 8);
        else if (!strncmp(a, "stacks=", 7))
            nstacks = atol(a + 7);
        else if (!strcmp(a, "sizes=random"))
            random_sizes = 1;
        else if (!strcmp(a, "sizes=fixed"))
            random_sizes = 0;
        else if (!strncmp(a, "warmup=", 7))
            warmup = atol(a + 7);
        else if (!strncmp(a, "settle_ms=", 10))
            settle_ms = atoi(a + 10);
        else if (!strncmp(a, "seed=", 5))
            seed = strtoull(a + 5, NULL, 10);
        else
            usage();
    }
    if (pairs < 0 || depth < 0 || live < 1 || nthreads < 1 || nthreads > 1024 || nstacks < 1 || warmup < 0 ||
        settle_ms < 0)
        usage();

    if (mode == M_CU || mode == M_LAUNCH) {
        CUdevice dev;
        if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev)) {
            fprintf(stderr, "hotpath: no (simulated) device\n");
            return 1;
        }
    }
    if (mode == M_LAUNCH) {
        CUdeviceptr d;
        CUgraph g;
        if (cuCtxSetCurrent(ctx) || cuStreamCreate(&launch_stream, CU_STREAM_NON_BLOCKING) ||
            cuStreamBeginCapture_v2(launch_stream, CU_STREAM_CAPTURE_MODE_RELAXED) ||
            cuMemAllocAsync(&d, 1u << 20, launch_stream) || cuMemFreeAsync(d, launch_stream) ||
            cuStreamEndCapture(launch_stream, &g) || cuGraphInstantiateWithFlags(&launch_exec, g, 0)) {
            fprintf(stderr, "hotpath: no graph to launch\n");
            return 1;
        }
    }

    pthread_barrier_init(&start_line, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&go_line, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&end_line, NULL, (unsigned)nthreads + 1);
    pthread_t *th = calloc((size_t)nthreads, sizeof *th);
    worker_t *w = calloc((size_t)nthreads, sizeof *w);
    if (!th || !w)
        return 1;
    for (int i = 0; i < nthreads; i++) {
        w[i].rng = (seed + (uint64_t)i) * 0x9e3779b97f4a7c15ull | 1;
        w[i].ring = calloc((size_t)live, sizeof(void *));
        if (!w[i].ring || pthread_create(&th[i], NULL, worker_main, &w[i]) != 0) {
            fprintf(stderr, "hotpath: cannot start thread %d\n", i);
            return 1;
        }
    }
    pthread_barrier_wait(&start_line);
    uint64_t cpu0 = process_cpu_ns();
    pthread_barrier_wait(&go_line);
    pthread_barrier_wait(&end_line);
    /* The workers wait here; a tracer's writer drains the loop's events. */
    if (mode != M_NONE)
        nap_ms(settle_ms);
    uint64_t cpu1 = process_cpu_ns();
    tasks_seen = count_tasks();
    pthread_barrier_wait(&end_line);
    int failed = 0;
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        failed += w[i].failed;
        if (w[i].t0 < t0)
            t0 = w[i].t0;
        if (w[i].t1 > t1)
            t1 = w[i].t1;
        free(w[i].ring);
    }
    printf("threads=%d pairs=%ld wall_ns=%llu cpu_ns=%llu tasks=%d\n", nthreads, pairs * nthreads,
           (unsigned long long)(t1 - t0), (unsigned long long)(cpu1 - cpu0), tasks_seen);
    free(th);
    free(w);
    if (failed) {
        fprintf(stderr, "hotpath: %d allocations failed\n", failed);
        return 1;
    }
    return 0;
}
