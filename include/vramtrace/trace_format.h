/* vramtrace trace format, version 4: the contract between preload/ (writer)
 * and analyzer/ (reader). Both sides compile against this header; nothing
 * else about the format exists anywhere.
 *
 * FILE LAYOUT (all integers little-endian)
 *
 *   file    := prelude header_body chunk*
 *   prelude := 16 bytes, vt_file_prelude_t:
 *                magic[8]     = "VRAMTRC\0"
 *                version u16  = the lowest version that describes the
 *                             file: 4 when it holds stored chunks, else 3
 *                             (readers refuse newer than VT_FORMAT_VERSION;
 *                             they read versions 1 to 3 too, see
 *                             VT_REC_EVENT)
 *                flags   u16  = 0 (reserved; readers ignore unknown bits)
 *                header_len u32 = bytes of header_body that follow, <= VT_MAX_HEADER
 *   header_body := a record stream (see RECORDS) holding exactly one
 *                VT_REC_PROCESS record, uncompressed so `file`/`head` tools
 *                and a half-written trace still show who wrote it.
 *   chunk   := vt_chunk_header_t (16 bytes) + zsize bytes of ONE zstd frame
 *                magic u32    = VT_CHUNK_MAGIC ("VTCK")
 *                zsize u32    <= VT_MAX_CHUNK_ZSIZE
 *                rawsize u32  <= VT_MAX_CHUNK_RAW, exact decompressed size
 *                seq u32      = 0,1,2,... per file; a gap means corruption
 *              The zstd frame carries its content checksum. The decompressed
 *              bytes are a record stream.
 *           or, version 4 only, a stored chunk: the same header with
 *                magic u32    = VT_CHUNK_STORED_MAGIC ("VTCS")
 *                zsize u32    = rawsize (a stored chunk with any other zsize
 *                             is corrupt)
 *              followed by the record stream itself, uncompressed and
 *              without a checksum. The shim writes them when it cannot load
 *              libzstd (a container image without it): a larger file with
 *              the same records. All chunks of a file are one kind or the
 *              other, but a reader need not rely on that. A version 3
 *              reader refuses the file by its version, not at its first
 *              chunk.
 *
 * Every chunk is self-contained: delta state (see EVENT) restarts at each
 * chunk, so a reader can report everything in complete chunks of a file that
 * was cut short by SIGKILL or a full disk. The writer emits one chunk at
 * least every VRAMTRACE_FLUSH_MS while events flow.
 *
 * RECORDS
 *
 *   record := type u8, len varint, payload[len]
 *
 * A reader skips types it does not know (len tells it how far), so new
 * record types do not need a version bump; changing an existing payload
 * does. A payload may be longer than the fields a reader knows: trailing
 * bytes are ignored, so fields can be appended.
 *
 * varint: unsigned LEB128, at most 10 bytes. zz: zigzag-mapped signed varint.
 * str: varint length (<= VT_MAX_STRING) then that many bytes, not NUL
 * terminated, not trusted to be UTF-8.
 *
 *   VT_REC_PROCESS  pid varint, ppid varint, mono_start_ns varint,
 *                   wall_start_ns varint (Unix epoch), shim_version str,
 *                   exe str, hostname str, argc varint (<= VT_MAX_ARGC),
 *                   argv str * argc, then optionally time_res_ns varint:
 *                   the grain of EVENT times (VRAMTRACE_TIME_RES_US), so a
 *                   reader prints no finer digits than the trace holds;
 *                   absent (shims before it, generated traces) = unknown;
 *                   then optionally degraded varint: the vt_degraded bits,
 *                   what the shim could not load or do and did without;
 *                   absent = 0 (none, or a shim that did not say);
 *                   then optionally envc varint (<= VT_MAX_ENV), env str *
 *                   envc: "NAME=VALUE", the variables of the environment the
 *                   process started with that decide where memory goes
 *                   (llama.cpp's LLAMA_ARG_* options, CUDA_VISIBLE_DEVICES,
 *                   PyTorch's allocator, ollama's scheduler: the shim's list,
 *                   never all of it), each at most VT_MAX_ENV_ENTRY bytes;
 *                   absent = not recorded (shims before it).
 *   VT_REC_DEVICE   ordinal zz, time_ns varint (monotonic, absolute),
 *                   total_bytes varint, free_bytes varint (cuMemGetInfo when
 *                   first seen: total - free is the context reserve plus
 *                   whatever else holds the card), uuid 16 raw bytes, name str
 *   VT_REC_MODULE   module_id varint (dense from 1), base varint (load bias),
 *                   size varint, build_id str (raw bytes), path str
 *   VT_REC_FRAME    ip varint, module_id varint (0 = unknown),
 *                   sym_offset varint (ip - symbol start), function str
 *                   (mangled as in the symbol table; empty = unresolved)
 *   VT_REC_STACK    node_id varint, parent_id varint, ip varint
 *                   One node of the calling-context tree (heaptrack's
 *                   "trace tree"). Ids are dense from 1 in the order written,
 *                   parent_id < node_id, 0 is the root (empty stack). The
 *                   stack of an event is the path leaf -> root, innermost
 *                   frame first. Every node is written before any event or
 *                   node that refers to it.
 *                   A native ip (bit 63 clear) carries a load epoch in bits
 *                   62..48 (VT_IP_EPOCH): how many times a library had been
 *                   unloaded (dlclose) when the stack was captured, 0 before
 *                   the first. The address is ip & VT_IP_ADDR_MASK (x86-64
 *                   and arm64 user addresses are below 2^48); the whole ip
 *                   is the frame's identity, so a library mapped where an
 *                   unloaded one was gets its own nodes and FRAME records,
 *                   never the old library's names. FRAME's ip is the whole
 *                   value too; sym_offset is from the address. Traces
 *                   written before epochs existed have 0 there.
 *   VT_REC_EVENT    see vt_event_t below; fields in this order:
 *                   api varint, present u8 (version 3 only, see below),
 *                   dt zz (time - previous EVENT's time in this chunk; the
 *                   first EVENT of a chunk is relative to the PROCESS
 *                   record's mono_start_ns), tid varint, device zz
 *                   (-1 = host / not applicable), ptr zz (versions 2 and 3:
 *                   ptr - previous EVENT's ptr in this chunk, the first
 *                   relative to 0; version 1: the address itself, a
 *                   varint), size varint, reserved varint, aux varint, flags
 *                   varint, result varint, stack varint
 *                   Version 3: the byte `present` says which of the eight
 *                   optional fields follow (VT_EV_HAS_*: dt, tid, device,
 *                   size, reserved, aux, flags, result, bits 0..7 in that
 *                   order); an absent one is 0. ptr and stack are always
 *                   there. And one EVENT record holds one or more events
 *                   back to back, as many as the writer had in a row: its
 *                   payload is exactly those events, so the trailing-bytes
 *                   rule above does not apply to it, and an empty one is
 *                   corrupt. The shim writes the length as a 3-byte varint
 *                   (non-minimal forms are valid) and patches it as events
 *                   join. Versions 1 and 2 have no `present` byte, all
 *                   eleven fields, and one event per record.
 *                   The shim writes event times rounded down to a multiple
 *                   of VRAMTRACE_TIME_RES_US (1 ms by default) after
 *                   mono_start_ns: its precision, which the PROCESS record
 *                   states. Other records' times are exact.
 *   VT_REC_DROPPED  time_ns varint, dropped_total varint (cumulative count of
 *                   the program's events the trace does not hold: lost, for
 *                   any reason), stacks_lost_total varint, then optionally
 *                   the loss by reason (see LOSS BY REASON)
 *   VT_REC_NOTE     time_ns varint, text str (a diagnostic from the shim)
 *   VT_REC_END      time_ns varint (when the call that ended the trace came:
 *                   exit's destructor, exec, _exit, abort), events_total
 *                   varint (events in the file),
 *                   dropped_total varint (as in DROPPED), then optionally the
 *                   loss by reason, then optionally how varint (vt_end_how:
 *                   how the process ended its image; absent, as before the
 *                   shim wrapped exec and _exit: exit). Written once at
 *                   process exit, exec, _exit or abort, also after
 *                   the disk filled: the shim then cuts a partial chunk off
 *                   and tries once more, with this small chunk alone. Its
 *                   absence means the process died (SIGKILL, crash), is
 *                   still running, or the disk had no room even for that:
 *                   the loss after the last DROPPED is unknown.
 *   VT_REC_RANGE    time_ns varint, tid varint, depth varint, push u8,
 *                   name str (annotation/NVTX ranges: phase tags)
 *   VT_REC_GGML_BUFFER  time_ns varint, buffer varint (the program's
 *                   ggml_backend_buffer_t, an identity only), usage varint
 *                   (vt_ggml_usage: what the program passed to
 *                   ggml_backend_buffer_set_usage, unchecked), base varint,
 *                   size varint (ggml_backend_buffer_get_base/_get_size),
 *                   name str (ggml_backend_buffer_name: "CUDA0",
 *                   "CUDA_Host", ...). One per set_usage call on a buffer
 *                   with a size (preload/ggml_buffers.c). File order
 *                   against EVENTs is not kept (events wait in per-thread
 *                   buffers): the allocation holding [base, base+size) is
 *                   the one live at base at time_ns, which is exact while
 *                   EVENT times are rounded down, so that allocation's
 *                   time is never later. A new type: older readers skip
 *                   it, no version bump.
 *                   Then optionally host varint: 0 not stated (shims
 *                   before it), 1 device memory, 2 host memory
 *                   (ggml_backend_buffer_is_host). Besides set_usage, the
 *                   shim writes one for each buffer
 *                   ggml_backend_alloc_ctx_tensors_from_buft returns (usage
 *                   as ggml_backend_buffer_get_usage says then, usually
 *                   ANY; base 0 for a multi-buffer, whose parts the
 *                   tensors' addresses name), host buffers included: the
 *                   only record of memory that never touches CUDA.
 *   VT_REC_GGML_TENSOR  time_ns varint, buffer varint (as GGML_BUFFER),
 *                   data varint (the tensor's address), nbytes varint
 *                   (ggml_nbytes), name str (ggml_get_name, at most 63
 *                   bytes: "blk.12.attn_q.weight", "cache_k_l3"). One per
 *                   tensor placed by ggml_backend_alloc_ctx_tensors_from_buft
 *                   or by a ggml_backend_tensor_alloc call from outside
 *                   libggml-base (a loader placing mmapped weights), after
 *                   its buffer's GGML_BUFFER record. Then optionally rows
 *                   varint (ggml_nrows: ne[1] x ne[2] x ne[3]; 0 or absent
 *                   = not known, shims before it): a KV cache tensor's
 *                   cells over all its streams, and its per-stream
 *                   views' ("cache_k_l3 (view)", recorded as any
 *                   tensor) one stream's. Older readers skip it.
 *   VT_REC_GGML_FREE  time_ns varint, buffer varint: ggml_backend_buffer_free
 *                   was called on it. The identity may be reused after.
 *   VT_REC_GGML_LOST  time_ns varint, lost_total varint: GGML_* records
 *                   the shim had no room to queue since the start,
 *                   cumulative. Absent = none lost. A reader that sees one
 *                   knows its buffers and tensors are not all there.
 *   GGML_* records keep their order among themselves (one queue).
 *
 * EVENT FIELD MEANING BY KIND (kind and space come from the entry point,
 * see entrypoints.def; "api" is the entry point id, stable within a format
 * version, and is the name the program called: a cudaMalloc that reaches
 * cuMemAlloc_v2 is one event, api = cudaMalloc).
 *
 *   ALLOC   ptr = returned address (0 on failure), size = requested bytes
 *           (UINT64_MAX when the request's byte count overflowed 64 bits:
 *           cuMemAllocPitch's width x height),
 *           reserved = bytes the driver set aside when knowable (pitch *
 *           height, VMM granularity), else 0; aux = pool handle / stream /
 *           flags argument as the entry point's table line says.
 *   FREE    ptr = address released; size = 0 (the reader knows it from the
 *           matching ALLOC); aux = stream for stream-ordered frees.
 *   VMM_CREATE   ptr = handle, size = bytes, device = prop->location.id
 *                (flag VT_EF_HOST_LOCATED: located in host memory)
 *   VMM_RELEASE  ptr = handle
 *   VMM_RETAIN   ptr = handle, aux = the address it was retained from
 *                (cuMemRetainAllocationHandle): one more reference to a
 *                handle, which needs its own VMM_RELEASE
 *   VMM_EMPTY    ptr = handle, size = 0: a handle that holds no memory
 *                of its own. cuMemImportFromShareableHandle: aux =
 *                CUmemAllocationHandleType, memory another process created
 *                and exported; cuMulticastCreate: aux = the most each
 *                device may bind, memory other handles hold. It needs its
 *                own VMM_RELEASE, which frees nothing of this process
 *   VMM_MAP      ptr = va, size = bytes, aux = handle
 *   VMM_UNMAP    ptr = va, size = bytes
 *   VA_RESERVE   ptr = va, size = bytes;  VA_FREE ptr = va, size = bytes
 *   REGISTER     ptr = host address, size = bytes (pinned, not allocated)
 *   UNREGISTER   ptr = host address
 *   POOL_*       ptr = pool handle, size = trim target for POOL_TRIM
 *   MEMINFO      size = free bytes, aux = total bytes (what the program was
 *                told, or a sample the shim took: flag VT_EF_SAMPLE)
 *   POOL_USAGE   ptr = pool handle, aux = CUmemPool_attribute, size = its
 *                value for the cuuint64_t attributes (4 RELEASE_THRESHOLD,
 *                5/6 RESERVED_MEM_CURRENT/HIGH, 7/8 USED_MEM_CURRENT/HIGH),
 *                else 0. The shim samples 5 and 7 of every pool it has seen
 *                right after each MEMINFO sample, with the same flags.
 *                On cuDeviceGetGraphMemAttribute the pool is the device's
 *                graph memory pool, which a graph's launches allocate from:
 *                ptr = 0, aux = CUgraphMem_attribute (0/1 USED_MEM_CURRENT/
 *                HIGH, 2/3 RESERVED_MEM_CURRENT/HIGH), size = its value.
 *                Once the process has begun a capture or added a graph
 *                memory node, the shim samples 2 and 0 of the sample's
 *                device right after each MEMINFO sample.
 *   CTX_RESET    a context teardown (cuCtxDestroy_v2, cuDevicePrimaryCtxReset
 *                and _v2, cudaDeviceReset, and cuDevicePrimaryCtxRelease
 *                and _v2 that dropped the last reference): device = the
 *                device whose context went (the current one when the call
 *                began, or the argument of the primary context's calls);
 *                ptr = the CUcontext for cuCtxDestroy_v2, else 0; aux =
 *                VT_CTX_RELEASE_KEPT for a release after which the driver
 *                said the context was still active (other references
 *                remain): no teardown, nothing freed. On success the driver freed every
 *                allocation that context made (docs/report.md): every live
 *                device allocation on that device except those named just
 *                before it by the same thread's VT_EF_OTHER_CONTEXT events.
 *                A new kind: readers that predate it skip the entry point's
 *                id.
 *   GRAPH_NODE   a memory node added to a graph through the generic
 *                cuGraphAddNode or cuGraphAddNode_v2 (no other node type
 *                is written): flag VT_EF_CAPTURED, aux = the node type,
 *                VT_GRAPH_NODE_MEM_ALLOC (then as ALLOC: ptr = the address
 *                the graph's allocation will have, size = its bytes,
 *                device = its pool's) or VT_GRAPH_NODE_MEM_FREE (then as
 *                FREE: ptr = the address freed)
 *   GRAPH_LAUNCH a launch of a CUDA graph (cuGraphLaunch, _ptsz) that
 *                failed, or the first to succeed after a failed one the
 *                shim wrote (no other successful launch is written):
 *                ptr = the CUgraphExec, aux = the stream, device = the
 *                current one, result = what the launch returned.
 *                CUDA_ERROR_OUT_OF_MEMORY means the graph pool could not
 *                grow for the graph's allocations, whose size the event
 *                does not hold.
 *   PTR_IMPORT   another process's allocation mapped here: ptr = the
 *                address (0 on failure), size = 0 (no argument holds it);
 *                aux = the imported pool (cuMemPoolImportPointer) or the
 *                flags (cuIpcOpenMemHandle, _v2). An IPC handle opened
 *                again returns the same address: one more reference. A
 *                FREE that names the address (cuIpcCloseMemHandle, or
 *                cuMemFree / cuMemFreeAsync of a pool pointer) releases a
 *                reference and frees nothing of this process. A new kind:
 *                readers that predate it skip the entry point's id.
 *
 * An ALLOC's device is the one current at the call, except for
 * stream-ordered allocations on a non-default stream or from a named pool:
 * the device the driver placed the pointer on.
 *
 * LOSS BY REASON (DROPPED and END, optional, appended; shims before it
 * write none, and a reader then knows the total only):
 *   reasons varint (<= VT_LOST_REASONS_MAX), then that many counts varint,
 *   cumulative, in vt_lost_reason order. Their sum is dropped_total; a
 *   reader that knows fewer reasons than the record holds counts the rest
 *   as lost for a reason it cannot name.
 *
 * result is the CUresult / cudaError_t the program got back. A failed
 * request is an event like any other, with its size: it is usually the most
 * important one in the file.
 *
 * PSEUDO FRAMES
 *
 * A STACK node's ip with bit 63 set is not machine code (no user-space
 * address on x86-64 or arm64 has it): bits 62..60 say what it is
 * (VT_PSEUDO_KIND), bits 59..0 are an id private to the process. Its FRAME
 * record has module_id 0, sym_offset 0, and the provider's name:
 *   VT_PSEUDO_PY     a CPython frame, merged where the interpreter's
 *                    _PyEval_EvalFrameDefault frames were in the native
 *                    stack: "py:QUALNAME (FILE:LINE)" (3.10: the function's
 *                    name, code objects have no qualname; LINE "?" when
 *                    unknown; a FILE over 120 bytes keeps its tail after
 *                    "...").
 *   VT_PSEUDO_RANGE  a range open on the allocating thread, at the outer
 *                    end of the stack, innermost range first:
 *                    "tag:NAME" (annotation API, include/vramtrace/annotate.h),
 *                    "nvtx:MESSAGE" or "nvtx:DOMAIN/MESSAGE" (NVTX push/pop).
 * The same ip always carries the same name within one trace.
 */
#ifndef VRAMTRACE_TRACE_FORMAT_H
#define VRAMTRACE_TRACE_FORMAT_H

#include <stdint.h>

/* 2: EVENT ptr became a delta. An allocation lands next to the previous
 * one and a free names a recent address, so the delta is short where the
 * address is not: ~30 % fewer bytes on the random-size bench, ~35 % on
 * the fixed loop. */
/* 3: EVENT's optional fields are left out when 0, behind a presence byte,
 * and events in a row share one record. Most optional fields are 0 in most
 * events (reserved, aux, result, often dt and device), and zstd spent a
 * sequence on each run of them and on each record's type and length: on
 * tests/bench/gentrace's traces ~13 % fewer bytes and a third less time
 * to read (zstd and decoding), on the shim's random-size bench ~24 %
 * fewer bytes. */
/* 4: stored (uncompressed) chunks, so a process whose container lacks
 * libzstd is traced all the same. Files without them stay version 3, which
 * readers of version 3 keep reading. */
#define VT_FORMAT_VERSION 4u
#define VT_FORMAT_VERSION_STORED 4u

/* Version 3 EVENT: the bits of the `present` byte, in field order. */
enum vt_event_present {
    VT_EV_HAS_DT = 1u << 0,
    VT_EV_HAS_TID = 1u << 1,
    VT_EV_HAS_DEVICE = 1u << 2,
    VT_EV_HAS_SIZE = 1u << 3,
    VT_EV_HAS_RESERVED = 1u << 4,
    VT_EV_HAS_AUX = 1u << 5,
    VT_EV_HAS_FLAGS = 1u << 6,
    VT_EV_HAS_RESULT = 1u << 7,
};
#define VT_FILE_MAGIC "VRAMTRC"     /* 7 chars + NUL = 8 bytes on disk */
#define VT_CHUNK_MAGIC 0x4b435456u  /* "VTCK" little-endian */
#define VT_CHUNK_STORED_MAGIC 0x53435456u  /* "VTCS" little-endian */

/* Hard bounds a reader enforces before trusting any length. */
#define VT_MAX_HEADER (1u << 20)
#define VT_MAX_CHUNK_ZSIZE (64u << 20)
#define VT_MAX_CHUNK_RAW (64u << 20)
#define VT_MAX_STRING (64u << 10)
#define VT_MAX_ARGC 4096u
#define VT_MAX_ENV 64u
#define VT_MAX_ENV_ENTRY 4096u
#define VT_MAX_STACK_DEPTH 256u
/* POOL_USAGE aux values the report reads (CUmemPool_attribute, cuda.h). */
#define VT_POOL_ATTR_RESERVED_CURRENT 5u
#define VT_POOL_ATTR_USED_CURRENT 7u
/* ... and on cuDeviceGetGraphMemAttribute (CUgraphMem_attribute, cuda.h). */
#define VT_GRAPH_ATTR_USED_CURRENT 0u
#define VT_GRAPH_ATTR_USED_HIGH 1u
#define VT_GRAPH_ATTR_RESERVED_CURRENT 2u
#define VT_GRAPH_ATTR_RESERVED_HIGH 3u

/* GRAPH_NODE's aux: CUgraphNodeType's memory nodes. */
#define VT_GRAPH_NODE_MEM_ALLOC 10u
#define VT_GRAPH_NODE_MEM_FREE 11u

/* CTX_RESET's aux on a primary context's release that left the context
 * active: it freed nothing. */
#define VT_CTX_RELEASE_KEPT 1u

typedef struct vt_file_prelude {
    char magic[8];
    uint16_t version;
    uint16_t flags;
    uint32_t header_len;
} vt_file_prelude_t;

typedef struct vt_chunk_header {
    uint32_t magic;
    uint32_t zsize;
    uint32_t rawsize;
    uint32_t seq;
} vt_chunk_header_t;

_Static_assert(sizeof(vt_file_prelude_t) == 16, "prelude is 16 bytes on disk");
_Static_assert(sizeof(vt_chunk_header_t) == 16, "chunk header is 16 bytes on disk");

enum vt_record_type {
    VT_REC_PROCESS = 1,
    VT_REC_DEVICE = 2,
    VT_REC_MODULE = 3,
    VT_REC_FRAME = 4,
    VT_REC_STACK = 5,
    VT_REC_EVENT = 6,
    VT_REC_DROPPED = 7,
    VT_REC_NOTE = 8,
    VT_REC_END = 9,
    VT_REC_RANGE = 10,
    VT_REC_GGML_BUFFER = 11,
    VT_REC_GGML_TENSOR = 12,
    VT_REC_GGML_FREE = 13,
    VT_REC_GGML_LOST = 14,
    VT_REC_TYPES    /* not a type: one past the last, the length of name tables */
};

/* PROCESS degraded bits: what the shim did without. */
enum vt_degraded {
    VT_DEGRADED_NO_ZSTD = 1u << 0,      /* libzstd.so.1 not loaded: stored chunks */
    VT_DEGRADED_NO_LIBUNWIND = 1u << 1, /* libunwind.so.8 not loaded: see stacks.c */
    /* unshare(CLONE_FILES) refused: the trace's descriptor is in the
     * program's table, checked before each write (see writer.c). */
    VT_DEGRADED_SHARED_FDS = 1u << 2,
};

/* Why the shim lost a program's event (DROPPED, END: LOSS BY REASON).
 * New reasons are appended, never renumbered. */
enum vt_lost_reason {
    VT_LOST_RING_FULL = 0,  /* the event buffer had no free slot */
    VT_LOST_IN_HANDLER = 1, /* a signal handler's call while its thread was inside the shim */
    VT_LOST_UNRETURNED = 2, /* a release whose call had not returned when the process exited */
    VT_LOST_UNWRITTEN = 3,  /* recorded, but the file write failed (disk full, RLIMIT_FSIZE, I/O) */
    VT_LOST_REASONS         /* not a reason: how many this header knows */
};
#define VT_LOST_REASONS_MAX 64u

/* END's how: the call that ended the process's image and its trace. */
enum vt_end_how {
    VT_END_EXIT = 0,     /* exit() or a return from main: exit handlers ran */
    VT_END_EXEC = 1,     /* an exec function: the image was replaced */
    VT_END_EXIT_NOW = 2, /* _exit or _Exit: no exit handlers */
    VT_END_ABORT = 3,    /* abort() or a failed assert(): SIGABRT follows */
};

/* GGML_BUFFER usage values: enum ggml_backend_buffer_usage in ggml-backend.h. */
enum vt_ggml_usage {
    VT_GGML_USAGE_ANY = 0,
    VT_GGML_USAGE_WEIGHTS = 1,
    VT_GGML_USAGE_COMPUTE = 2,
    VT_GGML_USAGES  /* not a usage: the length of vt_ggml_usage_name's table */
};

/* Pseudo frames (see PSEUDO FRAMES above). */
#define VT_PSEUDO_BIT (1ull << 63)
#define VT_PSEUDO_PAYLOAD_MASK ((1ull << 60) - 1)
#define VT_PSEUDO_KIND(ip) (((ip) & VT_PSEUDO_BIT) ? (unsigned)(((ip) >> 60) & 7u) : 0u)
#define VT_PSEUDO_IP(kind, id) (VT_PSEUDO_BIT | ((uint64_t)(kind) << 60) | ((uint64_t)(id) & VT_PSEUDO_PAYLOAD_MASK))
/* Native ips: load epoch and address (see VT_REC_STACK). */
#define VT_IP_EPOCH_SHIFT 48
#define VT_IP_EPOCH_MAX 0x7fffu
#define VT_IP_ADDR_MASK (((uint64_t)1 << VT_IP_EPOCH_SHIFT) - 1)
#define VT_IP_EPOCH(ip) (((ip) & VT_PSEUDO_BIT) ? 0u : (unsigned)(((ip) >> VT_IP_EPOCH_SHIFT) & VT_IP_EPOCH_MAX))
/* The address of a native ip; a pseudo ip unchanged. */
#define VT_IP_ADDR(ip) (((ip) & VT_PSEUDO_BIT) ? (uint64_t)(ip) : (uint64_t)(ip) & VT_IP_ADDR_MASK)
enum vt_pseudo_kind {
    VT_PSEUDO_PY = 1,
    VT_PSEUDO_RANGE = 2,
};

/* Event flags. */
enum vt_event_flags {
    VT_EF_SAMPLE = 1u << 0,   /* MEMINFO taken by the shim, not the program */
    VT_EF_RUNTIME = 1u << 1,  /* recorded at the runtime API (cuda*) level */
    VT_EF_PTSZ = 1u << 2,     /* per-thread default stream flavour */
    /* Reserved: one wrapper serves all three paths, so format 1 shims never
     * set these two; readers must not rely on them. */
    VT_EF_VIA_PROCADDR = 1u << 3,
    VT_EF_VIA_DLSYM = 1u << 4,
    VT_EF_FIRST_ON_DEVICE = 1u << 5, /* reserved: the DEVICE record holds first-use free */
    VT_EF_AFTER_FAILURE = 1u << 6,   /* MEMINFO sample after a failed request */
    VT_EF_AT_PEAK = 1u << 7,         /* MEMINFO sample at a new tracked peak */
    /* VMM_CREATE or POOL_CREATE of memory located in host memory
     * (CU_MEM_LOCATION_TYPE_HOST, HOST_NUMA, HOST_NUMA_CURRENT): pinned host
     * memory, not VRAM; so are the allocations from such a pool. */
    VT_EF_HOST_LOCATED = 1u << 8,
    /* A release the writer passed over while its call was blocked
     * (written after events that began after it): an allocation written
     * before it may already have reused its address, and then this frees
     * the allocation that address held before. */
    VT_EF_LATE = 1u << 9,
    /* On a CTX_RESET entry point's id, with VT_EF_SAMPLE (not a call):
     * ptr = an allocation on the device that the driver still knew after
     * the teardown this thread's next CTX_RESET event records; it belongs
     * to another context, and that teardown did not free it. Readers that
     * predate the flag take it as the teardown itself, an instant early. */
    VT_EF_OTHER_CONTEXT = 1u << 10,
    /* An ALLOC or FREE on a stream that was capturing into a CUDA graph
     * (cuStreamIsCapturing said so): the call added a node to the graph
     * and neither allocated nor freed anything. A graph allocates from the
     * driver's graph memory pool at each launch, which no event records.
     * ptr is the address the graph's allocation will have. */
    VT_EF_CAPTURED = 1u << 11,
};

/* One decoded event, as both sides see it in memory. */
typedef struct vt_event {
    uint64_t time_ns;   /* CLOCK_MONOTONIC */
    uint64_t ptr;
    uint64_t size;
    uint64_t reserved;
    uint64_t aux;
    uint32_t tid;
    uint32_t stack;     /* leaf node id, 0 = no stack */
    uint32_t flags;     /* vt_event_flags */
    uint32_t result;
    uint16_t api;       /* vt_api_id */
    int16_t device;     /* -1 = host / unknown */
} vt_event_t;

#endif
