/* got.c: a loaded object's relocation slots for named functions, read and
 * rewritten in place.
 *
 * Two parts of the shim point another library's imports elsewhere:
 * libunwind's pipe and memory checks (unwind_fds.c), and the CUDA imports
 * of a library loaded with RTLD_DEEPBIND, which bound past the preload to
 * the driver (deepbind.c). Both go through the slots the loader fills for
 * the object's own references, R_X86_64_JUMP_SLOT (calls through the PLT)
 * and R_X86_64_GLOB_DAT (addresses taken), no one else's.
 *
 * Contract: vt_got_rewrite(lm, fn, arg) calls fn once per relocation of
 * the object whose symbol has a name, with the name, whether the object
 * imports it (undefined there) and, for those two kinds, the slot (NULL
 * for any other kind). fn may store a new value there with vt_got_store,
 * which makes the slot writable just for the store where the loader made
 * it read-only after relocation (PT_GNU_RELRO: the whole GOT with -z now).
 * Returns 0, or -1 where the object's tables cannot be read (no dynamic
 * section, REL instead of RELA, not among the loaded objects, not x86-64).
 * Caller: not inside a walk of the modules (it walks them once).
 */
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim.h"

#if defined(__x86_64__)
/* The pages the loader made read-only after relocation: those wholly
 * inside PT_GNU_RELRO, as the loader rounds them (both ends down to a
 * page). found: the object was among the loaded ones. */
struct vt_got {
    uintptr_t base, lo, hi;
    int found;
};
typedef struct vt_got relro_t;

static int find_relro(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    relro_t *r = data;
    if (info->dlpi_addr != r->base)
        return 0;
    uintptr_t page = (uintptr_t)getpagesize();
    r->found = 1;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
            uintptr_t start = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            r->lo = start & ~(page - 1);
            r->hi = (start + info->dlpi_phdr[i].p_memsz) & ~(page - 1);
        }
    return 1;
}

static int store_slot(void **slot, void *fn, const relro_t *relro)
{
    if (!slot)
        return 0;
    uintptr_t page_size = (uintptr_t)getpagesize();
    uintptr_t page = (uintptr_t)slot & ~(page_size - 1);
    if (page < relro->lo || page >= relro->hi) {
        __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
        return 1;
    }
    if (mprotect((void *)page, page_size, PROT_READ | PROT_WRITE) != 0)
        return 0;
    __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    mprotect((void *)page, page_size, PROT_READ);
    return 1;
}

/* The loader relocates most d_ptr entries of a loaded object in place;
 * where it has not (a read-only .dynamic), they are still offsets. */
static uintptr_t dyn_ptr(const struct link_map *lm, ElfW(Addr) v)
{
    return v < lm->l_addr ? lm->l_addr + v : v;
}

static void rewrite_table(const struct link_map *lm, const ElfW(Rela) *rela, size_t bytes, const ElfW(Sym) *symtab,
                          const char *strtab, size_t strsz, vt_got_fn fn, void *arg, relro_t *relro)
{
    for (size_t i = 0; i < bytes / sizeof *rela; i++) {
        unsigned type = ELF64_R_TYPE(rela[i].r_info);
        const ElfW(Sym) *sym = &symtab[ELF64_R_SYM(rela[i].r_info)];
        if (!sym->st_name || sym->st_name >= strsz)
            continue;
        void **slot = type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT
                          ? (void **)(lm->l_addr + rela[i].r_offset)
                          : NULL;
        fn(relro, strtab + sym->st_name, sym->st_shndx == SHN_UNDEF, slot, arg);
    }
}
#endif

int vt_got_store(vt_got_t *g, void **slot, void *fn)
{
#if defined(__x86_64__)
    return store_slot(slot, fn, g);
#else
    (void)g, (void)slot, (void)fn;
    return 0;
#endif
}

int vt_got_rewrite(const struct link_map *lm, vt_got_fn fn, void *arg)
{
#if defined(__x86_64__)
    if (!lm || !lm->l_ld)
        return -1;
    const ElfW(Rela) *jmprel = NULL, *rela = NULL;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    size_t pltrelsz = 0, relasz = 0, strsz = 0;
    int plt_is_rela = 1;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_JMPREL: jmprel = (const ElfW(Rela) *)dyn_ptr(lm, d->d_un.d_ptr); break;
        case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
        case DT_PLTREL: plt_is_rela = d->d_un.d_val == DT_RELA; break;
        case DT_RELA: rela = (const ElfW(Rela) *)dyn_ptr(lm, d->d_un.d_ptr); break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_ptr(lm, d->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (const char *)dyn_ptr(lm, d->d_un.d_ptr); break;
        case DT_STRSZ: strsz = d->d_un.d_val; break;
        }
    }
    if (!symtab || !strtab || !plt_is_rela)
        return -1;
    relro_t relro = { lm->l_addr, 0, 0, 0 };
    vt_dl_iterate_phdr(find_relro, &relro);
    if (!relro.found)
        return -1;
    if (jmprel)
        rewrite_table(lm, jmprel, pltrelsz, symtab, strtab, strsz, fn, arg, &relro);
    if (rela)
        rewrite_table(lm, rela, relasz, symtab, strtab, strsz, fn, arg, &relro);
    return 0;
#else
    (void)lm, (void)fn, (void)arg;
    return -1;
#endif
}
