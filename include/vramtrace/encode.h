/* Record encoding primitives for the trace format (trace_format.h), shared
 * by every writer: the shim's writer thread and the test trace generator.
 *
 * Contract: the caller guarantees room. A record is at most
 * 1 + 10 + payload bytes; payloads are built in a scratch buffer first, then
 * framed with vt_put_record(). No function here allocates or fails.
 */
#ifndef VRAMTRACE_ENCODE_H
#define VRAMTRACE_ENCODE_H

#include <stdint.h>
#include <string.h>

#define VT_VARINT_MAX 10

static inline uint8_t *vt_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint64_t vt_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* vt_zigzag's inverse; defined for every input, hostile ones included. */
static inline int64_t vt_unzigzag(uint64_t u)
{
    return (int64_t)((u >> 1) ^ (0 - (u & 1)));
}

static inline uint8_t *vt_put_zz(uint8_t *p, int64_t v)
{
    return vt_put_varint(p, vt_zigzag(v));
}

/* Strings longer than VT_MAX_STRING are cut, never rejected. */
static inline uint8_t *vt_put_str(uint8_t *p, const char *s, size_t len, size_t max)
{
    if (len > max)
        len = max;
    p = vt_put_varint(p, len);
    if (len)
        memcpy(p, s, len);
    return p + len;
}

/* Frames payload[0..len) as one record at p. */
static inline uint8_t *vt_put_record(uint8_t *p, uint8_t type, const uint8_t *payload, size_t len)
{
    *p++ = type;
    p = vt_put_varint(p, len);
    memmove(p, payload, len);
    return p + len;
}

#endif
