/* Entry point ids, names and semantics, expanded from entrypoints.def.
 * Shared by the shim (which writes ids) and the analyzer (which reads them).
 * An id read from a trace is untrusted: always go through vt_api_info(),
 * which returns NULL for an id this build does not know.
 */
#ifndef VRAMTRACE_ENTRYPOINTS_H
#define VRAMTRACE_ENTRYPOINTS_H

#include <stddef.h>
#include <stdint.h>

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
};

enum vt_space {
    VT_SPACE_NONE,
    VT_SPACE_DEVICE,
    VT_SPACE_HOST,    /* pinned host memory */
    VT_SPACE_MANAGED,
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

static inline const char *vt_kind_name(unsigned kind)
{
    static const char *const names[] = {
        "route", "alloc", "free", "vmm_create", "vmm_release", "vmm_map", "vmm_unmap",
        "va_reserve", "va_free", "register", "unregister", "pool_create", "pool_destroy",
        "pool_trim", "meminfo", "pool_usage",
    };
    return kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

static inline const char *vt_space_name(unsigned space)
{
    static const char *const names[] = { "none", "device", "host", "managed" };
    return space < 4 ? names[space] : "?";
}

#endif
