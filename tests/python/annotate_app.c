/* annotate_app: the annotation API (include/vramtrace/annotate.h) around
 * runtime allocations: an untagged one, nested built-in tags (the inner
 * one decides), a custom tag, and a tag pushed on another thread that
 * must not leak into this one. Prints what the calls returned. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "vramtrace/annotate.h"

#define MiB (1u << 20)
#define CHECK(x)                                                        \
    do {                                                                \
        if ((x) != 0) {                                                 \
            fprintf(stderr, "annotate_app: %s failed\n", #x);           \
            exit(1);                                                    \
        }                                                               \
    } while (0)

static void *other_thread(void *arg)
{
    (void)arg;
    vramtrace_annotate_push("scratch"); /* never popped: only this thread's */
    return NULL;
}

__attribute__((noinline)) static void load(void)
{
    void *p;
    CHECK(cudaMalloc(&p, 3 * MiB));
}

int main(void)
{
    void *p;
    pthread_t t;
    pthread_create(&t, NULL, other_thread, NULL);
    pthread_join(t, NULL);
    CHECK(cudaMalloc(&p, 1 * MiB));
    int d0 = vramtrace_annotate_push("weights");
    load();
    int d1 = vramtrace_annotate_push("kv");
    CHECK(cudaMalloc(&p, 5 * MiB));
    int p1 = vramtrace_annotate_pop();
    int p0 = vramtrace_annotate_pop();
    int extra = vramtrace_annotate_pop();
    vramtrace_annotate_push("custom phase!");
    CHECK(cudaMalloc(&p, 2 * MiB));
    vramtrace_annotate_pop();
    printf("push %d %d pop %d %d extra %d\n", d0, d1, p1, p0, extra);
    return 0;
}
