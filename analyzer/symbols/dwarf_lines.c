/* file:line from libdw (see dwarf_lines.h). A small LRU of open modules keyed by
 * (path, build id); each lookup is the CU holding the address (aranges,
 * else a scan of the CUs' ranges) and its line table row. */
#include "dwarf_lines.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"

typedef struct open_mod {
    char *path;               /* as the trace named it */
    uint8_t bid[VT_DWARF_MAX_BUILD_ID];
    size_t bid_len;
    int fd;
    Elf *elf;
    Dwarf *dbg;
    uint64_t stamp;           /* LRU clock at last use */
    int no_aranges;           /* dwarf_addrdie found nothing once: scan CUs */
} open_mod_t;

struct vt_dwarf {
    open_mod_t mods[VT_DWARF_MAX_OPEN];
    int nmods;
    uint64_t clock;
    unsigned opens;
    char path[4096];          /* the last answer made absolute */
};

vt_dwarf_t *vt_dwarf_new(void)
{
    /* libelf refuses elf_begin until the version is agreed on. */
    if (elf_version(EV_CURRENT) == EV_NONE)
        return NULL;
    return calloc(1, sizeof(vt_dwarf_t));
}

static void close_mod(open_mod_t *m)
{
    if (m->dbg)
        dwarf_end(m->dbg);
    if (m->elf)
        elf_end(m->elf);
    if (m->fd >= 0)
        close(m->fd);
    free(m->path);
    memset(m, 0, sizeof *m);
    m->fd = -1;
}

void vt_dwarf_free(vt_dwarf_t *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->nmods; i++)
        close_mod(&d->mods[i]);
    free(d);
}

unsigned vt_dwarf_opens(const vt_dwarf_t *d)
{
    return d ? d->opens : 0;
}

static int regular_and_small(const struct stat *st)
{
    return S_ISREG(st->st_mode) && st->st_size > 0 && (uint64_t)st->st_size <= VT_DWARF_MAX_FILE;
}

/* Opens path as an ELF file with DWARF whose build id is bid. stat before
 * open so a fifo or device is never opened (opening a fifo blocks);
 * O_NONBLOCK and the fstat after cover a file swapped in between. */
static int open_checked(open_mod_t *m, const char *path, const uint8_t *bid, size_t bid_len)
{
    struct stat st;
    if (stat(path, &st) || !regular_and_small(&st))
        return VT_E_IO;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return VT_E_IO;
    if (fstat(fd, &st) || !regular_and_small(&st)) {
        close(fd);
        return VT_E_IO;
    }
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!elf || elf_kind(elf) != ELF_K_ELF) {
        if (elf)
            elf_end(elf);
        close(fd);
        return VT_E_IO;
    }
    const void *id = NULL;
    ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
    Dwarf *dbg = NULL;
    if (n > 0 && (size_t)n == bid_len && !memcmp(id, bid, bid_len))
        dbg = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
    if (!dbg) {
        elf_end(elf);
        close(fd);
        return VT_E_IO;
    }
    m->fd = fd;
    m->elf = elf;
    m->dbg = dbg;
    return 0;
}

/* The module file itself, else its separate debug file by build id (the
 * layout distributions' -dbg / -debuginfo packages install). */
static int open_mod(open_mod_t *m, const char *path, const uint8_t *bid, size_t bid_len)
{
    if (open_checked(m, path, bid, bid_len) == 0)
        return 0;
    char dbgpath[64 + 2 * VT_DWARF_MAX_BUILD_ID];
    int k = snprintf(dbgpath, sizeof dbgpath, "/usr/lib/debug/.build-id/%02x/", bid[0]);
    for (size_t i = 1; i < bid_len; i++)
        k += snprintf(dbgpath + k, sizeof dbgpath - (size_t)k, "%02x", bid[i]);
    snprintf(dbgpath + k, sizeof dbgpath - (size_t)k, ".debug");
    return open_checked(m, dbgpath, bid, bid_len);
}

static open_mod_t *get_mod(vt_dwarf_t *d, const char *path, const uint8_t *bid, size_t bid_len, int *rc)
{
    for (int i = 0; i < d->nmods; i++) {
        open_mod_t *m = &d->mods[i];
        if (m->bid_len == bid_len && !memcmp(m->bid, bid, bid_len) && !strcmp(m->path, path)) {
            m->stamp = ++d->clock;
            return m;
        }
    }
    if (d->nmods == VT_DWARF_MAX_OPEN) {
        /* Full: close the least recently used; the last entry fills its
         * place so the open ones stay packed at the front. */
        int lru = 0;
        for (int i = 1; i < d->nmods; i++)
            if (d->mods[i].stamp < d->mods[lru].stamp)
                lru = i;
        close_mod(&d->mods[lru]);
        d->mods[lru] = d->mods[--d->nmods];
    }
    open_mod_t *m = &d->mods[d->nmods];
    memset(m, 0, sizeof *m);
    m->fd = -1;
    d->opens++;
    if ((*rc = open_mod(m, path, bid, bid_len)) || !(m->path = strdup(path))) {
        if (!*rc)
            *rc = VT_E_NOMEM;
        close_mod(m);
        return NULL;
    }
    memcpy(m->bid, bid, bid_len);
    m->bid_len = bid_len;
    m->stamp = ++d->clock;
    d->nmods++;
    return m;
}

/* The compile unit whose ranges hold addr. gcc writes .debug_aranges;
 * clang and some linkers do not, and libdw 0.188 then finds nothing, so
 * fall back to asking each CU (libdw caches the parsed DIEs). */
static int cu_of(open_mod_t *m, uint64_t addr, Dwarf_Die *cu)
{
    if (!m->no_aranges) {
        if (dwarf_addrdie(m->dbg, addr, cu))
            return 1;
        Dwarf_Aranges *ar;
        size_t n = 0;
        if (dwarf_getaranges(m->dbg, &ar, &n) != 0 || n == 0)
            m->no_aranges = 1;
        else
            return 0;   /* aranges exist and do not cover addr */
    }
    Dwarf_CU *unit = NULL, *next;
    Dwarf_Die die;
    uint8_t unit_type;
    Dwarf_Half version;
    for (; dwarf_get_units(m->dbg, unit, &next, &version, &unit_type, &die, NULL) == 0; unit = next) {
        if (dwarf_haspc(&die, addr) > 0) {
            *cu = die;
            return 1;
        }
    }
    return 0;
}

int vt_dwarf_line(vt_dwarf_t *d, const char *path, const uint8_t *build_id, size_t build_id_len, uint64_t addr,
                  const char **file, uint32_t *line)
{
    if (!d || !path || !path[0] || !build_id_len || build_id_len > VT_DWARF_MAX_BUILD_ID)
        return VT_E_IO;
    int rc = 0;
    open_mod_t *m = get_mod(d, path, build_id, build_id_len, &rc);
    if (!m)
        return rc;
    Dwarf_Die cu;
    if (!cu_of(m, addr, &cu))
        return 0;
    Dwarf_Line *l = dwarf_getsrc_die(&cu, addr);
    int lineno = 0;
    const char *src = l ? dwarf_linesrc(l, NULL, NULL) : NULL;
    if (!src || !src[0] || dwarf_lineno(l, &lineno) || lineno <= 0)
        return 0;
    /* A file named relative to the compiler's directory (gcc's DWARF 5
     * names files as given on its command line) is made absolute, so it
     * names one file whatever directory the report runs in. */
    Dwarf_Attribute at;
    const char *dir = src[0] != '/' ? dwarf_formstring(dwarf_attr(&cu, DW_AT_comp_dir, &at)) : NULL;
    if (dir && dir[0] == '/') {
        int k = snprintf(d->path, sizeof d->path, "%s/%s", dir, src);
        if (k > 0 && (size_t)k < sizeof d->path)
            src = d->path;
    }
    *file = src;
    *line = (uint32_t)lineno;
    return 1;
}
