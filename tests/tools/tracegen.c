/* tracegen.c: see tracegen.h. */
#include "tracegen.h"

#include <stdlib.h>
#include <string.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_c_literalCompressionMode */
#include <zstd.h>

#include "vramtrace/encode.h"

static void die(const char *what)
{
    fprintf(stderr, "tracegen: %s\n", what);
    exit(1);
}

static void reserve(tg_buf_t *b, size_t more)
{
    if (b->len + more <= b->cap)
        return;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < b->len + more)
        ncap *= 2;
    uint8_t *np = realloc(b->p, ncap);
    if (!np)
        die("out of memory");
    b->p = np;
    b->cap = ncap;
}

void tg_buf_varint(tg_buf_t *b, uint64_t v)
{
    reserve(b, VT_VARINT_MAX);
    b->len = (size_t)(vt_put_varint(b->p + b->len, v) - b->p);
}

void tg_buf_zz(tg_buf_t *b, int64_t v)
{
    reserve(b, VT_VARINT_MAX);
    b->len = (size_t)(vt_put_zz(b->p + b->len, v) - b->p);
}

void tg_buf_str(tg_buf_t *b, const char *s, size_t len)
{
    reserve(b, VT_VARINT_MAX + len);
    b->len = (size_t)(vt_put_str(b->p + b->len, s, len, len) - b->p);
}

void tg_buf_bytes(tg_buf_t *b, const void *p, size_t len)
{
    reserve(b, len);
    if (len)
        memcpy(b->p + b->len, p, len);
    b->len += len;
}

void tg_buf_free(tg_buf_t *b)
{
    free(b->p);
    *b = (tg_buf_t){ 0 };
}

void tg_init(tg_t *g, FILE *out)
{
    memset(g, 0, sizeof *g);
    g->out = out;
    memcpy(g->magic, VT_FILE_MAGIC, 8);
    g->version = 3; /* what the shim writes with libzstd; stored chunks need VT_FORMAT_VERSION_STORED */
    g->level = 3;
    g->checksum = 1;
}

static void put_le(tg_t *g, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        if (putc((int)((v >> (8 * i)) & 0xff), g->out) == EOF)
            die("write error");
}

void tg_record(tg_t *g, uint8_t type, const uint8_t *payload, size_t len)
{
    tg_buf_t *b = g->header_written ? &g->chunk : &g->header;
    reserve(b, 1 + VT_VARINT_MAX + len);
    b->len = (size_t)(vt_put_record(b->p + b->len, type, payload, len) - b->p);
}

void tg_buf_event(tg_t *g, tg_buf_t *b, const tg_event_t *e)
{
    uint64_t wire[VT_EVF_COUNT] = {
        [VT_EVF_API] = e->api,
        [VT_EVF_DT] = vt_zigzag((int64_t)(e->time_ns - g->prev_event_ns)),
        [VT_EVF_TID] = e->tid,
        [VT_EVF_DEVICE] = vt_zigzag(e->device),
        [VT_EVF_PTR] = g->version >= 2 ? vt_zigzag((int64_t)(e->ptr - g->prev_event_ptr)) : e->ptr,
        [VT_EVF_SIZE] = e->size,
        [VT_EVF_RESERVED] = e->reserved,
        [VT_EVF_AUX] = e->aux,
        [VT_EVF_FLAGS] = e->flags,
        [VT_EVF_RESULT] = e->result,
        [VT_EVF_STACK] = e->stack,
    };
    g->prev_event_ns = e->time_ns;
    g->prev_event_ptr = e->ptr;
    uint8_t buf[VT_EVENT_MAX_PAYLOAD], *end = buf;
    if (g->version >= 3)
        end = vt_put_event_v3(buf, wire, e->force);
    else
        for (int k = 0; k < VT_EVF_COUNT; k++)
            end = vt_put_varint(end, wire[k]);
    tg_buf_bytes(b, buf, (size_t)(end - buf));
}

void tg_event(tg_t *g, const tg_event_t *e)
{
    tg_buf_t *b = g->header_written ? &g->chunk : &g->header;
    if (g->version < 3) {
        tg_buf_t p = { 0 };
        tg_buf_event(g, &p, e);
        tg_record(g, VT_REC_EVENT, p.p, p.len);
        tg_buf_free(&p);
        return;
    }
    if (!(g->batch_buf == b && g->batch_end == b->len)) {
        /* the length is filled in after each event (vt_put_event_len) */
        uint8_t open_record[1 + VT_EVENT_LEN_BYTES] = { VT_REC_EVENT };
        tg_buf_bytes(b, open_record, sizeof open_record);
        g->batch_buf = b;
        g->batch_len_at = b->len - VT_EVENT_LEN_BYTES;
    }
    tg_buf_event(g, b, e);
    size_t len = b->len - (g->batch_len_at + VT_EVENT_LEN_BYTES);
    if (len > VT_EVENT_RECORD_MAX)
        die("tg_event: EVENT record over 2 MiB");
    vt_put_event_len(b->p + g->batch_len_at, len);
    g->batch_end = b->len;
}

void tg_set_start(tg_t *g, uint64_t mono_start_ns)
{
    g->start_ns = mono_start_ns;
    g->prev_event_ns = mono_start_ns;
}

void tg_write_header(tg_t *g)
{
    if (g->header_written)
        return;
    fwrite(g->magic, 1, 8, g->out);
    put_le(g, g->version, 2);
    put_le(g, g->flags, 2);
    put_le(g, g->has_header_len ? g->header_len : (uint32_t)g->header.len, 4);
    if (g->header.len && fwrite(g->header.p, 1, g->header.len, g->out) != g->header.len)
        die("write error");
    g->header_written = 1;
    g->prev_event_ns = g->start_ns;
}

void tg_chunk(tg_t *g, const tg_chunk_opts_t *opts)
{
    tg_write_header(g);
    size_t bound = g->stored ? g->chunk.len : ZSTD_compressBound(g->chunk.len);
    uint8_t *z = malloc(bound ? bound : 1);
    if (!z)
        die("out of memory");
    size_t zsize = g->chunk.len;
    if (g->stored) {
        if (zsize)
            memcpy(z, g->chunk.p, zsize);
    } else {
        ZSTD_CCtx *cctx = ZSTD_createCCtx();
        if (!cctx)
            die("out of memory");
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, g->level);
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, g->checksum);
        if (g->raw_literals)
            ZSTD_CCtx_setParameter(cctx, ZSTD_c_literalCompressionMode, ZSTD_ps_disable);
        zsize = ZSTD_compress2(cctx, z, bound, g->chunk.p ? g->chunk.p : (const uint8_t *)"", g->chunk.len);
        ZSTD_freeCCtx(cctx);
        if (ZSTD_isError(zsize))
            die(ZSTD_getErrorName(zsize));
    }
    tg_chunk_opts_t o = opts ? *opts : (tg_chunk_opts_t){ 0 };
    put_le(g, o.has_magic ? o.magic : g->stored ? VT_CHUNK_STORED_MAGIC : VT_CHUNK_MAGIC, 4);
    put_le(g, o.has_zsize ? o.zsize : (uint32_t)zsize, 4);
    put_le(g, o.has_rawsize ? o.rawsize : (uint32_t)g->chunk.len, 4);
    put_le(g, o.has_seq ? o.seq : g->seq, 4);
    if (fwrite(z, 1, zsize, g->out) != zsize)
        die("write error");
    free(z);
    g->seq++;
    g->chunk.len = 0;
    g->batch_buf = NULL;
    g->prev_event_ns = g->start_ns;
    g->prev_event_ptr = 0;
}

void tg_bytes(tg_t *g, const void *p, size_t len)
{
    tg_write_header(g);
    if (len && fwrite(p, 1, len, g->out) != len)
        die("write error");
}

void tg_finish(tg_t *g)
{
    tg_write_header(g);
    if (g->chunk.len)
        tg_chunk(g, NULL);
    if (fflush(g->out))
        die("write error");
    tg_buf_free(&g->header);
    tg_buf_free(&g->chunk);
}
