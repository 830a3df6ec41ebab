/* gpu-hog: another process holding VRAM. It stands in for whatever else
 * is on the card in the field (a browser or compositor with hardware
 * acceleration, a second model server, a notebook someone forgot), so
 * field story 3 can be told with two processes sharing one simulated card
 * (VTSIM_SHARED) or on a real GPU.
 *
 *   gpu-hog [-d DEVICE] MiB
 *
 * Allocates MiB in 256 MiB tiles (one cudaMalloc each, like a texture
 * cache), prints "ready" on stdout, and holds them until SIGTERM or SIGINT,
 * then frees them and exits 0.
 *
 * Story 3a (examples/README.md, docs/stories.md): a traced
 * llama-server-chat --stdin on a 12 GiB card serves its first request,
 * then gpu-hog 2048 takes 2048 MiB of the same card: the third request's
 * 800 MiB KV block fails with 36 MiB free, and the server's report counts
 * 2.44 GiB untracked (the 2048 MiB and gpu-hog's own 448 MiB context).
 * Memory taken before a process starts shows in its report as context
 * reserve instead (story 3b, told with VTSIM_EXTERNAL).
 */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TILE (256ull << 20)
#define MAX_TILES 4096

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

__attribute__((noinline)) static int gpu_raster_allocate_tiles(void **tiles, unsigned long long bytes)
{
    int n = 0;
    while (bytes && n < MAX_TILES) {
        size_t sz = bytes < TILE ? bytes : TILE;
        cudaError_t err = cudaMalloc(&tiles[n], sz);
        if (err != cudaSuccess) {
            fprintf(stderr, "gpu-hog: cudaMalloc(%zu) failed: %s\n", sz, cudaGetErrorString(err));
            break;
        }
        n++;
        bytes -= sz;
    }
    return n;
}

int main(int argc, char **argv)
{
    int dev = 0, opt;
    while ((opt = getopt(argc, argv, "d:h")) != -1) {
        if (opt == 'd') {
            dev = atoi(optarg);
        } else {
            fprintf(stderr, "usage: gpu-hog [-d DEVICE] MiB\n");
            return opt == 'h' ? 0 : 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "usage: gpu-hog [-d DEVICE] MiB\n");
        return 2;
    }
    unsigned long long mib = strtoull(argv[optind], NULL, 10);
    /* Blocked until sigsuspend, so a signal cannot slip in between the
     * check of `stop` and the wait. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &old);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    static void *tiles[MAX_TILES];
    if (cudaSetDevice(dev) != cudaSuccess) {
        fprintf(stderr, "gpu-hog: no device %d\n", dev);
        return 1;
    }
    int n = gpu_raster_allocate_tiles(tiles, mib << 20);
    size_t free_b = 0, total = 0;
    cudaMemGetInfo(&free_b, &total);
    fprintf(stderr, "gpu-hog: holding %llu MiB on device %d in %d tiles; %zu MiB free\n",
            mib, dev, n, free_b >> 20);
    printf("ready\n");
    fflush(stdout);

    while (!stop)
        sigsuspend(&old);
    for (int i = 0; i < n; i++)
        cudaFree(tiles[i]);
    return 0;
}
