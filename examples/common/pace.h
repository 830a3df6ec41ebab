/* The time real runtimes spend between allocation phases, scaled down.
 *
 * A real model load takes seconds: reading GGUF metadata, then the tensors
 * from disk, then building the graph. Without that time every event of an
 * example lands in its first millisecond, and a trace's timeline (report
 * times, the HTML chart) cannot show the phases apart. The examples stand
 * still for a few milliseconds where the real program works, so a whole
 * run takes 50-300 ms: long enough to tell the phases apart at the default
 * 1 ms grain, short enough for the test suite. */
#ifndef EXAMPLES_PACE_H
#define EXAMPLES_PACE_H

#include <errno.h>
#include <time.h>

static inline void example_pace_ms(unsigned ms)
{
    struct timespec left = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
}

/* Reading tensor data: about 3 ms per GiB here (a fast NVMe reads 3 GiB
 * in about a second, so this is a few hundred times faster than real). */
static inline void example_pace_read(size_t bytes)
{
    example_pace_ms((unsigned)(bytes / (1024.0 * 1024.0 * 1024.0) * 3.0));
}

#endif
