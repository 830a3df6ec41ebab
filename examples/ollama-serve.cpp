/* ollama-serve: a model server that does its GPU work in child processes,
 * shaped like `ollama serve`. One executable, three roles, as ollama
 * re-executes itself as `ollama runner`:
 *
 *   ollama-serve [runner options]        the server: no CUDA calls itself
 *   ollama-serve runner --discover       prints each GPU's free/total and
 *                                        waits; the server reads the line
 *                                        and kills it with SIGKILL
 *   ollama-serve runner [llama options]  loads the model, answers one
 *                                        request, exits
 *
 * Field story 6: "which of ollama's processes holds my VRAM?" Running
 * `vramtrace record ollama-serve` (or LD_PRELOAD on the server) traces
 * every process into one directory, and `vramtrace report DIR` reports
 * them together: the discovery runner's trace ends without an END record
 * (SIGKILL), the model runner's is complete.
 *
 * Exact numbers (VTSIM_DEVICES=24GiB, defaults -m llama-8b-q4_k_m -c 4096
 * --mmap): discovery reports 24128 MiB free and is killed; the runner
 * loads 33/33 layers: CUDA0 model 4570 MiB, CUDA0 KV 512 MiB, CUDA0
 * compute 260 MiB, CUDA_Host compute 24 MiB (pinned), VMM pool 16 MiB...
 * see examples/README.md; the server exits 0 with the runner's status.
 *
 * stdout (server): "discovery: pid=N killed" and "runner: pid=N status=S".
 */
#include "common/common.h"
#include "ggml/ggml.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static int runner_main(int argc, char **argv)
{
    const char *defaults[] = {"-m", "llama-8b-q4_k_m", "-c", "4096", "--mmap"};
    int n_def = sizeof defaults / sizeof defaults[0];
    std::vector<char *> args;
    args.push_back(argv[0]);
    for (const char *d : defaults)
        args.push_back((char *)d);
    for (int i = 1; i < argc; i++)
        args.push_back(argv[i]);
    args.push_back(nullptr);
    common_params p;
    if (common_params_parse(argc + n_def, args.data(), p, nullptr, nullptr, nullptr))
        return 1;
    llama_model *model;
    llama_context *ctx;
    if (!common_init_from_params(p, &model, &ctx)) {
        fprintf(stderr, "runner: error loading model\n");
        return 1;
    }
    fprintf(stderr, "runner: llama runner started, offloaded %d/%d layers\n", llama_model_n_offloaded(model),
            p.shape.n_layer + 1);
    int rc = llama_decode(ctx, (uint32_t)p.n_prompt) ? 1 : 0;
    for (int i = 0; !rc && i < p.n_predict; i++)
        rc = llama_decode(ctx, 1) ? 1 : 0;
    llama_free(ctx);
    llama_model_free(model);
    return rc;
}

/* Starts /proc/self/exe with ARGS, its stdout on a pipe if out != NULL. */
static pid_t spawn_self(std::vector<const char *> args, int *out)
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
        execv("/proc/self/exe", (char **)args.data());
        _exit(127);
    }
    if (out) {
        close(fds[1]);
        *out = fds[0];
    }
    return pid;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "runner")) {
        if (argc > 2 && !strcmp(argv[2], "--discover"))
            return runner_discover();
        return runner_main(argc - 1, argv + 1);
    }
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fprintf(stderr, "usage: ollama-serve [llama options for the runner]\n"
                        "       ollama-serve runner --discover | runner [llama options]\n");
        return 0;
    }
    fprintf(stderr, "routes.go: Listening on 127.0.0.1:11434 (version 0.0.0-vramtrace-example)\n");

    int fd;
    pid_t disc = spawn_self({argv[0], "runner", "--discover"}, &fd);
    if (disc < 0) {
        perror("ollama-serve: fork");
        return 1;
    }
    FILE *f = fdopen(fd, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f) && strcmp(line, "done\n"))
        fprintf(stderr, "discover.go: inference compute %s", line);
    kill(disc, SIGKILL);
    int st;
    waitpid(disc, &st, 0);
    if (f)
        fclose(f);
    printf("discovery: pid=%d killed=%d\n", (int)disc, WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    std::vector<const char *> rargs = {argv[0], "runner"};
    for (int i = 1; i < argc; i++)
        rargs.push_back(argv[i]);
    fflush(stdout);
    pid_t runner = spawn_self(rargs, nullptr);
    if (runner < 0) {
        perror("ollama-serve: fork");
        return 1;
    }
    waitpid(runner, &st, 0);
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    printf("runner: pid=%d status=%d\n", (int)runner, status);
    fprintf(stderr, "server.go: runner exited with status %d; shutting down\n", status);
    return status;
}
