/* elf_symtab.h: private to preload/. The ELF64 reader behind symbols.c.
 *
 * Contract:
 *  - Every function here treats its input as hostile: it never reads outside
 *    [image, image + len), whatever the headers claim, and reports a
 *    malformed image as "no symbols" rather than failing loudly.
 *  - A parsed table points into the image (names are not copied: a big C++
 *    library's string table would otherwise become anonymous memory in the
 *    traced server), so the image must stay mapped while the table is used.
 *  - Only libc; no stdio, no dl*; allocation only through malloc/free.
 *  - Declared hidden: these are shared between two files of the shim but are
 *    not part of what libvramtrace.so exports.
 */
#ifndef VT_PRELOAD_ELF_SYMTAB_H
#define VT_PRELOAD_ELF_SYMTAB_H

#include <stddef.h>
#include <stdint.h>

#define VT_ELF_HIDDEN __attribute__((visibility("hidden")))

/* A symbol or string table bigger than this is ignored, which bounds the
 * sort array we allocate per module. */
#define VT_ELF_MAX_TABLE ((uint64_t)64 << 20)
/* Files are mapped, not read, so this only bounds address space. */
#define VT_ELF_MAX_FILE ((uint64_t)8 << 30)

typedef struct vt_elf_func {
    uint64_t addr;  /* st_value: the ELF's own virtual address */
    uint32_t size;  /* st_size, saturated; 0 = unknown extent */
    uint32_t name;  /* offset of a NUL-terminated name in the strtab */
} vt_elf_func_t;

enum vt_elf_source { VT_ELF_NONE = 0, VT_ELF_DYNSYM = 1, VT_ELF_SYMTAB = 2 };

typedef struct vt_elf_symtab {
    vt_elf_func_t *funcs;  /* sorted by addr, one entry per address */
    size_t count;
    const char *strtab;    /* inside the parsed image */
    int source;            /* enum vt_elf_source */
} vt_elf_symtab_t;

/* A checked symbol section, read in place: what vt_elf_parse sorts, for
 * callers that only need a few addresses named. */
typedef struct vt_elf_symsec {
    const uint8_t *syms;   /* count Elf64_Sym entries, possibly unaligned */
    size_t count;          /* 0 = the image has no usable section */
    const char *strtab;
    size_t strsize;
    int terminated;        /* strtab ends in NUL */
    int source;            /* enum vt_elf_source */
} vt_elf_symsec_t;

typedef struct vt_elf_file {
    void *map;
    size_t len;
} vt_elf_file_t;

/* Parses the section headers of an ELF64 image of the host's byte order
 * and collects its STT_FUNC and STT_GNU_IFUNC symbols from .symtab, or from
 * .dynsym when there is no usable .symtab.
 * @return 0 with *out filled (count may be 0 when the file has no table),
 * or -1 with *out empty when the image is not a well-formed ELF64. */
VT_ELF_HIDDEN int vt_elf_parse(const void *image, size_t len, vt_elf_symtab_t *out);

/* The symbol enclosing addr (in the ELF's own address space): a sized
 * symbol must contain it; an unsized one is taken as the nearest preceding.
 * @return the entry or NULL. */
VT_ELF_HIDDEN const vt_elf_func_t *vt_elf_find(const vt_elf_symtab_t *t, uint64_t addr);

VT_ELF_HIDDEN void vt_elf_symtab_free(vt_elf_symtab_t *t);

/* Picks the symbol section vt_elf_parse would read (.symtab unless it is
 * unusable, then .dynsym) without collecting it.
 * @return 0 with *out filled (count 0 when there is none), or -1 with *out
 * empty when the image is not a well-formed ELF64. */
VT_ELF_HIDDEN int vt_elf_symsec(const void *image, size_t len, vt_elf_symsec_t *out);

/* How many entries of the section usable_sym takes: at least the count
 * vt_elf_parse's table of this section has (it keeps one per address). */
VT_ELF_HIDDEN size_t vt_elf_count_funcs(const vt_elf_symsec_t *sec);

/* Names n addresses in one pass over the section, with no sorted table:
 * out[i] becomes what vt_elf_find on vt_elf_parse's table returns for
 * addrs[i], or all zero (name 0) where that is NULL. addrs must be sorted
 * ascending and distinct. Costs one read of the section, so it pays only
 * for a few addresses in a big table.
 * @return 0, or -1 when out of memory (out all zero). */
VT_ELF_HIDDEN int vt_elf_scan(const vt_elf_symsec_t *sec, const uint64_t *addrs, size_t n,
                              vt_elf_func_t *out);

/* Finds the NT_GNU_BUILD_ID note in the contents of a PT_NOTE segment
 * whose notes are aligned to align (4 or 8, p_align).
 * @return 1 with *id pointing into notes, else 0. */
VT_ELF_HIDDEN int vt_elf_note_build_id(const void *notes, size_t len, size_t align,
                                       const uint8_t **id, size_t *id_len);

/* Maps a regular file read-only. @return 0, or -1 with *f empty. */
VT_ELF_HIDDEN int vt_elf_map_file(const char *path, vt_elf_file_t *f);
VT_ELF_HIDDEN void vt_elf_unmap_file(vt_elf_file_t *f);

#endif
