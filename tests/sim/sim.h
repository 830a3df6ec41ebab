/* sim.h: internal state of the simulated CUDA driver (build/sim/libcuda.so.1).
 *
 * Contract:
 *  - One process-wide state, `sim`, guarded by one mutex. Every exported
 *    entry point takes it (sim_lock) and releases it before returning;
 *    functions named *_locked expect it held and never take it.
 *  - Device memory is address space only, never backed. Device d owns the
 *    1 TiB slot starting at SIM_DEV_BASE(d):
 *      [slot, slot+capacity)          contiguous allocations, first-fit
 *      [slot+512GiB, slot+1TiB)       VTSIM_SYSMEM_FALLBACK placements
 *    plus a 512 MiB window below 4 GiB for the 32-bit legacy entry points.
 *    cuMemAddressReserve hands out VA from one separate global range.
 *  - "used" is what this process has charged to a device: every contiguous
 *    block (pool caches included), legacy and fallback blocks, and VMM
 *    physical memory. VMM memory is charged by count only: page-mapped
 *    physical memory does not fragment, so it never occupies the first-fit
 *    range. A contiguous allocation needs both enough free bytes and a hole.
 *  - Pinned and managed memory are real, lazily backed host mappings.
 *  - Compiled with __CUDA_API_VERSION_INTERNAL so cuda.h declares every ABI
 *    flavour (legacy 32-bit, _v2, _ptsz) under its exact exported name.
 */
#ifndef VTSIM_SIM_H
#define VTSIM_SIM_H

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_EXPORT __attribute__((visibility("default")))

#define SIM_MAX_DEV 16
#define SIM_GiB (1024ull * 1024 * 1024)
#define SIM_MiB (1024ull * 1024)
#define SIM_DEV_BASE(d) (0x10000000000ull * (uint64_t)((d) + 1))
#define SIM_SYSMEM_OFF (512ull * SIM_GiB)
#define SIM_SYSMEM_SIZE (512ull * SIM_GiB)
#define SIM_MAX_CAPACITY (512ull * SIM_GiB)
#define SIM_LEGACY_BASE(d) (0x20000000ull * (uint64_t)((d) + 1))
#define SIM_LEGACY_SIZE 0x20000000ull
#define SIM_LEGACY_MAX_DEV 7 /* windows must end below 4 GiB */
#define SIM_VA_BASE 0x200000000000ull
#define SIM_VA_SIZE 0x100000000000ull
#define SIM_PITCH_ALIGN 512u

#ifdef VTSIM_NO_V2
#define SIM_DRIVER_VERSION 11080
#else
#define SIM_DRIVER_VERSION 13000
#endif

enum sim_kind {
    SK_DEVICE = 1, /* cuMemAlloc_v2 / cuMemAllocPitch_v2 */
    SK_LEGACY,     /* 32-bit cuMemAlloc */
    SK_POOL_USED,  /* stream-ordered block handed to the program */
    SK_POOL_CACHED,/* freed block the pool keeps, still charged */
    SK_PINNED,     /* cuMemAllocHost / cuMemHostAlloc */
    SK_MANAGED,    /* cuMemAllocManaged */
    SK_REGISTERED, /* cuMemHostRegister */
    SK_VA,         /* cuMemAddressReserve range */
    SK_MAPPING,    /* cuMemMap of a physical handle */
};

struct sim_ctx;

typedef struct sim_ext {
    uint64_t start, size; /* span occupied in its map (rounded) */
    uint64_t req;         /* bytes the caller asked for */
    int kind;
    int dev;
    int fallback;         /* placed in the system memory range */
    struct sim_ctx *ctx;  /* owning context, for context teardown */
    void *owner;          /* sim_pool (pool blocks), sim_handle (mappings) */
} sim_ext_t;

/* Sorted array of non-overlapping extents within [base, end). Pointers into
 * it are invalidated by any insert or remove. */
typedef struct sim_map {
    sim_ext_t *v;
    size_t n, cap;
    uint64_t base, end;
} sim_map_t;

void sim_map_init(sim_map_t *m, uint64_t base, uint64_t end);
sim_ext_t *sim_map_find(sim_map_t *m, uint64_t addr);
int sim_map_fit(const sim_map_t *m, uint64_t size, uint64_t align, uint64_t *out);
int sim_map_overlaps(const sim_map_t *m, uint64_t start, uint64_t size);
sim_ext_t *sim_map_insert(sim_map_t *m, const sim_ext_t *e);
void sim_map_remove(sim_map_t *m, sim_ext_t *e);

typedef struct sim_ctx {
    uint32_t magic;
    int dev;
    int primary;
    int alive;
    unsigned refs;        /* primary retain count */
    struct sim_ctx *next; /* all non-primary contexts ever created */
} sim_ctx_t;

typedef struct sim_pool {
    uint32_t magic;
    int dev;
    int is_default;
    int destroyed;
    uint64_t threshold, max_size;
    uint64_t used, reserved, used_high, reserved_high;
    CUmemAllocationHandleType handle_types; /* exportable when not NONE */
    int imported;         /* cuMemPoolImportFromShareableHandle: allocates nothing */
    struct sim_pool *next;
} sim_pool_t;

typedef struct sim_handle {
    uint32_t magic;
    int dev;              /* -1: located in host memory (CU_MEM_LOCATION_TYPE_HOST*) */
    int released;         /* refs reached 0 */
    unsigned refs;        /* cuMemCreate and each cuMemRetainAllocationHandle */
    unsigned nmaps;
    int holds_nothing;    /* imported (the exporter's memory) or multicast: charges nothing */
    /* A multicast object (cuMulticastCreate): its team's size, the devices
     * added so far, and the handles bound to it, each kept alive as a
     * mapping keeps it. */
    unsigned mc_devices, mc_added;
    struct { struct sim_handle *mem; uint64_t offset, size; } mc_bound[4];
    uint64_t size;
    CUmemAllocationProp prop;
    struct sim_handle *next;
} sim_handle_t;

typedef struct sim_graph sim_graph_t;

typedef struct sim_stream {
    uint32_t magic;
    int alive;
    sim_ctx_t *ctx;
    sim_graph_t *capture;  /* the graph it captures into, or NULL */
    int capture_mode;      /* CUstreamCaptureMode it began with */
    int capture_invalid;   /* an unsafe call broke the capture */
    long capture_tid;      /* the thread that began it */
    struct sim_stream *next;
} sim_stream_t;

typedef struct sim_dev {
    char name[256];
    uint64_t capacity, reserve, external;
    sim_map_t mem, sysmem, legacy;
    uint64_t used;
    int nctx;
    sim_ctx_t primary;
    sim_pool_t *default_pool, *current_pool;
} sim_dev_t;

typedef struct sim_config {
    int ndev;
    uint64_t cap[SIM_MAX_DEV], reserve[SIM_MAX_DEV], external[SIM_MAX_DEV];
    char names[SIM_MAX_DEV][256];
    uint64_t gran, host_limit, fault_after;
    int fallback;
    char shared[PATH_MAX];
} sim_config_t;

struct sim_state {
    pthread_mutex_t lock;
    int initialized;
    CUresult init_rc;
    int ndev;
    sim_dev_t dev[SIM_MAX_DEV];
    uint64_t gran, host_limit, host_bytes;
    uint64_t fault_after, blocks_made;   /* VTSIM_FAULT_AFTER (sim_core.c) */
    int fallback;
    sim_map_t va, maps, host;
    sim_handle_t *handles;
    sim_pool_t *pools;
    sim_stream_t *streams;
    sim_ctx_t *ctxs;
    struct sim_import *imports;
    uint64_t import_next;  /* the next imported mapping's address (sim_ipc.c) */
};
extern struct sim_state sim;

#define SIM_MAGIC_CTX 0x76746378u
#define SIM_MAGIC_POOL 0x7674706cu
#define SIM_MAGIC_HANDLE 0x76746864u
#define SIM_MAGIC_STREAM 0x76747374u

void sim_lock(void);
void sim_unlock(void);

/* sim_config.c */
int sim_parse_size(const char *s, uint64_t *out);
void sim_config_load(sim_config_t *c);

/* sim_shared.c: cross-process usage (VTSIM_SHARED). */
void sim_shared_open(const char *path);
void sim_shared_publish(int dev, uint64_t footprint);
uint64_t sim_shared_others(int dev);
void sim_shared_fork_child(void);

/* sim_core.c: accounting shared by every allocator. */
static inline uint64_t sim_round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
uint64_t sim_footprint_locked(int dev);
uint64_t sim_free_locked(int dev);
void sim_charge_locked(int dev, int64_t delta);
CUresult sim_block_alloc_locked(int dev, uint64_t bytes, int kind, sim_ctx_t *ctx, void *owner,
                                uint64_t *addr);
sim_ext_t *sim_dev_find_locked(uint64_t addr, sim_map_t **map);
void sim_block_free_locked(sim_map_t *map, sim_ext_t *e);

/* sim_ctx.c */
CUresult sim_cur_ctx_locked(sim_ctx_t **ctx);
CUresult sim_stream_dev_locked(CUstream h, int *dev);
sim_stream_t *sim_stream_locked(CUstream h); /* a created stream, or NULL */
CUresult sim_ctx_attach_locked(int dev);
void sim_ctx_detach_locked(int dev);
void sim_ctx_teardown_locked(sim_ctx_t *ctx);

/* sim_pool.c */
CUresult sim_pools_init_locked(int dev);
void sim_pools_sync_locked(int dev);
void sim_pool_release_locked(sim_pool_t *p, uint64_t keep);
void sim_pool_block_freed_locked(sim_map_t *map, sim_ext_t *e);
CUresult sim_free_async_locked(CUdeviceptr dptr); /* cuMemFreeAsync's free, stream checked */
sim_pool_t *sim_pool_lookup_locked(CUmemoryPool h); /* a live pool, or NULL */

/* sim_ipc.c: another process's memory mapped here. ipc 0: a pool pointer's
 * import, freed by cuMemFree / cuMemFreeAsync; 1: a cuIpcOpenMemHandle
 * mapping, closed by cuIpcCloseMemHandle. 1 when addr was one (a reference
 * dropped). */
int sim_import_free_locked(uint64_t addr, int ipc);
/* An export as a process hands it to another: a new close-on-exec memfd
 * named name holding size bytes of what, its descriptor in *(int *)fd_out. */
CUresult sim_export_fd(const char *name, const void *what, size_t size, void *fd_out);
void sim_imports_teardown_locked(sim_ctx_t *ctx);

/* sim_graph.c */
sim_graph_t *sim_graph_capturing_locked(CUstream h);
CUresult sim_graph_capture_alloc_locked(sim_graph_t *g, int dev, CUdeviceptr *dptr, size_t bytes);
CUresult sim_graph_capture_free_locked(sim_graph_t *g, CUdeviceptr dptr);
int sim_graph_free_locked(uint64_t addr); /* 1: a live graph allocation, given back */
/* 1 when a capture forbids this thread a potentially unsafe call: the
 * capture is then invalidated, and the call fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED. */
int sim_capture_forbids_locked(void);

/* sim_vmm.c */
sim_ext_t *sim_vmm_find_locked(uint64_t addr);

/* sim_host.c */
sim_ext_t *sim_host_find_locked(uint64_t addr);
CUresult sim_managed_free_locked(uint64_t addr);

/* Entry guard: every entry point but the version/error/lookup ones fails
 * with CUDA_ERROR_NOT_INITIALIZED before a successful cuInit. */
#define SIM_ENTER()                                  \
    do {                                             \
        sim_lock();                                  \
        if (!sim.initialized) {                      \
            sim_unlock();                            \
            return CUDA_ERROR_NOT_INITIALIZED;       \
        }                                            \
    } while (0)
#define SIM_LEAVE(rc)          \
    do {                       \
        CUresult sim_rc_ = (rc); \
        sim_unlock();          \
        return sim_rc_;        \
    } while (0)

#endif
