/* The model: one process's trace, fed event by event into the
 * state the report reads (what was live where, peaks, headroom, spills,
 * fragmentation, sites).
 *
 * Contract:
 *  - Feed records in file order with vt_model_feed(), then call
 *    vt_model_finish() once; the report reads vt_model_proc() afterwards.
 *    A trace still being written is viewed instead (vt_model_view): proc
 *    then reads as if finished there, and feeding goes on with the records
 *    that follow, viewed again (or finished) after them, each time as one
 *    finish after all of them would leave it.
 *  - Memory is bounded by live allocations + unique stacks + sites, never by
 *    the number of events.
 *  - Bad events never fail the model: a free of an unknown pointer (or a
 *    double free) is counted in events.unmatched_frees; an allocation at a
 *    pointer that is still live implicitly frees the old one (events can be
 *    dropped) and is counted in events.implicit_frees; unknown api ids are
 *    counted and skipped. Only VT_E_NOMEM fails vt_model_feed().
 *  - cudaFree / cuMemFree release whatever space the pointer lives in
 *    (device or managed): lookups are by address, whatever the space.
 *  - Times in vt_proc_t are ns since the PROCESS record's mono_start_ns.
 *  - Sizes are requested bytes; the driver's rounding (reserved - requested,
 *    when the trace knows reserved) is kept apart as rounding waste.
 *  - Estimated free ("free_est") on a device = the driver's last reported
 *    free (MEMINFO sample, or the DEVICE record's free at first sight) minus
 *    what this process's tracked device bytes grew by since that report.
 *    Rounding makes the driver use more than requested, so the estimate is
 *    optimistic: it never invents a spill that did not happen.
 */
#ifndef VT_MODEL_H
#define VT_MODEL_H

#include <stdint.h>

#include "u64map.h"
#include "rules.h"
#include "stack_tree.h"
#include "trace_reader.h"
#include "vramtrace/entrypoints.h"

#define VT_MAX_DEVICES 64
#define VT_MAX_LATER_SPILLS 32
#define VT_MAX_POOLS 32                /* per device; more are counted, not kept */
#define VT_FRAG_MAX_LIVE (1u << 20)  /* external fragmentation skipped above this */

enum vt_spill_kind {
    VT_SPILL_OOM,
    VT_SPILL_HOST_FALLBACK,
    VT_SPILL_MANAGED_OVERSUB,
    VT_SPILL_OVER_CAPACITY,
    /* A CUDA graph's launch failed for lack of memory: the driver's graph
     * pool could not grow for the graph's allocations, whose size the
     * trace does not hold (bytes 0, tag unknown). */
    VT_SPILL_GRAPH_LAUNCH,
    VT_SPILL_KINDS
};
const char *vt_spill_kind_name(int kind);

/* An event as the report shows it, with the device state then. */
/* A failed request's result that means the memory was not there: the
 * driver's CUDA_ERROR_OUT_OF_MEMORY and the runtime's
 * cudaErrorMemoryAllocation, both 2 (cuda.h, driver_types.h; report_common.c
 * checks they agree). Any other failure (CUDA_ERROR_ILLEGAL_ADDRESS after a
 * kernel fault makes every later request fail, CUDA_ERROR_INVALID_CONTEXT,
 * CUDA_ERROR_DEINITIALIZED) says nothing of memory. */
#define VT_RESULT_OUT_OF_MEMORY 2u
static inline int vt_result_out_of_memory(uint32_t result) { return result == VT_RESULT_OUT_OF_MEMORY; }

typedef struct vt_event_view {
    int valid;
    uint64_t time_ns;     /* since trace start */
    uint16_t api;
    uint64_t bytes;
    int tag;
    int device;           /* ordinal, -1 host */
    uint32_t result, tid, stack;
    /* the state of `device` just before the event (0 when host) */
    uint64_t dev_tracked, dev_by_tag[VT_MAX_TAGS];
    int have_free;
    uint64_t last_free;   /* driver's last report */
    int64_t free_est;     /* see contract */
    uint64_t free_after;  /* margin crossings: estimated free after it */
} vt_event_view_t;

typedef struct vt_spill_brief {
    int kind;
    uint64_t time_ns, bytes;
    uint16_t api;
    int tag, device;
    uint32_t result;
} vt_spill_brief_t;

typedef struct vt_tagged_peak {
    uint64_t tracked;                 /* live now */
    uint64_t by_tag[VT_MAX_TAGS];
    uint64_t peak_bytes, peak_time_ns, peak_seq;
    uint64_t peak_by_tag[VT_MAX_TAGS];
    int have_peak;
} vt_tagged_peak_t;

/* One live range of a device's address space (vt_model_keep_layout). */
typedef struct vt_range {
    uint64_t addr, size;
    int8_t tag;
    uint8_t vmm;   /* a VMM mapping (else an allocation) */
} vt_range_t;

/* Gaps between a device's live ranges at one moment (model_frag.c). */
typedef struct vt_holes {
    int measured;   /* 0: not measured (no failure, or too many live ranges) */
    uint64_t bytes, largest, ranges;
} vt_holes_t;

/* A stream-ordered pool as its last POOL_USAGE events reported it. */
typedef struct vt_pool_usage {
    uint64_t handle, reserved, used;
} vt_pool_usage_t;

typedef struct vt_dev {
    int ordinal;
    int have_info;          /* a DEVICE record was seen */
    uint8_t uuid[16];
    char name[128];
    uint64_t total, first_free, first_time_ns;
    vt_tagged_peak_t mem;   /* device bytes: allocations + VMM physical */
    uint64_t allocs;
    /* driver view */
    int have_free;
    uint64_t last_free, last_free_time_ns, tracked_at_sample;
    int have_min;
    uint64_t min_free, min_free_time_ns;
    int min_free_estimated; /* the minimum came from an estimate, not a sample */
    uint64_t free_at_peak;
    int have_free_at_peak;
    /* margin rule */
    vt_event_view_t below_margin;  /* valid when the run went below */
    /* When a driver report, not an allocation of this process, first found
     * free memory below the margin (below_margin is then that report):
     * how much less free it found than this process's bytes explain. */
    uint64_t below_margin_outside;
    /* vmm / rounding, now and at peak */
    uint64_t va_reserved, va_mapped, vmm_physical, rounding_waste, rounding_allocs;
    uint64_t peak_va_reserved, peak_va_mapped, peak_vmm_physical, peak_rounding_waste;
    uint64_t max_va_reserved, max_va_mapped;
    /* external fragmentation at peak */
    int frag_pending, frag_computed, frag_skipped;
    uint64_t frag_span, frag_holes, frag_largest_hole, frag_live_allocs;
    vt_range_t *layout;     /* live ranges at peak, by address (keep_layout) */
    /* pool slack: bytes stream-ordered pools reserved beyond what they have
     * allocated, from POOL_USAGE samples; at peak as the samples after it
     * report (else the last known before it) */
    vt_pool_usage_t pools[VT_MAX_POOLS];
    uint32_t npools, pools_untracked;
    uint64_t pool_slack, pool_slack_at_peak, max_pool_slack;
    int have_pool_slack_at_peak;
    size_t nlayout;
    /* smoking guns */
    uint64_t failures;
    uint64_t graph_launch_oom;  /* graph launches that failed for lack of memory here */
    /* The latest of them, until the shim's after-failure sample gives the
     * tipping event the driver's free memory (as for a failed request). */
    int pend_launch_active;
    uint64_t pend_launch_time_ns;
    /* The driver's graph pool (POOL_USAGE of cuDeviceGetGraphMemAttribute,
     * the shim's samples or the program's own queries): reports of its
     * reserved bytes (CURRENT or HIGH), the last RESERVED_MEM_CURRENT, and
     * the largest reserved and used bytes any report gave. Lower bounds of
     * what the pool held: it may have held more between reports. */
    uint64_t graph_pool_reports, graph_reserved_last, graph_reserved_max, graph_used_max;
    uint64_t failed_with_free;
    vt_event_view_t first_failed_with_free;
    int pend_fail_active, pend_fail_counted;
    uint64_t pend_fail_size;
    vt_event_view_t pend_fail_view;
    /* This process's holes on the device at a failed request (the pending
     * one, and first_failed_with_free's): what a fragmentation claim needs. */
    vt_holes_t pend_fail_holes, gun_holes;
    uint32_t fail_measures;
    uint64_t retry_bursts, retry_freed_bytes;
    uint64_t retry_recovered;   /* failures whose same-size retry on the same thread succeeded */
    vt_event_view_t first_burst;
    uint64_t first_burst_frees, first_burst_freed;
    int retry_active;
    uint64_t retry_size, retry_frees, retry_freed;
    uint32_t retry_tid;
    int retry_tag;
    /* last successful allocation here: who crossed the margin per a sample */
    vt_event_view_t last_alloc;
    int oversub_active;
} vt_dev_t;

/* Which evidence decided a site's tag, in the order they are tried
 * (docs/report.md "Tags"): the user's rules, then ggml's own mark on the
 * buffer (GGML_BUFFER records), then the built-in stack rules. */
enum vt_decided {
    VT_DECIDED_NOTHING,     /* no rule matched and no mark: unknown */
    VT_DECIDED_USER_RULE,
    VT_DECIDED_GGML_MARK,
    VT_DECIDED_BUILTIN_RULE,
};

typedef struct vt_site {
    uint32_t stack;
    uint8_t space;       /* enum vt_space */
    uint8_t ggml_usage;  /* the mark on this site's buffers (vt_ggml_usage), 0 none */
    uint8_t decided;     /* enum vt_decided */
    int16_t device;      /* -1 for host/managed */
    /* The tag given: match.rule is the deciding rule, -1 when ggml's mark
     * or nothing decided. stack_match is what the rules alone say, kept to
     * show where a mark and a rule disagree. */
    vt_match_t match, stack_match;
    uint64_t calls, failed, total_bytes;
    /* Failed requests from here: the bytes they asked for, and the last
     * one's entry point and result (what the site tables print). */
    uint64_t failed_bytes;
    uint32_t failed_result;
    uint16_t failed_api;
    uint64_t live, at_peak, max_live, changed_seq;
    /* Allocations from here live now (at the end: never freed, what
     * --leaks lists) and those freed again with their bytes (--churn: the
     * temporaries a caching allocator would keep from the driver). */
    uint64_t live_allocs, frees, freed_bytes;
    /* Of those freed, heaptrack's temporaries: freed with no other
     * allocation or free between the allocation and its free, in trace
     * order (heaptrack -T). */
    uint64_t temporary, temporary_bytes;
} vt_site_t;

/* Where ggml's buffers were (model_placement.c). */
enum vt_place { VT_PLACE_GPU, VT_PLACE_PINNED, VT_PLACE_MAPPED, VT_PLACE_PAGEABLE };

typedef struct vt_place_bytes {
    uint64_t gpu, pinned, mapped, pageable;
    uint64_t gpu_by_dev[VT_MAX_DEVICES];   /* by ordinal, where the type's name gives it */
} vt_place_bytes_t;

static inline uint64_t vt_place_host(const vt_place_bytes_t *b)
{
    return b->pinned + b->mapped + b->pageable;
}

/* Placement: where a ggml program's model ran, from its GGML_* records
 * (model_placement.c says what decides a buffer's place and content).
 * known = 0 without them: nothing below is filled, and the report says
 * nothing about placement it cannot see. */
typedef struct vt_placement {
    int known;
    uint64_t at_ns;            /* the moment pictured: most weights + KV live */
    uint64_t buffers;          /* weights, KV and other buffers live then */
    vt_place_bytes_t weights, kv, compute, other;
    uint64_t input_host;       /* token embeddings in host memory: llama.cpp's design, not an offload */
    int layers_known;          /* blk.N tensors were named */
    uint32_t blocks, blocks_gpu;
    int output_layer;          /* -1 none named, 0 host, 1 GPU */
    uint64_t output_bytes;     /* what the output layer weighs on a GPU: with tied embeddings, their copy too */
    uint32_t layers_total, layers_gpu;   /* llama.cpp's count: blocks + the output layer */
    uint32_t layers_by_dev[VT_MAX_DEVICES];
    uint32_t kv_blocks, kv_blocks_gpu;
    /* The KV cache's cells pictured, as llama.cpp's log counts them ("N
     * cells": kv_size, one stream's), and its streams: 1, one cache every
     * sequence shares (--kv-unified, or one sequence); S, S sequences
     * (-np S) with kv_cells each. Both from the largest cache: its K and
     * V tensors' rows (ggml_nrows: kv_size x n_stream) over their
     * per-stream views' rows. kv_streams 0: no views in the trace (a
     * llama.cpp before streams, 2025), and kv_cells are then the rows,
     * over all sequences. kv_cells 0: the trace does not say (shims
     * before it, flat 1-D caches, a recurrent model's states alone);
     * kv_streams is then 0 too. */
    uint32_t kv_cells, kv_streams;
    uint64_t block_weight_bytes, block_kv_bytes;   /* per block, on average */
    uint64_t ggml_records, tensors, tensors_unattributed;
    /* Buffers ended because their tensors' names were placed again (a
     * reload whose frees the trace does not hold: model_placement.c). */
    uint64_t placed_again;
    /* Weight and KV buffers with named tensors not live at the picture's
     * moment: the model's placement changed over the run. */
    uint32_t buffers_outside;
    uint64_t lost;             /* GGML_LOST: records the shim could not queue */
    uint64_t records_over_bounds;
    /* Blocks, the output layer or KV cache in host memory (token
     * embeddings alone are not an offload: llama.cpp keeps them there). */
    int offloaded;
    uint64_t layer_weights_host, layer_weights;   /* blocks + output layer */
    /* Blocks on the GPU (among blocks_gpu) whose experts are in host
     * memory (llama-server's --cpu-moe, --n-cpu-moe), and those experts'
     * bytes (in layer_weights_host too). */
    uint32_t expert_blocks_host;
    uint64_t experts_host;
    uint64_t block_rest_bytes;   /* per block, on average: its weights but its experts */
    /* Blocks on the GPU (among blocks_gpu) whose KV cache is in host
     * memory (llama.cpp's --no-kv-offload: every block's), and those
     * bytes (in kv's host figures too). */
    uint32_t kv_blocks_host;
    uint64_t kv_host_of_gpu_blocks;
    /* Blocks in host memory (not among blocks_gpu) whose KV cache is on a
     * GPU: -ngl put them there, and an override (llama-server's -ot) keeps
     * their weights, or most of them, in host memory; llama.cpp counts
     * them among the offloaded layers. Their weights' bytes in host memory. */
    uint32_t override_blocks;
    uint64_t override_host;
    /* Blocks on the GPU (among blocks_gpu) with weights besides their
     * experts in host memory: an override of part of a block (-ot
     * blk.N.ffn_up=CPU, or --fit's overflow of its partial layer,
     * common/fit.cpp's LAYER_FRACTION_*), and those bytes (in
     * layer_weights_host too). llama.cpp offloads a block whole
     * otherwise. */
    uint32_t part_blocks_host;
    uint64_t part_host;
    /* Models loaded at once (model_placement.c: a block's tensors named
     * again while the buffer of the same names before is live on a GPU or
     * in pinned memory: llama.cpp's draft model beside its target, two
     * models in one process). The figures above are then of one of them,
     * the one with most layers in host memory (else the largest); the
     * others are summed up here. 1 for one model. */
    uint32_t models_at_once;
#define VT_MAX_OTHER_MODELS 7
    struct vt_other_model {
        uint32_t layers_total, layers_gpu;
        uint64_t layer_weights, layer_weights_host, kv_host;
    } other_models[VT_MAX_OTHER_MODELS];
    vt_place_bytes_t layer_weights_at;            /* the same, by place */
    /* The offload arithmetic (docs/report.md, "Offload estimate"): on the
     * GPU holding the most weights, the room above the margin at the
     * lowest free (less a device request that failed and was not met) in
     * layers of this run's size. known = 0 without blocks, a device or a
     * driver report of free memory. */
    struct vt_advice {
        int known, device;
        uint64_t total, free_lowest, margin, unmet, per_layer, per_layer_kv;
        int64_t room;
        uint32_t gpu_layers;   /* advised, in llama.cpp's count */
        uint64_t need_all;     /* what every layer on the GPU (experts included) adds to now */
        int64_t short_all;     /* need_all - room: > 0, more VRAM for a full offload */
        /* Every layer on the GPU, experts of some in host memory: how many
         * blocks' experts would fit too (llama.cpp's --n-cpu-moe counts
         * the others). */
        uint32_t expert_blocks_fit;
        int of_experts;        /* the estimate is expert_blocks_fit, not gpu_layers */
        /* Layers in host memory, and every block on the GPU has its
         * experts in host memory (--cpu-moe): a layer more is counted
         * without its experts (per_layer), which stay where they are. */
        int experts_kept;
        /* Every layer on the GPU, the KV cache of their blocks in host
         * memory and no experts there: the estimate is whether that KV
         * cache fits too (kv_fits); llama.cpp moves all of it or none. */
        int of_kv, kv_fits;
        /* Layers in host memory, and every block on the GPU has its KV
         * cache in host memory (--no-kv-offload): a layer more is counted
         * without its KV cache (per_layer_kv 0), which stays there. */
        int kv_kept;
        /* Every block in host memory is an override's (override_blocks),
         * beside blocks on the GPU with part of their weights in host
         * memory (part_blocks_host), and nothing else is there: -ngl is
         * not the knob; how many of those blocks' host weights would fit
         * too. */
        int of_override;
        uint32_t override_blocks_fit;
        /* What that estimate moves: the override blocks and the blocks on
         * the GPU with part of their weights in host memory, and their
         * host bytes. */
        uint32_t override_n;
        uint64_t override_bytes;
    } advice;
    /* The GPUs holding the model's layer weights when more than one: the
     * estimate counts one card's room, so none is made (advice.known 0). */
    uint32_t advice_withheld_gpus;
    /* The GPUs this process used (DEVICE records) when more than one and
     * the layers are on one or none of them: llama.cpp's -sm layer spreads
     * what it offloads over every GPU it sees, so no one card's room says
     * what fits. 0 where the options pin it to one GPU (vt_proc_one_gpu). */
    uint32_t advice_withheld_devices;
    /* Layers in host memory, and some blocks on the GPU with their experts
     * in host memory but not all: what a layer more costs depends on which
     * (--n-cpu-moe counts from the first), so no estimate is made. */
    int advice_withheld_experts;
    /* Blocks on the GPU with their KV cache in host memory, and either
     * layers in host memory with some GPU blocks' KV cache on the GPU
     * (VT_WITHHELD_KV_SOME), or every layer on the GPU with experts in
     * host memory too (VT_WITHHELD_KV_AND_EXPERTS: which would move
     * first is the program's choice): no estimate. */
    int advice_withheld_kv;
    /* Blocks in host memory by an override beside others (by -ngl, or
     * with experts or KV cache in host memory): which a change would move,
     * the trace cannot say, so no estimate. */
    int advice_withheld_override;
#define VT_WITHHELD_KV_SOME 1
#define VT_WITHHELD_KV_AND_EXPERTS 2
} vt_placement_t;

typedef struct vt_api_stats {
    uint64_t calls, failed, bytes;
} vt_api_stats_t;

typedef struct vt_proc {
    uint64_t pid, ppid, mono_start_ns, wall_start_ns;
    uint64_t time_res_ns; /* grain of event times, from PROCESS; 0 = not stated */
    uint64_t degraded;    /* vt_degraded bits, from PROCESS: libraries the shim did without */
    char *exe, *hostname, *shim_version;
    char **argv;
    uint32_t argc;
    /* The variables of the start-up environment that decide where memory
     * goes ("NAME=VALUE", the shim's list); env_recorded 0: a shim that
     * did not look, so no envc says a variable was unset. */
    char **env;
    uint32_t envc;
    int env_recorded;
    /* llama.cpp's --fit: free-memory queries made from under
     * common_fit_params (llama_params_fit before it moved to common), which
     * measures the model with no_alloc probes before the load and sets what
     * was left unset; first and last since trace start. */
    struct {
        uint64_t queries, first_ns, last_ns;
    } llama_fit;
    int have_process;
    /* GGML_BUFFER records marking WEIGHTS or COMPUTE: how many, how many
     * named an allocation of this trace, how many named none (memory the
     * shim does not see: ggml's CPU buffers) and how many marked an
     * allocation a second time with another usage (the last one counts). */
    struct {
        uint64_t marks, matched, unmatched, remarked;
    } ggml;
    vt_placement_t placement;
    /* A pinned site tagged weights whose stack a llama.cpp rule matches:
     * a ggml runtime whose trace lacks ggml's records (the report then
     * tells llama.cpp's reasons, not an offload). */
    int host_weights_ggml_rule;
    struct {
        uint64_t allocs, frees, failed, dropped, stacks_lost;
        uint64_t unmatched_frees, implicit_frees, unknown_api, total;
        /* Allocations a context teardown freed (CTX_RESET: cuCtxDestroy,
         * cuDevicePrimaryCtxReset, cudaDeviceReset), and failed requests
         * whose size overflowed 64 bits (size UINT64_MAX, trace_format.h):
         * refused as impossible, not a shortage of memory. */
        uint64_t teardown_frees, impossible;
        /* Failed device requests whose result was not out of memory (a
         * sticky error after a kernel fault, no current context, a driver
         * shutting down): the driver refused them for another reason, so
         * they are no spill and no shortage (vt_result_out_of_memory). */
        uint64_t failed_not_oom;
        /* CUDA graphs (VT_EF_CAPTURED, docs/report.md): successful
         * stream-ordered allocations captured into a graph and their bytes,
         * which hold no memory; captured frees, and of them those that name
         * memory allocated outside a graph (freed at a launch the trace does
         * not see: it stays live); frees outside a graph of memory a graph
         * allocated; captures begun. */
        uint64_t captured_allocs, captured_bytes, captured_frees, captured_frees_outside;
        uint64_t graph_frees, captures;
        /* Failed graph launches, and those for lack of memory on a device
         * of the trace: spills of kind VT_SPILL_GRAPH_LAUNCH. */
        uint64_t graph_launch_failures, graph_launch_oom;
        /* Successful launches in the trace: each the first after a failed
         * one (the shim records no other). The OOM launch failures before
         * the last of them are recovered: the program launched again. */
        uint64_t graph_launches_after_failure, graph_launch_recovered;
        uint64_t graph_relaunch_time_ns;  /* the first of them, since trace start */
        /* VMM handles with no memory of their own (VMM_EMPTY): imported
         * from other processes' exports, and multicast objects; releases of
         * their references. None holds or frees this process's memory, so
         * none is in allocs, frees or unmatched_frees. */
        uint64_t imported_handles, multicast_objects, empty_handle_releases;
        /* Device pointers mapped from other processes' memory (PTR_IMPORT),
         * and the releases of those references (cuMemFree, cuMemFreeAsync,
         * cuIpcCloseMemHandle naming one): none is in allocs, frees or
         * unmatched_frees. */
        uint64_t imported_pointers, imported_pointer_frees;
        /* dropped by reason, from the same record as dropped; reasons 0
         * when the trace does not say (older shims) */
        vt_lost_t by_reason;
    } events;
    vt_api_stats_t apis[VT_API_COUNT];
    /* Successful requests that hold memory (not address reservations or
     * mappings) by size, bucket b = [2^b, 2^(b+1)) bytes: --histogram. */
    uint64_t size_hist_count[64], size_hist_bytes[64];
    /* The devices seen, in order of first sight (at most VT_MAX_DEVICES):
     * grown as they appear, since a report of a directory keeps a model
     * per trace and most traces see one GPU. A vt_dev_t pointer is valid
     * until the next event is fed. */
    vt_dev_t *devs;
    int ndevs, devs_cap;
    vt_tagged_peak_t host;      /* pinned host: allocations + registrations */
    uint64_t host_registered;
    vt_tagged_peak_t managed;
    uint64_t pools_created, pool_allocs, pool_trims;
    /* The first of events.failed_not_oom (valid 0 without one). */
    vt_event_view_t first_not_oom;
    /* spill */
    vt_event_view_t tip;
    int tip_kind;
    vt_spill_brief_t later[VT_MAX_LATER_SPILLS];
    uint64_t nlater;
    uint64_t spill_count[VT_SPILL_KINDS], spill_bytes[VT_SPILL_KINDS];
    uint64_t spills;   /* the sum of spill_count, for per-event observers */
    uint64_t oom_shortfall, oversub_excess;
    uint64_t fallback_live, fallback_peak;
    uint32_t failed_tags;       /* bit per tag of failed device requests not since retried successfully */
    uint32_t fallback_tags;     /* bit per tag of pinned allocations counted as host fallback */
    uint64_t allocs_after_tip;  /* successful allocations after the tipping event */
    int last_failed_tag;        /* tag of the latest failed device request not since retried, -1 none */
    int host_weights_after;     /* last_failed_tag when pinned weights last reached a peak, -1 none */
    int last_failed_dev;
    int ended;
    uint64_t end_how; /* END's vt_end_how (an unknown value passes as is) */
    uint64_t end_time_ns, last_time_ns;
    /* The trace stops inside a chunk (vt_model_mark_truncated): nothing
     * after truncated_at is known, so the verdict may not speak for the
     * whole run. */
    int truncated, damaged;
    uint64_t truncated_at;
    /* sites */
    vt_site_t *sites;
    size_t nsites;
    /* The site of the latest successful allocation, registration or
     * cuMemCreate (UINT32_MAX: none yet): what a per-event observer reads
     * to know the tag and stack an allocation was given. */
    uint32_t last_alloc_site;
} vt_proc_t;

typedef struct vt_model vt_model_t;

/* Called after each change of a device's tracked bytes (for the combined
 * per-GPU view across processes); abs_time_ns is the monotonic time. Once
 * it has returned 1 for a device, it is called for that device's increases
 * only (a hook whose state is a running maximum of sums it recomputes
 * needs no decreases; half the events of a steady state are frees), and
 * only those that leave the device at or above its hook floor. */
typedef int (*vt_dev_hook_t)(void *ctx, const vt_model_t *m, int dev_index, uint64_t abs_time_ns);

/* rules are borrowed and must outlive the model; margin_pct in [0,100]. */
vt_model_t *vt_model_new(const vt_rules_t *rules, double margin_pct);
void vt_model_free(vt_model_t *m);
void vt_model_set_hook(vt_model_t *m, vt_dev_hook_t hook, void *ctx);
/* The hook floor of device dev_index (initially 0): increases that leave
 * the device's tracked bytes below it do not call the hook. A GPU that one
 * device alone makes up cannot reach a new peak below its peak, so the
 * per-GPU view sets its peak here and 0 again when another device joins. */
void vt_model_set_hook_floor(vt_model_t *m, int dev_index, uint64_t floor);
/* Keep each device's live ranges at its peak (devs[].layout) for pictures
 * of the address space; costs one copy of the live ranges per device. */
void vt_model_keep_layout(vt_model_t *m, int on);
/* Source lines in printed stacks (vt_stacks_set_source); on by default. */
void vt_model_set_source(vt_model_t *m, int on);

int vt_model_set_process(vt_model_t *m, const vt_rec_process_t *p);
int vt_model_feed(vt_model_t *m, const vt_record_t *rec);
/* vt_model_feed of an EVENT record, without the record around it. */
int vt_model_feed_event(vt_model_t *m, const vt_event_t *ev);
/* A hint that ev will be fed soon: starts loading what feeding it reads
 * (the live slot its address hashes to, its live entry, its site). Stages
 * 0, 1, 2 are meant to be called in turn a few events apart, each using
 * what the previous one brought in: each wants the value the one before
 * returned (stage 0: cookie 0), and a stage given 0 has nothing to do
 * (the caller may skip it). Changes nothing and reads only in bounds, so
 * any event and cookie at any time is safe; output never depends on it. */
uint32_t vt_model_prefetch(const vt_model_t *m, const vt_event_t *ev, int stage, uint32_t cookie);
/* A hint that STACK record n will be fed soon: the first event on the new
 * stack judges it from its parent's memo (stack_match) and writes its
 * own, both usually far from anything recent. Same guarantees as
 * vt_model_prefetch. */
void vt_model_prefetch_node(const vt_model_t *m, const vt_rec_stack_t *n);
/* Fills proc's figures that are summed at the end (fragmentation at
 * peak, placement, the sites' bytes at peak) from what was fed so far,
 * leaving the model able to take more records; as many times as wanted. */
void vt_model_view(vt_model_t *m);
/* vt_model_view, then frees what only more records would need: nothing
 * may be fed after it. */
void vt_model_finish(vt_model_t *m);

/* ggml's buffer marks (GGML_BUFFER records) as a witness of what an
 * allocation holds (model_witness.c). A mark names its allocation by base
 * address and time only, and the file holds it anywhere after that
 * allocation's event, often after its free (the shim queues marks apart
 * from the threads' event buffers): a reading cannot use a mark when its
 * allocation is fed. So a reading only collects the marks
 * (vt_model_marks_seen); vt_marks_match reads the trace again and names
 * each mark's allocation; a new reading given those (vt_model_give_marks)
 * tags every marked allocation as it is fed. A trace without ggml is
 * read once. */
typedef struct vt_marks vt_marks_t;
/* GGML_BUFFER records marking WEIGHTS or COMPUTE read so far. */
size_t vt_model_marks_seen(const vt_model_t *m);
/* Reads reader (the same trace, from its start) and matches the marks m
 * saw to its allocations. NULL when out of memory or on a read error
 * (*err set, err->path left to the caller). */
vt_marks_t *vt_marks_match(const vt_model_t *m, vt_reader_t *reader, vt_error_t *err);
/* Before the first event: allocations are tagged by these marks (taken
 * over; freed with the model), and proc.ggml counts what matching found. */
void vt_model_give_marks(vt_model_t *m, vt_marks_t *marks);
void vt_marks_free(vt_marks_t *marks);

const vt_proc_t *vt_model_proc(const vt_model_t *m);
/* The offload estimate of placement.advice, the same arithmetic, for a
 * card of `total` bytes whose free memory at the lowest would be
 * free_lowest (this run's layers, failed request and margin otherwise):
 * what `replay --capacity` says of another card. free_lowest below 0 (a
 * card smaller than what the run used) counts in the room; out->free_lowest
 * says 0 then. Given the run's own total and free at the lowest, *out is
 * placement.advice. @return 0 (out untouched) when the run has no estimate. */
int vt_model_advise(const vt_model_t *m, uint64_t total, int64_t free_lowest, struct vt_advice *out);
/* The reader stopped at file offset `offset`: a partial chunk, or with
 * `damaged` a corrupt one. */
void vt_model_mark_truncated(vt_model_t *m, uint64_t offset, int damaged);
/* Reading goes on where a partial chunk stopped it: the mark is gone until
 * the reader stops inside a chunk again. */
void vt_model_resume(vt_model_t *m);
const vt_stacks_t *vt_model_stacks(const vt_model_t *m);
const vt_rules_t *vt_model_rules(const vt_model_t *m);
double vt_model_margin(const vt_model_t *m);

/* The tag the rules gave an allocation with this stack (after it was fed),
 * VT_TAG_UNKNOWN for a stack no allocation used. */
int vt_model_stack_tag(const vt_model_t *m, uint32_t stack);

/* Index in proc->devs of ordinal, or -1. */
int vt_model_dev_index(const vt_model_t *m, int ordinal);

/* llama.cpp's options of a process as common/arg.cpp reads them
 * (proc_options.c): the environment's LLAMA_ARG_* first, the command line
 * over it, the last of an option given winning. */
/* The value of the last of names on the command line ("-x V" or "-x=V"),
 * or NULL; *name (may be NULL) gets the name it was given by. */
const char *vt_proc_arg_value(const vt_proc_t *p, const char *const *names, size_t nnames, const char **name);
/* A flag (no value) on the command line: its name as given, or NULL. */
const char *vt_proc_arg_flag(const vt_proc_t *p, const char *const *names, size_t nnames);
/* The value of NAME=VALUE in the recorded environment, or NULL. */
const char *vt_proc_env_value(const vt_proc_t *p, const char *name);
/* An option's value as llama.cpp reads it: the command line's (names), else
 * its LLAMA_ARG_* variable's (env), else NULL; *from_env (may be NULL) is
 * 0 where the command line gave it, 1 otherwise. */
const char *vt_proc_option(const vt_proc_t *p, const char *const *names, size_t nnames, const char *env, int *from_env);
/* common/arg.cpp's is_truthy and is_falsey, for a flag's variable. */
int vt_llama_truthy(const char *v);
int vt_llama_falsey(const char *v);
/* 1 when llama.cpp was told to keep the KV cache in host memory: the last
 * of -nkvo/--no-kv-offload and -kvo/--kv-offload on the command line, else
 * LLAMA_ARG_KV_OFFLOAD off. */
int vt_proc_no_kv_offload(const vt_proc_t *p);
/* 1 when llama.cpp was told to offload to one GPU whatever it sees: -sm
 * none (LLAMA_ARG_SPLIT_MODE=none), -dev/--device (LLAMA_ARG_DEVICE)
 * naming a single device, or a -ts/--tensor-split (LLAMA_ARG_TENSOR_SPLIT)
 * with one share above 0. */
int vt_proc_one_gpu(const vt_proc_t *p);

#endif
