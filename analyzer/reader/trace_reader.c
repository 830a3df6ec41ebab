/* trace_reader.c: the streaming reader behind trace_reader.h.
 *
 * The file is read front to back with plain read(), so pipes work and a
 * multi-GB trace costs one chunk of memory. Every number taken from the file
 * is a claim to be checked: lengths against the VT_MAX_* bounds and against
 * the bytes actually present, values against the width of the field they
 * land in. Buffers grow only as bytes really arrive (read_grow), so a
 * 40-byte file that claims a 64 MiB chunk costs 64 KiB, not 64 MiB.
 *
 * Error codes: bytes that stop early are TRUNCATED only where a writer that
 * was killed could have stopped (prelude, header body, chunk boundary);
 * everything inside a checksummed chunk that does not add up is CORRUPT; a
 * length over a VT_MAX_* bound is LIMIT.
 */
#include "trace_reader.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "vramtrace/encode.h"

#ifndef VT_VERSION
#define VT_VERSION "?"
#endif

#define HEADER_OFFSET 16u            /* header body follows the prelude */
#define SEQ_HEADER UINT32_MAX
#define READ_STEP (64u << 10)        /* first allocation for a claimed length */

enum { ST_STREAM, ST_EOF, ST_ERROR };

/* What an EVENT's fields are deltas of: reset at the header body and at
 * every chunk, so each chunk decodes on its own. */
typedef struct event_base {
    uint64_t time, ptr;
    unsigned version; /* the file's: ptr is a delta from 2, `present` from 3 */
} event_base_t;

struct vt_reader {
    int fd;                 /* -1 once vt_reader_release_file closed it */
    int flags;              /* vt_reader_open_flags', for vt_reader_resume */
    dev_t dev;              /* the file read, by identity (fstat at open) */
    ino_t ino;
    int state;
    uint64_t pos;           /* bytes consumed from fd */
    uint64_t file_size;     /* from fstat; 0 for pipes */
    ZSTD_DCtx *dctx;

    uint8_t *hdr;           /* header body, kept for the PROCESS strings */
    vt_rec_process_t process;
    vt_bytes_t *hdr_argv;

    uint8_t *raw;           /* the current chunk's records; freed at the end */
    size_t rawcap;
    vt_bytes_t *argv;       /* scratch for PROCESS records met in chunks */
    uint32_t argv_cap;

    /* The record stream being walked: the header body, then each chunk. */
    const uint8_t *s;
    size_t slen, spos;
    uint64_t s_offset;      /* file offset of the header body or chunk */
    uint32_t s_seq;
    uint32_t next_seq;      /* == number of complete chunks read */
    event_base_t base;      /* EVENT delta bases */
    /* Version 3 EVENT records hold events back to back: the unread part
     * of the current one is s[ev_pos, ev_end) (empty: none open). */
    size_t ev_pos, ev_end;
    int checked;            /* vt_reader_set_checked: no fast paths */

    vt_error_t err;
};

/* ---- decoding cursor over one payload ---------------------------------- */

/* The cursor is built once per record, so it is kept small: no buffers,
 * only pointers to the string literals that say what failed. */
typedef struct cur {
    const uint8_t *p;
    size_t n, i;
    size_t avail;           /* bytes readable from p (>= n): the rest of the
                               stream after this payload, for the fast path */
    int code;               /* VT_E_* of the first failure, 0 if none */
    const char *field;      /* which field failed */
    const char *why;        /* a string literal */
} cur_t;

static int cur_fail(cur_t *c, int code, const char *field, const char *why)
{
    if (!c->code) {
        c->code = code;
        c->field = field;
        c->why = why;
    }
    return -1;
}

/* Fast path: decodes the varint at *pp with no bounds check. The caller
 * guarantees VARINT_MAX readable bytes at *pp. Accepts exactly what
 * get_varint accepts; @return 0 and advances *pp, or -1 (leaving *pp
 * anywhere) for anything get_varint would reject, so the caller can redo
 * the record with the checked path and get its exact error. */
#define VARINT_MAX 10u
static inline int fast_varint(const uint8_t **pp, uint64_t *v)
{
    const uint8_t *p = *pp;
    uint64_t b = *p++;
    if (b < 0x80) {         /* most fields of most events are one byte */
        *pp = p;
        *v = b;
        return 0;
    }
    uint64_t x = b & 0x7f;
    for (unsigned k = 1; k < 9; k++) {
        b = *p++;
        x |= (b & 0x7f) << (7 * k);
        if (b < 0x80) {
            *pp = p;
            *v = x;
            return 0;
        }
    }
    b = *p++;
    if (b > 1)              /* continuation bit or bits past 63 */
        return -1;
    *pp = p;
    *v = x | b << 63;
    return 0;
}

#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* fast_varint for the EVENT fields, inlined once per field so that each
 * field's branches are predicted on their own. A field of one or two bytes
 * (api, device, flags; most time deltas and thread ids) takes a branch
 * that is nearly always right for that field; a longer one is decoded from
 * one 8-byte load without a loop: the lowest clear high bit ends it, and
 * its 7-bit groups are packed by three shift rounds. The byte loop's exit
 * branch mispredicted on the pointer and size fields, whose lengths vary
 * from event to event. Decoding only the branch-free way was slower (each
 * field's address then waits on the mask arithmetic of the one before).
 * Needs VARINT_MAX readable bytes, like fast_varint. */
static inline __attribute__((always_inline)) int field_varint(const uint8_t **pp, uint64_t *v)
{
    const uint8_t *p = *pp;
    uint64_t x;
    memcpy(&x, p, sizeof x);
    if (!(x & 0x80)) {
        *pp = p + 1;
        *v = x & 0x7f;
        return 0;
    }
    if (!(x & 0x8000)) {
        *pp = p + 2;
        *v = (x & 0x7f) | (x >> 1 & 0x3f80);
        return 0;
    }
    uint64_t stop = ~x & 0x8080808080808080ull;
    if (!stop)
        return fast_varint(pp, v);
    x &= stop ^ (stop - 1);
    x = (x & 0x007f007f007f007full) | (x & 0x7f007f007f007f00ull) >> 1;
    x = (x & 0x00003fff00003fffull) | (x & 0x3fff00003fff0000ull) >> 2;
    x = (x & 0x000000000fffffffull) | (x & 0x0fffffff00000000ull) >> 4;
    *pp = p + ((unsigned)__builtin_ctzll(stop) >> 3) + 1;
    *v = x;
    return 0;
}
#else
#define field_varint fast_varint
#endif

static int get_varint(cur_t *c, const char *field, uint64_t *v)
{
    /* STACK and other non-event records: the unrolled decoder where
     * VARINT_MAX bytes are readable (avail is 0 in checked mode and for
     * cursors without it), the byte loop for the rest and for every
     * error, which it words. */
    if (c->i < c->avail && c->avail - c->i >= VARINT_MAX) {
        const uint8_t *p = c->p + c->i;
        uint64_t fx;
        if (field_varint(&p, &fx) == 0 && (size_t)(p - c->p) <= c->n) {
            c->i = (size_t)(p - c->p);
            *v = fx;
            return 0;
        }
    }
    uint64_t x = 0;
    for (unsigned k = 0; k < 10; k++) {
        if (c->i >= c->n)
            return cur_fail(c, VT_E_CORRUPT, field, "payload ends inside the field");
        uint8_t b = c->p[c->i++];
        /* The 10th byte holds bit 63 only; anything more overflows. */
        if (k == 9 && (b & 0x80))
            break;
        if (k == 9 && b > 1)
            return cur_fail(c, VT_E_CORRUPT, field, "varint overflows 64 bits");
        x |= (uint64_t)(b & 0x7f) << (7 * k);
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return cur_fail(c, VT_E_CORRUPT, field, "varint longer than 10 bytes");
}


static int get_zz(cur_t *c, const char *field, int64_t *v)
{
    uint64_t u;
    if (get_varint(c, field, &u))
        return -1;
    *v = vt_unzigzag(u);
    return 0;
}

static int get_u32(cur_t *c, const char *field, uint32_t *v)
{
    uint64_t u;
    if (get_varint(c, field, &u))
        return -1;
    if (u > UINT32_MAX)
        return cur_fail(c, VT_E_CORRUPT, field, "value does not fit 32 bits");
    *v = (uint32_t)u;
    return 0;
}

static int get_str(cur_t *c, const char *field, vt_bytes_t *s)
{
    uint64_t len;
    if (get_varint(c, field, &len))
        return -1;
    if (len > VT_MAX_STRING)
        return cur_fail(c, VT_E_LIMIT, field, "string longer than VT_MAX_STRING (65536)");
    if (len > c->n - c->i)
        return cur_fail(c, VT_E_CORRUPT, field, "string runs past the end of the record");
    s->data = (const char *)c->p + c->i;
    s->len = (uint32_t)len;
    c->i += len;
    return 0;
}

static int get_raw(cur_t *c, const char *field, uint8_t *out, size_t len)
{
    if (len > c->n - c->i)
        return cur_fail(c, VT_E_CORRUPT, field, "payload ends inside the field");
    memcpy(out, c->p + c->i, len);
    c->i += len;
    return 0;
}

/* ---- payload decoders: 0 or -1 with the cursor's failure set ----------- */

/* count strings into (*arr)[at...], growing it: each string takes at least
 * its length byte, which bounds the array by the bytes present before
 * anything is allocated. */
static int get_strs(cur_t *c, const char *field, uint64_t count, vt_bytes_t **arr, uint32_t *cap, uint32_t at)
{
    if (count > c->n - c->i)
        return cur_fail(c, VT_E_CORRUPT, field, "more strings than bytes left in the record");
    if (at + count > *cap) {
        vt_bytes_t *a = realloc(*arr, (size_t)(at + count) * sizeof *a);
        if (!a)
            return cur_fail(c, VT_E_NOMEM, field, "cannot allocate the strings");
        *arr = a;
        *cap = (uint32_t)(at + count);
    }
    for (uint64_t k = 0; k < count; k++)
        if (get_str(c, field, &(*arr)[at + k]))
            return -1;
    return 0;
}

/* argv and env share one array: argc arguments, then envc variables. */
static int decode_process(cur_t *c, vt_rec_process_t *p, vt_bytes_t **argv, uint32_t *argv_cap)
{
    uint64_t argc;
    if (get_varint(c, "pid", &p->pid) || get_varint(c, "ppid", &p->ppid) ||
        get_varint(c, "mono_start_ns", &p->mono_start_ns) ||
        get_varint(c, "wall_start_ns", &p->wall_start_ns) ||
        get_str(c, "shim_version", &p->shim_version) || get_str(c, "exe", &p->exe) ||
        get_str(c, "hostname", &p->hostname) || get_varint(c, "argc", &argc))
        return -1;
    if (argc > VT_MAX_ARGC)
        return cur_fail(c, VT_E_LIMIT, "argc", "more than VT_MAX_ARGC (4096) arguments");
    if (get_strs(c, "argv", argc, argv, argv_cap, 0))
        return -1;
    p->argc = (uint32_t)argc;
    /* Optional: shims before it end the record at argv, or at degraded. */
    p->time_res_ns = 0;
    if (c->i < c->n && get_varint(c, "time_res_ns", &p->time_res_ns))
        return -1;
    p->degraded = 0;
    if (c->i < c->n && get_varint(c, "degraded", &p->degraded))
        return -1;
    uint64_t envc = 0;
    p->env_recorded = c->i < c->n;
    if (p->env_recorded && get_varint(c, "envc", &envc))
        return -1;
    if (envc > VT_MAX_ENV)
        return cur_fail(c, VT_E_LIMIT, "envc", "more than VT_MAX_ENV (64) environment variables");
    if (get_strs(c, "env", envc, argv, argv_cap, p->argc))
        return -1;
    for (uint64_t k = 0; k < envc; k++)
        if ((*argv)[argc + k].len > VT_MAX_ENV_ENTRY)
            return cur_fail(c, VT_E_LIMIT, "env", "a variable longer than VT_MAX_ENV_ENTRY (4096) bytes");
    p->envc = (uint32_t)envc;
    p->argv = *argv;
    /* No strings at all leaves the array unallocated: NULL + 0 is UB. */
    p->env = *argv ? *argv + argc : NULL;
    return 0;
}

/* The optional loss by reason at the end of DROPPED and END. The counts
 * must add up to no more than the total they break down. */
static int decode_lost(cur_t *c, uint64_t dropped_total, vt_lost_t *l)
{
    memset(l, 0, sizeof *l);
    if (c->i == c->n)
        return 0;
    uint64_t reasons, sum = 0;
    if (get_varint(c, "reasons", &reasons))
        return -1;
    if (reasons > VT_LOST_REASONS_MAX)
        return cur_fail(c, VT_E_LIMIT, "reasons", "more than VT_LOST_REASONS_MAX (64) loss reasons");
    for (uint64_t k = 0; k < reasons; k++) {
        uint64_t n;
        if (get_varint(c, "lost", &n))
            return -1;
        if (n > dropped_total - sum)
            return cur_fail(c, VT_E_CORRUPT, "lost", "the losses by reason add up to more than dropped_total");
        sum += n;
        if (k < VT_LOST_REASONS)
            l->lost[k] = n;
    }
    l->reasons = (uint32_t)reasons;
    return 0;
}

static int decode_device(cur_t *c, vt_rec_device_t *d)
{
    int64_t ord;
    if (get_zz(c, "ordinal", &ord))
        return -1;
    if (ord < INT32_MIN || ord > INT32_MAX)
        return cur_fail(c, VT_E_CORRUPT, "ordinal", "device ordinal out of range");
    d->ordinal = (int32_t)ord;
    return get_varint(c, "time_ns", &d->time_ns) || get_varint(c, "total_bytes", &d->total_bytes) ||
                   get_varint(c, "free_bytes", &d->free_bytes) ||
                   get_raw(c, "uuid", d->uuid, sizeof d->uuid) || get_str(c, "name", &d->name)
               ? -1
               : 0;
}

static int decode_module(cur_t *c, vt_rec_module_t *m)
{
    return get_varint(c, "module_id", &m->module_id) || get_varint(c, "base", &m->base) ||
                   get_varint(c, "size", &m->size) || get_str(c, "build_id", &m->build_id) ||
                   get_str(c, "path", &m->path)
               ? -1
               : 0;
}

static int decode_frame(cur_t *c, vt_rec_frame_t *f)
{
    return get_varint(c, "ip", &f->ip) || get_varint(c, "module_id", &f->module_id) ||
                   get_varint(c, "sym_offset", &f->sym_offset) || get_str(c, "function", &f->function)
               ? -1
               : 0;
}

/* The checks of a decoded STACK node, for decode_stack and
 * vt_reader_stack alike: parent < node makes every walk to the root
 * finite, whatever the file. @return NULL, or the field at fault with
 * *why. */
static const char *stack_node_fault(const vt_rec_stack_t *s, const char **why)
{
    if (s->node_id == 0) {
        *why = "stack node id 0 is the root";
        return "node_id";
    }
    if (s->parent_id >= s->node_id) {
        *why = "stack parent id not below node id";
        return "parent_id";
    }
    return NULL;
}

static int decode_stack(cur_t *c, vt_rec_stack_t *s)
{
    if (get_varint(c, "node_id", &s->node_id) || get_varint(c, "parent_id", &s->parent_id) ||
        get_varint(c, "ip", &s->ip))
        return -1;
    const char *why, *field = stack_node_fault(s, &why);
    return field ? cur_fail(c, VT_E_CORRUPT, field, why) : 0;
}

/* An EVENT is at most 11 varints and the presence byte: with this many
 * bytes readable the fast path cannot run off the stream, whatever the
 * bytes say. */
#define EVENT_FAST_BYTES (1u + 11u * VARINT_MAX)

/* Which of the fields after api (bit k: field k in wire order, api = 0)
 * are on the wire. Before version 3, all of them. */
static inline unsigned event_wire_fields(unsigned version, unsigned present)
{
    if (version < 3)
        return 0x7feu;
    /* present bits 0..2: dt, tid, device (fields 1..3); ptr (4) always;
     * bits 3..7: size .. result (fields 5..9); stack (10) always */
    return (present & 7u) << 1 | 1u << 4 | (present >> 3) << 5 | 1u << 10;
}

/* The checks every EVENT passes, on both paths. @return 0 or -1. */
static inline __attribute__((always_inline)) int finish_event(cur_t *c, vt_event_t *e, uint64_t api, int64_t dt,
                                                            int64_t dev, event_base_t *base)
{
    if (api > UINT16_MAX)
        return cur_fail(c, VT_E_CORRUPT, "api", "api id does not fit 16 bits");
    if (dev < INT16_MIN || dev > INT16_MAX)
        return cur_fail(c, VT_E_CORRUPT, "device", "device ordinal out of int16 range");
    e->api = (uint16_t)api;
    e->device = (int16_t)dev;
    /* Unsigned wrap-around: a hostile delta gives a silly time, never UB. */
    e->time_ns = base->time + (uint64_t)dt;
    base->time = e->time_ns;
    if (base->version >= 2) {
        e->ptr = base->ptr + (uint64_t)vt_unzigzag(e->ptr);
        base->ptr = e->ptr;
    }
    return 0;
}

/* The unchecked decode of an EVENT payload when EVENT_FAST_BYTES are
 * readable. Inlined into the bulk loop, where the cursor then lives in
 * registers and the call's register saves are gone. It commits nothing
 * unless every field decodes, ends inside the payload and fits its width;
 * otherwise @return -1 and decode_event redoes the record field by field,
 * which reports the exact field and reason. */
static inline __attribute__((always_inline)) int decode_event_fast(cur_t *c, vt_event_t *e, event_base_t *base)
{
    const uint8_t *p = c->p + c->i;
    uint64_t f[11];
    if (field_varint(&p, &f[0]))
        return -1;
    unsigned wire = event_wire_fields(base->version, base->version >= 3 ? *p++ : 0);
#pragma GCC unroll 10
    for (unsigned k = 1; k < 11; k++) {
        f[k] = 0;
        if ((wire >> k & 1) && field_varint(&p, &f[k]))
            return -1;
    }
    size_t used = (size_t)(p - (c->p + c->i));
    if (used > c->n - c->i)
        return -1;
    /* tid, flags, result and stack fit 32 bits, api 16, device int16:
     * one test for all */
    int64_t dev = vt_unzigzag(f[3]);
    if (((f[2] | f[8] | f[9] | f[10]) >> 32 | f[0] >> 16 | ((uint64_t)dev + 0x8000u) >> 16) != 0)
        return -1;
    c->i += used;
    e->tid = (uint32_t)f[2];
    e->ptr = f[4];
    e->size = f[5];
    e->reserved = f[6];
    e->aux = f[7];
    e->flags = (uint32_t)f[8];
    e->result = (uint32_t)f[9];
    e->stack = (uint32_t)f[10];
    return finish_event(c, e, f[0], vt_unzigzag(f[1]), dev, base);
}

/* fast 0: the field-by-field path only (vt_reader_set_checked). */
static int decode_event(cur_t *c, vt_event_t *e, event_base_t *base, int fast)
{
    uint64_t api;
    int64_t dt = 0, dev = 0;
    if (fast && c->avail - c->i >= EVENT_FAST_BYTES && decode_event_fast(c, e, base) == 0)
        return 0;
    if (get_varint(c, "api", &api))
        return -1;
    uint8_t present = 0;
    if (base->version >= 3 && get_raw(c, "present", &present, 1))
        return -1;
    unsigned wire = event_wire_fields(base->version, present);
    e->tid = e->flags = e->result = e->stack = 0;
    e->ptr = e->size = e->reserved = e->aux = 0;
    if (((wire & 1u << 1) && get_zz(c, "dt", &dt)) || ((wire & 1u << 2) && get_u32(c, "tid", &e->tid)) ||
        ((wire & 1u << 3) && get_zz(c, "device", &dev)) || get_varint(c, "ptr", &e->ptr) ||
        ((wire & 1u << 5) && get_varint(c, "size", &e->size)) ||
        ((wire & 1u << 6) && get_varint(c, "reserved", &e->reserved)) ||
        ((wire & 1u << 7) && get_varint(c, "aux", &e->aux)) ||
        ((wire & 1u << 8) && get_u32(c, "flags", &e->flags)) ||
        ((wire & 1u << 9) && get_u32(c, "result", &e->result)) || get_u32(c, "stack", &e->stack))
        return -1;
    return finish_event(c, e, api, dt, dev, base);
}

static int decode_range(cur_t *c, vt_rec_range_t *g)
{
    return get_varint(c, "time_ns", &g->time_ns) || get_varint(c, "tid", &g->tid) ||
                   get_varint(c, "depth", &g->depth) || get_raw(c, "push", &g->push, 1) ||
                   get_str(c, "name", &g->name)
               ? -1
               : 0;
}

const char *vt_ggml_usage_name(uint64_t usage)
{
    static const char *const names[] = {
        [VT_GGML_USAGE_ANY] = "ANY", [VT_GGML_USAGE_WEIGHTS] = "WEIGHTS", [VT_GGML_USAGE_COMPUTE] = "COMPUTE",
    };
    _Static_assert(sizeof names / sizeof names[0] == VT_GGML_USAGES, "one name per enum vt_ggml_usage");
    return usage < VT_GGML_USAGES ? names[usage] : NULL;
}

static int decode_ggml_buffer(cur_t *c, vt_rec_ggml_buffer_t *g)
{
    return get_varint(c, "time_ns", &g->time_ns) || get_varint(c, "buffer", &g->buffer) ||
                   get_varint(c, "usage", &g->usage) || get_varint(c, "base", &g->base) ||
                   get_varint(c, "size", &g->size) || get_str(c, "name", &g->name) ||
                   (g->host = 0, c->i < c->n && get_varint(c, "host", &g->host))
               ? -1
               : 0;
}

static int decode_ggml_tensor(cur_t *c, vt_rec_ggml_tensor_t *t)
{
    return get_varint(c, "time_ns", &t->time_ns) || get_varint(c, "buffer", &t->buffer) ||
                   get_varint(c, "data", &t->data) || get_varint(c, "nbytes", &t->nbytes) ||
                   get_str(c, "name", &t->name) || (t->rows = 0, c->i < c->n && get_varint(c, "rows", &t->rows))
               ? -1
               : 0;
}

const char *vt_record_type_name(unsigned type)
{
    static const char *const names[] = {
        [VT_REC_PROCESS] = "PROCESS", [VT_REC_DEVICE] = "DEVICE",   [VT_REC_MODULE] = "MODULE",
        [VT_REC_FRAME] = "FRAME",     [VT_REC_STACK] = "STACK",     [VT_REC_EVENT] = "EVENT",
        [VT_REC_DROPPED] = "DROPPED", [VT_REC_NOTE] = "NOTE",       [VT_REC_END] = "END",
        [VT_REC_RANGE] = "RANGE",     [VT_REC_GGML_BUFFER] = "GGML_BUFFER",
        [VT_REC_GGML_TENSOR] = "GGML_TENSOR", [VT_REC_GGML_FREE] = "GGML_FREE",
        [VT_REC_GGML_LOST] = "GGML_LOST",
    };
    _Static_assert(sizeof names / sizeof names[0] == VT_REC_TYPES, "one name per enum vt_record_type");
    return type < VT_REC_TYPES ? names[type] : NULL;
}

const char *vt_event_flag_name(uint32_t flag)
{
    /* Paired with their bits, not placed by them: the flags are masks, and
     * a pair cannot slide onto its neighbour's bit. */
    static const struct {
        uint32_t flag;
        const char *name;
    } flags[] = {
        { VT_EF_SAMPLE, "sample" },
        { VT_EF_RUNTIME, "runtime" },
        { VT_EF_PTSZ, "ptsz" },
        { VT_EF_VIA_PROCADDR, "via_procaddr" },
        { VT_EF_VIA_DLSYM, "via_dlsym" },
        { VT_EF_FIRST_ON_DEVICE, "first_on_device" },
        { VT_EF_AFTER_FAILURE, "after_failure" },
        { VT_EF_AT_PEAK, "at_peak" },
        { VT_EF_HOST_LOCATED, "host_located" },
        { VT_EF_LATE, "late" },
        { VT_EF_OTHER_CONTEXT, "other_context" },
        { VT_EF_CAPTURED, "captured" },
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (flags[i].flag == flag)
            return flags[i].name;
    return NULL;
}

/* @return 1 decoded, 0 unknown type (skip), -1 failure in c. */
static int decode_payload(vt_reader_t *r, uint8_t type, cur_t *c, vt_record_t *rec)
{
    switch (type) {
    case VT_REC_PROCESS:
        return decode_process(c, &rec->u.process, &r->argv, &r->argv_cap) ? -1 : 1;
    case VT_REC_DEVICE:
        return decode_device(c, &rec->u.device) ? -1 : 1;
    case VT_REC_MODULE:
        return decode_module(c, &rec->u.module) ? -1 : 1;
    case VT_REC_FRAME:
        return decode_frame(c, &rec->u.frame) ? -1 : 1;
    case VT_REC_STACK:
        return decode_stack(c, &rec->u.stack) ? -1 : 1;
    case VT_REC_EVENT:
        return decode_event(c, &rec->u.event, &r->base, !r->checked) ? -1 : 1;
    case VT_REC_DROPPED:
        return get_varint(c, "time_ns", &rec->u.dropped.time_ns) ||
                       get_varint(c, "dropped_total", &rec->u.dropped.dropped_total) ||
                       get_varint(c, "stacks_lost_total", &rec->u.dropped.stacks_lost_total) ||
                       decode_lost(c, rec->u.dropped.dropped_total, &rec->u.dropped.by_reason)
                   ? -1
                   : 1;
    case VT_REC_NOTE:
        return get_varint(c, "time_ns", &rec->u.note.time_ns) || get_str(c, "text", &rec->u.note.text)
                   ? -1
                   : 1;
    case VT_REC_END:
        rec->u.end.how = VT_END_EXIT;
        return get_varint(c, "time_ns", &rec->u.end.time_ns) ||
                       get_varint(c, "events_total", &rec->u.end.events_total) ||
                       get_varint(c, "dropped_total", &rec->u.end.dropped_total) ||
                       decode_lost(c, rec->u.end.dropped_total, &rec->u.end.by_reason) ||
                       (c->i < c->n && get_varint(c, "how", &rec->u.end.how))
                   ? -1
                   : 1;
    case VT_REC_RANGE:
        return decode_range(c, &rec->u.range) ? -1 : 1;
    case VT_REC_GGML_BUFFER:
        return decode_ggml_buffer(c, &rec->u.ggml_buffer) ? -1 : 1;
    case VT_REC_GGML_TENSOR:
        return decode_ggml_tensor(c, &rec->u.ggml_tensor) ? -1 : 1;
    case VT_REC_GGML_FREE:
        return get_varint(c, "time_ns", &rec->u.ggml_free.time_ns) ||
                       get_varint(c, "buffer", &rec->u.ggml_free.buffer)
                   ? -1
                   : 1;
    case VT_REC_GGML_LOST:
        return get_varint(c, "time_ns", &rec->u.ggml_lost.time_ns) ||
                       get_varint(c, "lost_total", &rec->u.ggml_lost.lost_total)
                   ? -1
                   : 1;
    default:
        return 0;
    }
}

/* ---- errors ------------------------------------------------------------ */

static int fail(vt_reader_t *r, vt_error_t *err, int code, uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Latches the first error: the reader answers it again on every later call. */
static int fail(vt_reader_t *r, vt_error_t *err, int code, uint64_t offset, const char *fmt, ...)
{
    va_list ap;
    r->state = ST_ERROR;
    r->err.code = code;
    r->err.offset = offset;
    va_start(ap, fmt);
    vsnprintf(r->err.detail, sizeof r->err.detail, fmt, ap);
    va_end(ap);
    if (err)
        *err = r->err;
    return code;
}

/* Where a record stream's failure is reported: exact for the uncompressed
 * header, the chunk's offset (plus the position in the detail) otherwise. */
static uint64_t stream_offset(const vt_reader_t *r, size_t at)
{
    return r->s_seq == SEQ_HEADER ? r->s_offset + at : r->s_offset;
}

static const char *stream_name(const vt_reader_t *r, char *buf, size_t len)
{
    if (r->s_seq == SEQ_HEADER)
        snprintf(buf, len, "header");
    else
        snprintf(buf, len, "chunk %u", r->s_seq);
    return buf;
}

/* ---- reading ----------------------------------------------------------- */

/* Reads up to want bytes into *buf, growing it only as bytes arrive.
 * @return bytes read (< want at end of file), or -1 with errno set. */
static ssize_t read_grow(vt_reader_t *r, uint8_t **buf, size_t *cap, size_t want)
{
    size_t have = 0;
    while (have < want) {
        if (have == *cap) {
            size_t ncap = *cap ? *cap * 2 : READ_STEP;
            if (ncap > want)
                ncap = want;
            uint8_t *nb = realloc(*buf, ncap);
            if (!nb) {
                errno = ENOMEM;
                return -1;
            }
            *buf = nb;
            *cap = ncap;
        }
        size_t room = (*cap < want ? *cap : want) - have;
        ssize_t n = read(r->fd, *buf + have, room);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            break;
        have += (size_t)n;
        r->pos += (uint64_t)n;
    }
    return (ssize_t)have;
}

static ssize_t read_fixed(vt_reader_t *r, uint8_t *buf, size_t want)
{
    size_t have = 0;
    while (have < want) {
        ssize_t n = read(r->fd, buf + have, want - have);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            break;
        have += (size_t)n;
        r->pos += (uint64_t)n;
    }
    return (ssize_t)have;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

/* One zstd context for every open reader: each chunk is a frame of its
 * own, so no state carries from one decompression to the next, and a
 * report of a directory keeps every trace's reader open at once (the
 * merged time order): a context each was about a third of the memory of
 * a thousand runners' report. The compressed bytes of a chunk are needed
 * only while it is decompressed, so one buffer holds them for every
 * reader too (11 KB a trace of a thousand). The analyzer is
 * single-threaded. */
static struct {
    ZSTD_DCtx *dctx;
    size_t readers;
    uint8_t *zbuf;   /* the chunk being decompressed */
    size_t zcap;
} shared_zstd;

/* The chunk at off, now in r->raw, becomes the record stream. @return 1. */
static int chunk_loaded(vt_reader_t *r, uint64_t off, uint32_t rawsize, uint32_t seq)
{
    r->s = r->raw;
    r->slen = rawsize;
    r->spos = 0;
    r->ev_pos = r->ev_end = 0;
    r->s_offset = off;
    r->s_seq = seq;
    r->next_seq++;
    r->base.time = r->process.mono_start_ns;
    r->base.ptr = 0;
    return 1;
}

/* A stored chunk's records, read straight into r->raw: the header's sizes
 * are already bounded; the buffer grows only as bytes arrive. */
static int load_stored_chunk(vt_reader_t *r, vt_error_t *err, uint64_t off, uint32_t zsize, uint32_t rawsize,
                             uint32_t seq)
{
    if (zsize != rawsize)
        return fail(r, err, VT_E_CORRUPT, off + 4, "stored chunk %u: zsize %u, rawsize %u (must be equal)", seq,
                    zsize, rawsize);
    ssize_t n = read_grow(r, &r->raw, &r->rawcap, rawsize);
    if (n < 0)
        return fail(r, err, errno == ENOMEM ? VT_E_NOMEM : VT_E_IO, off, "%s", strerror(errno));
    if ((size_t)n < rawsize)
        return fail(r, err, VT_E_TRUNCATED, off, "%u complete chunks read; stored chunk %u has %zd of %u bytes",
                    r->next_seq, seq, n, rawsize);
    return chunk_loaded(r, off, rawsize, seq);
}

/* Frees the current chunk's records and ends the record stream: the next
 * read loads a chunk. */
static void drop_chunk(vt_reader_t *r)
{
    free(r->raw);
    r->raw = NULL;
    r->rawcap = 0;
    r->s = NULL;
    r->slen = r->spos = 0;
    r->ev_pos = r->ev_end = 0;
}

/* Reads the next chunk into r->raw. @return 1, 0 at a clean end, <0 error. */
static int load_chunk(vt_reader_t *r, vt_error_t *err)
{
    uint8_t h[sizeof(vt_chunk_header_t)];
    uint64_t off = r->pos;
    uint32_t n_done = r->next_seq;
    ssize_t n = read_fixed(r, h, sizeof h);
    if (n < 0)
        return fail(r, err, VT_E_IO, off, "%s", strerror(errno));
    if (n == 0) {
        /* The end: nothing refers to the last chunk's bytes any more (a
         * caller feeds what it holds before it reads on), and a report of
         * a thousand traces keeps every reader until it prints. */
        drop_chunk(r);
        return 0;
    }
    if ((size_t)n < sizeof h)
        return fail(r, err, VT_E_TRUNCATED, off,
                    "%u complete chunks read; chunk %u header has %zd of 16 bytes", n_done, n_done, n);

    uint32_t magic = le32(h), zsize = le32(h + 4), rawsize = le32(h + 8), seq = le32(h + 12);
    int stored = magic == VT_CHUNK_STORED_MAGIC && r->base.version >= VT_FORMAT_VERSION_STORED;
    if (magic != VT_CHUNK_MAGIC && !stored)
        return fail(r, err, VT_E_CORRUPT, off, "bad chunk magic 0x%08x (want 0x%08x \"VTCK\"%s)", magic,
                    VT_CHUNK_MAGIC, r->base.version >= VT_FORMAT_VERSION_STORED ? " or 0x53435456 \"VTCS\"" : "");
    if (zsize > VT_MAX_CHUNK_ZSIZE)
        return fail(r, err, VT_E_LIMIT, off + 4, "chunk zsize %u exceeds %u", zsize, VT_MAX_CHUNK_ZSIZE);
    if (rawsize > VT_MAX_CHUNK_RAW)
        return fail(r, err, VT_E_LIMIT, off + 8, "chunk rawsize %u exceeds %u", rawsize, VT_MAX_CHUNK_RAW);
    if (seq != r->next_seq)
        return fail(r, err, VT_E_CORRUPT, off + 12, "chunk seq %u, expected %u", seq, r->next_seq);
    if (zsize == 0)
        return fail(r, err, VT_E_CORRUPT, off + 4, "chunk %u has zsize 0", seq);
    if (stored)
        return load_stored_chunk(r, err, off, zsize, rawsize, seq);

    uint8_t *const *zb = &shared_zstd.zbuf;
    n = read_grow(r, &shared_zstd.zbuf, &shared_zstd.zcap, zsize);
    if (n < 0)
        return fail(r, err, errno == ENOMEM ? VT_E_NOMEM : VT_E_IO, off, "%s", strerror(errno));
    if ((size_t)n < zsize)
        return fail(r, err, VT_E_TRUNCATED, off,
                    "%u complete chunks read; chunk %u has %zd of %u compressed bytes", n_done, seq, n,
                    zsize);

    unsigned long long fcs = ZSTD_getFrameContentSize(*zb, zsize);
    if (fcs == ZSTD_CONTENTSIZE_ERROR)
        return fail(r, err, VT_E_CORRUPT, off + 16, "chunk %u: not a zstd frame", seq);
    if (fcs == ZSTD_CONTENTSIZE_UNKNOWN)
        return fail(r, err, VT_E_CORRUPT, off + 16, "chunk %u: zstd frame does not state its size", seq);
    if (fcs != rawsize)
        return fail(r, err, VT_E_CORRUPT, off + 16, "chunk %u: zstd frame holds %llu bytes, header says %u",
                    seq, fcs, rawsize);
    size_t fsz = ZSTD_findFrameCompressedSize(*zb, zsize);
    if (ZSTD_isError(fsz))
        return fail(r, err, VT_E_CORRUPT, off + 16, "chunk %u: zstd: %s", seq, ZSTD_getErrorName(fsz));
    if (fsz != zsize)
        return fail(r, err, VT_E_CORRUPT, off + 16, "chunk %u: %zu bytes follow its zstd frame", seq,
                    (size_t)zsize - fsz);

    if (rawsize > r->rawcap || !r->raw) {
        size_t ncap = rawsize ? rawsize : 1;
        uint8_t *nb = realloc(r->raw, ncap);
        if (!nb)
            return fail(r, err, VT_E_NOMEM, off, "chunk %u: %u bytes", seq, rawsize);
        r->raw = nb;
        r->rawcap = ncap;
    }
    size_t d = ZSTD_decompressDCtx(r->dctx, r->raw, r->rawcap, *zb, zsize);
    if (ZSTD_isError(d))
        return fail(r, err, VT_E_CORRUPT, off + 16, "chunk %u: zstd: %s", seq, ZSTD_getErrorName(d));
    if (d != rawsize)
        return fail(r, err, VT_E_CORRUPT, off + 16, "chunk %u: decompressed to %zu bytes, header says %u",
                    seq, d, rawsize);

    return chunk_loaded(r, off, rawsize, seq);
}

/* Frames the record at r->spos. @return 1 with *type and *c set to its
 * payload, 0 at the end of the stream, <0 error. */
static int next_frame(vt_reader_t *r, vt_error_t *err, uint8_t *type, cur_t *c, size_t *start)
{
    if (r->spos >= r->slen)
        return 0;
    *start = r->spos;
    *type = r->s[r->spos];
    size_t at = r->spos + 1;
    uint64_t len;
    const uint8_t *q = r->s + at;
    /* Fast path for the length; any doubt goes to the checked path below. */
    if (!r->checked && r->slen - at >= VARINT_MAX && fast_varint(&q, &len) == 0) {
        at = (size_t)(q - r->s);
    } else {
        cur_t f = { .p = r->s, .n = r->slen, .i = at };
        if (get_varint(&f, "len", &len)) {
            char sn[32];
            return fail(r, err, VT_E_CORRUPT, stream_offset(r, *start), "%s: record at byte %zu: length %s",
                        stream_name(r, sn, sizeof sn), *start, f.why);
        }
        at = f.i;
    }
    if (len > r->slen - at) {
        char sn[32];
        return fail(r, err, VT_E_CORRUPT, stream_offset(r, *start),
                    "%s: record at byte %zu (type %u) is %llu bytes, only %zu left", stream_name(r, sn, sizeof sn),
                    *start, *type, (unsigned long long)len, r->slen - at);
    }
    c->p = r->s + at;
    c->n = (size_t)len;
    c->i = 0;
    c->avail = r->checked ? 0 : r->slen - at;
    c->code = 0;
    r->spos = at + (size_t)len;
    return 1;
}

/* The next event of the open version 3 EVENT record. Called with none
 * left only for a record just opened with an empty payload, which fails as
 * an EVENT without an api does in version 2. */
static int next_batched(vt_reader_t *r, vt_record_t *rec, vt_error_t *err)
{
    size_t start = r->ev_pos;
    cur_t c = { .p = r->s + start, .n = r->ev_end - start, .i = 0, .avail = r->checked ? 0 : r->slen - start };
    rec->type = VT_REC_EVENT;
    rec->file_offset = r->s_offset;
    rec->chunk_seq = r->s_seq;
    if (decode_event(&c, &rec->u.event, &r->base, !r->checked)) {
        char sn[32];
        return fail(r, err, c.code, stream_offset(r, start), "%s: EVENT at byte %zu: field %s: %s",
                    stream_name(r, sn, sizeof sn), start, c.field, c.why);
    }
    r->ev_pos = start + c.i;
    return 1;
}

int vt_reader_next(vt_reader_t *r, vt_record_t *rec, vt_error_t *err)
{
    for (;;) {
        if (r->state == ST_ERROR) {
            if (err)
                *err = r->err;
            return r->err.code;
        }
        if (r->state == ST_EOF)
            return 0;
        if (r->ev_pos < r->ev_end)
            return next_batched(r, rec, err);

        uint8_t type;
        cur_t c;
        size_t start;
        int rc = next_frame(r, err, &type, &c, &start);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            rc = load_chunk(r, err);
            if (rc < 0)
                return rc;
            if (rc == 0)
                r->state = ST_EOF;
            continue;
        }
        if (type == VT_REC_EVENT && r->base.version >= 3) {
            r->ev_pos = (size_t)(c.p - r->s);
            r->ev_end = r->ev_pos + c.n;
            return next_batched(r, rec, err);
        }
        /* An EVENT sets every field of its member itself; the other types
         * leave some members' fields unset, so they start from zero. */
        if (type != VT_REC_EVENT)
            memset(rec, 0, sizeof *rec);
        rec->type = type;
        rec->file_offset = r->s_offset;
        rec->chunk_seq = r->s_seq;
        rc = decode_payload(r, type, &c, rec);
        if (rc == 1)
            return 1;
        if (rc < 0) {
            char sn[32];
            return fail(r, err, c.code, stream_offset(r, start), "%s: %s record at byte %zu: field %s: %s",
                        stream_name(r, sn, sizeof sn), vt_record_type_name(type), start, c.field, c.why);
        }
    }
}

/* The bulk paths' test for the next record (next_frame does the rest): one
 * of type `type` at s[pos] whose length varint the fast path reads and
 * whose payload lies inside the stream. @return 1 with *at (the payload's
 * offset) and *len, else 0. */
static inline __attribute__((always_inline)) int fast_record(const uint8_t *s, size_t slen, size_t pos,
                                                             uint8_t type, size_t *at, uint64_t *len)
{
    if (slen - pos < 1 + VARINT_MAX || s[pos] != type)
        return 0;
    const uint8_t *q = s + pos + 1;
    if (fast_varint(&q, len))
        return 0;
    *at = (size_t)(q - s);
    return *len <= slen - *at;
}

/* vt_reader_events for version 3: events back to back in EVENT records.
 * A record is opened here only when its length is beyond doubt; the
 * events in it are decoded while the fast path takes them; anything else
 * is left where vt_reader_next resumes (next_batched for an open record). */
static size_t events_batched(vt_reader_t *r, vt_event_t *out, size_t max)
{
    /* The loop's state in locals: out[]'s uint64_t stores may alias r's
     * size_t fields (one type here), so the compiler could not keep those
     * in registers across them. */
    const uint8_t *s = r->s;
    const size_t slen = r->slen;
    size_t pos = r->ev_pos, end = r->ev_end, next = r->spos, n = 0;
    event_base_t base = r->base;
    while (n < max) {
        if (pos == end) {
            /* fast_record's test, written out: through the helper gcc
             * laid this loop out worse, +5 instructions an event. */
            if (slen - next < 1 + VARINT_MAX || s[next] != VT_REC_EVENT)
                break;
            const uint8_t *q = s + next + 1;
            uint64_t len;
            if (fast_varint(&q, &len))
                break;
            size_t at = (size_t)(q - s);
            if (len == 0 || len > slen - at)
                break;
            pos = at;
            end = next = at + (size_t)len;
        }
        if (slen - pos < EVENT_FAST_BYTES)
            break;
        cur_t c; /* only what the fast path reads: no failure is recorded there */
        c.p = s + pos;
        c.n = end - pos;
        c.i = 0;
        c.avail = slen - pos;
        if (decode_event_fast(&c, &out[n], &base))
            break;
        pos += c.i;
        n++;
    }
    r->ev_pos = pos;
    r->ev_end = end;
    r->spos = next;
    r->base = base;
    return n;
}

/* always_inline: the report's fill loop is its hot caller, and once
 * `dump --count` became a second caller gcc's LTO stopped inlining it there
 * (the decode loop then keeps its state in memory across the call). The
 * attribute is on this definition only, so callers compiled without LTO
 * just call it. */
__attribute__((always_inline)) inline size_t vt_reader_events(vt_reader_t *r, vt_event_t *out, size_t max)
{
    if (r->state != ST_STREAM || r->checked)
        return 0;
    if (r->base.version >= 3)
        return events_batched(r, out, max);
    size_t n = 0, pos = r->spos;
    /* Only what next_frame's and decode_event's fast paths take without a
     * doubt; anything else stops the batch where vt_reader_next resumes.
     * One test per event covers both unchecked reads: the type byte, a
     * length varint of at most VARINT_MAX bytes, then EVENT_FAST_BYTES
     * (the last records of a stream take vt_reader_next's path). */
    const size_t need = 1 + VARINT_MAX + EVENT_FAST_BYTES;
    while (n < max && r->slen - pos >= need) {
        size_t at;
        uint64_t len;
        if (!fast_record(r->s, r->slen, pos, VT_REC_EVENT, &at, &len))
            break;
        cur_t c = { .p = r->s + at, .n = (size_t)len, .i = 0, .avail = r->slen - at };
        if (decode_event_fast(&c, &out[n], &r->base))
            break;
        n++;
        pos = at + (size_t)len;
    }
    r->spos = pos;
    return n;
}

int vt_reader_stack(vt_reader_t *r, vt_rec_stack_t *out)
{
    /* Between records only (not inside an open batch of events), and with
     * the length and three fields readable without a bounds check. */
    size_t at;
    uint64_t len;
    if (r->state != ST_STREAM || r->checked || r->ev_pos < r->ev_end ||
        r->slen - r->spos < 1 + VARINT_MAX + 3 * VARINT_MAX ||
        !fast_record(r->s, r->slen, r->spos, VT_REC_STACK, &at, &len))
        return 0;
    const uint8_t *q = r->s + at, *p = q;
    vt_rec_stack_t st;
    const char *why;
    if (field_varint(&p, &st.node_id) || field_varint(&p, &st.parent_id) || field_varint(&p, &st.ip))
        return 0;
    /* decode_stack's checks: a failure is reported by vt_reader_next. */
    if ((size_t)(p - q) > len || stack_node_fault(&st, &why))
        return 0;
    *out = st;
    r->spos = at + (size_t)len;
    return 1;
}

void vt_reader_set_checked(vt_reader_t *r, int on)
{
    r->checked = on != 0;
}

/* ---- open / close ------------------------------------------------------ */

static int open_fail(vt_reader_t *r, vt_error_t *err, int code, uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int open_fail(vt_reader_t *r, vt_error_t *err, int code, uint64_t offset, const char *fmt, ...)
{
    va_list ap;
    if (err) {
        err->code = code;
        err->offset = offset;
        va_start(ap, fmt);
        vsnprintf(err->detail, sizeof err->detail, fmt, ap);
        va_end(ap);
    }
    vt_reader_close(r);
    return code;
}

/* Validates the header body: well framed, exactly one PROCESS record. */
static int read_header(vt_reader_t *r, uint32_t header_len, vt_error_t *err)
{
    size_t cap = 0;
    ssize_t n = read_grow(r, &r->hdr, &cap, header_len);
    if (n < 0)
        return open_fail(r, err, errno == ENOMEM ? VT_E_NOMEM : VT_E_IO, HEADER_OFFSET, "%s",
                         strerror(errno));
    if ((size_t)n < header_len)
        return open_fail(r, err, VT_E_TRUNCATED, HEADER_OFFSET, "header body has %zd of %u bytes", n,
                         header_len);

    r->s = r->hdr;
    r->slen = header_len;
    r->spos = 0;
    r->s_offset = HEADER_OFFSET;
    r->s_seq = SEQ_HEADER;
    unsigned found = 0;
    uint32_t argv_cap = 0;
    for (;;) {
        uint8_t type;
        cur_t c;
        size_t start;
        int rc = next_frame(r, NULL, &type, &c, &start);
        if (rc < 0)
            return open_fail(r, err, r->err.code, r->err.offset, "%s", r->err.detail);
        if (rc == 0)
            break;
        if (type != VT_REC_PROCESS)
            continue;
        if (found++)
            return open_fail(r, err, VT_E_CORRUPT, HEADER_OFFSET + start,
                             "header holds more than one PROCESS record");
        if (decode_process(&c, &r->process, &r->hdr_argv, &argv_cap))
            return open_fail(r, err, c.code, HEADER_OFFSET + start, "header: PROCESS record: field %s: %s",
                             c.field, c.why);
    }
    if (!found)
        return open_fail(r, err, VT_E_CORRUPT, HEADER_OFFSET, "header holds no PROCESS record");
    /* Walk it again from next(): the header's records come first. */
    r->spos = 0;
    r->base.time = r->process.mono_start_ns;
    r->base.ptr = 0;
    r->state = ST_STREAM;
    return 0;
}


static ZSTD_DCtx *shared_dctx_get(void)
{
    if (!shared_zstd.dctx)
        shared_zstd.dctx = ZSTD_createDCtx();
    if (shared_zstd.dctx)
        shared_zstd.readers++;
    return shared_zstd.dctx;
}

static void shared_dctx_put(ZSTD_DCtx *d)
{
    if (d && d == shared_zstd.dctx && --shared_zstd.readers == 0) {
        ZSTD_freeDCtx(shared_zstd.dctx);
        shared_zstd.dctx = NULL;
        free(shared_zstd.zbuf);
        shared_zstd.zbuf = NULL;
        shared_zstd.zcap = 0;
    }
}

int vt_reader_open(const char *path, vt_reader_t **out, vt_error_t *err)
{
    return vt_reader_open_flags(path, 0, out, err);
}

int vt_reader_open_flags(const char *path, int flags, vt_reader_t **out, vt_error_t *err)
{
    *out = NULL;
    if (err) {
        memset(err, 0, sizeof *err);
        snprintf(err->path, sizeof err->path, "%s", path);
    }
    vt_reader_t *r = calloc(1, sizeof *r);
    if (!r)
        return vt_error_set(err, VT_E_NOMEM, 0, "reader");
    r->fd = -1;
    snprintf(r->err.path, sizeof r->err.path, "%s", path);

    /* Only-regular: O_NONBLOCK so that a FIFO (or a device) put where a
     * trace was expected cannot block the open; nothing but a regular file
     * is read, and a regular file ignores the flag. */
    int only_regular = flags & VT_READER_REGULAR_ONLY;
    r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | (only_regular ? O_NONBLOCK | O_NOFOLLOW : 0));
    if (r->fd < 0)
        return open_fail(r, err, VT_E_IO, 0, "%s",
                         errno == ELOOP && only_regular ? "a symbolic link: not read in a directory" : strerror(errno));
    r->flags = flags;
    struct stat st;
    if (fstat(r->fd, &st) == 0) {
        r->dev = st.st_dev;
        r->ino = st.st_ino;
        if (S_ISDIR(st.st_mode))
            return open_fail(r, err, VT_E_IO, 0, "is a directory");
        if (S_ISREG(st.st_mode))
            r->file_size = (uint64_t)st.st_size;
        else if (only_regular)
            return open_fail(r, err, VT_E_IO, 0, "not a regular file (%s): not read",
                             S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device");
    } else if (only_regular) {
        return open_fail(r, err, VT_E_IO, 0, "%s", strerror(errno));
    }
    r->dctx = shared_dctx_get();
    if (!r->dctx)
        return open_fail(r, err, VT_E_NOMEM, 0, "zstd context");

    uint8_t pre[sizeof(vt_file_prelude_t)];
    ssize_t n = read_fixed(r, pre, sizeof pre);
    if (n < 0)
        return open_fail(r, err, VT_E_IO, 0, "%s", strerror(errno));
    if (n == 0)
        return open_fail(r, err, VT_E_NOT_TRACE, 0, "empty file");
    /* A prefix of the magic is a writer killed before its first write. */
    size_t cmp = (size_t)n < 8 ? (size_t)n : 8;
    if (memcmp(pre, VT_FILE_MAGIC, cmp) != 0)
        return open_fail(r, err, VT_E_NOT_TRACE, 0, "file does not start with \"VRAMTRC\"");
    if ((size_t)n < sizeof pre)
        return open_fail(r, err, VT_E_TRUNCATED, 0, "prelude has %zd of 16 bytes", n);

    uint16_t version = le16(pre + 8);
    uint32_t header_len = le32(pre + 12);
    if (version > VT_FORMAT_VERSION)
        return open_fail(r, err, VT_E_VERSION, 8,
                         "file is format version %u; this vramtrace (" VT_VERSION ") reads up to version %u",
                         version, VT_FORMAT_VERSION);
    if (version == 0)
        return open_fail(r, err, VT_E_CORRUPT, 8, "format version 0 does not exist");
    r->base.version = version;
    if (header_len > VT_MAX_HEADER)
        return open_fail(r, err, VT_E_LIMIT, 12, "header_len %u exceeds %u", header_len, VT_MAX_HEADER);
    if (header_len == 0)
        return open_fail(r, err, VT_E_CORRUPT, 12, "header_len 0: no PROCESS record");
    int rc = read_header(r, header_len, err);
    if (rc < 0)
        return rc;
    *out = r;
    return 0;
}

const vt_rec_process_t *vt_reader_process(const vt_reader_t *r)
{
    return &r->process;
}

int vt_reader_resume(vt_reader_t *r, const char *path)
{
    uint64_t at;
    if (r->state == ST_EOF)
        at = r->pos;
    else if (r->state == ST_ERROR && r->err.code == VT_E_TRUNCATED)
        at = r->err.offset;   /* after open, only a chunk's start (load_chunk) */
    else
        return VT_E_IO;
    struct stat st;
    if (r->fd < 0) {
        int only_regular = r->flags & VT_READER_REGULAR_ONLY;
        r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | (only_regular ? O_NONBLOCK | O_NOFOLLOW : 0));
        if (r->fd < 0)
            return VT_E_IO;
    }
    /* Another file at that path now is not this trace grown. */
    if (fstat(r->fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != r->dev || st.st_ino != r->ino ||
        (uint64_t)st.st_size < at || lseek(r->fd, (off_t)at, SEEK_SET) != (off_t)at)
        return VT_E_IO;
    r->file_size = (uint64_t)st.st_size;
    r->pos = at;
    r->state = ST_STREAM;
    memset(&r->err.detail, 0, sizeof r->err.detail);
    r->err.code = 0;
    r->err.offset = 0;
    return 0;
}

void vt_reader_release_file(vt_reader_t *r)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    /* Every record of the last chunk was returned: nothing refers to it. */
    if (r->s == r->raw && r->spos >= r->slen && r->ev_pos >= r->ev_end)
        drop_chunk(r);
}

uint64_t vt_reader_offset(const vt_reader_t *r)
{
    return r->pos;
}

uint64_t vt_reader_file_size(const vt_reader_t *r)
{
    return r->file_size > r->pos ? r->file_size : r->pos;
}

void vt_reader_close(vt_reader_t *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    shared_dctx_put(r->dctx);
    free(r->hdr);
    free(r->hdr_argv);
    free(r->raw);
    free(r->argv);
    free(r);
}
