/* Streaming reader for vramtrace trace files (include/vramtrace/trace_format.h).
 *
 * Contract:
 *  - Every trace is hostile. Every length, count and index read from the file
 *    is checked against the VT_MAX_* bounds and the bytes actually present
 *    before use; no allocation is sized by an unchecked length.
 *  - Memory is bounded by one chunk (VT_MAX_CHUNK_RAW + VT_MAX_CHUNK_ZSIZE),
 *    never by the number of records in the file.
 *  - Records are returned in file order. Pointers inside a record (strings,
 *    argv, build ids) point into the reader's buffers and stay valid only
 *    until the next vt_reader_next() call or vt_reader_close().
 *  - Unknown record types are skipped. Unknown event api ids are returned as
 *    they are: the caller checks them with vt_api_info().
 *  - A file cut short (SIGKILL, disk full) yields every record of its complete
 *    chunks, then VT_E_TRUNCATED with the offset of the partial chunk; a
 *    file still being written can be read on from there (vt_reader_resume).
 */
#ifndef VT_TRACE_READER_H
#define VT_TRACE_READER_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "vramtrace/trace_format.h"

typedef struct vt_bytes {
    const char *data;  /* not NUL-terminated, may hold any byte */
    uint32_t len;
} vt_bytes_t;

typedef struct vt_rec_process {
    uint64_t pid, ppid, mono_start_ns, wall_start_ns;
    vt_bytes_t shim_version, exe, hostname;
    uint32_t argc;
    const vt_bytes_t *argv;   /* argc entries */
    uint64_t time_res_ns;     /* grain of EVENT times; 0 = not stated */
    uint64_t degraded;        /* vt_degraded bits; 0 = none stated */
    uint32_t envc;            /* the placement variables the shim found */
    const vt_bytes_t *env;    /* envc "NAME=VALUE" entries */
    int env_recorded;         /* 0: a shim before the field (envc 0 says nothing) */
} vt_rec_process_t;

typedef struct vt_rec_device {
    int32_t ordinal;
    uint64_t time_ns, total_bytes, free_bytes;
    uint8_t uuid[16];
    vt_bytes_t name;
} vt_rec_device_t;

typedef struct vt_rec_module {
    uint64_t module_id, base, size;
    vt_bytes_t build_id, path;
} vt_rec_module_t;

typedef struct vt_rec_frame {
    uint64_t ip, module_id, sym_offset;
    vt_bytes_t function;
} vt_rec_frame_t;

typedef struct vt_rec_stack {
    uint64_t node_id, parent_id, ip;
} vt_rec_stack_t;

/* The loss by reason that DROPPED and END may end with (trace_format.h):
 * reasons = how many the record stated (0: none, an older shim), lost[] the
 * counts of those this reader knows; their sum is at most dropped_total, and
 * the rest was lost for reasons it cannot name. */
typedef struct vt_lost {
    uint32_t reasons;
    uint64_t lost[VT_LOST_REASONS];
} vt_lost_t;

typedef struct vt_rec_dropped {
    uint64_t time_ns, dropped_total, stacks_lost_total;
    vt_lost_t by_reason;
} vt_rec_dropped_t;

typedef struct vt_rec_note {
    uint64_t time_ns;
    vt_bytes_t text;
} vt_rec_note_t;

typedef struct vt_rec_end {
    uint64_t time_ns, events_total, dropped_total;
    vt_lost_t by_reason;
    uint64_t how; /* vt_end_how; VT_END_EXIT when the record has none */
} vt_rec_end_t;

typedef struct vt_rec_range {
    uint64_t time_ns, tid, depth;
    uint8_t push;
    vt_bytes_t name;
} vt_rec_range_t;

typedef struct vt_rec_ggml_buffer {
    uint64_t time_ns, buffer, usage, base, size;
    vt_bytes_t name;
    uint64_t host;   /* 0 not stated, 1 device memory, 2 host memory */
} vt_rec_ggml_buffer_t;

typedef struct vt_rec_ggml_tensor {
    uint64_t time_ns, buffer, data, nbytes;
    uint64_t rows;   /* ggml_nrows; 0 not known */
    vt_bytes_t name;
} vt_rec_ggml_tensor_t;

typedef struct vt_rec_ggml_free {
    uint64_t time_ns, buffer;
} vt_rec_ggml_free_t;

typedef struct vt_rec_ggml_lost {
    uint64_t time_ns, lost_total;
} vt_rec_ggml_lost_t;

/* "ANY", "WEIGHTS", "COMPUTE" (vt_ggml_usage), NULL for any other value. */
const char *vt_ggml_usage_name(uint64_t usage);

/* "PROCESS", "EVENT", ... (enum vt_record_type), NULL for any other value. */
const char *vt_record_type_name(unsigned type);

/* "sample", "runtime", ... for one VT_EF_* bit, NULL for any other value
 * (several bits, none, or a bit no flag uses). */
const char *vt_event_flag_name(uint32_t flag);

typedef struct vt_record {
    uint8_t type;          /* enum vt_record_type */
    uint64_t file_offset;  /* offset of the chunk (or header) holding it */
    uint32_t chunk_seq;    /* UINT32_MAX for the header */
    union {
        vt_rec_process_t process;
        vt_rec_device_t device;
        vt_rec_module_t module;
        vt_rec_frame_t frame;
        vt_rec_stack_t stack;
        vt_event_t event;     /* time_ns already absolute (delta undone) */
        vt_rec_dropped_t dropped;
        vt_rec_note_t note;
        vt_rec_end_t end;
        vt_rec_range_t range;
        vt_rec_ggml_buffer_t ggml_buffer;
        vt_rec_ggml_tensor_t ggml_tensor;
        vt_rec_ggml_free_t ggml_free;
        vt_rec_ggml_lost_t ggml_lost;
    } u;
} vt_record_t;

typedef struct vt_reader vt_reader_t;

/* Opens PATH, checks the prelude and reads the PROCESS header.
 * @return 0, or a negative VT_E_* with err filled (path and offset). */
int vt_reader_open(const char *path, vt_reader_t **out, vt_error_t *err);
/* vt_reader_open, but with VT_READER_REGULAR_ONLY (for a file found in a
 * directory, which anyone who can write there may have planted): the open
 * never blocks and refuses, with a VT_E_IO error, a symbolic link and
 * anything but a regular file (a FIFO, socket or device). */
#define VT_READER_REGULAR_ONLY 1
int vt_reader_open_flags(const char *path, int flags, vt_reader_t **out, vt_error_t *err);

/* The PROCESS record from the header; valid until vt_reader_close(). */
const vt_rec_process_t *vt_reader_process(const vt_reader_t *r);

/* @return 1 with *rec filled, 0 at a clean end of file, or a negative
 * VT_E_* (VT_E_TRUNCATED for a partial last chunk) with err filled. After an
 * error, further calls return the same error. */
int vt_reader_next(vt_reader_t *r, vt_record_t *rec, vt_error_t *err);

/* The EVENT records that come next, decoded into out[0..max): exactly the
 * events vt_reader_next would return one by one, in bulk. It stops before
 * any other record, the end of a chunk, an error, or an event that needs
 * the field-by-field checks; @return how many were decoded (0: call
 * vt_reader_next, which goes on from there). */
size_t vt_reader_events(vt_reader_t *r, vt_event_t *out, size_t max);

/* The STACK record that comes next, into *out: exactly what vt_reader_next
 * would return, without its per-record costs (a trace defines a node or
 * two before each new stack's first event). @return 1, or 0 where the next
 * record is anything else, or needs the checked path (call vt_reader_next,
 * which goes on from there). */
int vt_reader_stack(vt_reader_t *r, vt_rec_stack_t *out);

/* For tests (tests/unit/test_reader.c), not for users: with on, every
 * record after this call is decoded field by field with every check, as if
 * the fast paths did not exist, and vt_reader_events returns 0. The records
 * and errors must be the same either way; the test compares them. */
void vt_reader_set_checked(vt_reader_t *r, int on);

/* Reading a file that is still being written (serve and top read a
 * trace again as it grows): after a clean end (0) or VT_E_TRUNCATED, the
 * reader goes on from the end of the last complete chunk, where the next
 * chunk starts, as if the bytes appended since had been there (chunks are
 * self-contained: nothing before that point is read again). The file is
 * opened again at path (with the flags it was opened with) when
 * vt_reader_release_file closed it, and must be the same file (device
 * and inode) no shorter than that point. @return 0, or VT_E_IO when it
 * cannot go on (another error, another file, a pipe): read it afresh. */
int vt_reader_resume(vt_reader_t *r, const char *path);
/* Closes r's file until vt_reader_resume, and frees the last chunk once
 * every record of it was returned: a reader kept between two reads of a
 * growing trace holds no descriptor and no chunk. */
void vt_reader_release_file(vt_reader_t *r);

/* Bytes of the file consumed so far and its total size (for progress). */
uint64_t vt_reader_offset(const vt_reader_t *r);
uint64_t vt_reader_file_size(const vt_reader_t *r);

void vt_reader_close(vt_reader_t *r);

#endif
