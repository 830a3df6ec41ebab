/* symbols.c: the shim's module map and ip -> function name lookup.
 * Contract: see symbols.h. In short: writer thread only, one caller at a
 * time, may allocate and read files, never calls CUDA or dl*.
 *
 * Design notes:
 *  - Modules are heap objects that are never freed before fini, even when
 *    unloaded, so ids and every string handed out stay valid. Unloaded
 *    modules just leave the address index.
 *  - The address index is an array of live modules sorted by start address,
 *    behind a one-entry cache: consecutive frames of a stack mostly fall in
 *    one library. It is rebuilt when the loader's add/sub counters move.
 *  - Symbols are read on the first lookup that lands in a module: a server
 *    maps hundreds of libraries but allocates from a handful.
 *  - A module with a huge .symtab (/usr/bin/node: 107k symbols, 6-8 ms to
 *    sort) that is first met by vt_symbols_prefetch is not sorted: each
 *    batch's new ips are named in one pass over the section (about 2 ms)
 *    into a small per-module cache. A lookup that misses the cache, a
 *    batch past VT_SCAN_MAX_PASSES passes or past VT_SCAN_MAX_CACHED names
 *    builds the sorted table after all, so the cost is bounded by about
 *    twice today's, and the names are the same either way.
 *  - All live, unreported modules are reported on the next lookup (not only
 *    the one hit), so a trace carries the whole map early and the analyzer
 *    can place any ip, including ones it symbolizes offline.
 */
#include "symbols.h"
#include "loader_lock.h"
#include "shim.h" /* vt_readable */

#include "elf_symtab.h"

#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#define VT_MAX_BUILD_ID 64
#define VT_VDSO_MAX_IMAGE ((size_t)1 << 20)
#define VT_DEBUG_DIR "/usr/lib/debug/.build-id/"

/* Above this many entries in .symtab, prefetched ips are scanned for
 * rather than sorting the table; small tables sort in well under 1 ms. */
#ifndef VT_SCAN_MIN_SYMBOLS /* the unit test lowers it to scan small tables */
#define VT_SCAN_MIN_SYMBOLS 16384
#endif
/* A scan costs about a third of sorting /usr/bin/node's table. */
#define VT_SCAN_MAX_PASSES 3
#define VT_SCAN_MAX_CACHED 4096

/* SYMS_SCANNED: names come from scan passes over scan_sec into scanned. */
enum { SYMS_UNREAD, SYMS_READ, SYMS_SCANNED };

typedef struct vt_scanned_ip {
    uint64_t rel;                /* ip - base */
    vt_elf_func_t func;          /* name 0: no enclosing symbol */
} vt_scanned_ip_t;

typedef struct vt_module {
    uint32_t id;
    uint64_t base;               /* load bias */
    uintptr_t lo, hi;            /* absolute [lo, hi) covered by PT_LOADs */
    uint64_t size;               /* hi - base: the extent as symbols.h defines it */
    uint8_t build_id[VT_MAX_BUILD_ID];
    size_t build_id_len;
    char *path;                  /* as reported */
    const char *open_path;       /* what to read symbols from; NULL = memory */
    const void *mem_image;       /* vdso: its ELF image, already in memory */
    size_t mem_image_len;
    int alive, reported, syms_state, seen;
    vt_elf_symtab_t syms;
    vt_elf_file_t file;          /* the mapping syms.strtab points into */
    vt_elf_symsec_t scan_sec;    /* SYMS_SCANNED: the section, in file */
    vt_scanned_ip_t *scanned;    /* sorted by rel */
    size_t nscanned;
    unsigned scan_passes;
} vt_module_t;

static struct {
    int initialized;
    vt_module_t **mods;          /* every module ever seen, index = id - 1 */
    size_t nmods, capmods;
    vt_module_t **live;          /* live modules sorted by lo */
    size_t nlive;
    vt_module_t *last;           /* last module hit */
    int pending_report;
    unsigned long long adds, subs; /* loader counters at the last refresh */
    int have_counters;
    int final, final_refresh;    /* vt_symbols_final */
    char *exe_path;
    int exe_in_proc; /* exe_path came from /proc/self/exe, which then opens */
    vt_symbols_stats_t stats;
} g;

/* ---- module map ------------------------------------------------------ */

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Without /proc (a chroot, a container that does not mount it), the name
 * the process was exec'd by, resolved against its working directory. */
static char *exec_fn_path(void)
{
    const char *fn = (const char *)getauxval(AT_EXECFN);
    return fn ? realpath(fn, NULL) : NULL;
}

/* The program's path, found once; and *open_path what to read its
 * symbols from: /proc/self/exe, which still opens when the binary was
 * deleted or replaced after exec, or, without /proc, the path itself
 * (NULL). */
static const char *exe_path(const char **open_path)
{
    if (!g.exe_path) {
        char *p = realpath("/proc/self/exe", NULL);
        g.exe_in_proc = p != NULL;
        if (!p)
            p = exec_fn_path();
        g.exe_path = p ? p : dup_str("/proc/self/exe");
    }
    *open_path = g.exe_in_proc ? "/proc/self/exe" : NULL;
    return g.exe_path;
}

/* Build-id from the PT_NOTE segments as the loader mapped them, so it
 * identifies the code actually running even if the file was replaced. A
 * note is read only if it lies inside a PT_LOAD, i.e. in mapped memory. */
static void read_build_id(const struct dl_phdr_info *info, vt_module_t *m)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *n = &info->dlpi_phdr[i];
        if (n->p_type != PT_NOTE || n->p_memsz == 0 || n->p_memsz > (1u << 20))
            continue;
        int mapped = 0;
        for (int j = 0; j < info->dlpi_phnum && !mapped; j++) {
            const ElfW(Phdr) *l = &info->dlpi_phdr[j];
            mapped = l->p_type == PT_LOAD && n->p_vaddr >= l->p_vaddr &&
                     n->p_vaddr - l->p_vaddr <= l->p_filesz &&
                     n->p_memsz <= l->p_filesz - (n->p_vaddr - l->p_vaddr);
        }
        if (!mapped)
            continue;
        const uint8_t *id;
        size_t len;
        if (vt_elf_note_build_id((const void *)(info->dlpi_addr + n->p_vaddr), n->p_memsz,
                                 n->p_align, &id, &len) &&
            len <= VT_MAX_BUILD_ID) {
            memcpy(m->build_id, id, len);
            m->build_id_len = len;
            return;
        }
    }
}

/* The vdso's section headers lie past its PT_LOAD file extent but inside
 * the pages the kernel mapped; vt_readable tells whether those pages can
 * be read without touching them. It was mincore, which systemd's
 * @system-service set lacks: a unit with SystemCallFilter=@system-service
 * killed the process at the writer's first naming (77-fault-seccomp). */
static void vdso_image(uintptr_t ehdr_addr, uint64_t load_end, vt_module_t *m)
{
    const ElfW(Ehdr) *eh = (const void *)ehdr_addr;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t want = load_end;
    uint64_t sh_end = eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize;
    if (sh_end > want && sh_end <= VT_VDSO_MAX_IMAGE)
        want = sh_end;
    size_t rounded = (want + page - 1) & ~(page - 1);
    if (rounded <= VT_VDSO_MAX_IMAGE + page && vt_readable((const void *)ehdr_addr, rounded))
        m->mem_image_len = want;
    else
        m->mem_image_len = load_end;
    m->mem_image = eh;
}

/* Index of the first live module with lo >= addr. */
static size_t live_lower_bound(uintptr_t addr)
{
    size_t lo = 0, hi = g.nlive;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g.live[mid]->lo < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static vt_module_t *find_existing(const vt_module_t *c)
{
    for (size_t i = live_lower_bound(c->lo); i < g.nlive && g.live[i]->lo == c->lo; i++) {
        vt_module_t *m = g.live[i];
        if (m->base == c->base && m->hi == c->hi && m->build_id_len == c->build_id_len &&
            memcmp(m->build_id, c->build_id, c->build_id_len) == 0 &&
            strcmp(m->path, c->path) == 0)
            return m;
    }
    return NULL;
}

static int add_module(vt_module_t *m)
{
    if (g.nmods == g.capmods) {
        size_t cap = g.capmods ? g.capmods * 2 : 64;
        vt_module_t **n = realloc(g.mods, cap * sizeof *n);
        if (!n)
            return -1;
        g.mods = n;
        g.capmods = cap;
    }
    g.mods[g.nmods++] = m;
    m->id = (uint32_t)g.nmods;
    return 0;
}

struct refresh_ctx {
    int saw_main;
    uintptr_t vdso;
};

static int refresh_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct refresh_ctx *rc = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        g.adds = info->dlpi_adds;
        g.subs = info->dlpi_subs;
        g.have_counters = 1;
    }

    uint64_t lo = UINT64_MAX, hi = 0, file_end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD)
            continue;
        if (p->p_vaddr < lo)
            lo = p->p_vaddr;
        if (p->p_vaddr + p->p_memsz > hi)
            hi = p->p_vaddr + p->p_memsz;
        if (p->p_offset + p->p_filesz > file_end)
            file_end = p->p_offset + p->p_filesz;
    }
    if (hi <= lo)
        return 0;

    vt_module_t c;
    memset(&c, 0, sizeof c);
    c.base = info->dlpi_addr;
    c.lo = info->dlpi_addr + lo;
    c.hi = info->dlpi_addr + hi;
    c.size = hi;

    /* The vdso is recognized by where its program headers are, since its
     * dlpi_name differs between libcs (and is not a path). */
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    int is_vdso = rc->vdso && (uintptr_t)info->dlpi_phdr ==
                                  rc->vdso + ((const ElfW(Ehdr) *)rc->vdso)->e_phoff;
    char *resolved = NULL;
    if (is_vdso) {
        c.path = "[vdso]";
    } else if (name[0] == '\0') {
        if (rc->saw_main)
            return 0;
        rc->saw_main = 1;
        c.path = (char *)exe_path(&c.open_path);
    } else if (name[0] == '/') {
        c.path = (char *)name;
    } else if (strchr(name, '/') && (resolved = realpath(name, NULL)) != NULL) {
        c.path = resolved; /* dlopen("./x.so") keeps the relative name */
    } else {
        return 0;
    }
    read_build_id(info, &c);

    vt_module_t *m = find_existing(&c);
    if (m) {
        m->seen = 1;
        free(resolved);
        return 0;
    }
    m = malloc(sizeof *m);
    if (!m) {
        free(resolved);
        return 0;
    }
    *m = c;
    m->path = resolved ? resolved : dup_str(c.path);
    if (!m->path || add_module(m) != 0) {
        free(m->path);
        free(m);
        return 0;
    }
    if (!is_vdso && !m->open_path)
        m->open_path = m->path;
    if (is_vdso)
        vdso_image(rc->vdso, file_end, m);
    m->alive = 1;
    m->seen = 1;
    g.pending_report = 1;
    return 0;
}

static int live_cmp(const void *a, const void *b)
{
    const vt_module_t *x = *(vt_module_t *const *)a, *y = *(vt_module_t *const *)b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void refresh(void)
{
    struct refresh_ctx rc = {0, (uintptr_t)getauxval(AT_SYSINFO_EHDR)};
    for (size_t i = 0; i < g.nmods; i++)
        g.mods[i]->seen = 0;
    vt_dl_iterate_phdr(refresh_cb, &rc);

    vt_module_t **live = realloc(g.live, (g.nmods ? g.nmods : 1) * sizeof *live);
    if (!live)
        return; /* keep the old index; a later miss retries */
    g.live = live;
    g.nlive = 0;
    for (size_t i = 0; i < g.nmods; i++) {
        vt_module_t *m = g.mods[i];
        m->alive = m->seen;
        if (m->alive)
            g.live[g.nlive++] = m;
    }
    qsort(g.live, g.nlive, sizeof *g.live, live_cmp);
    g.last = NULL;
    g.initialized = 1;
}

static int counters_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    unsigned long long *c = arg;
    if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        return -1;
    c[0] = info->dlpi_adds;
    c[1] = info->dlpi_subs;
    return 1; /* one callback is enough to read the counters */
}

/* Checked on every lookup, not only on a miss: a library unloaded and
 * another mapped at its address would otherwise be served from the stale
 * entry. Reading the loader's add/sub counters costs one callback (about
 * 13 ns uncontended) where a refresh walks every library.
 * @return 1 if changed, 0 if not, -1 if this libc has no counters. */
static int loader_changed(void)
{
    unsigned long long c[2];
    if (!g.have_counters || vt_dl_iterate_phdr(counters_cb, c) != 1)
        return -1;
    return c[0] != g.adds || c[1] != g.subs;
}

static vt_module_t *find_module(uintptr_t ip)
{
    vt_module_t *m = g.last;
    if (m && ip >= m->lo && ip < m->hi)
        return m;
    size_t i = live_lower_bound(ip + 1); /* first module starting above ip */
    if (i == 0)
        return NULL;
    m = g.live[i - 1];
    if (ip >= m->hi)
        return NULL;
    g.last = m;
    return m;
}

/* ---- symbols --------------------------------------------------------- */

static void debug_path(const vt_module_t *m, char *out)
{
    static const char hex[] = "0123456789abcdef";
    char *p = out;
    memcpy(p, VT_DEBUG_DIR, sizeof VT_DEBUG_DIR - 1);
    p += sizeof VT_DEBUG_DIR - 1;
    for (size_t i = 0; i < m->build_id_len; i++) {
        *p++ = hex[m->build_id[i] >> 4];
        *p++ = hex[m->build_id[i] & 15];
        if (i == 0)
            *p++ = '/';
    }
    memcpy(p, ".debug", sizeof ".debug");
}

/* Maps m's separate debug file and sorts its table into *syms (empty
 * when it has none). @return 1 when the file is mapped, else 0. */
static int read_debug_file(const vt_module_t *m, vt_elf_file_t *dbg, vt_elf_symtab_t *syms)
{
    if (m->build_id_len < 2)
        return 0;
    char path[sizeof VT_DEBUG_DIR + 2 * VT_MAX_BUILD_ID + 8];
    debug_path(m, path);
    if (vt_elf_map_file(path, dbg) != 0)
        return 0;
    vt_elf_parse(dbg->map, dbg->len, syms); /* empty on failure */
    return 1;
}

/* may_scan: the caller will name this module's ips through a scan batch
 * first (vt_symbols_prefetch), so a big .symtab need not be sorted. Only a
 * .symtab qualifies: a .dynsym may yet lose to a debug file. */
static void read_symbols(vt_module_t *m, int may_scan)
{
    m->syms_state = SYMS_READ;
    if (m->mem_image) {
        vt_elf_parse(m->mem_image, m->mem_image_len, &m->syms);
        return;
    }
    int mapped = vt_elf_map_file(m->open_path, &m->file) == 0;
    vt_elf_symsec_t own = {0};
    if (mapped && vt_elf_symsec(m->file.map, m->file.len, &own) != 0)
        memset(&own, 0, sizeof own);
    if (may_scan && own.source == VT_ELF_SYMTAB && own.count > VT_SCAN_MIN_SYMBOLS) {
        m->scan_sec = own;
        m->syms_state = SYMS_SCANNED;
        return;
    }
    /* Distributions ship the static functions' names separately, and the
     * debug file's table is taken when it is the larger. Where the file's
     * own table is a .dynsym, its sorted table would hold at most
     * vt_elf_count_funcs of it, so a debug table above that is taken
     * without sorting the .dynsym first (libc: 0.15 of the 0.5 ms its
     * names cost the writer, in every process). */
    vt_elf_file_t dbg = {0};
    vt_elf_symtab_t dsyms = {0};
    int dbg_read = own.source != VT_ELF_SYMTAB;
    if (dbg_read && read_debug_file(m, &dbg, &dsyms) && dsyms.count > vt_elf_count_funcs(&own)) {
        vt_elf_unmap_file(&m->file);
        m->syms = dsyms;
        m->file = dbg;
        return;
    }
    if (mapped) {
        g.stats.tables_sorted++;
        if (vt_elf_parse(m->file.map, m->file.len, &m->syms) != 0 || m->syms.count == 0)
            vt_elf_unmap_file(&m->file); /* nothing points into it */
    }
    /* Read here only where a .symtab could not be collected (no memory)
     * and the table fell back to the .dynsym. */
    if (m->syms.source != VT_ELF_SYMTAB && !dbg_read)
        read_debug_file(m, &dbg, &dsyms);
    if (m->syms.source != VT_ELF_SYMTAB && dsyms.count > m->syms.count) {
        vt_elf_symtab_free(&m->syms);
        vt_elf_unmap_file(&m->file);
        m->syms = dsyms;
        m->file = dbg;
        return;
    }
    vt_elf_symtab_free(&dsyms);
    vt_elf_unmap_file(&dbg);
}

/* Gives up scanning: from now on m is named from its sorted table, which
 * is what read_symbols would have built for this .symtab. */
static void stop_scanning(vt_module_t *m)
{
    free(m->scanned);
    m->scanned = NULL;
    m->nscanned = 0;
    memset(&m->scan_sec, 0, sizeof m->scan_sec);
    m->syms_state = SYMS_READ;
    g.stats.tables_sorted++;
    if (vt_elf_parse(m->file.map, m->file.len, &m->syms) != 0 || m->syms.count == 0)
        vt_elf_unmap_file(&m->file);
}

static const vt_scanned_ip_t *find_scanned(const vt_module_t *m, uint64_t rel)
{
    size_t lo = 0, hi = m->nscanned;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->scanned[mid].rel < rel)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->nscanned && m->scanned[lo].rel == rel ? &m->scanned[lo] : NULL;
}

/* Names the ips (sorted, all inside m) that m's cache lacks, in one pass. */
static void scan_batch(vt_module_t *m, const uintptr_t *ips, size_t n)
{
    uint64_t *rel = malloc(n * sizeof *rel);
    vt_elf_func_t *found = malloc(n * sizeof *found);
    size_t k = 0;
    for (size_t i = 0; rel && i < n; i++) {
        uint64_t r = ips[i] - m->base;
        if ((!k || rel[k - 1] != r) && !find_scanned(m, r))
            rel[k++] = r;
    }
    vt_scanned_ip_t *cache = NULL;
    if (!k) {
        /* all known already */
    } else if (!found || m->scan_passes >= VT_SCAN_MAX_PASSES ||
               k > VT_SCAN_MAX_CACHED - m->nscanned ||
               !(cache = realloc(m->scanned, (m->nscanned + k) * sizeof *cache)) ||
               vt_elf_scan(&m->scan_sec, rel, k, found) != 0) {
        if (cache)
            m->scanned = cache;
        stop_scanning(m);
    } else {
        m->scanned = cache;
        m->scan_passes++;
        g.stats.scan_passes++;
        /* Merged from the back, in place: both runs are sorted. */
        size_t a = m->nscanned, b = k, out = m->nscanned + k;
        while (b) {
            if (a && cache[a - 1].rel > rel[b - 1]) {
                cache[--out] = cache[--a];
            } else {
                --out;
                --b;
                cache[out].rel = rel[b];
                cache[out].func = found[b];
            }
        }
        m->nscanned += k;
    }
    free(rel);
    free(found);
}

/* ---- API ------------------------------------------------------------- */

static void report_pending(vt_module_sink_t sink, void *ctx)
{
    if (!g.pending_report || !sink)
        return;
    g.pending_report = 0;
    for (size_t i = 0; i < g.nmods; i++) {
        vt_module_t *m = g.mods[i];
        if (!m->alive || m->reported)
            continue;
        vt_module_info_t info = {
            .id = m->id,
            .base = m->base,
            .size = m->size,
            .build_id = m->build_id_len ? m->build_id : NULL,
            .build_id_len = m->build_id_len,
            .path = m->path,
        };
        m->reported = 1;
        sink(ctx, &info);
    }
}

/* 1: refresh now; 0: the map is current; -1: refresh only on a miss. */
static int changed_now(void)
{
    if (!g.initialized)
        return 1;
    if (!g.final)
        return loader_changed();
    if (g.final_refresh) {
        g.final_refresh = 0;
        return 1;
    }
    return -1;
}

void vt_symbols_final(unsigned long long subs)
{
    g.final = 1;
    g.final_refresh = g.initialized && (!g.have_counters || subs != g.subs);
}

int vt_symbols_lookup(uintptr_t ip, vt_module_sink_t sink, void *ctx, uint32_t *module_id,
                      const char **function, uint64_t *sym_offset)
{
    *module_id = 0;
    *function = "";
    *sym_offset = 0;
    int changed = changed_now();
    if (changed == 1)
        refresh();
    vt_module_t *m = find_module(ip);
    if (!m && changed == -1) {
        /* Without counters a miss is the only hint of a dlopen. */
        refresh();
        m = find_module(ip);
    }
    report_pending(sink, ctx);
    if (!m)
        return 0;

    *module_id = m->id;
    if (m->syms_state == SYMS_UNREAD)
        read_symbols(m, 0);
    const vt_elf_func_t *f = NULL;
    const char *strtab = m->syms.strtab;
    if (m->syms_state == SYMS_SCANNED) {
        const vt_scanned_ip_t *s = find_scanned(m, ip - m->base);
        if (s) {
            f = s->func.name ? &s->func : NULL;
            g.stats.scan_hits++;
            strtab = m->scan_sec.strtab;
        } else {
            stop_scanning(m);
            strtab = m->syms.strtab;
        }
    }
    if (m->syms_state == SYMS_READ)
        f = vt_elf_find(&m->syms, ip - m->base);
    if (f) {
        *function = strtab + f->name;
        *sym_offset = ip - m->base - f->addr;
    }
    return 1;
}

static int ip_cmp(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

void vt_symbols_prefetch(uintptr_t *ips, size_t n)
{
    int changed = changed_now();
    if (changed == 1)
        refresh();
    qsort(ips, n, sizeof *ips, ip_cmp);
    for (size_t i = 0, j; i < n; i = j) {
        vt_module_t *m = find_module(ips[i]);
        if (!m) {
            j = i + 1;
            continue;
        }
        for (j = i + 1; j < n && ips[j] < m->hi; j++)
            ;
        if (m->syms_state == SYMS_UNREAD)
            read_symbols(m, 1);
        if (m->syms_state == SYMS_SCANNED)
            scan_batch(m, ips + i, j - i);
    }
}

void vt_symbols_stats(vt_symbols_stats_t *out)
{
    *out = g.stats;
}

void vt_symbols_reset_reported(void)
{
    for (size_t i = 0; i < g.nmods; i++)
        g.mods[i]->reported = 0;
    g.pending_report = 1;
}

void vt_symbols_fini(void)
{
    for (size_t i = 0; i < g.nmods; i++) {
        vt_module_t *m = g.mods[i];
        vt_elf_symtab_free(&m->syms);
        vt_elf_unmap_file(&m->file);
        free(m->scanned);
        free(m->path);
        free(m);
    }
    free(g.mods);
    free(g.live);
    free(g.exe_path);
    memset(&g, 0, sizeof g);
}
