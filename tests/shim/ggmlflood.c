/* ggmlflood: two threads mark their CPU buffers COMPUTE 6000 times each
 * while the shim is idle (no CUDA call, no WEIGHTS mark), so ggml's record
 * queue (preload/ggml_queue.c, 4096 records) fills and the rest are lost;
 * then one WEIGHTS mark starts the shim, whose writer drains the queue and
 * writes GGML_LOST. Under ThreadSanitizer: both threads count losses at
 * once. Links the examples' libggml-base.
 *
 * ggmlflood bursts: a WEIGHTS mark first (the shim starts, and its writer
 * then looks only every VRAMTRACE_FLUSH_MS, as no CUDA call comes), 300 ms
 * of quiet, then three bursts of 3000 COMPUTE marks 50 ms apart: 9000
 * records, which one queue of 4096 holds only if the writer drains it
 * during the bursts.
 *
 * ggmlflood burst N: the same start, then one burst of N COMPUTE marks
 * with no pause: more than the queue holds, however soon the writer is
 * woken, when they come faster than it drains. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void *ggml_backend_cpu_buffer_from_ptr(void *ptr, size_t size);
void ggml_backend_buffer_set_usage(void *buffer, int usage);

#define MARKS 6000
static char mem[3][4096];

static void *flood(void *arg)
{
    void *b = ggml_backend_cpu_buffer_from_ptr(arg, sizeof mem[0]);
    for (int i = 0; i < MARKS; i++)
        ggml_backend_buffer_set_usage(b, 2); /* COMPUTE: leaves the shim idle */
    return NULL;
}

static void nap_ms(long ms)
{
    struct timespec ts = { ms / 1000, ms % 1000 * 1000000L };
    nanosleep(&ts, NULL);
}

static int bursts(void)
{
    void *b = ggml_backend_cpu_buffer_from_ptr(mem[0], sizeof mem[0]);
    ggml_backend_buffer_set_usage(ggml_backend_cpu_buffer_from_ptr(mem[2], sizeof mem[2]), 1); /* WEIGHTS */
    nap_ms(300);
    for (int burst = 0; burst < 3; burst++) {
        for (int i = 0; i < 3000; i++)
            ggml_backend_buffer_set_usage(b, 2);
        nap_ms(50);
    }
    printf("marks=%d\n", 1 + 3 * 3000);
    return 0;
}

static int burst(int n)
{
    void *b = ggml_backend_cpu_buffer_from_ptr(mem[0], sizeof mem[0]);
    ggml_backend_buffer_set_usage(ggml_backend_cpu_buffer_from_ptr(mem[2], sizeof mem[2]), 1); /* WEIGHTS */
    nap_ms(300);
    for (int i = 0; i < n; i++)
        ggml_backend_buffer_set_usage(b, 2);
    printf("marks=%d\n", 1 + n);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "bursts"))
        return bursts();
    if (argc > 2 && !strcmp(argv[1], "burst"))
        return burst(atoi(argv[2]));
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, flood, mem[i]))
            return 1;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ggml_backend_buffer_set_usage(ggml_backend_cpu_buffer_from_ptr(mem[2], sizeof mem[2]), 1); /* WEIGHTS */
    printf("marks=%d\n", 2 * MARKS + 1);
    return 0;
}
