/* Human-readable byte counts for the text report.
 *
 * Contract: binary units (KiB = 1024 B); the result always fits in
 * VT_SIZE_BUF bytes and is right-aligned friendly (fixed two decimals for
 * GiB, one for MiB) so columns of sizes line up when printed with %*s.
 * Writes into the caller's buffer and returns it; never allocates.
 */
#ifndef VT_SIZES_H
#define VT_SIZES_H

#include <stdint.h>

#define VT_SIZE_BUF 32
#define VT_GIB (1024.0 * 1024.0 * 1024.0)
#define VT_MIB (1024.0 * 1024.0)

/* "71.50 GiB", "512.0 MiB", "4.0 KiB", "17 B" */
char *vt_fmt_bytes(char buf[VT_SIZE_BUF], uint64_t bytes);

/* Signed variant for deltas: "-1.25 GiB", "+0 B" is never printed: 0 is "0 B". */
char *vt_fmt_sbytes(char buf[VT_SIZE_BUF], int64_t bytes);

/* "12.345 s", "870 ms", "35 us" for ns since trace start. */
char *vt_fmt_time(char buf[VT_SIZE_BUF], uint64_t ns);

#endif
