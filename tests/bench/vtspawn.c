/* vtspawn: runs a command many times and reports its wall time, CPU time
 * and peak RSS, optionally interleaved with and without LD_PRELOAD, so a
 * startup ratio is measured against a baseline taken in the same run under
 * the same noise.
 *
 *   vtspawn [-n N] [-p LIB] [-d DIR] [-o FILE] -- CMD [ARG...]
 *     -n N    runs per variant (default 20)
 *     -p LIB  also run with LD_PRELOAD=LIB (repeatable, up to 3 libraries);
 *             runs alternate between the variants and rotate which goes
 *             first every round, so drift hits all of them alike
 *     -d DIR  run in DIR (the child's working directory)
 *     -o FILE child's stdout goes to FILE (default /dev/null); stderr is
 *             kept so failures show
 *
 * Output, one line per variant:
 *   base n=N med_ns=M min_ns=M cpu_med_ns=C cpu_min_ns=C cpu_max_ns=C maxrss_kb=K fails=F
 *   preload1 ...   (one line per -p, in order)
 * maxrss_kb is the largest peak RSS of any run (getrusage of the child).
 * Exit status 1 when any run failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef struct variant {
    const char *name;
    char **env;
    uint64_t *wall, *cpu;
    long maxrss;
    int fails, n;
} variant_t;

static const char *dir, *out_path = "/dev/null";

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* environ without LD_PRELOAD, plus `extra` when given. */
static char **make_env(const char *extra)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env)
        exit(2);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11))
            env[k++] = environ[i];
    if (extra)
        env[k++] = (char *)extra;
    return env;
}

static void run_once(variant_t *v, char **argv)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (dir)
        posix_spawn_file_actions_addchdir_np(&fa, dir);
    pid_t pid;
    uint64_t t0 = now_ns();
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, v->env);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "vtspawn: %s: %s\n", argv[0], strerror(rc));
        exit(2);
    }
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0)
        if (errno != EINTR)
            exit(2);
    uint64_t t1 = now_ns();
    v->wall[v->n] = t1 - t0;
    v->cpu[v->n] = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
                   (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
    v->n++;
    if (ru.ru_maxrss > v->maxrss)
        v->maxrss = ru.ru_maxrss;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        v->fails++;
}

static void print(variant_t *v)
{
    qsort(v->wall, (size_t)v->n, sizeof *v->wall, cmp_u64);
    qsort(v->cpu, (size_t)v->n, sizeof *v->cpu, cmp_u64);
    printf("%s n=%d med_ns=%llu min_ns=%llu cpu_med_ns=%llu cpu_min_ns=%llu cpu_max_ns=%llu maxrss_kb=%ld fails=%d\n",
           v->name, v->n, (unsigned long long)v->wall[v->n / 2], (unsigned long long)v->wall[0],
           (unsigned long long)v->cpu[v->n / 2], (unsigned long long)v->cpu[0], (unsigned long long)v->cpu[v->n - 1],
           v->maxrss, v->fails);
}

int main(int argc, char **argv)
{
    int n = 20, c, nlib = 0;
    const char *lib[3];
    while ((c = getopt(argc, argv, "+n:p:d:o:")) != -1) {
        switch (c) {
        case 'n':
            n = atoi(optarg);
            break;
        case 'p':
            if (nlib == 3) {
                fprintf(stderr, "vtspawn: at most 3 -p\n");
                return 2;
            }
            lib[nlib++] = optarg;
            break;
        case 'd':
            dir = optarg;
            break;
        case 'o':
            out_path = optarg;
            break;
        default:
            return 2;
        }
    }
    if (optind < argc && !strcmp(argv[optind], "--"))
        optind++;
    if (optind >= argc || n < 1) {
        fprintf(stderr, "usage: vtspawn [-n N] [-p LIB] [-d DIR] [-o FILE] -- CMD [ARG...]\n");
        return 2;
    }
    variant_t v[4] = { { .name = "base" }, { .name = "preload1" }, { .name = "preload2" }, { .name = "preload3" } };
    int nv = 1 + nlib;
    for (int i = 0; i < nv; i++) {
        char *preload = NULL;
        if (i && asprintf(&preload, "LD_PRELOAD=%s", lib[i - 1]) < 0)
            return 2;
        v[i].env = make_env(preload);
        v[i].wall = calloc((size_t)n, sizeof(uint64_t));
        v[i].cpu = calloc((size_t)n, sizeof(uint64_t));
        if (!v[i].wall || !v[i].cpu)
            return 2;
    }
    for (int r = 0; r < n; r++)
        for (int k = 0; k < nv; k++)
            run_once(&v[(k + r) % nv], argv + optind);
    int fails = 0;
    for (int i = 0; i < nv; i++) {
        print(&v[i]);
        fails += v[i].fails;
    }
    return fails ? 1 : 0;
}
