/* The calling-context tree of one trace (STACK, FRAME and MODULE records)
 * and the symbolized frames of any stack in it.
 *
 * Contract:
 *  - One vt_stacks_t per trace file: ips and node ids are per process.
 *  - Memory is bounded by unique stack nodes, frames and modules, never by
 *    events. Names are demangled once, when their FRAME record arrives.
 *  - Hostile input is tolerated: a node whose parent is not older than
 *    itself, or whose id is far beyond the dense sequence, is ignored
 *    (counted in bad_nodes) and events pointing at it get a shorter stack;
 *    a walk never loops (parent < id) and stops at VT_MAX_STACK_DEPTH.
 *  - An ip without a FRAME record is shown by address, with the module
 *    whose [base, base+size) holds it when known.
 *  - Source lines (file:line, dwarf_lines.h) are looked up only by
 *    vt_stacks_get_src, i.e. only for the stacks a report prints, never
 *    while the trace is read: once per ip, cached (bounded by the printed
 *    frames), and never for a module whose build id does not match the file
 *    on this machine. The cache is why a const stacks still changes inside.
 *  - Functions returning int return 0 or a negative VT_E_*.
 */
#ifndef VT_STACK_TREE_H
#define VT_STACK_TREE_H

#include <stdint.h>

#include "trace_reader.h"

typedef struct vt_frame {
    uint64_t ip;           /* as in the trace, epoch bits too: VT_IP_ADDR() for the address */
    uint64_t sym_offset;
    uint32_t module_id;    /* 0 = unknown */
    const char *display;   /* demangled, "" when unresolved */
    const char *name;      /* qualified name rules match, "" when unresolved */
    const char *module;    /* module path, "" when unknown */
    const char *module_base; /* basename of module, "" when unknown */
    const char *file;      /* source file from DWARF, "" when unknown */
    uint32_t line;         /* its line, 0 when unknown */
} vt_frame_t;

typedef struct vt_stacks vt_stacks_t;

vt_stacks_t *vt_stacks_new(void);
void vt_stacks_free(vt_stacks_t *s);

int vt_stacks_add_module(vt_stacks_t *s, const vt_rec_module_t *m);
int vt_stacks_add_frame(vt_stacks_t *s, const vt_rec_frame_t *f);
int vt_stacks_add_node(vt_stacks_t *s, const vt_rec_stack_t *n);

/* Frames of the stack whose leaf is node `leaf`, innermost first, at most
 * max. @return the number written (0 for leaf 0 or an unknown node). The
 * strings stay valid until vt_stacks_free(). */
int vt_stacks_get(const vt_stacks_t *s, uint32_t leaf, vt_frame_t *out, int max);
/* The ips of those same frames, without resolving them. */
int vt_stacks_ips(const vt_stacks_t *s, uint32_t leaf, uint64_t *out, int max);
/* The frame vt_stacks_get gives for ip now. It changes only when a FRAME
 * record for ip or any MODULE record is added. */
void vt_stacks_frame(const vt_stacks_t *s, uint64_t ip, vt_frame_t *out);
/* Starts loading node `leaf` for a walk soon after (a hint only). */
void vt_stacks_prefetch(const vt_stacks_t *s, uint32_t leaf);
/* Node id's ip and parent when id is a node a walk passes (not 0, added,
 * in range): @return 1, else 0. One step of vt_stacks_ips, for callers that
 * memoise per node. */
int vt_stacks_node(const vt_stacks_t *s, uint32_t id, uint64_t *ip, uint32_t *parent);
/* The highest node id added (0 when none): ids above it name no stack. */
uint32_t vt_stacks_max_id(const vt_stacks_t *s);

/* Sets file:line of frames[0..n) (from vt_stacks_get) when source lookup
 * is on (the default; see the contract above). Only for frames shown. */
void vt_stacks_src(const vt_stacks_t *s, vt_frame_t *frames, int n);
/* vt_stacks_get, then vt_stacks_src on every frame. */
int vt_stacks_get_src(const vt_stacks_t *s, uint32_t leaf, vt_frame_t *out, int max);

/* Turns source lookup on (default) or off (--no-source). */
void vt_stacks_set_source(vt_stacks_t *s, int on);

/* Nodes ignored because they were malformed. */
uint64_t vt_stacks_bad_nodes(const vt_stacks_t *s);

#endif
