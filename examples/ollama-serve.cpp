/* ollama-serve: a model server that does its GPU work in child processes,
 * shaped like `ollama serve` since 0.30, which runs a GGUF model in
 * upstream llama.cpp's llama-server:
 *
 *   ollama-serve [-m MODEL] [-c N]   the server: no CUDA calls itself. It
 *                                    starts a discovery child, reads each
 *                                    GPU's free memory from it and kills
 *                                    it, picks the layers to offload, then
 *                                    starts llama-server (next to this
 *                                    executable) with -m MODEL -ngl N -c N
 *                                    and waits for it
 *   ollama-serve runner --discover   prints each GPU's free/total and
 *                                    waits; the server reads the line and
 *                                    kills it with SIGKILL
 *
 * The layer count is this server's own estimate, not llama.cpp's --fit
 * (an -ngl given on the command line turns that off): each GPU's free
 * memory less a flat 4 GiB for the compute graph and headroom, the output
 * layer first, then as many blocks (weights + KV cache at -c) as fit.
 *
 * Field story 1 (`make demo`): -m llama-70b-q4_k_m -c 8192 on a 24 GiB
 * card: 24128 MiB free, 20032 after the reserve, the output layer (820)
 * and 39 blocks of 482 MiB: `llama-server -m llama-70b-q4_k_m -ngl 40
 * -c 8192`, 41 of 81 layers left in host memory, nothing failing.
 * Field story 6 (the defaults, -m llama-8b-q4_k_m -c 4096): everything
 * fits, -ngl 33; the discovery child's trace ends without an END record
 * (SIGKILL), the runner's is complete, and `vramtrace report DIR` reports
 * them together. Numbers: examples/README.md.
 *
 * stdout (server): "discovery: pid=N killed=1", "runner: pid=N ngl=N
 * status=S", and the runner's own lines.
 */
#include "ggml/ggml.h"
#include "llama/llama.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

static int runner_discover(void)
{
    int n = ggml_backend_cuda_get_device_count();
    for (int d = 0; d < n; d++) {
        size_t free_b, total;
        ggml_backend_cuda_get_device_memory(d, &free_b, &total);
        printf("{\"id\":\"CUDA%d\",\"free\":%zu,\"total\":%zu}\n", d, free_b, total);
    }
    printf("done\n");
    fflush(stdout);
    /* ollama's discovery runner serves its answer over HTTP until killed. */
    for (;;)
        pause();
}

/* The layers to offload: the output layer first, then blocks from the
 * last, while they fit in the free memory of the GPUs less the reserve. */
static int estimate_layers(const llama_model_shape &m, uint32_t n_ctx, const std::vector<size_t> &free_b)
{
    const size_t reserve = 4096 * MiB;
    size_t avail = 0;
    for (size_t f : free_b)
        avail += f > reserve ? f - reserve : 0;
    if (avail < m.output_bytes)
        return 0;
    avail -= m.output_bytes;
    size_t per_block = m.layer_bytes + (size_t)n_ctx * m.kv_bytes_token;
    size_t blocks = avail / per_block;
    return 1 + (int)(blocks < (size_t)m.n_layer ? blocks : (size_t)m.n_layer);
}

/* Starts EXE with ARGS, its stdout on a pipe if out != NULL. */
static pid_t spawn(const char *exe, std::vector<const char *> args, int *out)
{
    int fds[2] = {-1, -1};
    if (out && pipe(fds) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        if (out) {
            dup2(fds[1], 1);
            close(fds[0]);
            close(fds[1]);
        }
        args.push_back(nullptr);
        execv(exe, (char **)args.data());
        _exit(127);
    }
    if (out) {
        close(fds[1]);
        *out = fds[0];
    }
    return pid;
}

/* DIR/NAME for the directory of PATH ("" when PATH has none). */
static std::string sibling(const char *path, const char *name)
{
    const char *slash = strrchr(path, '/');
    return slash ? std::string(path, (size_t)(slash - path + 1)) + name : std::string(name);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "runner")) {
        if (argc > 2 && !strcmp(argv[2], "--discover"))
            return runner_discover();
        fprintf(stderr, "ollama-serve: runner: only --discover (models run in llama-server)\n");
        return 1;
    }
    const char *model = "llama-8b-q4_k_m", *n_ctx = "4096";
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "-m"))
            model = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "-c"))
            n_ctx = argv[++i];
        else {
            fprintf(stderr, "usage: ollama-serve [-m MODEL] [-c N]\n"
                            "       ollama-serve runner --discover\n");
            return strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? 1 : 0;
        }
    }
    const llama_model_shape *shape = llama_model_shape_find(model);
    if (!shape) {
        fprintf(stderr, "ollama-serve: unknown model '%s'; known:\n", model);
        llama_model_shape_list();
        return 1;
    }
    fprintf(stderr, "routes.go: Listening on 127.0.0.1:11434 (version 0.0.0-vramtrace-example)\n");

    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        perror("ollama-serve: /proc/self/exe");
        return 1;
    }
    self[n] = 0;
    int fd;
    pid_t disc = spawn(self, {argv[0], "runner", "--discover"}, &fd);
    if (disc < 0) {
        perror("ollama-serve: fork");
        return 1;
    }
    FILE *f = fdopen(fd, "r");
    char line[512];
    std::vector<size_t> free_b;
    while (f && fgets(line, sizeof line, f) && strcmp(line, "done\n")) {
        fprintf(stderr, "discover.go: inference compute %s", line);
        const char *p = strstr(line, "\"free\":");
        if (p)
            free_b.push_back(strtoull(p + 7, nullptr, 10));
    }
    kill(disc, SIGKILL);
    int st;
    waitpid(disc, &st, 0);
    if (f)
        fclose(f);
    printf("discovery: pid=%d killed=%d\n", (int)disc, WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    int ngl = estimate_layers(*shape, (uint32_t)strtoul(n_ctx, nullptr, 10), free_b);
    std::string ngl_s = std::to_string(ngl);
    std::string runner_exe = sibling(self, "llama-server"), runner_argv0 = sibling(argv[0], "llama-server");
    fprintf(stderr, "server.go: starting runner: %s -m %s -ngl %d -c %s\n", runner_argv0.c_str(), model, ngl, n_ctx);
    fflush(stdout);
    pid_t runner = spawn(runner_exe.c_str(), {runner_argv0.c_str(), "-m", model, "-ngl", ngl_s.c_str(), "-c", n_ctx}, nullptr);
    if (runner < 0) {
        perror("ollama-serve: fork");
        return 1;
    }
    waitpid(runner, &st, 0);
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    printf("runner: pid=%d ngl=%d status=%d\n", (int)runner, ngl, status);
    fprintf(stderr, "server.go: runner exited with status %d; shutting down\n", status);
    return status;
}
