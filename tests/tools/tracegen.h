/* tracegen: a small trace writer for tests (vtgen and the unit tests), built
 * on include/vramtrace/encode.h.
 *
 * Contract: records go to the header body until the header is written (the
 * first tg_chunk(), tg_bytes() or tg_finish()), then to the current chunk.
 * Everything a test may want wrong on purpose is an explicit override
 * (prelude fields, chunk header fields, raw bytes); by default the output is
 * a valid trace. Out of memory or a write error aborts the program: this is
 * test tooling.
 */
#ifndef VT_TESTS_TRACEGEN_H
#define VT_TESTS_TRACEGEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vramtrace/trace_format.h"

typedef struct tg_buf {
    uint8_t *p;
    size_t len, cap;
} tg_buf_t;

void tg_buf_varint(tg_buf_t *b, uint64_t v);
void tg_buf_zz(tg_buf_t *b, int64_t v);
void tg_buf_str(tg_buf_t *b, const char *s, size_t len);  /* no cut: tests may exceed VT_MAX_STRING */
void tg_buf_bytes(tg_buf_t *b, const void *p, size_t len);
void tg_buf_free(tg_buf_t *b);

typedef struct tg_chunk_opts {
    /* Each is written instead of the true value when its has_ flag is set. */
    int has_magic, has_zsize, has_rawsize, has_seq;
    uint32_t magic, zsize, rawsize, seq;
} tg_chunk_opts_t;

typedef struct tg {
    FILE *out;
    tg_buf_t header, chunk;
    int header_written;
    uint32_t seq;            /* next true chunk seq */
    uint64_t start_ns;       /* PROCESS mono_start_ns: EVENT delta base */
    uint64_t prev_event_ns;  /* delta base inside the current stream */
    uint64_t prev_event_ptr; /* EVENT ptr delta base (format version >= 2) */
    /* prelude overrides */
    char magic[8];
    uint16_t version, flags;
    int has_header_len;
    uint32_t header_len;
    /* tg_event's open version 3 EVENT record: its length field at
     * batch_len_at in batch_buf, which ended at batch_end after it (NULL:
     * none open; a chunk closes it) */
    tg_buf_t *batch_buf;
    size_t batch_len_at, batch_end;
    int level;               /* zstd level */
    int checksum;            /* zstd content checksum, on by default */
    int raw_literals;        /* zstd literals stored, not Huffman-coded (the shim's writer) */
    int stored;              /* chunks stored uncompressed (VTCS, version 4), as a shim without libzstd */
} tg_t;

void tg_init(tg_t *g, FILE *out);

/* Appends one framed record (EVENT payloads: see tg_buf_event). */
void tg_record(tg_t *g, uint8_t type, const uint8_t *payload, size_t len);

/* One EVENT as a test means it: time absolute, ptr the address, every
 * field 64 bits wide so that a test can write values the format's field
 * cannot hold (the reader must refuse them). */
typedef struct tg_event {
    uint64_t api, time_ns, tid;
    int64_t device;
    uint64_t ptr, size, reserved, aux, flags, result, stack;
    unsigned force;   /* version 3: VT_EV_HAS_* bits written even when 0 */
} tg_event_t;

/* Appends e's payload as g->version encodes it (dt and ptr as deltas from
 * the previous EVENT in the chunk; version 1: ptr is the address; version
 * 3: the presence byte and only the fields it names) and advances the
 * delta bases. */
void tg_buf_event(tg_t *g, tg_buf_t *b, const tg_event_t *e);

/* Appends one EVENT record as the shim's writer does: in version 3 the
 * event joins the EVENT record the previous tg_event opened when nothing
 * was appended since (no record, chunk or raw bytes); before version 3
 * each event is a record of its own. */
void tg_event(tg_t *g, const tg_event_t *e);

/* Sets the delta base after a PROCESS record was written to the header. */
void tg_set_start(tg_t *g, uint64_t mono_start_ns);

void tg_write_header(tg_t *g);
/* Compresses and writes the pending records as one chunk (even if empty). */
void tg_chunk(tg_t *g, const tg_chunk_opts_t *opts);
/* Raw bytes into the file at this point (header written first). */
void tg_bytes(tg_t *g, const void *p, size_t len);
/* Writes the header if not yet written and any pending records. */
void tg_finish(tg_t *g);

#endif
