/* unpack.c: turns real trace files into structured fuzz seeds (see
 * fuzz_input.h): "VTS1", the header body, then each chunk's decompressed
 * record stream behind a separator. Mutating these reaches the record
 * decoders, which checksummed zstd frames would otherwise shield.
 *
 *   unpack TRACE OUT
 *       Stops quietly at the first chunk that does not decompress (a
 *       corrupt or cut trace still gives a seed of what came before).
 *       Exit 1 only if TRACE is not a trace at all or OUT cannot be written.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "fuzz_input.h"
#include "vramtrace/trace_format.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: unpack TRACE OUT\n");
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
        if (h.magic != VT_CHUNK_MAGIC || h.zsize > VT_MAX_CHUNK_ZSIZE || h.rawsize > VT_MAX_CHUNK_RAW)
            break;
        uint8_t *z = malloc(h.zsize ? h.zsize : 1), *raw = malloc(h.rawsize ? h.rawsize : 1);
        if (!z || !raw || fread(z, 1, h.zsize, in) != h.zsize) {
            free(z);
            free(raw);
            break;
        }
        size_t got = ZSTD_decompress(raw, h.rawsize, z, h.zsize);
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
