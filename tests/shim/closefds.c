/* closefds: a program that closes or reuses every descriptor above 2 after
 * its first CUDA call, as daemons and sandboxes do, then writes its own
 * file while it keeps allocating.
 *
 *   closefds close_range|dup2|pipe|full FILE N
 *
 * close_range: close_range(3, ~0U) then opens FILE (it gets a freed low
 * number). dup2: opens FILE and dup2()s it over every descriptor from 3 to
 * the soft limit, so whatever the shim held now names FILE. pipe: as
 * close_range, but first makes a pipe of its own (the two lowest numbers)
 * holding "hello\n". full: every descriptor up to the soft limit but one
 * taken (/dev/null) before the first CUDA call, given back after the pairs,
 * when FILE is opened. Then N cudaMalloc/cudaFree pairs, 1 ms apart every
 * 1000, every other one made from a function without unwind information
 * (every fourth from one that keeps an unreadable address in rbp),
 * and "hello\n" written to FILE. Prints "FILE has N bytes" (and "pipe has
 * N bytes"); exits 0 when FILE, and the pipe, hold exactly "hello\n". */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

/* Callers without unwind information (no FDE), as JIT code or hand-written
 * assembly is: the shim's own unwinder leaves such a stack to libunwind,
 * whose frame-pointer guess checks every address it reads. The second
 * keeps the address of a mapped page that cannot be read (a guard page's
 * kind) in rbp, so the guess must find it unreadable rather than read it:
 * past mincore, only the pipe check (unwind_fds.c's) can tell. */
void *guard_page;
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl nocfi_malloc\n"
        ".type nocfi_malloc, @function\n"
        "nocfi_malloc:\n"
        "    pushq %rbp\n"
        "    movq %rsp, %rbp\n"
        "    call cudaMalloc@PLT\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size nocfi_malloc, .-nocfi_malloc\n"
        ".globl nocfi_junk_malloc\n"
        ".type nocfi_junk_malloc, @function\n"
        "nocfi_junk_malloc:\n"
        "    pushq %rbp\n"
        "    movq guard_page(%rip), %rbp\n"
        "    call cudaMalloc@PLT\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size nocfi_junk_malloc, .-nocfi_junk_malloc\n");
cudaError_t nocfi_malloc(void **p, size_t size);
cudaError_t nocfi_junk_malloc(void **p, size_t size);
#else
#define nocfi_malloc cudaMalloc
#define nocfi_junk_malloc cudaMalloc
#endif

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    guard_page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    /* full: at its descriptor limit from before its first CUDA call, as a
     * busy server is; it lets them go only after the pairs. */
    enum { HELD_MAX = 4096 };
    static int held[HELD_MAX];
    int nheld = 0, full = !strcmp(argv[1], "full");
    for (int fd; full && nheld < HELD_MAX && (fd = open("/dev/null", O_RDONLY)) >= 0;)
        held[nheld++] = fd;
    /* One free, which the runtime's own dlopen of the driver needs. */
    if (full && nheld)
        close(held[--nheld]);
    void *p = NULL;
    if (guard_page == MAP_FAILED || cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess)
        return 2;
    int own, pipefd[2] = { -1, -1 };
    if (!strcmp(argv[1], "close_range") || !strcmp(argv[1], "pipe")) {
        syscall(SYS_close_range, 3u, ~0u, 0u);
        if (!strcmp(argv[1], "pipe") && (pipe2(pipefd, O_NONBLOCK) != 0 || write(pipefd[1], "hello\n", 6) != 6))
            return 2;
        own = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    } else if (full) {
        own = 0;   /* opened after the pairs, once a descriptor is free */
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
        cudaError_t rc = i % 4 == 1 ? nocfi_malloc(&p, 4096) : i % 4 == 3 ? nocfi_junk_malloc(&p, 4096) : cudaMalloc(&p, 4096);
        failed += rc != cudaSuccess;
        failed += cudaFree(p) != cudaSuccess;
        if (i % 1000 == 999) {
            struct timespec ms = { 0, 20000000 };   /* let the writer flush */
            nanosleep(&ms, NULL);
        }
    }
    if (full) {
        for (int i = 0; i < nheld; i++)
            close(held[i]);
        printf("held %d descriptors, one left, through %d pairs\n", nheld, n);
        own = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (own < 0)
            return 2;
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
    if (pipefd[0] >= 0) {
        char piped[64] = "";
        ssize_t in_pipe = read(pipefd[0], piped, sizeof piped);
        printf("pipe has %zd bytes\n", in_pipe);
        if (in_pipe != 6 || memcmp(piped, "hello\n", 6) != 0)
            return 1;
    }
    return failed || got != 6 || memcmp(buf, "hello\n", 6) != 0;
}
