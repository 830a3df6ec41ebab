/* ggmladdon.c: an addon with its own copy of ggml, built twice for the
 * interposition test (76-fault-interpose): libaddon_a.so against the
 * examples' libggml-base.so, libaddon_b.so against libggml-base-b.so, the
 * same library built with another buffer layout (GGML_EXAMPLE_LAYOUT_B:
 * usage at another offset) under another soname, as two node addons each
 * bring their own llama.cpp. The host loads both RTLD_LOCAL; no CUDA.
 *
 * addon_mark: a CPU buffer, marked WEIGHTS, its usage read back through the
 * addon's own ggml (get_usage is not hooked), freed. */
#include <stdio.h>

#include "../../examples/ggml/ggml.h"

extern "C" __attribute__((visibility("default"))) void addon_mark(const char *tag, size_t size)
{
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), size);
    ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    printf("%s: usage after set_usage(WEIGHTS)=%d\n", tag, (int)ggml_backend_buffer_get_usage(buf));
    ggml_backend_buffer_free(buf);
}
