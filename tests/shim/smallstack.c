/* smallstack: CUDA calls made on a thread with a small stack, as fibers
 * and coroutines give them (folly fibers: 16 KiB; Boost coroutines: 64 to
 * 128 KiB).
 *
 *   smallstack KIB [first|later]
 *
 * `first` makes the process's first CUDA call on the small stack (the
 * shim starts up there); `later` makes one on the main thread first, then
 * the calls on the small stack. Each thread stack is a mapping of exactly
 * KIB KiB with a guard page below, so overflowing it faults instead of
 * overwriting a neighbour. The stack is filled with a pattern first, and
 * the deepest byte the thread changed gives its high-water mark: printed
 * as "used N bytes" (TLS and the thread descriptor, which glibc places at
 * the top of a caller-provided stack, included). Exits 0 when every call
 * succeeded. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

static int failures;

static void *calls(void *arg)
{
    (void)arg;
    for (int i = 0; i < 8; i++) {
        void *p = NULL;
        CUdeviceptr d = 0;
        failures += cudaMalloc(&p, 1 << 20) != cudaSuccess;
        failures += cudaFree(p) != cudaSuccess;
        failures += cuMemAlloc(&d, 1 << 20) != CUDA_SUCCESS;
        failures += cuMemFree(d) != CUDA_SUCCESS;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: smallstack KIB [first|later]\n");
        return 2;
    }
    size_t size = (size_t)atoi(argv[1]) << 10, page = (size_t)sysconf(_SC_PAGESIZE);
    if (argc > 2 && !strcmp(argv[2], "later")) {
        void *p = NULL;
        failures += cudaMalloc(&p, 1 << 20) != cudaSuccess;
        failures += cudaFree(p) != cudaSuccess;
    }
    char *map = mmap(NULL, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (map == MAP_FAILED || mprotect(map, page, PROT_NONE) != 0)
        return 2;
    memset(map + page, 0xa5, size);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, map + page, size);
    pthread_t t;
    if (pthread_create(&t, &attr, calls, NULL) != 0)
        return 2;
    pthread_join(t, NULL);
    size_t untouched = 0;
    while (untouched < size && (unsigned char)map[page + untouched] == 0xa5)
        untouched++;
    printf("smallstack %s KiB: %d failures, used %zu bytes\n", argv[1], failures, size - untouched);
    return failures != 0;
}
