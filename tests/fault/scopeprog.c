/* scopeprog: the host of the interposition test (76-fault-interpose). It
 * links no CUDA library; every runtime comes in with an extension loaded
 * RTLD_LOCAL from DIR, as Python and node load their extensions.
 *
 *   runtimes DIR   libscope_12.so and libscope_13.so, each linked to its own
 *                  runtime: scope_which from each, then scope_alloc
 *   vendored DIR   libscope_v.so, linked to libcudart-1a2b3c4d.so.11.0:
 *                  scope_alloc and scope_lookup
 *   reload DIR     libscope_13.so: scope_alloc, dlclose (its runtime goes
 *                  with it), the runtime's old pages held PROT_NONE so it
 *                  cannot come back there, dlopen again, scope_alloc; prints
 *                  whether the runtime moved
 *   late DIR       libscope_13.so RTLD_GLOBAL (its runtime joins the global
 *                  scope) and scope_which from it; then libscope_12.so
 *                  RTLD_LOCAL and scope_which from it: its references ask
 *                  for version libcudart.so.12, so they bind to its own
 *                  runtime, past the global .so.13
 *   ctor DIR       as late, with a second call from libscope_13.so, then
 *                  libscope_12.so's first call made by its constructor,
 *                  inside dlopen, before any dlsym
 *   ggml DIR       libaddon_a.so and libaddon_b.so, each with its own ggml
 *                  (b's buffers have another layout): addon_mark from a,
 *                  then from b; no CUDA at all
 *   deepbind DIR LIB [local]
 *                  LIB (libdeep_lazy.so, libdeep_now.so) loaded with
 *                  RTLD_DEEPBIND (local: without it), then deep_alloc;
 *                  the program exports a deep_whoami of its own, which the
 *                  library's call reaches only without RTLD_DEEPBIND
 *
 * Everything it prints is the same with and without the shim.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef void (*tag_fn)(const char *);
typedef int (*alloc_fn)(const char *);

static void die(const char *what)
{
    fprintf(stderr, "scopeprog: %s\n", what);
    exit(3);
}

static void *ext(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        die(dlerror());
    return h;
}

static void *sym(void *h, const char *name)
{
    void *fn = dlsym(h, name);
    if (!fn)
        die(name);
    return fn;
}

/* The runtime's mapped segments. */
typedef struct segs {
    int n;
    uintptr_t start[8], len[8];
} segs_t;

static int find_runtime(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    segs_t *s = data;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "libcudart.so.13"))
        return 0;
    for (int i = 0; i < info->dlpi_phnum && s->n < 8; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)4095;
        uintptr_t e = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + 4095) & ~(uintptr_t)4095;
        s->start[s->n] = a;
        s->len[s->n++] = e - a;
    }
    return 1;
}

static int mode_reload(const char *dir)
{
    void *h = ext(dir, "libscope_13.so");
    ((alloc_fn)sym(h, "scope_alloc"))("first load");
    segs_t old = { 0 };
    dl_iterate_phdr(find_runtime, &old);
    if (!old.n)
        die("runtime not loaded");
    if (dlclose(h))
        die("dlclose");
    segs_t gone = { 0 };
    dl_iterate_phdr(find_runtime, &gone);
    printf("runtime unloaded: %s\n", gone.n ? "no" : "yes");
    for (int i = 0; i < old.n; i++)
        if (mmap((void *)old.start[i], old.len[i], PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                 -1, 0) == MAP_FAILED)
            die("mmap over the old runtime");
    h = ext(dir, "libscope_13.so");
    segs_t now = { 0 };
    dl_iterate_phdr(find_runtime, &now);
    printf("runtime moved: %s\n", now.n && now.start[0] != old.start[0] ? "yes" : "no");
    ((alloc_fn)sym(h, "scope_alloc"))("second load");
    return 0;
}

__attribute__((visibility("default"))) const char *deep_whoami(void)
{
    return "the program's";
}

int main(int argc, char **argv)
{
    if (argc < 3)
        die("usage: scopeprog runtimes|vendored|reload|late|ctor|ggml DIR | deepbind DIR LIB [local]");
    const char *mode = argv[1], *dir = argv[2];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(mode, "runtimes") == 0) {
        void *h12 = ext(dir, "libscope_12.so"), *h13 = ext(dir, "libscope_13.so");
        ((tag_fn)sym(h12, "scope_which"))("ext linked to .so.12");
        ((tag_fn)sym(h13, "scope_which"))("ext linked to .so.13");
        ((alloc_fn)sym(h12, "scope_alloc"))("ext linked to .so.12");
        ((alloc_fn)sym(h13, "scope_alloc"))("ext linked to .so.13");
        return 0;
    }
    if (strcmp(mode, "vendored") == 0) {
        void *h = ext(dir, "libscope_v.so");
        ((alloc_fn)sym(h, "scope_alloc"))("vendored");
        ((tag_fn)sym(h, "scope_lookup"))("vendored");
        return 0;
    }
    if (strcmp(mode, "late") == 0 || strcmp(mode, "ctor") == 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s/libscope_13.so", dir);
        void *h13 = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        if (!h13)
            die(dlerror());
        ((tag_fn)sym(h13, "scope_which"))("ext linked to .so.13 (global)");
        if (strcmp(mode, "ctor") == 0) {
            /* Again, now that its runtime has found its driver: the
             * shim's answer for .so.13's callers is settled as everyone's. */
            ((alloc_fn)sym(h13, "scope_alloc"))("ext linked to .so.13 (global), again");
            setenv("SCOPE_CTOR_TAG", "ext linked to .so.12, its constructor", 1);
        }
        void *h12 = ext(dir, "libscope_12.so");
        unsetenv("SCOPE_CTOR_TAG");
        ((tag_fn)sym(h12, "scope_which"))("ext linked to .so.12, loaded later");
        ((alloc_fn)sym(h12, "scope_alloc"))("ext linked to .so.12, loaded later");
        return 0;
    }
    if (strcmp(mode, "ggml") == 0) {
        typedef void (*mark_fn)(const char *, size_t);
        void *ha = ext(dir, "libaddon_a.so"), *hb = ext(dir, "libaddon_b.so");
        ((mark_fn)sym(ha, "addon_mark"))("addon a", 4096);
        ((mark_fn)sym(hb, "addon_mark"))("addon b", 8192);
        ((mark_fn)sym(ha, "addon_mark"))("addon a again", 12288);
        return 0;
    }
    if (strcmp(mode, "reload") == 0)
        return mode_reload(dir);
    if (strcmp(mode, "deepbind") == 0 && argc > 3) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, argv[3]);
        void *h = dlopen(path, RTLD_NOW | (argc > 4 && !strcmp(argv[4], "local") ? 0 : RTLD_DEEPBIND));
        if (!h)
            die(dlerror());
        return ((int (*)(void))sym(h, "deep_alloc"))();
    }
    die("unknown mode");
    return 3;
}
