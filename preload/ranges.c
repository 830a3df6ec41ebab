/* ranges.c: phase tags the program pushes, from two sources:
 *  - the annotation API (include/vramtrace/annotate.h): vramtrace_tag_push /
 *    vramtrace_tag_pop, exported from the shim, frames named "tag:NAME";
 *  - NVTX: the shim is an NVTX v3 injection library (InitializeInjectionNvtx2)
 *    and takes over push/pop, ASCII, Unicode and attribute forms, in the
 *    default domain ("nvtx:MESSAGE") and in named ones ("nvtx:DOMAIN/MESSAGE").
 *    Start/end ranges are not nested per thread and are not taken.
 *
 * Contract and invariants:
 *  - Each thread keeps its own stack of open ranges (TLS, no allocation).
 *    Every stack captured on that thread gets them as pseudo frames
 *    (VT_PSEUDO_RANGE, trace_format.h) at its outer end, innermost first;
 *    at most VT_MAX_RANGE_FRAMES deep, deeper ones are counted, not kept.
 *  - Names are interned once into a table that only grows; an id, once
 *    published, names the same string for the life of the process, so the
 *    writer reads names with no lock. New names take name_lock; known ones
 *    are lock-free. A full table gives id 0 ("range:?").
 *  - While the shim records (vt_state ACTIVE), each push and pop also goes
 *    into a bounded ring drained by the writer as VT_REC_RANGE records; a
 *    full ring drops the record, never blocks. A push dropped is tried
 *    again at the thread's next push or pop; a record is counted lost once
 *    it can no longer go out (a pop, and its level's push if that never
 *    went out), and the trace's last NOTE says how many
 *    (vt_ranges_lost_note): RANGE records + lost = the pushes and pops
 *    made while the shim recorded.
 *  - Pushes before the first CUDA call are kept on the thread's stack (so
 *    stacks captured later still carry them); their RANGE records, with
 *    their own times, go out at the thread's next push or pop once the
 *    shim records (levels past VT_MAX_RANGE_FRAMES excepted).
 *  - NVTX_INJECTION64_PATH: NVTX reads it once, at the program's first NVTX
 *    call, which often comes before its first CUDA call (torch.cuda.nvtx
 *    around model loading). So a constructor sets it to this library's own
 *    path when it is unset and tracing is not disabled: two getenv, one
 *    dladdr and an environment array in static storage, nothing else at
 *    load time (no malloc: see add_to_environment). A path the user (or nsys) set is kept, and
 *    then NVTX goes to that tool, not to us. A process that inherited the
 *    variable without the preload declines the injection.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <wchar.h>

#include "shim.h"
#include "vramtrace/encode.h"

#define NAME_LEN 128
#define NAME_CAP (1u << 14)
#define NAME_TABLE (1u << 15)
#define RING_SIZE 8192u

typedef struct range_name {
    uint64_t hash;
    char text[NAME_LEN];
} range_name_t;

static range_name_t names[NAME_CAP];   /* bss: pages are touched as names appear */
static _Atomic uint32_t name_slots[NAME_TABLE];
static _Atomic uint32_t name_count;
static pthread_mutex_t name_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct open_ranges {
    uint32_t depth;
    uint32_t recorded;  /* levels whose push is in the ring */
    uint32_t ids[VT_MAX_RANGE_FRAMES];
    uint64_t since[VT_MAX_RANGE_FRAMES];
} open_ranges_t;
static __thread open_ranges_t open __attribute__((tls_model("initial-exec")));

typedef struct range_slot {
    _Atomic uint64_t seq;
    uint64_t time_ns;
    uint32_t tid, depth, id;
    uint8_t push;
} range_slot_t;
static range_slot_t ring[RING_SIZE]; /* laid out by ring_put while ring_state.ready is 1 */

/* The ring's positions and state, apart from its slots so that a child
 * resets them whole (ranges_atfork_child) without touching 256 KiB. */
typedef struct range_ring {
    _Atomic uint64_t tail;
    uint64_t head; /* writer thread only */
    _Atomic uint64_t dropped;
    _Atomic int ready; /* 0 slots not laid out, 1 being laid out, 2 in use */
} range_ring_t;
static range_ring_t ring_state;

/* ---- names ---- */

static uint64_t fnv(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h | 1;
}

static void ranges_atfork_child(void);

/* The child handler is registered before anything it resets is first used
 * (name_lock, the ring): a fork at any instant after that runs it, in a
 * process that never calls CUDA too (a child of a fork that landed while
 * another thread held name_lock waited for ever on it). */
static void register_fork_handler(void)
{
    pthread_atfork(NULL, NULL, ranges_atfork_child);
}

static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static uint32_t intern(const char *text)
{
    uint64_t h = fnv(text);
    uint32_t i = (uint32_t)(h >> 17) & (NAME_TABLE - 1);
    for (uint32_t probe = 0; probe < 64; probe++, i = (i + 1) & (NAME_TABLE - 1)) {
        uint32_t id = atomic_load_explicit(&name_slots[i], memory_order_acquire);
        if (!id)
            break;
        if (names[id].hash == h && !strcmp(names[id].text, text))
            return id;
    }
    pthread_once(&fork_handler_once, register_fork_handler);
    pthread_mutex_lock(&name_lock);
    uint32_t found = 0;
    i = (uint32_t)(h >> 17) & (NAME_TABLE - 1);
    for (uint32_t probe = 0; probe < 64; probe++, i = (i + 1) & (NAME_TABLE - 1)) {
        uint32_t id = atomic_load_explicit(&name_slots[i], memory_order_relaxed);
        if (id && names[id].hash == h && !strcmp(names[id].text, text)) {
            found = id;
            break;
        }
        if (!id) {
            uint32_t n = atomic_load_explicit(&name_count, memory_order_relaxed) + 1;
            if (n >= NAME_CAP)
                break;
            names[n].hash = h;
            strcpy(names[n].text, text);
            atomic_store_explicit(&name_count, n, memory_order_release);
            atomic_store_explicit(&name_slots[i], n, memory_order_release);
            found = n;
            break;
        }
    }
    pthread_mutex_unlock(&name_lock);
    return found;
}

/* Appends src (narrow or wide) to dst of NAME_LEN, printable ASCII only. */
static size_t append(char *dst, size_t len, const char *narrow, const wchar_t *wide)
{
    for (size_t i = 0; len < NAME_LEN - 1; i++) {
        unsigned c = narrow ? (unsigned char)narrow[i] : wide ? (unsigned)wide[i] : 0;
        if (!c)
            break;
        dst[len++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    dst[len] = 0;
    return len;
}

static uint32_t name_id(const char *prefix, const char *domain, const char *narrow, const wchar_t *wide)
{
    char text[NAME_LEN];
    size_t len = append(text, 0, prefix, NULL);
    if (domain && domain[0]) {
        len = append(text, len, domain, NULL);
        len = append(text, len, "/", NULL);
    }
    append(text, len, narrow, wide);
    return intern(text);
}

const char *vt_range_name(uint32_t id)
{
    if (!id || id > atomic_load_explicit(&name_count, memory_order_acquire))
        return "range:?";
    return names[id].text;
}

/* ---- the per-thread stack and the RANGE records ---- */

static int ring_put(int push, uint32_t depth, uint32_t id, uint64_t time_ns);

/* Records a push or pop. Levels pushed before the shim started recording
 * get their push records first, with their own times, so the timeline of
 * a thread that keeps pushing is complete. */
static void record(int push, uint32_t depth, uint32_t id, uint64_t time_ns)
{
    if (atomic_load_explicit(&vt_state, memory_order_acquire) != VT_ST_ACTIVE)
        return;
    /* Levels below a push, or up to the level a pop closes. */
    uint32_t known = push ? depth : depth + 1;
    if (known > VT_MAX_RANGE_FRAMES)
        known = VT_MAX_RANGE_FRAMES;
    int ok = 1;
    while (ok && open.recorded < known) {
        uint32_t d = open.recorded;
        ok = ring_put(1, d, open.ids[d], open.since[d]) == 0;
        open.recorded += ok;
    }
    if (ok && ring_put(push, depth, id, time_ns) == 0) {
        if (push && depth == open.recorded)
            open.recorded++;
        if (!push && open.recorded > depth)
            open.recorded = depth;
        return;
    }
    /* A push kept on the thread's stack goes out at its next record; one
     * past VT_MAX_RANGE_FRAMES is not kept. A pop is lost, and with it its
     * level's push if that never went out. */
    uint64_t lost = 0;
    if (!push) {
        lost = 1 + (open.recorded <= depth && depth < VT_MAX_RANGE_FRAMES);
        if (open.recorded > depth)
            open.recorded = depth;
    } else if (depth >= VT_MAX_RANGE_FRAMES) {
        lost = 1;
    }
    if (lost)
        atomic_fetch_add_explicit(&ring_state.dropped, lost, memory_order_relaxed);
}

static int ring_put(int push, uint32_t depth, uint32_t id, uint64_t time_ns)
{
    if (!atomic_load_explicit(&ring_state.ready, memory_order_acquire)) {
        pthread_once(&fork_handler_once, register_fork_handler);
        int expected = 0;
        if (atomic_compare_exchange_strong(&ring_state.ready, &expected, 1)) {
            for (uint32_t i = 0; i < RING_SIZE; i++)
                atomic_store_explicit(&ring[i].seq, i, memory_order_relaxed);
            atomic_store(&ring_state.ready, 2);
        }
        if (atomic_load(&ring_state.ready) != 2)
            return -1;
    }
    if (!vt_tls.tid)
        vt_tls.tid = (uint32_t)syscall(SYS_gettid);
    uint64_t pos = atomic_load_explicit(&ring_state.tail, memory_order_relaxed);
    range_slot_t *slot;
    for (;;) {
        slot = &ring[pos & (RING_SIZE - 1)];
        uint64_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&ring_state.tail, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (diff < 0) {
            return -1; /* full: record() counts what is lost */
        } else {
            pos = atomic_load_explicit(&ring_state.tail, memory_order_relaxed);
        }
    }
    slot->time_ns = time_ns;
    slot->tid = vt_tls.tid;
    slot->depth = depth;
    slot->id = id;
    slot->push = (uint8_t)push;
    atomic_store_explicit(&slot->seq, pos + 1, memory_order_release);
    return 0;
}

static int push(uint32_t id)
{
    uint64_t now = vt_now_ns();
    uint32_t d = open.depth;
    if (d < VT_MAX_RANGE_FRAMES) {
        open.ids[d] = id;
        open.since[d] = now;
    }
    record(1, d, id, now);
    open.depth++;
    return (int)d;
}

static int pop(void)
{
    if (!open.depth)
        return -1; /* NVTX's answer to a pop without a push */
    uint32_t d = open.depth - 1;
    record(0, d, d < VT_MAX_RANGE_FRAMES ? open.ids[d] : 0, vt_now_ns());
    open.depth = d;
    return (int)d;
}

int vt_ranges_open(void)
{
    return open.depth != 0;
}

int vt_ranges_frames(uint64_t *out, int cap)
{
    int n = open.depth < VT_MAX_RANGE_FRAMES ? (int)open.depth : VT_MAX_RANGE_FRAMES;
    int m = 0;
    for (int i = n - 1; i >= 0 && m < cap; i--)
        out[m++] = VT_PSEUDO_IP(VT_PSEUDO_RANGE, open.ids[i]);
    return m;
}

void vt_ranges_records(vt_emit_fn emit)
{
    if (atomic_load_explicit(&ring_state.ready, memory_order_acquire) != 2)
        return;
    for (;;) {
        range_slot_t *slot = &ring[ring_state.head & (RING_SIZE - 1)];
        if (atomic_load_explicit(&slot->seq, memory_order_acquire) != ring_state.head + 1)
            break;
        const char *name = vt_range_name(slot->id);
        uint8_t buf[4 * VT_VARINT_MAX + 1 + NAME_LEN], *p = buf;
        p = vt_put_varint(p, slot->time_ns);
        p = vt_put_varint(p, slot->tid);
        p = vt_put_varint(p, slot->depth);
        *p++ = slot->push;
        p = vt_put_str(p, name, strlen(name), NAME_LEN);
        atomic_store_explicit(&slot->seq, ring_state.head + RING_SIZE, memory_order_release);
        ring_state.head++;
        emit(VT_REC_RANGE, buf, (size_t)(p - buf));
    }
}

void vt_ranges_lost_note(vt_emit_fn emit)
{
    uint64_t lost = atomic_load_explicit(&ring_state.dropped, memory_order_relaxed);
    if (!lost)
        return;
    char text[128];
    int len = snprintf(text, sizeof text, "ranges: %llu range records lost, their buffer full",
                       (unsigned long long)lost);
    uint8_t buf[2 * VT_VARINT_MAX + sizeof text], *p = buf;
    p = vt_put_varint(p, vt_now_ns());
    p = vt_put_str(p, text, (size_t)len, sizeof text);
    emit(VT_REC_NOTE, buf, (size_t)(p - buf));
}

static void ranges_atfork_child(void)
{
    /* The parent's unwritten records belong to the parent's trace, and a
     * parent's thread may have been laying the slots out: the ring starts
     * over, laid out again at the child's first record. */
    ring_state = (range_ring_t){ 0 };
    /* The forking thread's open ranges stay open; their pushes go into the
     * child's trace at its next push or pop, as before a first CUDA call. */
    open.recorded = 0;
    /* The names survive: an id, once published, names the same text in
     * the child, which shares the table. Not the lock, which a parent's
     * thread that does not exist here may have held. */
    pthread_mutex_init(&name_lock, NULL);
}

/* ---- the annotation API (include/vramtrace/annotate.h) ---- */

VT_EXPORT int vramtrace_tag_push(const char *tag)
{
    return push(name_id("tag:", NULL, tag ? tag : "", NULL));
}

VT_EXPORT int vramtrace_tag_pop(void)
{
    return pop();
}

/* This library's own vramtrace_tag_push, whoever else exports the name. */
extern __typeof__(vramtrace_tag_push) vt_self_tag_push
    __attribute__((alias("vramtrace_tag_push"), visibility("hidden")));

/* ---- NVTX v3 injection ----
 * The ABI below mirrors nvtx3/nvToolsExt.h and nvtx3/nvtxDetail/nvtxTypes.h
 * of the CUDA toolkit: nvtxEventAttributes_v2, the export table ids
 * (NVTX_ETID_CALLBACKS = 1), the callback modules (CORE = 1, CORE2 = 5) and
 * the callback ids used here. tests/python/nvtx_app.c builds the real
 * header-only loader against us and checks the struct offsets. */

enum { NVTX_ETID_CALLBACKS = 1, NVTX_CB_MODULE_CORE = 1, NVTX_CB_MODULE_CORE2 = 5 };
enum {
    CBID_CORE_RangePushEx = 8, CBID_CORE_RangePushA = 9, CBID_CORE_RangePushW = 10, CBID_CORE_RangePop = 11,
    CBID_CORE2_DomainRangePushEx = 4, CBID_CORE2_DomainRangePop = 5, CBID_CORE2_DomainRegisterStringA = 10,
    CBID_CORE2_DomainRegisterStringW = 11, CBID_CORE2_DomainCreateA = 12, CBID_CORE2_DomainCreateW = 13,
    CBID_CORE2_DomainDestroy = 14,
};
enum { MSG_ASCII = 1, MSG_UNICODE = 2, MSG_REGISTERED = 3 };

typedef struct nvtx_attr {
    uint16_t version, size;
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type, reserved0;
    uint64_t payload;
    int32_t message_type;
    union {
        const char *ascii;
        const wchar_t *unicode;
        const void *registered;
    } message;
} nvtx_attr_t;

typedef void (*nvtx_fn)(void);
typedef struct nvtx_callbacks {
    size_t struct_size;
    int (*get_module_function_table)(int module, nvtx_fn ***out_table, unsigned *out_size);
} nvtx_callbacks_t;
typedef const void *(*nvtx_get_export_table_fn)(uint32_t id);

/* Domain and registered-string handles are interned name ids, never
 * dereferenced by NVTX; 0 (NULL) stays "no domain". */
static const char *domain_name(const void *domain)
{
    uintptr_t id = (uintptr_t)domain;
    return id && id <= NAME_CAP ? vt_range_name((uint32_t)id) : NULL;
}

static uint32_t attr_name(const void *domain, const nvtx_attr_t *a)
{
    const char *dom = domain_name(domain);
    if (!a || a->size < sizeof(nvtx_attr_t))
        return name_id("nvtx:", dom, "?", NULL);
    switch (a->message_type) {
    case MSG_ASCII:
        return name_id("nvtx:", dom, a->message.ascii ? a->message.ascii : "", NULL);
    case MSG_UNICODE:
        return name_id("nvtx:", dom, NULL, a->message.unicode ? a->message.unicode : L"");
    case MSG_REGISTERED: {
        uintptr_t id = (uintptr_t)a->message.registered;
        return name_id("nvtx:", dom, id && id <= NAME_CAP ? vt_range_name((uint32_t)id) : "?", NULL);
    }
    default:
        return name_id("nvtx:", dom, "?", NULL);
    }
}

static int nv_push_a(const char *msg) { return push(name_id("nvtx:", NULL, msg ? msg : "", NULL)); }
static int nv_push_w(const wchar_t *msg) { return push(name_id("nvtx:", NULL, NULL, msg ? msg : L"")); }
static int nv_push_ex(const nvtx_attr_t *a) { return push(attr_name(NULL, a)); }
static int nv_pop(void) { return pop(); }
static int nv_domain_push_ex(const void *domain, const nvtx_attr_t *a) { return push(attr_name(domain, a)); }
static int nv_domain_pop(const void *domain) { (void)domain; return pop(); }
static void nv_domain_destroy(const void *domain) { (void)domain; }
static const void *nv_domain_create_a(const char *name)
{
    return (const void *)(uintptr_t)name_id("", NULL, name ? name : "?", NULL);
}
static const void *nv_domain_create_w(const wchar_t *name)
{
    return (const void *)(uintptr_t)name_id("", NULL, NULL, name ? name : L"?");
}
static const void *nv_register_a(const void *domain, const char *s)
{
    (void)domain;
    return (const void *)(uintptr_t)name_id("", NULL, s ? s : "?", NULL);
}
static const void *nv_register_w(const void *domain, const wchar_t *s)
{
    (void)domain;
    return (const void *)(uintptr_t)name_id("", NULL, NULL, s ? s : L"?");
}

static void install(nvtx_get_export_table_fn get, int module, const unsigned *ids, nvtx_fn const *fns, size_t n)
{
    const nvtx_callbacks_t *cb = (const nvtx_callbacks_t *)get(NVTX_ETID_CALLBACKS);
    nvtx_fn **table = NULL;
    unsigned size = 0;
    if (!cb || cb->struct_size < sizeof *cb || !cb->get_module_function_table ||
        !cb->get_module_function_table(module, &table, &size) || !table)
        return;
    for (size_t i = 0; i < n; i++)
        if (ids[i] <= size && table[ids[i]])
            *table[ids[i]] = fns[i];
}

/* Whether this copy of the library is the preloaded one, recording: NVTX
 * may dlopen it in a child that inherited NVTX_INJECTION64_PATH but not
 * LD_PRELOAD. Asked of the program's global scope (the main program's
 * handle: RTLD_DEFAULT from here would also search this copy's own local
 * scope), and about a name only we define: another interposer preloaded
 * before us may define the wrapped names (HAMi-core: cuMemAlloc_v2). */
static int preloaded(void)
{
    void *global = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD);
    if (!global)
        return 0;
    void *found = vt_real_dlsym(global, "vramtrace_tag_push");
    vt_real_dlclose(global);
    return found == (void *)&vt_self_tag_push;
}

VT_EXPORT int InitializeInjectionNvtx2(nvtx_get_export_table_fn get)
{
    if (!get || !preloaded())
        return 0;
    static const unsigned core_ids[] = { CBID_CORE_RangePushEx, CBID_CORE_RangePushA, CBID_CORE_RangePushW,
                                         CBID_CORE_RangePop };
    static const nvtx_fn core_fns[] = { (nvtx_fn)nv_push_ex, (nvtx_fn)nv_push_a, (nvtx_fn)nv_push_w,
                                        (nvtx_fn)nv_pop };
    static const unsigned core2_ids[] = { CBID_CORE2_DomainRangePushEx, CBID_CORE2_DomainRangePop,
                                          CBID_CORE2_DomainRegisterStringA, CBID_CORE2_DomainRegisterStringW,
                                          CBID_CORE2_DomainCreateA, CBID_CORE2_DomainCreateW,
                                          CBID_CORE2_DomainDestroy };
    static const nvtx_fn core2_fns[] = { (nvtx_fn)nv_domain_push_ex, (nvtx_fn)nv_domain_pop,
                                         (nvtx_fn)nv_register_a, (nvtx_fn)nv_register_w,
                                         (nvtx_fn)nv_domain_create_a, (nvtx_fn)nv_domain_create_w,
                                         (nvtx_fn)nv_domain_destroy };
    install(get, NVTX_CB_MODULE_CORE, core_ids, core_fns, sizeof core_ids / sizeof core_ids[0]);
    install(get, NVTX_CB_MODULE_CORE2, core2_ids, core2_fns, sizeof core2_ids / sizeof core2_ids[0]);
    return 1;
}

/* setenv would initialise malloc in every process the preload reaches, CUDA
 * or not: 15 us of /bin/true's 540 us on the bench machine (tests/bench,
 * vtspawn). A copy of the environment array in static storage costs no
 * allocation. It stays valid for the host: glibc's setenv/putenv copy an
 * array they did not allocate instead of growing it, unsetenv edits it in
 * place, and clearenv frees only its own. Larger environments fall back to
 * setenv. */
#define ENV_SLOTS 1024
static char *environment_copy[ENV_SLOTS];
static char nvtx_assignment[sizeof "NVTX_INJECTION64_PATH=" + 4096];

static void add_to_environment(const char *path)
{
    extern char **environ;
    size_t n = 0;
    while (environ && environ[n])
        n++;
    size_t name_len = sizeof "NVTX_INJECTION64_PATH=" - 1, path_len = strlen(path);
    if (n + 2 > ENV_SLOTS || name_len + path_len >= sizeof nvtx_assignment) {
        setenv("NVTX_INJECTION64_PATH", path, 0);
        return;
    }
    memcpy(nvtx_assignment, "NVTX_INJECTION64_PATH=", name_len);
    memcpy(nvtx_assignment + name_len, path, path_len + 1);
    if (n)
        memcpy(environment_copy, environ, n * sizeof *environ);
    environment_copy[n] = nvtx_assignment;
    environment_copy[n + 1] = NULL;
    environ = environment_copy;
}

__attribute__((constructor)) static void ranges_load(void)
{
    /* A secure-execution process is never traced (options.c), and its
     * environment, which its children inherit, is left as it came. */
    const char *off = getenv("VRAMTRACE_DISABLE");
    if ((off && vt_options_bool(off) == 1) || getenv("NVTX_INJECTION64_PATH") || getauxval(AT_SECURE))
        return;
    Dl_info info;
    char path[4096];
    /* Our own static function: an exported name could be another
     * library's (a GLOB_DAT lookup at load, and the wrong path). */
    if (!dladdr((void *)&ranges_load, &info) || !info.dli_fname)
        return;
    /* LD_PRELOAD paths are usually absolute: skip realpath's syscalls, this
     * runs in every process, CUDA or not. */
    if (info.dli_fname[0] == '/')
        add_to_environment(info.dli_fname);
    else if (realpath(info.dli_fname, path))
        add_to_environment(path);
}
