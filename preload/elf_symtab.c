/* elf_symtab.c: bounds-checked ELF64 section/symbol/note reading for the
 * shim's symbolizer. Contract: see elf_symtab.h. Every length read from the
 * image is checked by subtraction against what is left, never by adding to
 * an offset, so hostile values near UINT64_MAX cannot wrap.
 */
#include "elf_symtab.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define VT_HOST_ELFDATA ELFDATA2LSB
#else
#define VT_HOST_ELFDATA ELFDATA2MSB
#endif

/* 1 if [off, off + size) lies within a buffer of len bytes. */
static int in_bounds(uint64_t off, uint64_t size, size_t len)
{
    return off <= len && size <= len - off;
}

/* Headers are copied out rather than cast in place: the image may be a
 * caller's unaligned buffer. */
static int read_shdr(const uint8_t *img, size_t len, const Elf64_Ehdr *eh, uint64_t idx,
                     Elf64_Shdr *sh)
{
    uint64_t off = eh->e_shoff + idx * sizeof(Elf64_Shdr);
    if (!in_bounds(off, sizeof *sh, len))
        return -1;
    memcpy(sh, img + off, sizeof *sh);
    return 0;
}

typedef struct sym_cand {
    uint64_t addr;
    uint32_t size;
    uint32_t name;
    uint32_t rank; /* sym_rank_without_name */
} sym_cand_t;

/* Several names often share an address (aliases, C1/C2 constructors,
 * __GI_ wrappers); prefer the one with an extent, then the most public,
 * then one a user would have written (malloc over __libc_malloc). The
 * name's part is added only where an address has several names: reading
 * every name's first bytes faults in most of a big string table (7 MB in
 * /usr/bin/node) for the few aliases. */
static uint32_t sym_rank_without_name(const Elf64_Sym *s)
{
    uint32_t r = s->st_size ? 8 : 0;
    switch (ELF64_ST_BIND(s->st_info)) {
    case STB_GLOBAL: r += 4; break;
    case STB_WEAK: r += 2; break;
    default: break;
    }
    return r;
}

static uint32_t sym_rank(const sym_cand_t *c, const char *strtab)
{
    const char *name = strtab + c->name;
    return c->rank + !(name[0] == '_' && name[1] == '_');
}

/* Among the candidates at one address, 1 if x is the better name: higher
 * rank, then the lower name offset (so the choice is the same every run). */
static int cand_better(const sym_cand_t *x, const sym_cand_t *y, const char *strtab)
{
    uint32_t rx = sym_rank(x, strtab), ry = sym_rank(y, strtab);
    if (rx != ry)
        return rx > ry;
    return x->name < y->name;
}

/* Stable LSD radix sort by addr, one byte a pass, skipping the bytes every
 * address shares (a library's addresses fit in 3-4 bytes). /usr/bin/node's
 * .symtab holds 78k functions: qsort with a comparison callback took
 * 20-30 ms of the writer's time on them, on the traced program's cores.
 * @return whichever of a and tmp holds the sorted candidates. */
static sym_cand_t *sort_by_addr(sym_cand_t *a, sym_cand_t *tmp, size_t n)
{
    uint64_t all_or = 0, all_and = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        all_or |= a[i].addr;
        all_and &= a[i].addr;
    }
    uint64_t varying = all_or ^ all_and;
    for (unsigned shift = 0; shift < 64; shift += 8) {
        if (!((varying >> shift) & 0xff))
            continue;
        size_t count[256] = {0};
        for (size_t i = 0; i < n; i++)
            count[(a[i].addr >> shift) & 0xff]++;
        size_t at = 0;
        for (size_t d = 0; d < 256; d++) {
            size_t c = count[d];
            count[d] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++)
            tmp[count[(a[i].addr >> shift) & 0xff]++] = a[i];
        sym_cand_t *swap = a;
        a = tmp;
        tmp = swap;
    }
    return a;
}

/* 1 if symbol i names a defined function with a well-formed name. In a
 * string table that ends in NUL (terminated), every name inside it ends
 * too, and no name needs a search for its NUL. */
static int usable_sym(const uint8_t *symbase, size_t i, const char *strtab, size_t strsize,
                      int terminated, Elf64_Sym *out)
{
    Elf64_Sym s;
    memcpy(&s, symbase + i * sizeof s, sizeof s);
    int type = ELF64_ST_TYPE(s.st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC)
        return 0;
    if (s.st_shndx == SHN_UNDEF || s.st_value == 0)
        return 0;
    if (s.st_name == 0 || s.st_name >= strsize)
        return 0;
    if (!terminated && !memchr(strtab + s.st_name, '\0', strsize - s.st_name))
        return 0;
    if (out)
        *out = s;
    return 1;
}

/* Checks one SHT_SYMTAB/SHT_DYNSYM section and its string table.
 * @return 0 with *out filled, or -1 if either is unusable. */
static int open_symsec(const uint8_t *img, size_t len, const Elf64_Ehdr *eh, uint64_t shnum,
                       const Elf64_Shdr *symsec, vt_elf_symsec_t *out)
{
    Elf64_Shdr strsec;
    if (symsec->sh_entsize != sizeof(Elf64_Sym) || symsec->sh_size > VT_ELF_MAX_TABLE ||
        !in_bounds(symsec->sh_offset, symsec->sh_size, len))
        return -1;
    if (symsec->sh_link == 0 || symsec->sh_link >= shnum ||
        read_shdr(img, len, eh, symsec->sh_link, &strsec) != 0)
        return -1;
    /* Names are stored as 32-bit offsets, hence the extra bound. */
    if (strsec.sh_type != SHT_STRTAB || strsec.sh_size > VT_ELF_MAX_TABLE ||
        strsec.sh_size > UINT32_MAX || !in_bounds(strsec.sh_offset, strsec.sh_size, len))
        return -1;
    out->syms = img + symsec->sh_offset;
    out->count = symsec->sh_size / sizeof(Elf64_Sym);
    out->strtab = (const char *)img + strsec.sh_offset;
    out->strsize = strsec.sh_size;
    out->terminated = out->strsize && out->strtab[out->strsize - 1] == '\0';
    out->source = symsec->sh_type == SHT_SYMTAB ? VT_ELF_SYMTAB : VT_ELF_DYNSYM;
    return out->count ? 0 : -1;
}

static void cand_from_sym(const Elf64_Sym *s, sym_cand_t *c)
{
    c->addr = s->st_value;
    c->size = s->st_size > UINT32_MAX ? UINT32_MAX : (uint32_t)s->st_size;
    c->name = s->st_name;
    c->rank = sym_rank_without_name(s);
}

/* Collects the function symbols of one checked section.
 * @return 0 on success (possibly zero symbols), -1 if out of memory. */
static int collect(const vt_elf_symsec_t *sec, vt_elf_symtab_t *out)
{
    const uint8_t *symbase = sec->syms;
    const char *strtab = sec->strtab;
    size_t strsize = sec->strsize;
    size_t nsyms = sec->count;
    int terminated = sec->terminated;

    /* Counted first: most entries of a big .symtab are objects, sections
     * and files, and the candidate array is the largest allocation here. */
    size_t nfuncs = 0;
    for (size_t i = 1; i < nsyms; i++) /* entry 0 is the reserved null symbol */
        nfuncs += usable_sym(symbase, i, strtab, strsize, terminated, NULL);
    /* Twice: the radix sort's second buffer. */
    sym_cand_t *buf = malloc((nfuncs ? 2 * nfuncs : 1) * sizeof *buf);
    if (!buf)
        return -1;
    sym_cand_t *cand = buf;
    size_t n = 0;
    for (size_t i = 1; i < nsyms && n < nfuncs; i++) {
        Elf64_Sym s;
        if (!usable_sym(symbase, i, strtab, strsize, terminated, &s))
            continue;
        cand_from_sym(&s, &cand[n++]);
    }
    cand = sort_by_addr(cand, buf + nfuncs, n);

    vt_elf_func_t *funcs = malloc((n ? n : 1) * sizeof *funcs);
    if (!funcs) {
        free(buf);
        return -1;
    }
    size_t m = 0;
    sym_cand_t best = {0};
    for (size_t i = 0; i < n; i++) {
        if (m && funcs[m - 1].addr == cand[i].addr) {
            if (cand_better(&cand[i], &best, strtab))
                best = cand[i];
        } else {
            best = cand[i];
            m++;
        }
        funcs[m - 1].addr = best.addr;
        funcs[m - 1].size = best.size;
        funcs[m - 1].name = best.name;
    }
    free(buf);
    if (m < n) {
        vt_elf_func_t *shrunk = realloc(funcs, (m ? m : 1) * sizeof *funcs);
        if (shrunk)
            funcs = shrunk;
    }
    out->funcs = funcs;
    out->count = m;
    out->strtab = strtab;
    out->source = sec->source;
    return 0;
}

/* Finds the symbol sections of an ELF64 image: order[0] is .symtab's
 * index, order[1] .dynsym's, 0 where absent.
 * @return 0, or -1 when the image is not a well-formed ELF64. */
static int find_symbol_sections(const uint8_t *img, size_t len, Elf64_Ehdr *eh,
                                uint64_t *shnum_out, uint64_t order[2])
{
    order[0] = order[1] = 0;
    *shnum_out = 0;
    if (!img || len < sizeof *eh)
        return -1;
    memcpy(eh, img, sizeof *eh);
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != VT_HOST_ELFDATA || eh->e_ident[EI_VERSION] != EV_CURRENT)
        return -1;
    if (eh->e_shoff == 0)
        return 0; /* fully stripped of section headers: valid, nameless */
    if (eh->e_shentsize != sizeof(Elf64_Shdr))
        return -1;

    uint64_t shnum = eh->e_shnum;
    if (shnum == 0) {
        /* Extended numbering: the real count sits in section 0's sh_size. */
        Elf64_Shdr sh0;
        if (read_shdr(img, len, eh, 0, &sh0) != 0)
            return -1;
        shnum = sh0.sh_size;
    }
    if (!in_bounds(eh->e_shoff, 0, len) || shnum > (len - eh->e_shoff) / sizeof(Elf64_Shdr))
        return -1;

    for (uint64_t i = 1; i < shnum; i++) {
        Elf64_Shdr sh;
        if (read_shdr(img, len, eh, i, &sh) != 0)
            return -1;
        if (sh.sh_type == SHT_SYMTAB && !order[0] && sh.sh_size)
            order[0] = i;
        else if (sh.sh_type == SHT_DYNSYM && !order[1] && sh.sh_size)
            order[1] = i;
    }
    *shnum_out = shnum;
    return 0;
}

/* The first of order[from..1] (.symtab, .dynsym) that opens as a usable
 * symbol section, into *sec. @return its place in order, or -1. */
static int first_usable(const uint8_t *img, size_t len, const Elf64_Ehdr *eh, uint64_t shnum,
                        const uint64_t order[2], int from, vt_elf_symsec_t *sec)
{
    for (int k = from; k < 2; k++) {
        Elf64_Shdr sh;
        if (order[k] && read_shdr(img, len, eh, order[k], &sh) == 0 &&
            open_symsec(img, len, eh, shnum, &sh, sec) == 0)
            return k;
    }
    return -1;
}

int vt_elf_parse(const void *image, size_t len, vt_elf_symtab_t *out)
{
    const uint8_t *img = image;
    Elf64_Ehdr eh;
    uint64_t shnum, order[2];
    memset(out, 0, sizeof *out);
    if (find_symbol_sections(img, len, &eh, &shnum, order) != 0)
        return -1;
    /* A broken .symtab should not hide a good .dynsym, nor one that could
     * not be collected (out of memory). */
    vt_elf_symsec_t sec;
    for (int k = first_usable(img, len, &eh, shnum, order, 0, &sec); k >= 0;
         k = first_usable(img, len, &eh, shnum, order, k + 1, &sec))
        if (collect(&sec, out) == 0)
            return 0;
    return 0;
}

int vt_elf_symsec(const void *image, size_t len, vt_elf_symsec_t *out)
{
    const uint8_t *img = image;
    Elf64_Ehdr eh;
    uint64_t shnum, order[2];
    memset(out, 0, sizeof *out);
    if (find_symbol_sections(img, len, &eh, &shnum, order) != 0)
        return -1;
    if (first_usable(img, len, &eh, shnum, order, 0, out) < 0)
        memset(out, 0, sizeof *out);
    return 0;
}

size_t vt_elf_count_funcs(const vt_elf_symsec_t *sec)
{
    size_t n = 0;
    for (size_t i = 1; i < sec->count; i++) /* entry 0 is the reserved null symbol */
        n += usable_sym(sec->syms, i, sec->strtab, sec->strsize, sec->terminated, NULL);
    return n;
}

#define SCAN_BUCKETS 4096

int vt_elf_scan(const vt_elf_symsec_t *sec, const uint64_t *addrs, size_t n, vt_elf_func_t *out)
{
    memset(out, 0, n * sizeof *out);
    if (!n || !sec->count)
        return 0;
    /* best[j]: the best symbol at the highest address in
     * (addrs[j - 1], addrs[j]]; these slots partition the address line, so
     * the symbol vt_elf_find would pick for addrs[j] is in the last
     * non-empty slot up to j. Symbols come in section order, as they reach
     * collect()'s alias choice after its stable sort. */
    uint64_t last = addrs[n - 1];
    /* bucket[b]: the first j with addrs[j] >= b << shift, so a symbol's
     * slot is one load and a search among the few addresses of its bucket:
     * a binary search over all of them per symbol was most of the pass. */
    unsigned shift = 0;
    while ((last >> shift) >= SCAN_BUCKETS)
        shift++;
    size_t nbuckets = (size_t)(last >> shift) + 1;
    sym_cand_t *best = calloc(n, sizeof *best);
    size_t *bucket = malloc((nbuckets + 1) * sizeof *bucket);
    if (!best || !bucket) {
        free(best);
        free(bucket);
        return -1;
    }
    for (size_t b = 0, j = 0; b < nbuckets; b++) {
        while (addrs[j] < (uint64_t)b << shift)
            j++;
        bucket[b] = j;
    }
    bucket[nbuckets] = n - 1;
    for (size_t i = 1; i < sec->count; i++) { /* entry 0 is the reserved null symbol */
        Elf64_Sym s;
        if (!usable_sym(sec->syms, i, sec->strtab, sec->strsize, sec->terminated, &s) ||
            s.st_value > last)
            continue;
        /* First j with addrs[j] >= st_value; it is at most the next
         * bucket's first, as addrs[bucket[b + 1]] >= st_value. */
        size_t at = (size_t)(s.st_value >> shift);
        size_t lo = bucket[at], len = bucket[at + 1] - lo + 1;
        while (len > 1) {
            size_t half = len / 2;
            lo = addrs[lo + half - 1] < s.st_value ? lo + half : lo;
            len -= half;
        }
        sym_cand_t c;
        cand_from_sym(&s, &c);
        sym_cand_t *b = &best[lo];
        if (!b->name || c.addr > b->addr || (c.addr == b->addr && cand_better(&c, b, sec->strtab)))
            *b = c;
    }
    const sym_cand_t *cover = NULL;
    for (size_t j = 0; j < n; j++) {
        if (best[j].name)
            cover = &best[j];
        if (cover && !(cover->size && addrs[j] - cover->addr >= cover->size)) {
            out[j].addr = cover->addr;
            out[j].size = cover->size;
            out[j].name = cover->name;
        }
    }
    free(best);
    free(bucket);
    return 0;
}

const vt_elf_func_t *vt_elf_find(const vt_elf_symtab_t *t, uint64_t addr)
{
    if (!t->count || addr < t->funcs[0].addr)
        return NULL;
    /* Last entry with funcs[i].addr <= addr. */
    size_t lo = 0, hi = t->count;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->funcs[mid].addr <= addr)
            lo = mid;
        else
            hi = mid;
    }
    const vt_elf_func_t *f = &t->funcs[lo];
    if (f->size && addr - f->addr >= f->size)
        return NULL;
    return f;
}

void vt_elf_symtab_free(vt_elf_symtab_t *t)
{
    free(t->funcs);
    memset(t, 0, sizeof *t);
}

int vt_elf_note_build_id(const void *notes, size_t len, size_t align, const uint8_t **id,
                         size_t *id_len)
{
    const uint8_t *p = notes;
    size_t a = align == 8 ? 8 : 4;
    size_t off = 0;
    *id = NULL;
    *id_len = 0;
    if (!p)
        return 0;
    /* Padding is to an offset boundary, not a size multiple: with 8-byte
     * notes the 12-byte header plus "GNU\0" lands exactly on 16. */
    while (len - off >= 12) {
        uint32_t hdr[3];
        memcpy(hdr, p + off, sizeof hdr);
        uint64_t namesz = hdr[0], descsz = hdr[1], type = hdr[2];
        size_t name_off = off + 12;
        if (namesz > len - name_off)
            return 0;
        uint64_t desc_off = (name_off + namesz + a - 1) & ~(uint64_t)(a - 1);
        if (desc_off > len || descsz > len - desc_off)
            return 0;
        if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(p + name_off, "GNU", 4) == 0 &&
            descsz > 0) {
            *id = p + desc_off;
            *id_len = descsz;
            return 1;
        }
        uint64_t next = (desc_off + descsz + a - 1) & ~(uint64_t)(a - 1);
        if (next > len || next <= off)
            return 0;
        off = next;
    }
    return 0;
}

int vt_elf_map_file(const char *path, vt_elf_file_t *f)
{
    f->map = NULL;
    f->len = 0;
    int fd;
    /* O_NONBLOCK: a FIFO planted at a library's path must not hang the
     * writer thread in open(); it does nothing for regular files. */
    do
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr) ||
        (uint64_t)st.st_size > VT_ELF_MAX_FILE) {
        close(fd);
        return -1;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return -1;
    f->map = m;
    f->len = (size_t)st.st_size;
    return 0;
}

void vt_elf_unmap_file(vt_elf_file_t *f)
{
    if (f->map)
        munmap(f->map, f->len);
    f->map = NULL;
    f->len = 0;
}
