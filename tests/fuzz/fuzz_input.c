/* fuzz_input.c: the trace-file builder behind fuzz_input.h. */
#include "fuzz_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include "vramtrace/encode.h"
#include "vramtrace/trace_format.h"

static int memfd = -1;
static char memfd_path[64];

static int put(const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(memfd, b, n);
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* A PROCESS record with every field present and plausible. */
static size_t default_header(uint8_t *out)
{
    uint8_t payload[128], *p = payload;
    p = vt_put_varint(p, 1234);            /* pid */
    p = vt_put_varint(p, 1);               /* ppid */
    p = vt_put_varint(p, 1000000000ull);   /* mono_start_ns */
    p = vt_put_varint(p, 1700000000000000000ull);
    p = vt_put_str(p, "0.1.0", 5, 64);
    p = vt_put_str(p, "/fuzz", 5, 64);
    p = vt_put_str(p, "host", 4, 64);
    p = vt_put_varint(p, 1);
    p = vt_put_str(p, "fuzz", 4, 64);
    return (size_t)(vt_put_record(out, VT_REC_PROCESS, payload, (size_t)(p - payload)) - out);
}

static const uint8_t *find_sep(const uint8_t *p, const uint8_t *end)
{
    while ((size_t)(end - p) >= FUZZ_SEP_LEN) {
        const uint8_t *q = memchr(p, FUZZ_SEP[0], (size_t)(end - p) - FUZZ_SEP_LEN + 1);
        if (!q)
            return end;
        if (!memcmp(q, FUZZ_SEP, FUZZ_SEP_LEN))
            return q;
        p = q + 1;
    }
    return end;
}

static int write_structured(const uint8_t *data, size_t size)
{
    static ZSTD_CCtx *cctx;
    static uint8_t *zbuf;
    static size_t zcap;
    if (!cctx) {
        cctx = ZSTD_createCCtx();
        if (!cctx)
            return -1;
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    }
    const uint8_t *p = data, *end = data + size;
    const uint8_t *seg_end = find_sep(p, end);

    uint8_t hdr[128];
    const uint8_t *body = p;
    size_t body_len = (size_t)(seg_end - p);
    if (!body_len) {
        body_len = default_header(hdr);
        body = hdr;
    }
    vt_file_prelude_t pre;
    memset(&pre, 0, sizeof pre);
    memcpy(pre.magic, VT_FILE_MAGIC, 8);
    /* zstd chunks: what the shim with libzstd writes, version 3 (version
     * 4 is for stored chunks). */
    pre.version = 3;
    pre.header_len = (uint32_t)body_len;
    if (put(&pre, sizeof pre) || put(body, body_len))
        return -1;

    uint32_t seq = 0;
    while (seg_end < end) {
        p = seg_end + FUZZ_SEP_LEN;
        seg_end = find_sep(p, end);
        size_t raw_len = (size_t)(seg_end - p);
        size_t need = ZSTD_compressBound(raw_len);
        if (need > zcap) {
            uint8_t *nb = realloc(zbuf, need);
            if (!nb)
                return -1;
            zbuf = nb;
            zcap = need;
        }
        size_t z = ZSTD_compress2(cctx, zbuf, zcap, p, raw_len);
        if (ZSTD_isError(z))
            return -1;
        vt_chunk_header_t h = { VT_CHUNK_MAGIC, (uint32_t)z, (uint32_t)raw_len, seq++ };
        if (put(&h, sizeof h) || put(zbuf, z))
            return -1;
    }
    return 0;
}

const char *fuzz_trace_path(const uint8_t *data, size_t size)
{
    if (memfd < 0) {
        memfd = memfd_create("vt-fuzz", MFD_CLOEXEC);
        if (memfd < 0)
            return NULL;
        snprintf(memfd_path, sizeof memfd_path, "/proc/self/fd/%d", memfd);
    }
    if (ftruncate(memfd, 0) != 0 || lseek(memfd, 0, SEEK_SET) != 0)
        return NULL;
    size_t mlen = sizeof FUZZ_STRUCT_MAGIC - 1;
    int rc = size >= mlen && !memcmp(data, FUZZ_STRUCT_MAGIC, mlen) ? write_structured(data + mlen, size - mlen)
                                                                   : put(data, size);
    return rc == 0 ? memfd_path : NULL;
}

void fuzz_quiet_stdio(void)
{
    const char *v = getenv("FUZZ_VERBOSE");
    if (v && *v)
        return;
    FILE *null = fopen("/dev/null", "w");
    if (!null)
        return;
    stdout = null;
    stderr = null;
}
