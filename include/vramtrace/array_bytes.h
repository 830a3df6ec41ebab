/* array_bytes.h: the bytes a CUDA array holds, from its descriptor, shared
 * by the shim (hooks.c) and the simulated driver (tests/sim/sim_array.c).
 *
 * The formula is the descriptor's: bytes per element x width x height x
 * depth (each at least 1), summed over the mipmap levels (each halves
 * width, height and, unless the array is layered, depth, down to 1). Block-
 * compressed formats count whole 4x4 blocks; planar YUV formats their
 * planes. The driver may pad rows and align the whole; that rounding is its
 * own and not in this figure. An unknown format gives 0, a product over 64
 * bits UINT64_MAX. Compiled with cuda.h (CU_AD_FORMAT_* values).
 */
#ifndef VRAMTRACE_ARRAY_BYTES_H
#define VRAMTRACE_ARRAY_BYTES_H

#include <stdint.h>

/* Bytes of a 4x4 block (block-compressed formats, *block = 1) or, x2, of
 * one element (the rest, *block = 0): NV12's 1.5 bytes a pixel is 3. */
static inline unsigned vt_array_unit2(unsigned format, unsigned channels, int *block)
{
    *block = 0;
    switch (format) {
    case 0x01: case 0x08: return 2 * channels;                  /* (UN)SIGNED_INT8 */
    case 0x02: case 0x09: case 0x10: return 4 * channels;       /* INT16, HALF */
    case 0x03: case 0x0a: case 0x20: return 8 * channels;       /* INT32, FLOAT */
    case 0xc0: case 0xc6: return 2;                             /* [US]NORM_INT8X1 */
    case 0xc1: case 0xc7: case 0xc3: case 0xc9: return 4;       /* INT8X2, INT16X1 */
    case 0xc2: case 0xc8: case 0xc4: case 0xca: case 0x50: return 8; /* INT8X4, INT16X2, 101010_2 */
    case 0xc5: case 0xcb: return 16;                            /* INT16X4 */
    case 0xb0: return 3;                                        /* NV12 */
    case 0x9f: case 0xa1: case 0xb2: return 6;                  /* P010, P016, Y444_PLANAR8 */
    case 0xa2: case 0xa5: return 4;                             /* NV16, YUY2 */
    case 0xa3: case 0xa4: case 0xa6: case 0xa7: case 0xa8: case 0xa9: return 8; /* P210 P216 Y210 Y216 AYUV Y410 */
    case 0xb1: case 0xb3: return 16 - 4 * (format == 0xb3);     /* Y416 8 bytes, Y444_PLANAR10 6 */
    case 0x91: case 0x92: case 0x97: case 0x98:                 /* BC1, BC4: 8 bytes a block */
        *block = 1;
        return 8;
    case 0x93: case 0x94: case 0x95: case 0x96: case 0x99: case 0x9a:
    case 0x9b: case 0x9c: case 0x9d: case 0x9e:                 /* BC2 BC3 BC5 BC6H BC7: 16 */
        *block = 1;
        return 16;
    default: return 0;
    }
}

/* levels: 1 for a plain array; layered: depth is a layer count, kept. */
static inline uint64_t vt_array_bytes(unsigned format, unsigned channels, uint64_t w, uint64_t h, uint64_t d,
                                      unsigned levels, int layered)
{
    int block;
    uint64_t unit = vt_array_unit2(format, channels, &block), total = 0;
    if (!unit)
        return 0;
    w = w ? w : 1, h = h ? h : 1, d = d ? d : 1;
    for (unsigned l = 0; l < (levels ? levels : 1); l++) {
        uint64_t lw = w, lh = h, n;
        if (block)
            lw = (lw + 3) / 4, lh = (lh + 3) / 4;
        if (__builtin_mul_overflow(lw, lh, &n) || __builtin_mul_overflow(n, d, &n) ||
            __builtin_mul_overflow(n, unit, &n) || __builtin_add_overflow(total, block ? n : n / 2, &total))
            return UINT64_MAX;
        if (w == 1 && h == 1 && (layered || d == 1))
            break;   /* no level below 1x1x1 */
        w = w > 1 ? w / 2 : 1, h = h > 1 ? h / 2 : 1;
        if (!layered)
            d = d > 1 ? d / 2 : 1;
    }
    return total;
}

#endif
