/* fuzz_input.h: turns one fuzzer input into a trace file the analyzer can
 * open by path, shared by every trace-reading fuzz target.
 *
 * Two shapes of input, so the fuzzer reaches both the framing code and the
 * record decoders behind it:
 *  - raw: the bytes are the file, as an attacker would hand it over. Every
 *    real trace is a valid raw seed.
 *  - structured: input starting with FUZZ_STRUCT_MAGIC is a list of
 *    segments separated by FUZZ_SEP. Segment 0 is the header body (empty:
 *    a minimal valid PROCESS record), each later segment the decompressed
 *    record stream of one chunk. The harness writes the file the shim with
 *    libzstd writes (format version 3) and compresses each chunk with its
 *    checksum, because a byte-level mutation of a checksummed zstd frame
 *    almost never survives to the decoder. tests/fuzz/unpack.c turns real
 *    traces, zstd or stored chunks, into such seeds, and back.
 *
 * The file lives in a memfd named by /proc/self/fd/N: no disk traffic, and
 * vt_reader_open() still goes through open(2) like it does for users.
 */
#ifndef VT_FUZZ_INPUT_H
#define VT_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

#define FUZZ_STRUCT_MAGIC "VTS1"
#define FUZZ_SEP "\xffVTSEP\xff"
#define FUZZ_SEP_LEN 7

/* Writes the trace for data[0..size) into the process's scratch memfd and
 * returns its path (static storage), or NULL if the memfd cannot be made,
 * in which case the target does nothing. */
const char *fuzz_trace_path(const uint8_t *data, size_t size);

/* Points stdout and stderr (the stdio streams, not fds 1 and 2) at
 * /dev/null so a run is not drowned in the analyzer's output, unless
 * FUZZ_VERBOSE is set. Sanitizer reports go to fd 2 and stay visible. */
void fuzz_quiet_stdio(void);

#endif
