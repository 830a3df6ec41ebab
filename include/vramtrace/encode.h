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

#include "vramtrace/trace_format.h"

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

/* An EVENT's fields in wire order (trace_format.h, VT_REC_EVENT). */
enum vt_event_field {
    VT_EVF_API, VT_EVF_DT, VT_EVF_TID, VT_EVF_DEVICE, VT_EVF_PTR, VT_EVF_SIZE,
    VT_EVF_RESERVED, VT_EVF_AUX, VT_EVF_FLAGS, VT_EVF_RESULT, VT_EVF_STACK,
    VT_EVF_COUNT
};

/* The longest EVENT payload of any version: 11 varints and the presence
 * byte. Below 128, so its length is one varint byte. */
#define VT_EVENT_MAX_PAYLOAD (1 + VT_EVF_COUNT * VT_VARINT_MAX)

/* One optional field of a version 3 EVENT: written, and its presence bit
 * set, when nonzero or when force names it. */
static inline uint8_t *vt_put_optional(uint8_t *p, uint64_t v, unsigned bit, unsigned force, unsigned *present)
{
    if (!v && !(force & bit))
        return p;
    *present |= bit;
    return vt_put_varint(p, v);
}

/* A version 3 EVENT payload at p. wire[] holds the fields as they go on
 * the wire (dt, device and ptr already zigzagged, ptr already a delta).
 * An optional field is written when nonzero, or when its bit is in force:
 * writers pass 0; tests force zeros onto the wire, which readers take.
 * One test per field, spelled out: the shim's writer thread runs it per
 * event, and a loop over a table of bits cost it ~150 instructions more. */
static inline uint8_t *vt_put_event_v3(uint8_t *p, const uint64_t wire[VT_EVF_COUNT], unsigned force)
{
    unsigned present = 0;
    p = vt_put_varint(p, wire[VT_EVF_API]);
    uint8_t *present_at = p++;
    p = vt_put_optional(p, wire[VT_EVF_DT], VT_EV_HAS_DT, force, &present);
    p = vt_put_optional(p, wire[VT_EVF_TID], VT_EV_HAS_TID, force, &present);
    p = vt_put_optional(p, wire[VT_EVF_DEVICE], VT_EV_HAS_DEVICE, force, &present);
    p = vt_put_varint(p, wire[VT_EVF_PTR]);
    p = vt_put_optional(p, wire[VT_EVF_SIZE], VT_EV_HAS_SIZE, force, &present);
    p = vt_put_optional(p, wire[VT_EVF_RESERVED], VT_EV_HAS_RESERVED, force, &present);
    p = vt_put_optional(p, wire[VT_EVF_AUX], VT_EV_HAS_AUX, force, &present);
    p = vt_put_optional(p, wire[VT_EVF_FLAGS], VT_EV_HAS_FLAGS, force, &present);
    p = vt_put_optional(p, wire[VT_EVF_RESULT], VT_EV_HAS_RESULT, force, &present);
    *present_at = (uint8_t)present;
    return vt_put_varint(p, wire[VT_EVF_STACK]);
}

/* Version 3 writers keep an EVENT record open while events join it, so
 * its length is written in a fixed 3 bytes (non-minimal LEB128, which
 * readers take) and filled in when the record closes. */
#define VT_EVENT_LEN_BYTES 3
#define VT_EVENT_RECORD_MAX ((1u << 21) - 1) /* what 3 varint bytes hold */

static inline void vt_put_event_len(uint8_t *p, size_t len)
{
    p[0] = (uint8_t)(0x80 | (len & 0x7f));
    p[1] = (uint8_t)(0x80 | (len >> 7 & 0x7f));
    p[2] = (uint8_t)(len >> 14 & 0x7f);
}

#endif
