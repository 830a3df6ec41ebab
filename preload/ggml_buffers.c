/* ggml_buffers.c: ggml's buffer API as a second witness of what an
 * allocation holds, for programs whose stacks say nothing (stripped
 * libraries, cgo callers such as ollama's Go engine).
 *
 * One hook, ggml_backend_buffer_set_usage: ggml marks weights buffers
 * (llama.cpp's model loader, ollama's ml/backend/ggml) with USAGE_WEIGHTS
 * and its graph allocator marks compute buffers USAGE_COMPUTE, both through
 * this call. In the shipped libggml-base.so (node-llama-cpp 3.21.1) it is
 * reached through a PLT slot from libllama and from libggml-base itself
 * (no -Bsymbolic), so this definition sees every call (docs/ggml.md).
 * Buffers never marked stay USAGE_ANY and say nothing; hooking their
 * creation would add records without a verdict.
 *
 * Contract:
 *  - Costs nothing for a program without ggml: nobody calls the name.
 *  - The real function is found on the first call (dlsym RTLD_NEXT, else
 *    from the calling library: see defined_near) and always called first,
 *    with the program's arguments; the shim then only reads the buffer
 *    through ggml's own exported getters.
 *  - A record is written only while the shim records (VT_ST_ACTIVE), for a
 *    buffer with a size, not a multi- or meta-buffer (ggml forwards the mark
 *    to each part through this same call; their get_base is not a real
 *    address), and only when the getters resolve.
 *  - Pending records wait in a bounded queue for the writer; a full queue
 *    drops the record (said once on stderr), never blocks on anything but
 *    the queue's own lock (this is not a CUDA call, not the hot path).
 *  - Records carry their exact time; readers match them to allocations by
 *    address and time, not by file order (trace_format.h).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "shim.h"
#include "vramtrace/encode.h"

#define QUEUE_CAP 256u
#define NAME_LEN 64u

typedef struct ggml_witness {
    uint64_t time_ns, buffer, base, size;
    uint32_t usage;
    char name[NAME_LEN];
} ggml_witness_t;

typedef void (*set_usage_fn)(void *buffer, int usage);
typedef void *(*get_base_fn)(void *buffer);
typedef size_t (*get_size_fn)(void *buffer);
typedef const char *(*name_fn)(void *buffer);
typedef _Bool (*predicate_fn)(void *buffer);

static ggml_witness_t queue[QUEUE_CAP];
static uint32_t queued;
static _Atomic int queue_full_warned;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int atfork_registered;

VT_EXPORT void ggml_backend_buffer_set_usage(void *buffer, int usage);

/* name as the object holding anchor, or one of its dependencies, defines
 * it. RTLD_NEXT searches the global scope only, and ggml is often not in
 * it: node loads its addons (and so libllama and libggml-base) with
 * RTLD_LOCAL, as does Python's ctypes. Their calls still reach this
 * definition (the global scope is searched first), so the real one is
 * found from the calling library instead. A caller in the main program
 * would find this very definition again: refused. */
static void *defined_near(const void *anchor, const char *name)
{
    Dl_info info;
    if (!anchor || !dladdr(anchor, &info) || !info.dli_fname || !info.dli_fname[0])
        return NULL;
    void *handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle)
        return NULL;
    void *fn = vt_real_dlsym(handle, name);
    vt_real_dlclose(handle);
    return fn == (void *)ggml_backend_buffer_set_usage ? NULL : fn;
}

static void *next_symbol(void **cache, const char *name, const void *anchor)
{
    void *fn = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (!fn) {
        fn = vt_real_dlsym(RTLD_NEXT, name);
        if (!fn)
            fn = defined_near(anchor, name);
        __atomic_store_n(cache, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

static int predicate(void **cache, const char *name, void *buffer, const void *anchor)
{
    predicate_fn fn = (predicate_fn)next_symbol(cache, name, anchor);
    return fn && fn(buffer);
}

static void queue_atfork_child(void)
{
    /* The parent's pending records belong to the parent's trace. */
    pthread_mutex_init(&queue_lock, NULL);
    queued = 0;
}

/* ggml's getters, from the library that defines set_usage (real). */
static void witness(void *buffer, int usage, const void *real)
{
    static void *get_base, *get_size, *get_name, *is_multi, *is_meta;
    get_base_fn base_of = (get_base_fn)next_symbol(&get_base, "ggml_backend_buffer_get_base", real);
    get_size_fn size_of = (get_size_fn)next_symbol(&get_size, "ggml_backend_buffer_get_size", real);
    name_fn name_of = (name_fn)next_symbol(&get_name, "ggml_backend_buffer_name", real);
    if (!base_of || !size_of || !name_of)
        return;
    if (predicate(&is_multi, "ggml_backend_buffer_is_multi_buffer", buffer, real) ||
        predicate(&is_meta, "ggml_backend_buffer_is_meta", buffer, real))
        return;
    ggml_witness_t w = {.time_ns = vt_now_ns(), .buffer = (uintptr_t)buffer, .usage = (uint32_t)usage};
    w.size = size_of(buffer);
    if (!w.size)
        return;
    w.base = (uintptr_t)base_of(buffer);
    const char *name = name_of(buffer);
    if (name) {
        size_t n = strnlen(name, NAME_LEN - 1);
        memcpy(w.name, name, n);
        w.name[n] = 0;
    }
    if (!atomic_exchange(&atfork_registered, 1))
        pthread_atfork(NULL, NULL, queue_atfork_child);
    pthread_mutex_lock(&queue_lock);
    if (queued < QUEUE_CAP)
        queue[queued++] = w;
    else
        vt_warn_once(&queue_full_warned, "ggml buffer witnesses come faster than the trace is written; some are lost");
    pthread_mutex_unlock(&queue_lock);
}

VT_EXPORT void ggml_backend_buffer_set_usage(void *buffer, int usage)
{
    static void *real;
    static _Atomic int unreachable_warned;
    set_usage_fn fn = (set_usage_fn)next_symbol(&real, "ggml_backend_buffer_set_usage", __builtin_return_address(0));
    if (!fn) {
        vt_warn_once(&unreachable_warned, "ggml_backend_buffer_set_usage: the real function cannot be found; "
                                          "the buffer's usage is not set");
        return;
    }
    fn(buffer, usage);
    if (buffer && atomic_load_explicit(&vt_state, memory_order_acquire) == VT_ST_ACTIVE)
        witness(buffer, usage, (const void *)fn);
}

void vt_ggml_records(vt_emit_fn emit)
{
    static ggml_witness_t taken[QUEUE_CAP];
    uint32_t n;
    if (!atomic_load_explicit(&atfork_registered, memory_order_acquire))
        return;  /* no ggml buffer was ever marked: no lock */
    pthread_mutex_lock(&queue_lock);
    n = queued;
    memcpy(taken, queue, n * sizeof *taken);
    queued = 0;
    pthread_mutex_unlock(&queue_lock);
    for (uint32_t i = 0; i < n; i++) {
        const ggml_witness_t *w = &taken[i];
        uint8_t buf[5 * VT_VARINT_MAX + VT_VARINT_MAX + NAME_LEN], *p = buf;
        p = vt_put_varint(p, w->time_ns);
        p = vt_put_varint(p, w->buffer);
        p = vt_put_varint(p, w->usage);
        p = vt_put_varint(p, w->base);
        p = vt_put_varint(p, w->size);
        p = vt_put_str(p, w->name, strlen(w->name), NAME_LEN);
        emit(VT_REC_GGML_BUFFER, buf, (size_t)(p - buf));
    }
}

