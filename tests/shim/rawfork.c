/* rawfork: a child made without the fork handlers: glibc's _Fork() (2.34)
 * or a raw clone(SIGCHLD) system call, as some runtimes and sandboxes do.
 * The child inherits the shim's state with none of its atfork handlers run.
 *
 *   rawfork _Fork|clone [cuda|fork|cudafork]
 *
 * The parent allocates (the shim starts, with its writer thread), makes the
 * child, which allocates too with `cuda`, then returns from main: exit()
 * runs the atexit handlers the parent registered. With `fork` the child
 * makes a grandchild with fork() (fork handlers and all) that allocates;
 * with `cudafork` the child allocates first. The parent waits at most
 * 10 s for it (the child 5 s for the grandchild, then exits 5); prints
 * "child exited N" or "child hung", and allocates once more. Exits 0 when the child
 * exited 0 in time. RAWFORK_DELAY_MS=N waits N ms between the first
 * allocation and the fork. */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

pid_t _Fork(void);

static int alloc_free(void)
{
    void *p = NULL;
    return cudaMalloc(&p, 1 << 20) == cudaSuccess && cudaFree(p) == cudaSuccess;
}

/* The exit status of child pid, 128 + its signal, or -1 when it had not
 * ended after ms (it is killed then). */
static int wait_for(pid_t pid, int ms)
{
    int st = 0;
    for (int i = 0; i < ms / 10; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        struct timespec tick = { 0, 10000000 };
        nanosleep(&tick, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static int child(const char *what)
{
    if (!what)
        return 0;
    if (strcmp(what, "fork") && !alloc_free())
        return 3;
    if (strcmp(what, "fork") && strcmp(what, "cudafork"))
        return 0;
    pid_t pid = fork();
    if (pid < 0)
        return 4;
    if (pid == 0)
        _exit(alloc_free() ? 0 : 3);
    int rc = wait_for(pid, 5000);   /* before the parent gives up on this one */
    return rc < 0 ? 5 : rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !alloc_free())
        return 2;
    /* RAWFORK_DELAY_MS: time for the shim's writer to begin its first walk
     * of the modules (which libvtfault can hold) before the fork. */
    if (getenv("RAWFORK_DELAY_MS")) {
        long ms = atol(getenv("RAWFORK_DELAY_MS"));
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
    pid_t pid = !strcmp(argv[1], "clone") ? (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, NULL) : _Fork();
    if (pid < 0)
        return 2;
    if (pid == 0)
        return child(argc > 2 ? argv[2] : NULL);
    int rc = wait_for(pid, 10000);
    if (rc < 0) {
        printf("child hung\n");
        return 1;
    }
    printf("child exited %d\n", rc);
    return alloc_free() && rc == 0 ? 0 : 1;
}
