/* ggml_buffers.c: what ggml says about its buffers and tensors, for two
 * questions stacks cannot answer: what a buffer holds (stripped
 * libraries, cgo callers such as ollama's Go engine), and where the model
 * runs: which buffers, on the GPU or in host memory, hold which layers'
 * weights and KV cache (docs/ggml.md). Host buffers never touch CUDA: these
 * hooks are the only place the trace sees them.
 *
 * The hooks, each reached through a PLT slot in the shipped libraries
 * (node-llama-cpp 3.21.1's build: objdump -R, docs/ggml.md):
 *  - ggml_backend_buffer_set_usage: ggml marks weights buffers
 *    (llama.cpp's model loader, ollama's ml/backend/ggml) WEIGHTS and its
 *    graph allocator marks compute buffers COMPUTE. A GGML_BUFFER record.
 *  - ggml_backend_alloc_ctx_tensors_from_buft: how libllama allocates the
 *    model's weights (mmap off) and every KV cache, on any backend. A
 *    GGML_BUFFER record for the buffer and a GGML_TENSOR record for each
 *    tensor it placed there.
 *  - ggml_backend_tensor_alloc: how libllama places each weight in an
 *    mmapped buffer (CPU_Mapped). Calls from inside libggml-base (the graph
 *    allocator, per node and per evaluation) pass straight through.
 *    Where ggml and llama.cpp are one object (@fugood/llama.node 1.7's
 *    index.node: only set_usage, tensor_alloc and two getters go through
 *    its PLT), llama's calls come from inside too, and so do the tensor
 *    allocator's for every buffer llama fills (KV caches, weights with
 *    mmap off): those are recorded, with their buffer, unless the buffer
 *    is a compute buffer (the graph allocator's).
 *  - ggml_backend_buffer_free: a GGML_FREE record.
 *
 * Contract:
 *  - Costs nothing for a program without ggml: nobody calls the names. The
 *    CUDA wrappers' hot path is unchanged.
 *  - The real function is found on the first call (dlsym RTLD_NEXT, else
 *    from the calling library: see defined_near) and always called first,
 *    with the program's arguments; the shim then only reads through ggml's
 *    own exported getters, never ggml's structs.
 *  - Records are queued (ggml_queue.c) unless the shim is off, before the
 *    first CUDA call too: a model is often loaded before it, or without
 *    it. The first WEIGHTS mark starts the shim in a process that made no
 *    CUDA call (a runner whose CUDA backend failed to load computes on the
 *    CPU): its trace says so. A process that loads no model and makes no
 *    CUDA call still writes nothing.
 *  - Multi- and meta-buffers get no GGML_BUFFER record from set_usage
 *    (ggml forwards the mark to each part through this same call; their
 *    get_base is not an address); from the tensor allocator, one with base
 *    0, since their tensors name them. Buffers of size 0 are skipped (ggml
 *    answers a fake base).
 *  - Records carry their exact time; readers match them to allocations by
 *    address and time, not by file order (trace_format.h).
 */
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "shim.h"

typedef void (*set_usage_fn)(void *buffer, int usage);
typedef void *(*get_base_fn)(void *buffer);
typedef size_t (*get_size_fn)(void *buffer);
typedef const char *(*name_fn)(void *buffer);
typedef _Bool (*predicate_fn)(void *buffer);
typedef int (*get_usage_fn)(void *buffer);
typedef void *(*alloc_ctx_fn)(void *ctx, void *buft);
typedef int (*tensor_alloc_fn)(void *buffer, void *tensor, void *addr);
typedef void (*buffer_free_fn)(void *buffer);
typedef void *(*tensor_walk_fn)(void *ctx, void *tensor);
typedef void *(*tensor_first_fn)(void *ctx);
typedef const char *(*tensor_name_fn)(const void *tensor);
typedef size_t (*tensor_nbytes_fn)(const void *tensor);
typedef void *(*tensor_data_fn)(const void *tensor);
typedef int64_t (*tensor_nrows_fn)(const void *tensor);

VT_EXPORT void ggml_backend_buffer_set_usage(void *buffer, int usage);
VT_EXPORT void *ggml_backend_alloc_ctx_tensors_from_buft(void *ctx, void *buft);
VT_EXPORT int ggml_backend_tensor_alloc(void *buffer, void *tensor, void *addr);
VT_EXPORT void ggml_backend_buffer_free(void *buffer);

/* Each hooked name's own definition here, which a lookup must not return. */
static int is_ours(const void *fn)
{
    return fn == (void *)ggml_backend_buffer_set_usage || fn == (void *)ggml_backend_alloc_ctx_tensors_from_buft ||
           fn == (void *)ggml_backend_tensor_alloc || fn == (void *)ggml_backend_buffer_free;
}

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
    return is_ours(fn) ? NULL : fn;
}

/* Each copy of ggml in the process (two node addons may each bring their
 * own libggml-base, with different struct layouts): its object's extent,
 * which tells the copy's own calls apart, and its getters, found on first
 * use from that copy, never from another. */
typedef struct ggml_copy {
    _Atomic int state;    /* 0 free, 1 being filled, 2 ready */
    unsigned gen;         /* vt_unload_gen when filled: stale after an unload */
    uintptr_t lo, hi;
    const void *anchor;   /* the hooked function found in it */
    void *get_base, *get_size, *get_name, *get_usage, *is_host, *is_multi, *is_meta;
    void *first_tensor, *next_tensor, *tensor_name, *tensor_nbytes, *tensor_data, *tensor_nrows;
    _Atomic int holds_llama; /* 0 not looked at yet, 1 no, 2 llama.cpp is in the same object */
} ggml_copy_t;
#define GGML_COPIES 8
static ggml_copy_t copies[GGML_COPIES];

static int extent_of(struct dl_phdr_info *info, size_t size, void *data);

static ggml_copy_t *copy_of(const void *real)
{
    uintptr_t a = (uintptr_t)real;
    unsigned gen = atomic_load_explicit(&vt_unload_gen, memory_order_acquire);
    for (int i = 0; i < GGML_COPIES; i++) {
        ggml_copy_t *c = &copies[i];
        if (atomic_load_explicit(&c->state, memory_order_acquire) == 2 && c->gen == gen && a >= c->lo && a < c->hi)
            return c;
    }
    Dl_info info;
    /* dli_fbase is the lowest mapping; dlpi_addr the load bias: equal for
     * a shared object linked at 0. */
    uintptr_t range[3] = { 0, 0, 0 };
    if (!real || !dladdr(real, &info) || !info.dli_fbase)
        return NULL;
    range[2] = (uintptr_t)info.dli_fbase;
    vt_dl_iterate_phdr(extent_of, range);
    if (range[0] == range[1])
        return NULL;
    for (int i = 0; i < GGML_COPIES; i++) {
        ggml_copy_t *c = &copies[i];
        int st = atomic_load_explicit(&c->state, memory_order_acquire);
        /* An entry left by a copy since unloaded is taken again. */
        if (st == 2 && c->gen != gen && atomic_compare_exchange_strong(&c->state, &st, 0))
            st = 0;
        if (st == 0 && atomic_compare_exchange_strong(&c->state, &st, 1)) {
            c->gen = gen;
            c->lo = range[0];
            c->hi = range[1];
            c->anchor = real;
            c->get_base = c->get_size = c->get_name = c->get_usage = c->is_host = c->is_multi = c->is_meta = NULL;
            c->first_tensor = c->next_tensor = c->tensor_name = c->tensor_nbytes = c->tensor_data = NULL;
            c->tensor_nrows = NULL;
            atomic_store_explicit(&c->holds_llama, 0, memory_order_relaxed);
            atomic_store_explicit(&c->state, 2, memory_order_release);
            return c;
        }
    }
    static _Atomic int full_warned;
    vt_warn_once(&full_warned, "more than %d copies of ggml in this process; buffers of the later ones are not named",
                 GGML_COPIES);
    return NULL;
}

/* A function copy c does not define (ggml_backend_buffer_is_meta before
 * ggml had it), kept as looked for: else each of a model's thousands of
 * marks and tensors would look again, each look a dlopen and dlclose
 * under the loader's lock. */
static char absent;
#define ABSENT ((void *)&absent)

/* One of copy c's functions, found on first use; NULL where it has none. */
static void *copy_symbol(void **cache, const char *name, ggml_copy_t *c)
{
    void *fn = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (fn == ABSENT)
        return NULL;
    if (!fn) {
        fn = defined_near(c->anchor, name);
        if (!fn) {
            /* ggml linked into the main program, whose scope is the global
             * one. */
            fn = vt_real_dlsym(RTLD_NEXT, name);
            if (is_ours(fn))
                fn = NULL;
        }
        __atomic_store_n(cache, fn ? fn : ABSENT, __ATOMIC_RELEASE);
    }
    return fn;
}

static int predicate(void **cache, const char *name, void *buffer, ggml_copy_t *c)
{
    predicate_fn fn = (predicate_fn)copy_symbol(cache, name, c);
    return fn && fn(buffer);
}

/* The real hooked function for a call from caller: the definition the
 * caller would bind to without the shim. One in the global scope
 * (RTLD_NEXT) is everyone's, kept in uniform_real; otherwise each call
 * site's is its own library's (defined_near), kept by return address.
 * Both are dropped when a library is unloaded. */
#define SITE_CACHE 256
static struct site {
    _Atomic(uintptr_t) ra;
    _Atomic(uintptr_t) tag; /* the hook's uniform slot + the unload generation */
    _Atomic(void *) fn;
} sites[SITE_CACHE];
static atomic_flag site_writing = ATOMIC_FLAG_INIT;
static _Atomic unsigned uniform_gen;
enum { HOOK_SET_USAGE, HOOK_ALLOC_CTX, HOOK_TENSOR_ALLOC, HOOK_BUFFER_FREE, HOOKS };
static void *uniform_real[HOOKS];

static void *real_of(void **uniform, const char *name, const void *caller)
{
    unsigned gen = atomic_load_explicit(&vt_unload_gen, memory_order_acquire);
    if (atomic_load_explicit(&uniform_gen, memory_order_acquire) != gen) {
        /* A library went: forget the global answers (the four hooks'). */
        for (int i = 0; i < HOOKS; i++)
            __atomic_store_n(&uniform_real[i], NULL, __ATOMIC_RELEASE);
        atomic_store_explicit(&uniform_gen, gen, memory_order_release);
    }
    void *fn = __atomic_load_n(uniform, __ATOMIC_ACQUIRE);
    if (fn)
        return fn;
    uintptr_t ra = (uintptr_t)caller, tag = (uintptr_t)uniform + gen;
    struct site *e = &sites[((ra >> 2) ^ (ra >> 11)) & (SITE_CACHE - 1)];
    if (atomic_load_explicit(&e->ra, memory_order_acquire) == ra &&
        atomic_load_explicit(&e->tag, memory_order_acquire) == tag) {
        fn = atomic_load_explicit(&e->fn, memory_order_acquire);
        /* fn was loaded with acquire: the check below reads after it. */
        if (atomic_load_explicit(&e->ra, memory_order_acquire) == ra &&
            atomic_load_explicit(&e->tag, memory_order_acquire) == tag && fn)
            return fn;
    }
    fn = vt_real_dlsym(RTLD_NEXT, name);
    if (fn && !is_ours(fn)) {
        __atomic_store_n(uniform, fn, __ATOMIC_RELEASE);
        return fn;
    }
    fn = defined_near(caller, name);
    if (fn && !atomic_flag_test_and_set_explicit(&site_writing, memory_order_acquire)) {
        /* Release stores: a reader that sees the new tag or fn sees ra 0
         * or the new ra, never the old one with them. */
        atomic_store_explicit(&e->ra, 0, memory_order_relaxed);
        atomic_store_explicit(&e->tag, tag, memory_order_release);
        atomic_store_explicit(&e->fn, fn, memory_order_release);
        atomic_store_explicit(&e->ra, ra, memory_order_release);
        atomic_flag_clear_explicit(&site_writing, memory_order_release);
    }
    return fn;
}

static int recording_allowed(void)
{
    return atomic_load_explicit(&vt_state, memory_order_acquire) != VT_ST_OFF && !vt_tls.guard;
}

static void copy_name(char out[VT_GGML_NAME_LEN], const char *name)
{
    size_t n = name ? strnlen(name, VT_GGML_NAME_LEN - 1) : 0;
    if (n)
        memcpy(out, name, n);
    out[n] = 0;
}

/* How long a record that finds the queue full waits for the writer to
 * empty it. This is ggml's load path, where a few milliseconds are
 * nothing, and a record lost leaves part of the model's placement unknown:
 * one burst of 20,000 marks lost 997 of them with the writer woken at a
 * quarter (63-ggml-queue, burst). */
#define FULL_WAIT_MS 200

/* Set when a wait did not make room (no writer yet, or one that cannot
 * drain: this thread may hold the loader's lock its naming needs), so the
 * records after it are counted at once instead of each waiting in turn;
 * cleared by the first record that finds room. */
static _Atomic int full_wait_futile;

/* A load queues its records faster than the writer looks when it makes
 * few CUDA calls: a quarter-full queue wakes it, and a full one is waited
 * for. */
static void queue_note(const vt_ggml_note_t *n)
{
    int futile = atomic_load_explicit(&full_wait_futile, memory_order_relaxed);
    int rc = vt_ggml_queue(n, futile);
    if (rc < 0 && !futile) {
        if (vt_writer_sync(FULL_WAIT_MS) != 0)
            atomic_store_explicit(&full_wait_futile, 1, memory_order_relaxed);
        rc = vt_ggml_queue(n, 1);
    }
    if (rc < 0)
        return;
    if (atomic_load_explicit(&full_wait_futile, memory_order_relaxed))
        atomic_store_explicit(&full_wait_futile, 0, memory_order_relaxed);
    if (rc > 0)
        vt_writer_wake();
}

/* A GGML_BUFFER record for buffer; 0 when none was queued (a getter
 * missing, a size of 0, or a multi-buffer when allow_multi is 0). */
static int note_buffer(void *buffer, int usage, const void *real, int allow_multi)
{
    ggml_copy_t *c = copy_of(real);
    if (!c)
        return 0;
    get_base_fn base_of = (get_base_fn)copy_symbol(&c->get_base, "ggml_backend_buffer_get_base", c);
    get_size_fn size_of = (get_size_fn)copy_symbol(&c->get_size, "ggml_backend_buffer_get_size", c);
    name_fn name_of = (name_fn)copy_symbol(&c->get_name, "ggml_backend_buffer_name", c);
    if (!base_of || !size_of || !name_of)
        return 0;
    int multi = predicate(&c->is_multi, "ggml_backend_buffer_is_multi_buffer", buffer, c) ||
                predicate(&c->is_meta, "ggml_backend_buffer_is_meta", buffer, c);
    if (multi && !allow_multi)
        return 0;
    vt_ggml_note_t n = { .type = VT_REC_GGML_BUFFER, .time_ns = vt_now_ns(), .buffer = (uintptr_t)buffer,
                         .usage = (uint32_t)usage };
    n.size = size_of(buffer);
    if (!n.size)
        return 0;
    n.addr = multi ? 0 : (uintptr_t)base_of(buffer);
    predicate_fn is_host = (predicate_fn)copy_symbol(&c->is_host, "ggml_backend_buffer_is_host", c);
    n.host = is_host ? (is_host(buffer) ? 2 : 1) : 0;
    copy_name(n.name, name_of(buffer));
    queue_note(&n);
    return 1;
}

static void note_tensor(void *buffer, void *tensor, const void *real)
{
    ggml_copy_t *c = copy_of(real);
    if (!c)
        return;
    tensor_name_fn name_of = (tensor_name_fn)copy_symbol(&c->tensor_name, "ggml_get_name", c);
    tensor_nbytes_fn nbytes_of = (tensor_nbytes_fn)copy_symbol(&c->tensor_nbytes, "ggml_nbytes", c);
    tensor_data_fn data_of = (tensor_data_fn)copy_symbol(&c->tensor_data, "ggml_get_data", c);
    if (!name_of || !nbytes_of || !data_of)
        return;
    vt_ggml_note_t n = { .type = VT_REC_GGML_TENSOR, .time_ns = vt_now_ns(), .buffer = (uintptr_t)buffer };
    n.addr = (uintptr_t)data_of(tensor);
    n.size = nbytes_of(tensor);
    if (!n.addr || !n.size)
        return;
    /* ggml_nrows: ne[1] x ne[2] x ne[3], read through ggml's own function
     * rather than struct ggml_tensor's layout. A KV cache tensor is
     * [n_embd_gqa, kv_size, n_stream] (llama-kv-cache.cpp): its rows are
     * the cells the context has, over all sequences. */
    tensor_nrows_fn rows_of = (tensor_nrows_fn)copy_symbol(&c->tensor_nrows, "ggml_nrows", c);
    int64_t rows = rows_of ? rows_of(tensor) : 0;
    n.rows = rows > 0 ? (uint64_t)rows : 0;
    copy_name(n.name, name_of(tensor));
    queue_note(&n);
}

VT_EXPORT void ggml_backend_buffer_set_usage(void *buffer, int usage)
{
    static _Atomic int unreachable_warned;
    set_usage_fn fn = (set_usage_fn)real_of(&uniform_real[HOOK_SET_USAGE], "ggml_backend_buffer_set_usage", __builtin_return_address(0));
    if (!fn) {
        vt_warn_once(&unreachable_warned, "ggml_backend_buffer_set_usage: the real function cannot be found; "
                                          "the buffer's usage is not set");
        return;
    }
    fn(buffer, usage);
    if (!buffer || !recording_allowed())
        return;
    if (note_buffer(buffer, usage, (const void *)fn, 0) && usage == VT_GGML_USAGE_WEIGHTS &&
        atomic_load_explicit(&vt_state, memory_order_acquire) == VT_ST_IDLE)
        vt_start_for_model();
}

VT_EXPORT void *ggml_backend_alloc_ctx_tensors_from_buft(void *ctx, void *buft)
{
    static _Atomic int unreachable_warned;
    alloc_ctx_fn fn = (alloc_ctx_fn)real_of(&uniform_real[HOOK_ALLOC_CTX], "ggml_backend_alloc_ctx_tensors_from_buft",
                                                 __builtin_return_address(0));
    if (!fn) {
        vt_warn_once(&unreachable_warned, "ggml_backend_alloc_ctx_tensors_from_buft: the real function cannot be "
                                          "found; the tensors are not allocated");
        return NULL;
    }
    /* The CUDA allocations inside are the program's: their stacks leave
     * this frame out (stacks.c). */
    vt_tls.ggml_hook_depth++;
    void *buffer = fn(ctx, buft);
    vt_tls.ggml_hook_depth--;
    if (!buffer || !ctx || !recording_allowed())
        return buffer;
    ggml_copy_t *c = copy_of((const void *)fn);
    if (!c)
        return buffer;
    get_usage_fn usage_of = (get_usage_fn)copy_symbol(&c->get_usage, "ggml_backend_buffer_get_usage", c);
    if (!note_buffer(buffer, usage_of ? usage_of(buffer) : VT_GGML_USAGE_ANY, (const void *)fn, 1))
        return buffer;
    tensor_first_fn first = (tensor_first_fn)copy_symbol(&c->first_tensor, "ggml_get_first_tensor", c);
    tensor_walk_fn next = (tensor_walk_fn)copy_symbol(&c->next_tensor, "ggml_get_next_tensor", c);
    if (!first || !next)
        return buffer;
    for (void *t = first(ctx); t; t = next(ctx, t))
        note_tensor(buffer, t, (const void *)fn);
    return buffer;
}

static int extent_of(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t *range = data;
    if (info->dlpi_addr != range[2])
        return 0;
    vt_load_span(info, &range[0], &range[1]);
    return 1;
}

/* Whether llama.cpp is linked into copy c's own object: its
 * llama_backend_init (in every release since 2023) lies in c's extent. */
static int holds_llama(ggml_copy_t *c)
{
    int v = atomic_load_explicit(&c->holds_llama, memory_order_acquire);
    if (!v) {
        uintptr_t a = (uintptr_t)defined_near(c->anchor, "llama_backend_init");
        v = a && a >= c->lo && a < c->hi ? 2 : 1;
        atomic_store_explicit(&c->holds_llama, v, memory_order_release);
    }
    return v == 2;
}

/* The buffer whose GGML_BUFFER record a tensor from inside a combined copy
 * last came with: the tensor allocator places a buffer's tensors in one
 * run, so one record per run. A race gives a second record of the same
 * buffer, which readers take as the same buffer marked again. */
static _Atomic(uintptr_t) noted_buffer, noted_base;

/* A placement of a tensor in buffer from inside c, the copy of ggml that
 * defines fn. In a separate libggml-base these are ggml's own (the graph
 * allocator's per node; the tensor allocator's inside the alloc_ctx hook,
 * which records them itself): not recorded. In a copy that holds
 * llama.cpp too they are also llama's placements of its weights and KV
 * cache: recorded, with their buffer first (nothing marks a KV buffer),
 * unless inside the alloc_ctx hook or into a compute buffer.
 * @return whether the tensor is to be recorded. */
static int inside_placement_counts(ggml_copy_t *c, void *buffer, const void *fn)
{
    if (vt_tls.ggml_hook_depth > 0 || !holds_llama(c))
        return 0;
    get_usage_fn usage_of = (get_usage_fn)copy_symbol(&c->get_usage, "ggml_backend_buffer_get_usage", c);
    get_base_fn base_of = (get_base_fn)copy_symbol(&c->get_base, "ggml_backend_buffer_get_base", c);
    if (!usage_of || !base_of)
        return 0;
    int usage = usage_of(buffer);
    if (usage == VT_GGML_USAGE_COMPUTE)
        return 0;
    uintptr_t base = (uintptr_t)base_of(buffer);
    if (atomic_load_explicit(&noted_buffer, memory_order_relaxed) != (uintptr_t)buffer ||
        atomic_load_explicit(&noted_base, memory_order_relaxed) != base) {
        if (!note_buffer(buffer, usage, fn, 1))
            return 0;
        atomic_store_explicit(&noted_buffer, (uintptr_t)buffer, memory_order_relaxed);
        atomic_store_explicit(&noted_base, base, memory_order_relaxed);
    }
    return 1;
}

/* The copy of ggml that defines fn, when it is the caller; NULL else. */
static ggml_copy_t *definer_calling(const void *fn, uintptr_t caller)
{
    ggml_copy_t *c = copy_of(fn);
    return c && caller >= c->lo && caller < c->hi ? c : NULL;
}

VT_EXPORT int ggml_backend_tensor_alloc(void *buffer, void *tensor, void *addr)
{
    static _Atomic int unreachable_warned;
    uintptr_t caller = (uintptr_t)__builtin_return_address(0);
    tensor_alloc_fn fn = (tensor_alloc_fn)real_of(&uniform_real[HOOK_TENSOR_ALLOC], "ggml_backend_tensor_alloc", (const void *)caller);
    if (!fn) {
        vt_warn_once(&unreachable_warned, "ggml_backend_tensor_alloc: the real function cannot be found; "
                                          "the tensor is not allocated");
        return -1;  /* GGML_STATUS_FAILED */
    }
    int status = fn(buffer, tensor, addr);
    if (status != 0 || !buffer || !tensor || !recording_allowed())
        return status;
    ggml_copy_t *definer = definer_calling((const void *)fn, caller);
    if (definer && !inside_placement_counts(definer, buffer, (const void *)fn))
        return status;
    note_tensor(buffer, tensor, (const void *)fn);
    return status;
}

VT_EXPORT void ggml_backend_buffer_free(void *buffer)
{
    static _Atomic int unreachable_warned;
    buffer_free_fn fn = (buffer_free_fn)real_of(&uniform_real[HOOK_BUFFER_FREE], "ggml_backend_buffer_free", __builtin_return_address(0));
    if (!fn) {
        vt_warn_once(&unreachable_warned, "ggml_backend_buffer_free: the real function cannot be found; "
                                          "the buffer is not freed");
        return;
    }
    if (buffer && recording_allowed()) {
        vt_ggml_note_t n = { .type = VT_REC_GGML_FREE, .time_ns = vt_now_ns(), .buffer = (uintptr_t)buffer };
        queue_note(&n);
    }
    fn(buffer);
}
