/* ggmlflood: two threads mark their CPU buffers COMPUTE 6000 times each
 * while the shim is idle (no CUDA call, no WEIGHTS mark), so ggml's record
 * queue (preload/ggml_queue.c, 4096 records) fills and the rest are lost;
 * then one WEIGHTS mark starts the shim, whose writer drains the queue and
 * writes GGML_LOST. Under ThreadSanitizer: both threads count losses at
 * once. Links the examples' libggml-base. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

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

int main(void)
{
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
