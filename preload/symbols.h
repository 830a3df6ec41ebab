/* symbols.c: the module map and ip -> function name lookup for the shim.
 *
 * Contract:
 *  - Called only from the shim's writer thread, never from a wrapped CUDA
 *    call (the hot path): it reads ELF files from disk and allocates.
 *  - Not thread-safe; one caller at a time.
 *  - Names come from .symtab when the file has one (ggml's allocators are
 *    static functions, invisible in .dynsym), else .dynsym. Names are
 *    returned mangled, exactly as in the symbol table.
 *  - The module list comes from dl_iterate_phdr and is refreshed when an ip
 *    falls outside every known module (no dlopen hook: interposing dlopen
 *    breaks callers' RPATH/RUNPATH lookups).
 *  - Never crashes on a malformed, truncated or vanished ELF file: such a
 *    module simply resolves no names.
 */
#ifndef VT_PRELOAD_SYMBOLS_H
#define VT_PRELOAD_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

typedef struct vt_module_info {
    uint32_t id;              /* dense from 1, stable for the process */
    uint64_t base;            /* load bias (dlpi_addr) */
    uint64_t size;            /* extent of the PT_LOAD segments from base */
    const uint8_t *build_id;  /* NT_GNU_BUILD_ID bytes, or NULL */
    size_t build_id_len;
    const char *path;         /* absolute path; the main program's real path */
} vt_module_info_t;

/* Receives each module the first time it is reported (and again after
 * vt_symbols_reset_reported()). */
typedef void (*vt_module_sink_t)(void *ctx, const vt_module_info_t *module);

/* Resolves ip (the caller passes return address - 1 for non-leaf frames).
 * Modules not yet reported are passed to sink first.
 * @return 1 if ip lies in a known module (*module_id set; *function is the
 * enclosing symbol's name or "" and *sym_offset = ip - symbol start), else 0
 * with *module_id = 0 and *function = "". *function stays valid until
 * vt_symbols_fini(). */
int vt_symbols_lookup(uintptr_t ip, vt_module_sink_t sink, void *ctx,
                      uint32_t *module_id, const char **function, uint64_t *sym_offset);

/* Names a batch of ips, passed as to vt_symbols_lookup, ahead of their
 * lookups: a module with a huge .symtab is then read in one pass for the
 * whole batch instead of being sorted. Sorts ips in place. Reports no
 * modules; the lookups that follow do. */
void vt_symbols_prefetch(uintptr_t *ips, size_t n);

/* How names were found since the last vt_symbols_fini (for tests and
 * measurements). */
typedef struct vt_symbols_stats {
    uint64_t tables_sorted; /* modules whose whole table was sorted */
    uint64_t scan_passes;   /* passes over a section for a prefetch batch */
    uint64_t scan_hits;     /* lookups answered from those passes */
} vt_symbols_stats_t;

void vt_symbols_stats(vt_symbols_stats_t *out);

/* At exit: lookups stop asking the loader whether modules changed (each
 * ask is a dl_iterate_phdr, which waits for any walk of the program's in
 * progress) and walk the modules only for an ip outside every known one,
 * or once when subs (the loader's count of unloads as last seen by the
 * caller) says a module was unloaded since the map was made: another may
 * be mapped at its address. Otherwise names come from the map as it was:
 * a dlclose already made the writer name what it unloads. */
void vt_symbols_final(unsigned long long subs);

/* In a forked child: report every module again to the new trace file. */
void vt_symbols_reset_reported(void);

void vt_symbols_fini(void);

#endif
