/* interpose.c: how the shim stays on every path a program takes to the
 * driver, and how it finds the real functions behind its wrappers.
 *
 * Three paths reach an entry point:
 *  1. A linked call binds to our export (LD_PRELOAD comes first in lookup
 *     order). The real function is the next definition: dlsym(RTLD_NEXT).
 *  2. dlopen("libcuda.so.1") + dlsym(handle, name): our dlsym returns the
 *     wrapper for exact table names, remembering what the real dlsym found.
 *  3. cuGetProcAddress(_v2): libcudart >= 11.3 and PyTorch's
 *     cudaGetDriverEntryPoint fetch every driver entry point this way. The
 *     pointer the driver returns is mapped to its exact ABI name (so the
 *     version and _ptsz flavour are the driver's choice, not ours) and
 *     swapped for that name's wrapper. Pointers we don't wrap pass untouched.
 *
 * dlsym rules, learnt from other interposers' bug trackers:
 *  - The real dlsym comes from dlvsym (real_dl.c), since calling "dlsym"
 *    from inside this library would find ourselves.
 *  - glibc resolves RTLD_NEXT and RTLD_DEFAULT relative to the CALLER's
 *    object. A plain C call from here would make us the caller, so every
 *    lookup we don't intercept is forwarded with a tail jump that keeps the
 *    caller's return address (x86-64 trampoline below).
 *  - Exact names only, never prefixes; RTLD_NEXT lookups are never
 *    intercepted (they come from another interposer asking for what is after
 *    it); libcuda's own lookups are never intercepted.
 *
 * dlclose is wrapped because frames are named after the fact, by address:
 * before a library goes, the writer names what was captured in it (waiting
 * a bounded time), and after one went, later captures get a new load epoch
 * so a library mapped at its addresses never shares its frames. dlopen is
 * not wrapped: that would make us the caller of every dlopen and break the
 * callers' RPATH/RUNPATH lookups.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include <cuda.h>

#include "shim.h"

static _Atomic(void *) real_fn[VT_API_COUNT];

/* ---- dlclose ---- */

/* How long a dlclose waits for the writer to name the library's frames.
 * Bounded because the caller may hold the loader's lock (a dlclose from a
 * library destructor) that the writer's module lookup needs: past it the
 * library goes, and frames the writer had not named yet come out unnamed
 * or, if another library lands at its address first, misnamed. */
#define DLCLOSE_SYNC_MS 200

VT_EXPORT int dlclose(void *handle)
{
    int state = atomic_load_explicit(&vt_state, memory_order_acquire);
    /* Inside the shim (guard) the writer may be what we would wait for. */
    if (state == VT_ST_ACTIVE && vt_tls.guard == 0)
        vt_writer_sync(DLCLOSE_SYNC_MS);
    int watch = state != VT_ST_OFF;
    unsigned long long before = watch ? vt_cfi_module_subs() : 0;
    int rc = vt_real_dlclose(handle);
    if (watch) {
        unsigned long long after = vt_cfi_module_subs();
        if (after != before)
            vt_stacks_unloaded(after);
    }
    return rc;
}

unsigned vt_api_by_name(const char *name)
{
    if (!name || name[0] != 'c' || name[1] != 'u')
        return VT_API_COUNT;
    for (unsigned i = 0; i < VT_API_COUNT; i++)
        if (strcmp(vt_api_info(i)->name, name) == 0)
            return i;
    return VT_API_COUNT;
}

static int is_wrapper(void *p)
{
    for (unsigned i = 0; i < VT_API_COUNT; i++)
        if (vt_wrapper(i) == p)
            return 1;
    return 0;
}

void vt_set_real(unsigned api, void *fn)
{
    void *expected = NULL;
    if (api < VT_API_COUNT && fn && !is_wrapper(fn))
        atomic_compare_exchange_strong(&real_fn[api], &expected, fn);
}

/* ---- the libraries behind the wrappers ---- */

static _Atomic(void *) libcuda_handle;

static void *noload_handle_of(void *fn)
{
    Dl_info info;
    if (!fn || !dladdr(fn, &info) || !info.dli_fname)
        return NULL;
    return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
}

void *vt_libcuda(void)
{
    void *h = atomic_load(&libcuda_handle);
    if (h)
        return h;
    /* The library that served cuGetProcAddress or any wrapped driver call
     * is the driver, whatever its file name. */
    for (unsigned i = 0; i < VT_API_COUNT && !h; i++)
        if (!vt_api_info(i)->runtime && atomic_load(&real_fn[i]))
            h = noload_handle_of(atomic_load(&real_fn[i]));
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h)
        atomic_store(&libcuda_handle, h);
    return h;
}

static void *runtime_lookup(const char *name)
{
    static const char *const sonames[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                                           "libcudart.so" };
    for (size_t i = 0; i < sizeof sonames / sizeof sonames[0]; i++) {
        void *h = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            void *fn = vt_real_dlsym(h, name);
            vt_real_dlclose(h);
            if (fn)
                return fn;
        }
    }
    return NULL;
}

/* Out of line: the lookup's calls would otherwise make every wrapper's
 * vt_real save and restore registers for a load. */
static __attribute__((noinline, cold)) void *real_lookup(unsigned api)
{
    const vt_api_info_t *info = vt_api_info(api);
    /* Linked call: the next definition after us in lookup order. */
    void *fn = vt_real_dlsym(RTLD_NEXT, info->name);
    if (!fn && !info->runtime && vt_libcuda())
        fn = vt_real_dlsym(vt_libcuda(), info->name);
    if (!fn && info->runtime)
        fn = runtime_lookup(info->name);
    if (!fn && !info->runtime) {
        /* A program linked against libcuda always has it loaded; one that
         * only calls us (it linked the shim's names) gets the driver now. */
        void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (h)
            fn = vt_real_dlsym(h, info->name);
    }
    vt_set_real(api, fn);
    return atomic_load(&real_fn[api]);
}

void *vt_real(unsigned api)
{
    void *fn = atomic_load_explicit(&real_fn[api], memory_order_acquire);
    return fn ? fn : real_lookup(api);
}

/* ---- cuGetProcAddress routing ---- */

static void *driver_addr[VT_API_COUNT];
static pthread_once_t driver_addr_once = PTHREAD_ONCE_INIT;

static void build_driver_addr(void)
{
    void *h = vt_libcuda();
    if (!h)
        return;
    for (unsigned i = 0; i < VT_API_COUNT; i++)
        if (!vt_api_info(i)->runtime)
            driver_addr[i] = vt_real_dlsym(h, vt_api_info(i)->name);
}

void *vt_route_procaddr(void *fn)
{
    if (!fn || is_wrapper(fn))
        return fn;
    pthread_once(&driver_addr_once, build_driver_addr);
    for (unsigned i = 0; i < VT_API_COUNT; i++) {
        if (driver_addr[i] == fn) {
            vt_set_real(i, fn);
            return vt_wrapper(i);
        }
    }
    /* A driver whose table entries are not its exported symbols: trust an
     * exact symbol match only. */
    Dl_info info;
    if (dladdr(fn, &info) && info.dli_saddr == fn && info.dli_sname) {
        unsigned api = vt_api_by_name(info.dli_sname);
        if (api < VT_API_COUNT && !vt_api_info(api)->runtime) {
            vt_set_real(api, fn);
            return vt_wrapper(api);
        }
    }
    return fn;
}

/* ---- dlsym ---- */

typedef struct route {
    void *ptr;
    long take; /* 1: return ptr; 0: forward to the real dlsym untouched */
} route_t;

static int caller_is_driver(void *caller)
{
    Dl_info info;
    if (!caller || !dladdr(caller, &info) || !info.dli_fname)
        return 0;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    return strncmp(base, "libcuda.so", 10) == 0;
}

/* Called by the trampoline before every dlsym. Never fails: when in doubt,
 * forward. Not instrumented: ASan and TSan call dlsym(RTLD_NEXT) while
 * setting themselves up, before their shadow memory exists, so this must
 * touch nothing before it knows the lookup is not ours. */
__attribute__((no_sanitize("address", "undefined", "thread"))) route_t vt_dlsym_route(void *handle, const char *name, void *caller)
{
    route_t fwd = { NULL, 0 };
    vt_real_dlsym_resolve();
    if (!vt_next_dlsym) {
        /* No glibc dlsym to jump to (not seen with glibc): answer "not
         * found" rather than let the trampoline jump to NULL. */
        route_t none = { NULL, 1 };
        return none;
    }
    if (handle == RTLD_NEXT || !name || name[0] != 'c' || name[1] != 'u')
        return fwd;
    unsigned api = vt_api_by_name(name);
    if (api == VT_API_COUNT || vt_tls.guard || caller_is_driver(caller))
        return fwd;
    void *real;
    if (handle == RTLD_DEFAULT) {
        /* From here RTLD_DEFAULT would find our own export first. */
        real = vt_real_dlsym(RTLD_NEXT, name);
        if (!real && !vt_api_info(api)->runtime && vt_libcuda())
            real = vt_real_dlsym(vt_libcuda(), name);
        if (!real && vt_api_info(api)->runtime)
            real = runtime_lookup(name);
        /* Nothing but us defines it (a driver without this entry point):
         * forwarding would answer with our own export, and the program
         * would think the driver has it. */
        if (!real) {
            route_t missing = { NULL, 1 };
            return missing;
        }
    } else {
        real = vt_real_dlsym(handle, name);
    }
    if (!real || is_wrapper(real))
        return fwd; /* the real lookup answers, dlerror() and all */
    vt_set_real(api, real);
    route_t take = { vt_wrapper(api), 1 };
    return take;
}

#if defined(__x86_64__)
/* dlsym entry: ask vt_dlsym_route, then either return its pointer or tail
 * jump into glibc's dlsym with the caller's own return address on the
 * stack, so RTLD_NEXT/RTLD_DEFAULT resolve relative to the caller. Two
 * labels, one per symbol version glibc programs bind to. */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl vt_dlsym_new\n"
        ".globl vt_dlsym_old\n"
        ".type vt_dlsym_new,@function\n"
        ".type vt_dlsym_old,@function\n"
        "vt_dlsym_new:\n"
        "vt_dlsym_old:\n"
        "    endbr64\n"
        "    subq $24, %rsp\n"
        "    movq %rdi, 0(%rsp)\n"
        "    movq %rsi, 8(%rsp)\n"
        "    movq 24(%rsp), %rdx\n"
        "    call vt_dlsym_route\n"
        "    testq %rdx, %rdx\n"
        "    jnz 1f\n"
        "    movq 0(%rsp), %rdi\n"
        "    movq 8(%rsp), %rsi\n"
        "    addq $24, %rsp\n"
        "    jmp *vt_next_dlsym(%rip)\n"
        "1:  addq $24, %rsp\n"
        "    ret\n"
        ".size vt_dlsym_new, .-vt_dlsym_new\n"
        ".size vt_dlsym_old, .-vt_dlsym_old\n"
        ".symver vt_dlsym_new, dlsym@@GLIBC_2.34\n"
        ".symver vt_dlsym_old, dlsym@GLIBC_2.2.5\n");
#else
/* Without the trampoline, forwarded lookups are made from this library:
 * RTLD_NEXT relative to the caller cannot be honoured exactly. */
VT_EXPORT void *dlsym(void *handle, const char *name)
{
    route_t r = vt_dlsym_route(handle, name, __builtin_return_address(0));
    return r.take ? r.ptr : vt_real_dlsym(handle, name);
}
#endif

/* ---- real driver calls for device facts and samples ---- */

typedef CUresult (*ctx_get_device_fn)(CUdevice *);
typedef CUresult (*mem_get_info_fn)(size_t *, size_t *);
typedef CUresult (*device_get_name_fn)(char *, int, CUdevice);
typedef CUresult (*device_get_uuid_fn)(CUuuid *, CUdevice);
typedef CUresult (*device_total_mem_fn)(size_t *, CUdevice);

static void *driver_sym(const char *name)
{
    void *h = vt_libcuda();
    return h ? vt_real_dlsym(h, name) : NULL;
}

/* driver_sym once per slot: the helpers that run on every event must not
 * pay a dlsym each time. A miss is asked again next time (the driver may
 * not be loaded yet). */
static void *cached_driver_sym(_Atomic(void *) *slot, const char *name)
{
    void *f = atomic_load_explicit(slot, memory_order_acquire);
    if (!f) {
        f = driver_sym(name);
        if (f)
            atomic_store_explicit(slot, f, memory_order_release);
    }
    return f;
}

int vt_driver_current_device(void)
{
    static _Atomic(void *) fn;
    ctx_get_device_fn f = (ctx_get_device_fn)cached_driver_sym(&fn, "cuCtxGetDevice");
    if (!f)
        return -1;
    CUdevice dev;
    if (f(&dev) != CUDA_SUCCESS || dev < 0 || dev >= VT_MAX_DEVICES)
        return -1;
    return dev;
}

int vt_driver_meminfo(uint64_t *free_bytes, uint64_t *total_bytes)
{
    /* The real function, never our wrapper: this is a sample, not the
     * program asking. */
    mem_get_info_fn f = (mem_get_info_fn)vt_real(VT_API_cuMemGetInfo_v2);
    size_t fr = 0, tot = 0;
    if (!f || f(&fr, &tot) != CUDA_SUCCESS)
        return -1;
    *free_bytes = fr;
    *total_bytes = tot;
    return 0;
}

typedef CUresult (*pool_get_attribute_fn)(CUmemoryPool, CUmemPool_attribute, void *);
typedef CUresult (*device_get_mem_pool_fn)(CUmemoryPool *, CUdevice);

int vt_driver_pool_usage(uint64_t pool, uint64_t *reserved, uint64_t *used)
{
    /* The real function, never our wrapper: a sample, not the program. */
    pool_get_attribute_fn f = (pool_get_attribute_fn)vt_real(VT_API_cuMemPoolGetAttribute);
    cuuint64_t r = 0, u = 0;
    CUmemoryPool p = (CUmemoryPool)(uintptr_t)pool;
    if (!f || f(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &r) != CUDA_SUCCESS ||
        f(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &u) != CUDA_SUCCESS)
        return -1;
    *reserved = r;
    *used = u;
    return 0;
}

int vt_driver_device_pool(int device, uint64_t *pool)
{
    static _Atomic(void *) fn;
    device_get_mem_pool_fn f = (device_get_mem_pool_fn)cached_driver_sym(&fn, "cuDeviceGetMemPool");
    if (!f)
        return -1;
    CUmemoryPool p = NULL;
    if (f(&p, device) != CUDA_SUCCESS || !p)
        return -1;
    *pool = (uint64_t)(uintptr_t)p;
    return 0;
}

int vt_driver_device_facts(int device, vt_device_slot_t *out)
{
    device_get_name_fn get_name = (device_get_name_fn)driver_sym("cuDeviceGetName");
    device_get_uuid_fn get_uuid = (device_get_uuid_fn)driver_sym("cuDeviceGetUuid_v2");
    if (!get_uuid)
        get_uuid = (device_get_uuid_fn)driver_sym("cuDeviceGetUuid");
    device_total_mem_fn total_mem = (device_total_mem_fn)driver_sym("cuDeviceTotalMem_v2");
    uint64_t fr = 0, tot = 0;
    if (vt_driver_meminfo(&fr, &tot) != 0)
        return -1;
    size_t total = tot;
    if (total_mem)
        total_mem(&total, device);
    out->total = total;
    out->free_at_first = fr;
    memset(out->name, 0, sizeof out->name);
    if (!get_name || get_name(out->name, (int)sizeof out->name - 1, device) != CUDA_SUCCESS)
        strcpy(out->name, "?");
    CUuuid uuid;
    memset(&uuid, 0, sizeof uuid);
    if (get_uuid)
        get_uuid(&uuid, device);
    memcpy(out->uuid, uuid.bytes, 16);
    return 0;
}
