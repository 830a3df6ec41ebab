/* unpack.c: turns real trace files into structured fuzz seeds (see
 * fuzz_input.h): "VTS1", the header body, then each chunk's decompressed
 * record stream behind a separator. Mutating these reaches the record
 * decoders, which checksummed zstd frames would otherwise shield.
 *
 *   unpack TRACE OUT
 *       Reads zstd chunks and stored ones (a shim without libzstd). Stops
 *       quietly at the first chunk that does not decompress (a corrupt or
 *       cut trace still gives a seed of what came before). Exit 1 only if
 *       TRACE is not a trace at all or OUT cannot be written.
 *   unpack --pack SEED OUT
 *       Writes the trace the fuzz targets read for SEED (fuzz_input.h), so
 *       a test can check what they are given.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "fuzz_input.h"
#include "vramtrace/trace_format.h"

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *bigger = realloc(buf, cap *= 2);
        if (!bigger)
            free(buf);
        buf = bigger;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static int pack(const char *seed_path, const char *out_path)
{
    size_t len;
    uint8_t *seed = read_all(seed_path, &len);
    if (!seed) {
        perror(seed_path);
        return 1;
    }
    const char *trace_path = fuzz_trace_path(seed, len);
    free(seed);
    size_t trace_len;
    uint8_t *trace = trace_path ? read_all(trace_path, &trace_len) : NULL;
    FILE *out = trace ? fopen(out_path, "wb") : NULL;
    int rc = out && fwrite(trace, 1, trace_len, out) == trace_len ? 0 : 1;
    if (out && fclose(out))
        rc = 1;
    if (rc)
        fprintf(stderr, "unpack: --pack %s %s failed\n", seed_path, out_path);
    free(trace);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--pack"))
        return pack(argv[2], argv[3]);
    if (argc != 3) {
        fprintf(stderr, "usage: unpack TRACE OUT\n       unpack --pack SEED OUT\n");
        return 1;
    }
    FILE *in = fopen(argv[1], "rb");
    if (!in) {
        perror(argv[1]);
        return 1;
    }
    vt_file_prelude_t pre;
    if (fread(&pre, sizeof pre, 1, in) != 1 || memcmp(pre.magic, VT_FILE_MAGIC, 8) ||
        pre.header_len > VT_MAX_HEADER) {
        fprintf(stderr, "unpack: %s: not a trace\n", argv[1]);
        return 1;
    }
    uint8_t *hdr = malloc(pre.header_len ? pre.header_len : 1);
    if (!hdr || fread(hdr, 1, pre.header_len, in) != pre.header_len) {
        fprintf(stderr, "unpack: %s: short header\n", argv[1]);
        return 1;
    }
    FILE *out = fopen(argv[2], "wb");
    if (!out) {
        perror(argv[2]);
        return 1;
    }
    fwrite(FUZZ_STRUCT_MAGIC, 1, sizeof FUZZ_STRUCT_MAGIC - 1, out);
    fwrite(hdr, 1, pre.header_len, out);
    vt_chunk_header_t h;
    while (fread(&h, sizeof h, 1, in) == 1) {
        int stored = h.magic == VT_CHUNK_STORED_MAGIC;
        if ((h.magic != VT_CHUNK_MAGIC && !stored) || (stored && h.zsize != h.rawsize) ||
            h.zsize > VT_MAX_CHUNK_ZSIZE || h.rawsize > VT_MAX_CHUNK_RAW)
            break;
        uint8_t *z = malloc(h.zsize ? h.zsize : 1), *raw = malloc(h.rawsize ? h.rawsize : 1);
        if (!z || !raw || fread(z, 1, h.zsize, in) != h.zsize) {
            free(z);
            free(raw);
            break;
        }
        size_t got = stored ? h.zsize : ZSTD_decompress(raw, h.rawsize, z, h.zsize);
        if (stored && got)
            memcpy(raw, z, got);
        if (!ZSTD_isError(got)) {
            fwrite(FUZZ_SEP, 1, FUZZ_SEP_LEN, out);
            fwrite(raw, 1, got, out);
        }
        free(z);
        free(raw);
        if (ZSTD_isError(got))
            break;
    }
    free(hdr);
    fclose(in);
    return fclose(out) == 0 ? 0 : 1;
}
