/* Entry point ids, names and semantics, expanded from entrypoints.def.
 * Shared by the shim (which writes ids) and the analyzer (which reads them).
 * An id read from a trace is untrusted: always go through vt_api_info(),
 * which returns NULL for an id this build does not know.
 */
#ifndef VRAMTRACE_ENTRYPOINTS_H
#define VRAMTRACE_ENTRYPOINTS_H

#include <stddef.h>
#include <stdint.h>

#include "trace_format.h"

enum vt_kind {
    VT_KIND_ROUTE,
    VT_KIND_ALLOC,
    VT_KIND_FREE,
    VT_KIND_VMM_CREATE,
    VT_KIND_VMM_RELEASE,
    VT_KIND_VMM_MAP,
    VT_KIND_VMM_UNMAP,
    VT_KIND_VA_RESERVE,
    VT_KIND_VA_FREE,
    VT_KIND_REGISTER,
    VT_KIND_UNREGISTER,
    VT_KIND_POOL_CREATE,
    VT_KIND_POOL_DESTROY,
    VT_KIND_POOL_TRIM,
    VT_KIND_MEMINFO,
    VT_KIND_POOL_USAGE,
    VT_KIND_CTX_RESET,
    VT_KIND_VMM_RETAIN,
    VT_KIND_CAPTURE_BEGIN,
    VT_KIND_CAPTURE_END,
    VT_KIND_GRAPH_LAUNCH,
    VT_KIND_VMM_EMPTY,
    VT_KIND_GRAPH_NODE,
    VT_KIND_PTR_IMPORT,
    VT_KIND_COUNT   /* not a kind: the length of vt_kind_name's table */
};

enum vt_space {
    VT_SPACE_NONE,
    VT_SPACE_DEVICE,
    VT_SPACE_HOST,    /* pinned host memory */
    VT_SPACE_MANAGED,
    VT_SPACE_COUNT  /* not a space: the length of vt_space_name's table */
};

enum vt_api_id {
#define VT_ENTRY(ret, name, kind, space, describe, params, args) VT_API_##name,
#include "entrypoints.def"
#undef VT_ENTRY
    VT_API_COUNT
};

typedef struct vt_api_info {
    const char *name;
    uint8_t kind;   /* enum vt_kind */
    uint8_t space;  /* enum vt_space */
    uint8_t runtime; /* 1 for cuda* runtime entry points */
} vt_api_info_t;

static inline const vt_api_info_t *vt_api_info(unsigned id)
{
    static const vt_api_info_t table[VT_API_COUNT] = {
#define VT_ENTRY(ret, name, kind, space, describe, params, args) \
    { #name, VT_KIND_##kind, VT_SPACE_##space, #name[0] == 'c' && #name[1] == 'u' && #name[2] == 'd' },
#include "entrypoints.def"
#undef VT_ENTRY
    };
    return id < VT_API_COUNT ? &table[id] : NULL;
}

/* The allocations that name their pool (aux holds it, trace_format.h). */
static inline int vt_api_allocates_from_pool(unsigned id)
{
    return id == VT_API_cuMemAllocFromPoolAsync || id == VT_API_cuMemAllocFromPoolAsync_ptsz ||
           id == VT_API_cudaMallocFromPoolAsync || id == VT_API_cudaMallocFromPoolAsync_ptsz;
}

/* What an event does, for readers of the trace: its entry point's kind,
 * except the generic graph node add's (GRAPH_NODE), whose memory nodes
 * allocate or free as their node type says (trace_format.h), as
 * cuGraphAddMemAllocNode's and cuGraphAddMemFreeNode's events do. */
static inline unsigned vt_event_kind(const vt_api_info_t *info, uint64_t aux)
{
    if (info->kind != VT_KIND_GRAPH_NODE)
        return info->kind;
    return aux == VT_GRAPH_NODE_MEM_FREE ? VT_KIND_FREE : VT_KIND_ALLOC;
}

static inline const char *vt_kind_name(unsigned kind)
{
    /* Designated, so an enum reordered cannot shift the names; sized by its
     * initializers, so a kind added without a name fails the assert. */
    static const char *const names[] = {
        [VT_KIND_ROUTE] = "route",           [VT_KIND_ALLOC] = "alloc",
        [VT_KIND_FREE] = "free",             [VT_KIND_VMM_CREATE] = "vmm_create",
        [VT_KIND_VMM_RELEASE] = "vmm_release", [VT_KIND_VMM_MAP] = "vmm_map",
        [VT_KIND_VMM_UNMAP] = "vmm_unmap",   [VT_KIND_VA_RESERVE] = "va_reserve",
        [VT_KIND_VA_FREE] = "va_free",       [VT_KIND_REGISTER] = "register",
        [VT_KIND_UNREGISTER] = "unregister", [VT_KIND_POOL_CREATE] = "pool_create",
        [VT_KIND_POOL_DESTROY] = "pool_destroy", [VT_KIND_POOL_TRIM] = "pool_trim",
        [VT_KIND_MEMINFO] = "meminfo",       [VT_KIND_POOL_USAGE] = "pool_usage",
        [VT_KIND_CTX_RESET] = "ctx_reset",   [VT_KIND_VMM_RETAIN] = "vmm_retain",
        [VT_KIND_CAPTURE_BEGIN] = "capture_begin", [VT_KIND_CAPTURE_END] = "capture_end",
        [VT_KIND_GRAPH_LAUNCH] = "graph_launch", [VT_KIND_VMM_EMPTY] = "vmm_empty",
        [VT_KIND_GRAPH_NODE] = "graph_node", [VT_KIND_PTR_IMPORT] = "ptr_import",
    };
    _Static_assert(sizeof names / sizeof names[0] == VT_KIND_COUNT, "one name per enum vt_kind");
    return kind < VT_KIND_COUNT ? names[kind] : "?";
}

static inline const char *vt_space_name(unsigned space)
{
    static const char *const names[] = {
        [VT_SPACE_NONE] = "none", [VT_SPACE_DEVICE] = "device",
        [VT_SPACE_HOST] = "host", [VT_SPACE_MANAGED] = "managed",
    };
    _Static_assert(sizeof names / sizeof names[0] == VT_SPACE_COUNT, "one name per enum vt_space");
    return space < VT_SPACE_COUNT ? names[space] : "?";
}

#endif
