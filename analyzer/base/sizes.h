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

/* "12.345 s", "870.2 ms", "35.0 us" for ns since trace start; with a grain
 * set, no digit finer than the grain, and "<1 ms" below it. */
char *vt_fmt_time(char buf[VT_SIZE_BUF], uint64_t ns);

/* The coarsest grain of event times among the traces being reported (the
 * PROCESS record's time_res_ns; 0 = exact, the default). An event stamped
 * 0 with a 1 ms grain happened somewhere in the first millisecond: "0.0 us"
 * would claim a precision the trace does not have. */
void vt_fmt_set_time_grain(uint64_t ns);

/* "24GiB", "24 GB", "512MiB", "1.5T", "4096B": a number and a unit,
 * binary whatever the spelling (GB = GiB: cards are sold in binary units).
 * A bare number is refused, since `--capacity 24` would otherwise mean 24
 * bytes; only "0" stands alone, being zero in any unit. Returns 0 and sets
 * *bytes, VT_SIZE_NO_UNIT for a bare number, or VT_SIZE_BAD. */
#define VT_SIZE_NO_UNIT (-2)
#define VT_SIZE_BAD (-1)
int vt_parse_size(const char *text, uint64_t *bytes);

#endif
