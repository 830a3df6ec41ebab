/* dl_hooks.c: the loader's entry points the shim wraps, dlsym, dlopen and
 * dlclose. They sit above everything else in the shim: dlsym asks
 * resolve.c what a lookup found and hands the program a wrapper (hooks.c);
 * dlopen has resolve.c drop the runtime answers kept as everyone's before
 * anything loads; dlclose has the writer name what it captured in the
 * library before it goes, and drops what was found and unwound there once
 * it went (resolve.c, stacks.c).
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
 *    it); libcuda's own lookups are never intercepted (resolve.c,
 *    vt_resolve_dlsym).
 *
 * dlclose is wrapped because frames are named after the fact, by address:
 * before a library goes, the writer names what was captured in it (waiting
 * a bounded time), and after one went, later captures get a new load epoch
 * so a library mapped at its addresses never shares its frames.
 *
 * dlopen is wrapped for one thing only, done before the loader starts: a
 * runtime it brings may be called by the constructors it runs, before any
 * dlsym. glibc's dlopen searches the CALLER's RUNPATH and namespace, so the
 * wrapper is a trampoline like dlsym's: it calls vt_dlopen_note and tail
 * jumps into glibc's dlopen with the caller's return address in place
 * (x86-64; elsewhere dlopen is not wrapped).
 */
#include <dlfcn.h>

#include "shim.h"

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
    unsigned long long before = vt_cfi_module_subs();
    int rc = vt_real_dlclose(handle);
    unsigned long long after = vt_cfi_module_subs();
    if (after != before) {
        /* Even with tracing off, the wrappers still call what they found. */
        vt_real_forget();
        if (state != VT_ST_OFF)
            vt_stacks_unloaded(after);
    }
    return rc;
}

/* ---- dlopen ---- */

/* Called by the trampoline before every dlopen. A NULL file (the program
 * itself: ctypes.CDLL(None)) and RTLD_NOLOAD (the shim's own lookups) load
 * nothing. A load with RTLD_DEEPBIND is noted, to be settled at the next
 * dlsym (deepbind.c). Not instrumented: the sanitizers' dlopen interceptors may reach
 * it before their shadow memory exists. */
__attribute__((no_sanitize("address", "undefined", "thread"))) void vt_dlopen_note(const char *file, int mode)
{
    vt_real_dlopen_resolve();
    if (file && !(mode & RTLD_NOLOAD)) {
        vt_resolve_loading();
        if (mode & RTLD_DEEPBIND)
            vt_deepbind_note();
    }
}

#if defined(__x86_64__)
/* dlopen entry: vt_dlopen_note, then a tail jump into glibc's dlopen with
 * the arguments and the caller's return address as they came; NULL (load
 * failed) when there is no glibc dlopen to jump to. */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl vt_dlopen_new\n"
        ".globl vt_dlopen_old\n"
        ".type vt_dlopen_new,@function\n"
        ".type vt_dlopen_old,@function\n"
        "vt_dlopen_new:\n"
        "vt_dlopen_old:\n"
        "    endbr64\n"
        "    subq $24, %rsp\n"
        "    movq %rdi, 0(%rsp)\n"
        "    movq %rsi, 8(%rsp)\n"
        "    call vt_dlopen_note\n"
        "    movq 0(%rsp), %rdi\n"
        "    movq 8(%rsp), %rsi\n"
        "    addq $24, %rsp\n"
        "    movq vt_next_dlopen(%rip), %rax\n"
        "    testq %rax, %rax\n"
        "    jz 1f\n"
        "    jmp *%rax\n"
        "1:  ret\n"
        ".size vt_dlopen_new, .-vt_dlopen_new\n"
        ".size vt_dlopen_old, .-vt_dlopen_old\n"
        ".symver vt_dlopen_new, dlopen@@GLIBC_2.34\n"
        ".symver vt_dlopen_old, dlopen@GLIBC_2.2.5\n");
#endif

/* ---- dlsym ---- */

#if defined(__x86_64__)
extern char vt_dlsym_new[], vt_dlopen_new[];

static void settle_deepbind(void)
{
    static const vt_loader_entries_t ours = { vt_dlsym_new, vt_dlopen_new, (void *)dlclose };
    vt_deepbind_settle(&ours);
}
#else
static void settle_deepbind(void)
{
}
#endif

typedef struct route {
    void *ptr;
    long take; /* 1: return ptr; 0: forward to the real dlsym untouched */
} route_t;

/* Called by the trampoline before every dlsym. Never fails: when in doubt,
 * forward. Not instrumented, as vt_resolve_dlsym is not: ASan and TSan
 * call dlsym(RTLD_NEXT) before their shadow memory exists. */
__attribute__((no_sanitize("address", "undefined", "thread"))) route_t vt_dlsym_route(void *handle, const char *name, void *caller)
{
    route_t route = { NULL, 0 };
    vt_real_dlsym_resolve();
    /* What a load with RTLD_DEEPBIND bound around us, before the program
     * reaches it (deepbind.c). Not inside the shim: its own lookups come
     * while it holds what the settling would wait for. */
    if (__builtin_expect(atomic_load_explicit(&vt_deepbind_pending, memory_order_relaxed) != 0, 0) &&
        !vt_tls.guard && atomic_load_explicit(&vt_state, memory_order_relaxed) != VT_ST_OFF)
        settle_deepbind();
    if (!vt_next_dlsym) {
        /* No glibc dlsym to jump to (not seen with glibc): answer "not
         * found" rather than let the trampoline jump to NULL. */
        route.take = 1;
        return route;
    }
    unsigned api;
    void *real;
    switch (vt_resolve_dlsym(handle, name, caller, &api, &real)) {
    case VT_LOOKUP_MISSING:
        route.take = 1;
        break;
    case VT_LOOKUP_FOUND:
        route.ptr = vt_hand_out(api, real, caller);
        route.take = 1;
        break;
    default:
        break;
    }
    return route;
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

