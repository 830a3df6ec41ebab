/* closefds: a program that closes or reuses every descriptor above 2 after
 * its first CUDA call, as daemons and sandboxes do, then writes its own
 * file while it keeps allocating.
 *
 *   closefds close_range|dup2 FILE N
 *
 * close_range: close_range(3, ~0U) then opens FILE (it gets a freed low
 * number). dup2: opens FILE and dup2()s it over every descriptor from 3 to
 * the soft limit, so whatever the shim held now names FILE. Then N
 * cudaMalloc/cudaFree pairs, 1 ms apart every 1000, and "hello\n" written
 * to FILE. Prints "FILE has N bytes"; exits 0 when FILE holds exactly
 * "hello\n". */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    void *p = NULL;
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess)
        return 2;
    int own;
    if (!strcmp(argv[1], "close_range")) {
        syscall(SYS_close_range, 3u, ~0u, 0u);
        own = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    } else {
        own = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        int lim = rl.rlim_cur > 4096 ? 4096 : (int)rl.rlim_cur;
        for (int f = 3; f < lim; f++)
            if (f != own)
                dup2(own, f);
    }
    if (own < 0)
        return 2;
    int n = atoi(argv[3]), failed = 0;
    for (int i = 0; i < n; i++) {
        failed += cudaMalloc(&p, 4096) != cudaSuccess;
        failed += cudaFree(p) != cudaSuccess;
        if (i % 1000 == 999) {
            struct timespec ms = { 0, 20000000 };   /* let the writer flush */
            nanosleep(&ms, NULL);
        }
    }
    if (write(own, "hello\n", 6) != 6)
        return 2;
    close(own);
    FILE *f = fopen(argv[2], "r");
    char buf[64] = "";
    size_t got = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    printf("%s has %zu bytes\n", argv[2], got);
    return failed || got != 6 || memcmp(buf, "hello\n", 6) != 0;
}
