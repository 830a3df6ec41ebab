/* Source lines (file:line) for code addresses, from the DWARF of binaries
 * present on this machine (elfutils' libdw).
 *
 * Contract:
 *  - The trace's module path and build id are untrusted. A file is used
 *    only when it is a regular file (stat, then fstat after a non-blocking
 *    open: never a fifo or device, which could hang or feed us forever), at
 *    most VT_DWARF_MAX_FILE bytes, an ELF file whose GNU build id equals
 *    the trace's, and has .debug_line. A module without a build id in the
 *    trace is never resolved: a line from a different binary is worse than
 *    none. Without debug info in the module file itself,
 *    /usr/lib/debug/.build-id/xx/rest.debug is tried (same checks).
 *  - addr is a file address: ip - module base (load bias), already moved
 *    into the call instruction by the caller (see stack_tree.c).
 *  - At most VT_DWARF_MAX_OPEN modules are open at once (least recently
 *    used closed first), so memory is bounded whatever the trace names.
 *    Remembering which modules are unusable, and caching lines per ip, is
 *    the caller's job (stack_tree.c), as is asking only for printed frames.
 *  - Nothing here prints: an unusable module or a lookup that finds nothing
 *    means "no line", never a failed report.
 *  - The file is mapped (ELF_C_READ_MMAP): a binary truncated by someone
 *    else while we read it can still raise SIGBUS, as in any debugger.
 */
#ifndef VT_DWARF_LINES_H
#define VT_DWARF_LINES_H

#include <stddef.h>
#include <stdint.h>

#define VT_DWARF_MAX_FILE (2ull << 30)   /* bytes */
#define VT_DWARF_MAX_OPEN 8
#define VT_DWARF_MAX_BUILD_ID 64         /* longer ids are treated as absent */

typedef struct vt_dwarf vt_dwarf_t;

vt_dwarf_t *vt_dwarf_new(void);
void vt_dwarf_free(vt_dwarf_t *d);

/* The source line of addr in the module (path, build_id). @return 1 with
 * *file (valid until the next call or vt_dwarf_free; copy it) and *line
 * set; 0 when the module has no line for addr; VT_E_IO when the module is
 * unusable (missing, not a regular file, too big, other build id, no debug
 * info: the caller should not ask about it again); VT_E_NOMEM. */
int vt_dwarf_line(vt_dwarf_t *d, const char *path, const uint8_t *build_id, size_t build_id_len, uint64_t addr,
                  const char **file, uint32_t *line);

/* Modules opened so far (a test and diagnostics hook). */
unsigned vt_dwarf_opens(const vt_dwarf_t *d);

#endif
