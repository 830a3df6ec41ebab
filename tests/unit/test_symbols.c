/* test_symbols.c: unit test of preload/symbols.c and preload/elf_symtab.c,
 * linked directly (no preload). Expects libsymtest.so next to the binary;
 * VT_EXPECT_BUILD_ID (hex, from readelf -n) is compared when set.
 * Checks the contract in symbols.h: names from .symtab (static, hidden,
 * mangled), the module map and its refresh, ids, re-reporting, and that
 * corrupt ELF input never crashes the parser (run it under ASan to make the
 * last part meaningful).
 */
#include "elf_symtab.h"
#include "symbols.h"
#include "tap.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef int (*st_fn_t)(int);

/* ---- sink ------------------------------------------------------------ */

#define MAX_SEEN 4096
static struct seen {
    uint32_t id;
    uint64_t base, size;
    char path[PATH_MAX];
    char build_id[2 * 64 + 1];
} seen[MAX_SEEN];
static int nseen;

static void sink(void *ctx, const vt_module_info_t *m)
{
    (*(int *)ctx)++;
    if (nseen == MAX_SEEN)
        return;
    struct seen *s = &seen[nseen++];
    s->id = m->id;
    s->base = m->base;
    s->size = m->size;
    snprintf(s->path, sizeof s->path, "%s", m->path ? m->path : "(null)");
    s->build_id[0] = '\0';
    for (size_t i = 0; m->build_id && i < m->build_id_len && i < 64; i++)
        sprintf(s->build_id + 2 * i, "%02x", m->build_id[i]);
}

/* The latest report of module id, or NULL. */
static const struct seen *seen_id(uint32_t id)
{
    for (int i = nseen - 1; i >= 0; i--)
        if (seen[i].id == id)
            return &seen[i];
    return NULL;
}

static int reports;

static int lookup(const void *ip, uint32_t *id, const char **fn, uint64_t *off)
{
    return vt_symbols_lookup((uintptr_t)ip, sink, &reports, id, fn, off);
}

/* ---- main-program functions ------------------------------------------ */

static volatile int main_sink;

static __attribute__((noinline)) int main_static_fn(int x)
{
    main_sink = x;
    return main_sink * 2 + 1;
}

static char *read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    *len = got;
    return buf;
}

static int write_file(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, buf, len);
    close(fd);
    return w == (ssize_t)len ? 0 : -1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Walks every name of a parsed table: under ASan a name that runs off
 * the image is reported here. */
static size_t touch_names(const vt_elf_symtab_t *t)
{
    size_t total = 0;
    for (size_t i = 0; i < t->count; i++)
        total += strlen(t->strtab + t->funcs[i].name);
    return total;
}

static int table_has(const vt_elf_symtab_t *t, const char *name)
{
    for (size_t i = 0; i < t->count; i++)
        if (strcmp(t->strtab + t->funcs[i].name, name) == 0)
            return 1;
    return 0;
}

/* ---- module map tests ------------------------------------------------- */

static char libpath[PATH_MAX], tmpdir[PATH_MAX];

static void test_main_program(uint32_t *main_id)
{
    uint32_t id;
    const char *fn;
    uint64_t off;
    st_fn_t f = main_static_fn;
    f(1);
    int r = lookup((const char *)f + 1, &id, &fn, &off);
    TAP_OK(r == 1, "main program function is in a known module");
    TAP_EQ_STR(fn, "main_static_fn", "static function of the executable resolves from .symtab");
    TAP_EQ_U64(off, 1, "sym_offset is ip - symbol start");
    TAP_OK(id >= 1, "module id is dense from 1 (got %u)", id);
    *main_id = id;

    char *exe = realpath("/proc/self/exe", NULL);
    const struct seen *s = seen_id(id);
    TAP_OK(s != NULL, "main module reported to the sink before lookup returns");
    TAP_EQ_STR(s ? s->path : NULL, exe, "main module path is the real path of /proc/self/exe");
    free(exe);

    int abs_paths = 1;
    for (int i = 0; i < nseen; i++)
        abs_paths &= seen[i].path[0] == '/' || strcmp(seen[i].path, "[vdso]") == 0;
    TAP_OK(abs_paths && nseen > 0, "every reported path is absolute or [vdso] (%d modules)", nseen);

    int ok_ids = 1;
    for (int i = 0; i < nseen; i++)
        ok_ids &= seen[i].id == (uint32_t)i + 1;
    TAP_OK(ok_ids, "ids of the first report are exactly 1..n");

    int heap = 0;
    char *h = malloc(64);
    r = lookup(h, &id, &fn, &off);
    TAP_OK(r == 0 && id == 0 && fn && fn[0] == '\0' && off == 0,
           "heap address is outside every module: 0, id 0, \"\"");
    free(h);
    r = lookup((void *)16, &id, &fn, &off);
    heap = r == 0 && id == 0;
    TAP_OK(heap, "address 16 is outside every module");
}

static void test_dlopened_lib(uint32_t main_id, uint32_t *lib_id)
{
    int before = reports;
    void *h = dlopen(libpath, RTLD_NOW | RTLD_LOCAL);
    TAP_OK(h != NULL, "dlopen %s after the first lookup", libpath);
    if (!h) {
        printf("# %s\n", dlerror());
        return;
    }
    void (*functions)(st_fn_t *) = (void (*)(st_fn_t *))dlsym(h, "st_functions");
    st_fn_t fns[4] = {0};
    if (functions)
        functions(fns);
    for (int i = 0; i < 4; i++)
        if (fns[i])
            fns[i](i);

    static const char *want[4] = {"st_exported_fn", "st_hidden_fn", "st_static_fn",
                                  "_ZN11llama_model12load_tensorsEv"};
    static const char *what[4] = {"exported", "hidden", "static", "mangled C++ (asm label)"};
    uint32_t id = 0;
    for (int i = 0; i < 4; i++) {
        const char *fn = NULL;
        uint64_t off = 99;
        uint32_t mid = 0;
        int r = lookup((const char *)fns[i] + 2, &mid, &fn, &off);
        TAP_OK(r == 1 && mid != 0, "%s function of the dlopen'ed lib is in a module", what[i]);
        TAP_EQ_STR(fn, want[i], "%s function resolves by exact name", what[i]);
        TAP_EQ_U64(off, 2, "%s function: sym_offset 2", what[i]);
        if (i == 0)
            id = mid;
        else
            TAP_EQ_U64(mid, id, "%s function is in the same module", what[i]);
    }
    *lib_id = id;
    TAP_OK(reports > before, "the refresh reported the new module to the sink");
    const struct seen *s = seen_id(id);
    TAP_EQ_STR(s ? s->path : NULL, libpath, "lib module path is the dlopen'ed path");
    TAP_OK(s && s->size > 0, "lib module has an extent");
    TAP_OK(s && (uintptr_t)fns[0] >= s->base && (uintptr_t)fns[0] < s->base + s->size,
           "function lies within [base, base + size)");

    size_t idlen = s ? strlen(s->build_id) / 2 : 0;
    TAP_EQ_U64(idlen, 20, "build-id is 20 bytes (sha1, --build-id)");
    TAP_OK(s && strspn(s->build_id, "0") != strlen(s->build_id), "build-id is not all zero");
    const char *expect = getenv("VT_EXPECT_BUILD_ID");
    if (expect && *expect)
        TAP_EQ_STR(s ? s->build_id : NULL, expect, "build-id matches readelf -n");

    uint32_t mid;
    const char *fn;
    uint64_t off;
    lookup((const char *)(st_fn_t)main_static_fn + 1, &mid, &fn, &off);
    TAP_EQ_U64(mid, main_id, "main program keeps its id across refreshes");

    /* reset_reported: every live module again, same ids. */
    int n0 = nseen;
    vt_symbols_reset_reported();
    lookup((const char *)fns[1] + 1, &mid, &fn, &off);
    int again_lib = 0, again_main = 0;
    for (int i = n0; i < nseen; i++) {
        again_lib |= seen[i].id == id && strcmp(seen[i].path, libpath) == 0;
        again_main |= seen[i].id == main_id;
    }
    TAP_OK(again_lib && again_main, "reset_reported re-reports modules with the same ids (%d)",
           nseen - n0);
    int n1 = nseen;
    lookup((const char *)fns[1] + 1, &mid, &fn, &off);
    TAP_EQ_U64(nseen, n1, "nothing is reported twice without a reset");

    /* Unload, then load a copy: likely at the same address, a new module. */
    dlclose(h);
    char copy[PATH_MAX + 32];
    snprintf(copy, sizeof copy, "%s/libsymtest_copy.so", tmpdir);
    size_t len;
    char *img = read_file(libpath, &len);
    TAP_OK(img && write_file(copy, img, len) == 0, "copied the lib to %s", copy);
    void *h2 = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
    TAP_OK(h2 != NULL, "dlopen the copy");
    if (h2) {
        void (*functions2)(st_fn_t *) = (void (*)(st_fn_t *))dlsym(h2, "st_functions");
        st_fn_t fns2[4] = {0};
        functions2(fns2);
        int r = lookup((const char *)fns2[2] + 1, &mid, &fn, &off);
        printf("# old base %#llx, copy at %p\n", s ? (unsigned long long)s->base : 0ull,
               (void *)fns2[2]);
        TAP_OK(r == 1 && mid != id && mid > id, "a module loaded after an unload is a new id (%u)",
               mid);
        TAP_EQ_STR(fn, "st_static_fn", "the copy resolves names");
        const struct seen *s2 = seen_id(mid);
        TAP_EQ_STR(s2 ? s2->path : NULL, copy, "the copy is reported with its own path");
    }

    /* A library whose file is gone by the time it is first looked up. */
    char gone[PATH_MAX + 32];
    snprintf(gone, sizeof gone, "%s/libsymtest_gone.so", tmpdir);
    void *h3 = img && write_file(gone, img, len) == 0 ? dlopen(gone, RTLD_NOW | RTLD_LOCAL) : NULL;
    TAP_OK(h3 != NULL, "dlopen a second copy");
    unlink(gone);
    if (h3) {
        void (*functions3)(st_fn_t *) = (void (*)(st_fn_t *))dlsym(h3, "st_functions");
        int r = lookup((const char *)functions3 + 1, &mid, &fn, &off);
        TAP_OK(r == 1 && mid != 0, "a vanished file's module is still found");
        TAP_EQ_STR(fn, "", "a vanished file resolves no names, without crashing");
    }
    free(img);
    unlink(copy);
    /* h2/h3 stay loaded: timing and vdso checks below do not need them
     * gone, and ASan's leak report stays quiet. */
}

static void test_vdso(void)
{
    uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
    if (!vdso) {
        TAP_OK(1, "no vdso # SKIP");
        return;
    }
    uint32_t id;
    const char *fn;
    uint64_t off;
    int r = lookup((void *)(vdso + 8), &id, &fn, &off);
    const struct seen *s = seen_id(id);
    TAP_OK(r == 1, "vdso is a module");
    TAP_EQ_STR(s ? s->path : NULL, "[vdso]", "vdso is reported as [vdso]");
    int named = 0;
    for (uint64_t a = s ? s->base : 0; s && a < s->base + s->size; a += 4) {
        lookup((void *)a, &id, &fn, &off);
        named |= strstr(fn, "clock_gettime") != NULL;
    }
    TAP_OK(named, "vdso functions resolve from its in-memory image");
}

static void test_timing(uint32_t lib_id)
{
    (void)lib_id;
    void *h = dlopen(libpath, RTLD_NOW | RTLD_LOCAL);
    void (*functions)(st_fn_t *) = h ? (void (*)(st_fn_t *))dlsym(h, "st_functions") : NULL;
    st_fn_t fns[4] = {0};
    if (!functions) {
        TAP_OK(0, "reload lib for timing");
        return;
    }
    functions(fns);
    uint32_t id;
    const char *fn;
    uint64_t off;
    const char *a = (const char *)fns[1] + 1;
    const char *b = (const char *)(st_fn_t)main_static_fn + 1;
    lookup(a, &id, &fn, &off);
    lookup(b, &id, &fn, &off);
    enum { N = 1000000 };
    uint64_t t0 = now_ns();
    for (int i = 0; i < N; i++)
        lookup(a, &id, &fn, &off);
    uint64_t t1 = now_ns();
    for (int i = 0; i < N; i++)
        lookup((i & 1) ? a : b, &id, &fn, &off);
    uint64_t t2 = now_ns();
    printf("# lookup: %.1f ns same module, %.1f ns alternating modules\n",
           (double)(t1 - t0) / N, (double)(t2 - t1) / N);
    TAP_EQ_STR(fn, "st_hidden_fn", "timed lookups still resolve");
    dlclose(h);
}

/* ---- ELF parser on corrupt input -------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int find_section(const char *img, size_t len, uint32_t type, Elf64_Shdr *out,
                        size_t *at)
{
    Elf64_Ehdr eh;
    memcpy(&eh, img, sizeof eh);
    for (size_t i = 0; i < eh.e_shnum && eh.e_shoff + (i + 1) * sizeof *out <= len; i++) {
        memcpy(out, img + eh.e_shoff + i * sizeof *out, sizeof *out);
        if (out->sh_type == type) {
            *at = eh.e_shoff + i * sizeof *out;
            return 1;
        }
    }
    return 0;
}

/* Parses a private, exactly-sized copy so ASan sees any overrun. */
static int parse_copy(const char *img, size_t len, vt_elf_symtab_t *t)
{
    char *c = malloc(len ? len : 1);
    memcpy(c, img, len);
    int r = vt_elf_parse(c, len, t);
    touch_names(t);
    vt_elf_find(t, 0x1234);
    vt_elf_symtab_free(t);
    free(c);
    return r;
}

static void test_parser(void)
{
    size_t len;
    char *img = read_file(libpath, &len);
    TAP_OK(img && len > sizeof(Elf64_Ehdr), "read the lib image (%zu bytes)", len);
    if (!img)
        return;
    vt_elf_symtab_t t;
    TAP_OK(vt_elf_parse(img, len, &t) == 0 && t.source == VT_ELF_SYMTAB,
           "the lib parses from .symtab");
    TAP_OK(table_has(&t, "st_static_fn") && table_has(&t, "_ZN11llama_model12load_tensorsEv"),
           ".symtab has the static and mangled names");
    int sorted = 1;
    for (size_t i = 1; i < t.count; i++)
        sorted &= t.funcs[i - 1].addr < t.funcs[i].addr;
    TAP_OK(sorted && t.count > 0, "table is sorted, one entry per address (%zu)", t.count);
    vt_elf_symtab_free(&t);

    /* Hide .symtab: the parser falls back to .dynsym (exported only). */
    Elf64_Shdr sh;
    size_t at;
    char *c = malloc(len);
    memcpy(c, img, len);
    if (find_section(c, len, SHT_SYMTAB, &sh, &at)) {
        sh.sh_type = SHT_PROGBITS;
        memcpy(c + at, &sh, sizeof sh);
    }
    TAP_OK(vt_elf_parse(c, len, &t) == 0 && t.source == VT_ELF_DYNSYM,
           "without .symtab, .dynsym is used");
    TAP_OK(table_has(&t, "st_exported_fn") && !table_has(&t, "st_static_fn"),
           ".dynsym has the exported function only");
    vt_elf_symtab_free(&t);
    free(c);

    /* Trivial non-ELF inputs. */
    TAP_OK(vt_elf_parse(NULL, 0, &t) == -1 && t.count == 0, "NULL image is refused");
    TAP_OK(vt_elf_parse(img, 0, &t) == -1, "empty image is refused");
    TAP_OK(parse_copy(img, 63, &t) == -1, "image shorter than the ELF header is refused");
    char garbage[4096];
    for (size_t i = 0; i < sizeof garbage; i++)
        garbage[i] = (char)next_rand();
    TAP_OK(parse_copy(garbage, sizeof garbage, &t) == -1, "random bytes are refused");

    /* Targeted header corruptions. */
    struct {
        const char *what;
        size_t off, size;
        uint64_t value;
    } hdr[] = {
        {"32-bit class", EI_CLASS, 1, ELFCLASS32},
        {"big-endian data", EI_DATA, 1, ELFDATA2MSB},
        {"bad magic", 1, 1, 'X'},
        {"e_shoff past the end", offsetof(Elf64_Ehdr, e_shoff), 8, (uint64_t)len + 1},
        {"e_shoff near UINT64_MAX", offsetof(Elf64_Ehdr, e_shoff), 8, UINT64_MAX - 63},
        {"e_shnum too large", offsetof(Elf64_Ehdr, e_shnum), 2, 0xffff},
        {"e_shnum 0 (extended) with garbage sh0", offsetof(Elf64_Ehdr, e_shnum), 2, 0},
        {"e_shentsize wrong", offsetof(Elf64_Ehdr, e_shentsize), 2, 40},
    };
    for (size_t k = 0; k < sizeof hdr / sizeof hdr[0]; k++) {
        c = malloc(len);
        memcpy(c, img, len);
        memcpy(c + hdr[k].off, &hdr[k].value, hdr[k].size);
        int r = parse_copy(c, len, &t);
        TAP_OK(r == -1 || r == 0, "corrupt header (%s): no crash, r=%d", hdr[k].what, r);
        free(c);
    }

    /* Targeted .symtab / strtab corruptions. */
    struct {
        const char *what;
        size_t field, size;
        uint64_t value;
    } sec[] = {
        {"symtab sh_offset huge", offsetof(Elf64_Shdr, sh_offset), 8, UINT64_MAX - 8},
        {"symtab sh_size huge", offsetof(Elf64_Shdr, sh_size), 8, UINT64_MAX / 2},
        {"symtab sh_size past the end", offsetof(Elf64_Shdr, sh_size), 8, (uint64_t)len},
        {"symtab sh_link out of range", offsetof(Elf64_Shdr, sh_link), 4, 0xfffff},
        {"symtab sh_link to itself", offsetof(Elf64_Shdr, sh_link), 4, 0},
        {"symtab sh_entsize wrong", offsetof(Elf64_Shdr, sh_entsize), 8, 16},
    };
    for (size_t k = 0; k < sizeof sec / sizeof sec[0]; k++) {
        c = malloc(len);
        memcpy(c, img, len);
        if (find_section(c, len, SHT_SYMTAB, &sh, &at))
            memcpy(c + at + sec[k].field, &sec[k].value, sec[k].size);
        vt_elf_symtab_t t2;
        int r = vt_elf_parse(c, len, &t2);
        touch_names(&t2);
        TAP_OK(r == 0 && t2.source == VT_ELF_DYNSYM,
               "corrupt %s: falls back to .dynsym (source %d)", sec[k].what, t2.source);
        vt_elf_symtab_free(&t2);
        free(c);
    }

    /* String table without a terminating NUL and names pointing past it. */
    c = malloc(len);
    memcpy(c, img, len);
    Elf64_Shdr strsh;
    if (find_section(c, len, SHT_SYMTAB, &sh, &at)) {
        size_t str_at = ((Elf64_Ehdr *)c)->e_shoff + sh.sh_link * sizeof strsh;
        memcpy(&strsh, c + str_at, sizeof strsh);
        memset(c + strsh.sh_offset, 'A', strsh.sh_size);
        for (size_t i = 1; i < sh.sh_size / sizeof(Elf64_Sym); i++) {
            Elf64_Sym s;
            memcpy(&s, c + sh.sh_offset + i * sizeof s, sizeof s);
            if (i % 2)
                s.st_name = (uint32_t)strsh.sh_size + (uint32_t)i;
            memcpy(c + sh.sh_offset + i * sizeof s, &s, sizeof s);
        }
    }
    TAP_OK(vt_elf_parse(c, len, &t) == 0 && t.count == 0,
           "unterminated strtab and out-of-range names yield no symbols");
    vt_elf_symtab_free(&t);
    free(c);

    /* Every truncation of the file. */
    int bad = 0;
    for (size_t n = 0; n <= len; n++) {
        int r = parse_copy(img, n, &t);
        bad += r != 0 && r != -1;
    }
    TAP_OK(bad == 0, "every truncated prefix (0..%zu bytes) parses or is refused", len);

    /* Random byte mutations, biased towards the headers. */
    Elf64_Ehdr eh;
    memcpy(&eh, img, sizeof eh);
    int parsed = 0;
    enum { ROUNDS = 4000 };
    for (int k = 0; k < ROUNDS; k++) {
        c = malloc(len);
        memcpy(c, img, len);
        int edits = 1 + (int)(next_rand() % 8);
        for (int e = 0; e < edits; e++) {
            size_t pos;
            switch (next_rand() % 3) {
            case 0: pos = next_rand() % sizeof eh; break;
            case 1: pos = eh.e_shoff + next_rand() % ((size_t)eh.e_shnum * sizeof(Elf64_Shdr)); break;
            default: pos = next_rand() % len; break;
            }
            if (pos < len)
                c[pos] = (char)next_rand();
        }
        parsed += parse_copy(c, len, &t) == 0;
        free(c);
    }
    TAP_OK(1, "%d random mutations without a crash (%d still parsed)", ROUNDS, parsed);
    free(img);
}

/* ---- aliases and order, on a built image ------------------------------- */

/* An ELF64 image of three sections (null, .symtab, .strtab) holding the
 * given function symbols; names are laid out in the order given. */
typedef struct { const char *name; uint64_t addr, size; int bind; } built_sym_t;

static char *build_image(const built_sym_t *syms, size_t n, size_t *len)
{
    size_t strsize = 1;
    for (size_t i = 0; i < n; i++)
        strsize += strlen(syms[i].name) + 1;
    size_t symoff = sizeof(Elf64_Ehdr), stroff = symoff + (n + 1) * sizeof(Elf64_Sym);
    size_t shoff = (stroff + strsize + 7) & ~(size_t)7;
    *len = shoff + 3 * sizeof(Elf64_Shdr);
    char *img = calloc(1, *len);
    Elf64_Ehdr eh = {.e_type = ET_DYN, .e_machine = EM_X86_64, .e_version = EV_CURRENT,
                     .e_shoff = shoff, .e_ehsize = sizeof eh, .e_shentsize = sizeof(Elf64_Shdr),
                     .e_shnum = 3};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    memcpy(img, &eh, sizeof eh);
    size_t name = 1;
    for (size_t i = 0; i < n; i++) {
        Elf64_Sym sym = {.st_name = (uint32_t)name,
                         .st_info = ELF64_ST_INFO(syms[i].bind, STT_FUNC),
                         .st_shndx = 1, .st_value = syms[i].addr, .st_size = syms[i].size};
        memcpy(img + symoff + (i + 1) * sizeof sym, &sym, sizeof sym);
        strcpy(img + stroff + name, syms[i].name);
        name += strlen(syms[i].name) + 1;
    }
    Elf64_Shdr sh[3] = {{0},
                        {.sh_type = SHT_SYMTAB, .sh_offset = symoff, .sh_link = 2,
                         .sh_size = (n + 1) * sizeof(Elf64_Sym), .sh_entsize = sizeof(Elf64_Sym)},
                        {.sh_type = SHT_STRTAB, .sh_offset = stroff, .sh_size = strsize}};
    memcpy(img + shoff, sh, sizeof sh);
    return img;
}

static const char *name_at(const vt_elf_symtab_t *t, uint64_t addr)
{
    const vt_elf_func_t *f = vt_elf_find(t, addr);
    return f ? t->strtab + f->name : "-";
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_aliases_and_order(void)
{
    /* Each address's winner: sized, then global over weak over local,
     * then a name without "__", then the name laid out first. */
    static const built_sym_t aliases[] = {
        {"__libc_malloc", 0x2000, 0x40, STB_GLOBAL}, {"malloc", 0x2000, 0x40, STB_GLOBAL},
        {"local_sized", 0x3000, 0x10, STB_LOCAL}, {"__weak_sized", 0x3000, 0x10, STB_WEAK},
        {"global_unsized", 0x4000, 0, STB_GLOBAL}, {"__local_sized", 0x4000, 0x10, STB_LOCAL},
        {"first", 0x5000, 8, STB_WEAK}, {"second", 0x5000, 8, STB_WEAK},
        {"third", 0x5000, 8, STB_LOCAL},
        {"high", 0x7fff000000001000ull, 0x10, STB_GLOBAL}, {"low", 0x10, 0x10, STB_GLOBAL},
    };
    size_t n = sizeof aliases / sizeof aliases[0], len;
    char *img = build_image(aliases, n, &len);
    vt_elf_symtab_t t;
    TAP_OK(vt_elf_parse(img, len, &t) == 0 && t.source == VT_ELF_SYMTAB, "built image parses");
    TAP_EQ_U64(t.count, 6, "one entry per address");
    TAP_EQ_STR(name_at(&t, 0x2000), "malloc", "equal rank otherwise: the name without __");
    TAP_EQ_STR(name_at(&t, 0x3000), "__weak_sized", "weak over local, before the name");
    TAP_EQ_STR(name_at(&t, 0x4000), "__local_sized", "sized over unsized, before binding");
    TAP_EQ_STR(name_at(&t, 0x5000), "first", "a tie: the name laid out first");
    TAP_EQ_STR(name_at(&t, 0x7fff000000001008ull), "high", "an address in the top byte");
    TAP_EQ_STR(name_at(&t, 0x18), "low", "and one in the lowest");
    vt_elf_symtab_free(&t);
    free(img);

    /* Random addresses over all 64 bits: the table comes out sorted, each
     * address once, whatever bytes the addresses share. */
    enum { NRAND = 5000 };
    static built_sym_t rnd[NRAND];
    static uint64_t want[NRAND];
    static char names[NRAND][8];
    for (size_t i = 0; i < NRAND; i++) {
        unsigned shift = (unsigned)(next_rand() % 64);
        want[i] = (next_rand() >> shift) | 1;
        if (i % 7 == 0 && i)
            want[i] = want[i - 1]; /* some aliases */
        snprintf(names[i], sizeof names[i], "f%zu", i);
        rnd[i] = (built_sym_t){names[i], want[i], 0, STB_GLOBAL};
    }
    img = build_image(rnd, NRAND, &len);
    qsort(want, NRAND, sizeof *want, cmp_u64);
    size_t distinct = 0;
    for (size_t i = 0; i < NRAND; i++)
        if (i == 0 || want[i] != want[i - 1])
            want[distinct++] = want[i];
    int same = vt_elf_parse(img, len, &t) == 0 && t.count == distinct;
    for (size_t i = 0; same && i < distinct; i++)
        same = t.funcs[i].addr == want[i];
    TAP_OK(same, "%d random addresses come out sorted, %zu distinct", NRAND, distinct);
    vt_elf_symtab_free(&t);
    free(img);
}

static void test_find(void)
{
    static const char str[] = "\0a\0b\0c";
    vt_elf_func_t f[] = {{0x100, 0x10, 1}, {0x200, 0, 3}, {0x300, 8, 5}};
    vt_elf_symtab_t t = {f, 3, str, VT_ELF_SYMTAB};
    const vt_elf_func_t *r;
#define FIND(addr) ((r = vt_elf_find(&t, addr)) ? t.strtab + r->name : "-")
    TAP_EQ_STR(FIND(0xff), "-", "before the first symbol: none");
    TAP_EQ_STR(FIND(0x100), "a", "first byte of a sized symbol");
    TAP_EQ_STR(FIND(0x10f), "a", "last byte of a sized symbol");
    TAP_EQ_STR(FIND(0x110), "-", "past a sized symbol: none");
    TAP_EQ_STR(FIND(0x2ff), "b", "unsized symbol: nearest preceding");
    TAP_EQ_STR(FIND(0x307), "c", "last symbol, inside");
    TAP_EQ_STR(FIND(0x308), "-", "last symbol, past its end");
    vt_elf_symtab_t empty = {0};
    TAP_OK(vt_elf_find(&empty, 0x100) == NULL, "empty table finds nothing");
#undef FIND
}

static void test_notes(void)
{
    /* Two notes, 4-aligned: an ABI tag, then a 20-byte build-id. */
    uint8_t buf[128] = {0};
    uint32_t abi[4] = {4, 16, NT_GNU_ABI_TAG, 0};
    memcpy(buf, abi, 12);
    memcpy(buf + 12, "GNU", 4);
    uint32_t bid[3] = {4, 20, NT_GNU_BUILD_ID};
    memcpy(buf + 32, bid, 12);
    memcpy(buf + 44, "GNU", 4);
    for (int i = 0; i < 20; i++)
        buf[48 + i] = (uint8_t)(i + 1);
    const uint8_t *id;
    size_t idlen;
    TAP_OK(vt_elf_note_build_id(buf, 68, 4, &id, &idlen) == 1 && idlen == 20 && id == buf + 48,
           "build-id found after another note");
    TAP_OK(vt_elf_note_build_id(buf, 67, 4, &id, &idlen) == 0, "build-id cut short is refused");
    int bad = 0;
    for (size_t n = 0; n < 68; n++)
        bad += vt_elf_note_build_id(buf, n, 4, &id, &idlen) != 0;
    TAP_OK(bad == 0, "every truncation of the notes is refused");
    uint32_t huge[3] = {0xffffffffu, 0xffffffffu, NT_GNU_BUILD_ID};
    memcpy(buf, huge, 12);
    TAP_OK(vt_elf_note_build_id(buf, sizeof buf, 4, &id, &idlen) == 0, "huge namesz is refused");
    huge[0] = 4;
    memcpy(buf, huge, 12);
    TAP_OK(vt_elf_note_build_id(buf, sizeof buf, 4, &id, &idlen) == 0, "huge descsz is refused");
    TAP_OK(vt_elf_note_build_id(NULL, 100, 4, &id, &idlen) == 0, "NULL notes are refused");

    /* 8-aligned notes: descriptor starts at offset 16, next note at 8k. */
    uint8_t b8[64] = {0};
    uint32_t prop[3] = {4, 4, 5 /* NT_GNU_PROPERTY_TYPE_0 */};
    memcpy(b8, prop, 12);
    memcpy(b8 + 12, "GNU", 4);
    uint32_t b8id[3] = {4, 8, NT_GNU_BUILD_ID};
    memcpy(b8 + 24, b8id, 12);
    memcpy(b8 + 36, "GNU", 4);
    memset(b8 + 40, 0xab, 8);
    TAP_OK(vt_elf_note_build_id(b8, 48, 8, &id, &idlen) == 1 && id == b8 + 40 && idlen == 8,
           "8-aligned notes are walked with 8-byte padding");
}

/* ---- one-pass scan against the sorted table --------------------------- */

/* Addresses where a lookup can change its answer: starts, ends, one off
 * either side, plus uniform ones across the table's span and beyond. */
static size_t probe_addrs(const vt_elf_symtab_t *t, uint64_t *a, size_t want)
{
    uint64_t lo = t->funcs[0].addr, hi = t->funcs[t->count - 1].addr;
    uint64_t span = hi - lo + 4096;
    for (size_t i = 0; i < want; i++) {
        const vt_elf_func_t *f = &t->funcs[next_rand() % t->count];
        switch (next_rand() % 6) {
        case 0: a[i] = f->addr; break;
        case 1: a[i] = f->addr - 1; break;
        case 2: a[i] = f->addr + f->size - 1; break;
        case 3: a[i] = f->addr + f->size; break;
        case 4: a[i] = f->addr + next_rand() % (f->size + 64); break;
        default: a[i] = lo - 2048 + next_rand() % span; break;
        }
    }
    qsort(a, want, sizeof *a, cmp_u64);
    size_t n = 0;
    for (size_t i = 0; i < want; i++)
        if (!n || a[i] != a[n - 1])
            a[n++] = a[i];
    return n;
}

/* 1 if vt_elf_scan names every probe as vt_elf_find does; counts ips. */
static int scan_matches(const char *path, size_t want, size_t *ips)
{
    vt_elf_file_t f;
    if (vt_elf_map_file(path, &f) != 0)
        return 1;
    vt_elf_symtab_t t;
    vt_elf_symsec_t sec;
    int ok = 1;
    if (vt_elf_parse(f.map, f.len, &t) == 0 && t.count && vt_elf_symsec(f.map, f.len, &sec) == 0) {
        uint64_t *a = malloc(want * sizeof *a);
        vt_elf_func_t *got = malloc(want * sizeof *got);
        size_t n = probe_addrs(&t, a, want);
        ok = sec.source == t.source && vt_elf_scan(&sec, a, n, got) == 0;
        for (size_t i = 0; ok && i < n; i++) {
            const vt_elf_func_t *w = vt_elf_find(&t, a[i]);
            ok = w ? got[i].name == w->name && got[i].addr == w->addr && got[i].size == w->size
                   : got[i].name == 0;
            if (!ok)
                printf("# %s: 0x%llx scans to %u, finds %u\n", path, (unsigned long long)a[i],
                       got[i].name, w ? w->name : 0);
        }
        *ips += n;
        free(a);
        free(got);
    }
    vt_elf_symtab_free(&t);
    vt_elf_unmap_file(&f);
    return ok;
}

static void test_scan_equals_find(void)
{
    static const char *const dirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/bin"};
    size_t files = 0, ips = 0, bad = 0;
    for (size_t d = 0; d < sizeof dirs / sizeof *dirs; d++) {
        DIR *dir = opendir(dirs[d]);
        struct dirent *e;
        while (dir && (e = readdir(dir)) != NULL) {
            char p[PATH_MAX];
            struct stat st;
            snprintf(p, sizeof p, "%s/%s", dirs[d], e->d_name);
            if (lstat(p, &st) != 0 || !S_ISREG(st.st_mode))
                continue;
            size_t before = ips;
            bad += !scan_matches(p, 64, &ips);
            files += ips > before;
        }
        if (dir)
            closedir(dir);
    }
    TAP_OK(bad == 0 && files > 0, "scan names %zu ips in %zu ELF files as the sorted table does",
           ips, files);
    if (access("/usr/bin/node", R_OK) != 0) {
        printf("ok %d # SKIP no /usr/bin/node\n", ++tap_n);
        return;
    }
    size_t node_ips = 0;
    TAP_OK(scan_matches("/usr/bin/node", 20000, &node_ips) && node_ips > 10000,
           "/usr/bin/node: scan names %zu ips as the sorted table does", node_ips);
}

/* Prefetched lookups (the scan path: this binary's symbols.o scans every
 * .symtab) must name each ip of the main program as its sorted table does,
 * across batches, past the pass limit, and for ips never prefetched. */
static void test_prefetch(void)
{
    vt_elf_file_t f;
    vt_elf_symtab_t t = {0};
    if (vt_elf_map_file("/proc/self/exe", &f) != 0 || vt_elf_parse(f.map, f.len, &t) != 0 ||
        t.count == 0) {
        TAP_OK(0, "main program's table parses");
        return;
    }
    uint64_t static_addr = 0;
    for (size_t i = 0; i < t.count; i++)
        if (strcmp(t.strtab + t.funcs[i].name, "main_static_fn") == 0)
            static_addr = t.funcs[i].addr;
    uintptr_t bias = (uintptr_t)(st_fn_t)main_static_fn - static_addr;

    enum { BATCHES = 5, PER_BATCH = 64 };
    uintptr_t ips[BATCHES * PER_BATCH + 1], batch[PER_BATCH];
    for (size_t i = 0; i < BATCHES * PER_BATCH; i++) {
        const vt_elf_func_t *fn = &t.funcs[next_rand() % t.count];
        ips[i] = bias + fn->addr + next_rand() % (fn->size + 16);
    }
    ips[0] = bias + 16; /* the ELF header: in the module, in no function */
    ips[BATCHES * PER_BATCH] = bias + t.funcs[t.count / 2].addr + 1; /* never prefetched */

    vt_symbols_fini(); /* the main program unread again */
    size_t checked = 0, wrong = 0;
    vt_symbols_stats_t st[BATCHES];
    for (size_t b = 0; b < BATCHES; b++) {
        memcpy(batch, ips + b * PER_BATCH, sizeof batch);
        vt_symbols_prefetch(batch, PER_BATCH);
        for (size_t i = b * PER_BATCH; i < (b + 1) * PER_BATCH + (b == BATCHES - 1); i++) {
            uint32_t id;
            const char *fn;
            uint64_t off;
            const vt_elf_func_t *w = vt_elf_find(&t, ips[i] - bias);
            lookup((const void *)ips[i], &id, &fn, &off);
            int same = w ? strcmp(fn, t.strtab + w->name) == 0 && off == ips[i] - bias - w->addr
                         : fn[0] == '\0' && off == 0;
            if (!same)
                printf("# batch %zu: %#lx named %s+%llu\n", b, (unsigned long)ips[i], fn,
                       (unsigned long long)off);
            wrong += !same;
            checked++;
        }
        vt_symbols_stats(&st[b]);
    }
    /* Passes 1-3 name their batches; the 4th batch sorts the table. */
    TAP_EQ_U64(st[2].scan_passes, 3, "three batches: three passes");
    TAP_EQ_U64(st[2].scan_hits, 3 * PER_BATCH, "every lookup of them answered by a pass");
    TAP_EQ_U64(st[2].tables_sorted, 0, "and no table sorted");
    TAP_EQ_U64(st[BATCHES - 1].scan_passes, 3, "no pass beyond the limit");
    TAP_EQ_U64(st[BATCHES - 1].tables_sorted, 1, "the 4th batch sorts the table, once");
    TAP_EQ_U64(checked, BATCHES * PER_BATCH + 1, "every prefetched ip looked up");
    TAP_EQ_U64(wrong, 0, "prefetched lookups name ips as the sorted table does");
    vt_elf_symtab_free(&t);
    vt_elf_unmap_file(&f);
}

static void test_files(void)
{
    vt_elf_file_t f;
    TAP_OK(vt_elf_map_file("/nonexistent/vt/lib.so", &f) == -1 && !f.map, "missing file: -1");
    TAP_OK(vt_elf_map_file(tmpdir, &f) == -1, "directory: -1");
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/empty", tmpdir);
    write_file(p, "", 0);
    TAP_OK(vt_elf_map_file(p, &f) == -1, "empty file: -1");
    unlink(p);
    snprintf(p, sizeof p, "%s/fifo", tmpdir);
    TAP_OK(mkfifo(p, 0600) == 0 && vt_elf_map_file(p, &f) == -1, "FIFO: -1 without blocking");
    unlink(p);

    snprintf(p, sizeof p, "%s/garbage.so", tmpdir);
    char junk[8192];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)next_rand();
    memcpy(junk, ELFMAG "\2\1\1", 7); /* passes the ident check, nothing else */
    write_file(p, junk, sizeof junk);
    vt_elf_symtab_t t = {0};
    int r = vt_elf_map_file(p, &f);
    TAP_OK(r == 0 && f.len == sizeof junk, "garbage file maps");
    if (r == 0) {
        int pr = vt_elf_parse(f.map, f.len, &t);
        touch_names(&t);
        TAP_OK(pr == -1 || pr == 0, "garbage ELF file parses or is refused (%d, %zu names)", pr,
               t.count);
        vt_elf_symtab_free(&t);
        vt_elf_unmap_file(&f);
    }
    unlink(p);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    char *exe = realpath("/proc/self/exe", NULL);
    snprintf(libpath, sizeof libpath, "%s/libsymtest.so", dirname(exe));
    free(exe);
    snprintf(tmpdir, sizeof tmpdir, "%s/vt-symtest.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        printf("Bail out! mkdtemp failed\n");
        return 1;
    }

    uint32_t main_id = 0, lib_id = 0;
    test_main_program(&main_id);
    test_dlopened_lib(main_id, &lib_id);
    test_vdso();
    test_timing(lib_id);
    test_find();
    test_notes();
    test_parser();
    test_aliases_and_order();
    test_files();
    test_scan_equals_find();
    test_prefetch();

    vt_symbols_fini();
    uint32_t id;
    const char *fn;
    uint64_t off;
    int r = lookup((const char *)(st_fn_t)main_static_fn + 1, &id, &fn, &off);
    TAP_OK(r == 1 && strcmp(fn, "main_static_fn") == 0, "lookup works again after fini");
    vt_symbols_fini();

    rmdir(tmpdir);
    return tap_done();
}
