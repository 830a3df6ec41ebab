/* errors.c: messages for the VT_E_* codes and the one way they are printed.
 *
 * Contract: vt_error_message() never returns NULL (an unknown code gets a
 * generic message), vt_error_set() never overflows err->detail (long details
 * are cut), and vt_error_print() writes one line on stderr. The path is the
 * caller's business: vt_error_set() leaves err->path alone.
 */
#include "errors.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *vt_error_message(int code)
{
    switch (code) {
    case VT_OK:
        return "success";
#define VT_E_CASE(name, msg) \
    case VT_E_##name:        \
        return msg;
        VT_ERROR_LIST(VT_E_CASE)
#undef VT_E_CASE
    default:
        return "unknown error";
    }
}

int vt_error_set(vt_error_t *err, int code, uint64_t offset, const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    err->offset = offset;
    err->detail[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->detail, sizeof err->detail, fmt, ap);
        va_end(ap);
    }
    return code;
}

void vt_error_print(const vt_error_t *err)
{
    /* The path may be a name found in a directory anyone could write to,
     * the detail may quote the file: both go to the terminal escaped. */
    const char *path = err->path[0] ? vt_text(err->path) : "-";
    if (err->detail[0])
        fprintf(stderr, "vramtrace: %s: offset %llu: %s: %s\n", path,
                (unsigned long long)err->offset, vt_error_message(err->code), vt_text(err->detail));
    else
        fprintf(stderr, "vramtrace: %s: offset %llu: %s\n", path,
                (unsigned long long)err->offset, vt_error_message(err->code));
}

/* ---- text from a trace, made safe for a terminal ------------------------ */

int vt_text_raw;

/* Length of the UTF-8 sequence at p (at most n bytes) that a terminal shows
 * as a glyph; 0 for a byte to escape: C0 controls and DEL, C1 controls
 * (U+0080..U+009F: some terminals take U+009B as CSI), the bidi embedding,
 * override and isolate controls (U+202A..U+202E, U+2066..U+2069: they
 * reorder what follows on the line), and anything not valid UTF-8. */
size_t vt_text_glyph_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if (c < 0x80)
        return c >= 0x20 && c != 0x7f;
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!len || len > n)
        return 0;
    uint32_t cp = c & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;   /* overlong or a surrogate */
    if (cp < 0xa0 || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069))
        return 0;
    return len;
}

/* A few results live at once (one printf may take several), each in its own
 * buffer that grows to fit and is kept for the next call. */
#define TEXT_SLOTS 8

const char *vt_text(const char *s)
{
    static char *slot[TEXT_SLOTS];
    static size_t cap[TEXT_SLOTS];
    static unsigned next;
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), i = 0, k;
    if (vt_text_raw)
        return s;
    while (i < n && (k = vt_text_glyph_len(p + i, n - i)))
        i += k;
    if (i == n)
        return s;   /* the usual case: nothing to escape, nothing copied */
    unsigned sl = next++ % TEXT_SLOTS;
    if (n > (SIZE_MAX - 1) / 4)
        return "?";
    if (cap[sl] < 4 * n + 1) {
        char *b = realloc(slot[sl], 4 * n + 1);
        if (!b)
            return "?";
        slot[sl] = b;
        cap[sl] = 4 * n + 1;
    }
    char *o = slot[sl];
    memcpy(o, s, i);
    o += i;
    while (i < n) {
        if ((k = vt_text_glyph_len(p + i, n - i))) {
            memcpy(o, p + i, k);
            o += k;
            i += k;
        } else {
            static const char hex[] = "0123456789abcdef";
            *o++ = '\\';
            *o++ = 'x';
            *o++ = hex[p[i] >> 4];
            *o++ = hex[p[i++] & 15];
        }
    }
    *o = 0;
    return slot[sl];
}

int vt_usage_error(const char *cmd, const char *what, ...)
{
    if (what) {
        va_list ap;
        fprintf(stderr, "vramtrace %s: ", cmd);
        va_start(ap, what);
        vfprintf(stderr, what, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
    fprintf(stderr, "Try 'vramtrace %s --help' for its options.\n", cmd);
    return VT_EXIT_BAD_INPUT;
}
