/* Streaming JSON writer (see json.h). Two-space indentation so the output
 * greps well line by line ("tracked_bytes": N on its own line), which the
 * scenario tests and shell users rely on.
 *
 * Each public call assembles its bytes (separator, indentation, key, value)
 * in a small buffer on the stack and hands them to stdio with one fwrite:
 * a report with 100k stacks writes millions of short strings, and stdio's
 * per-call cost (locking, dispatch) dominated when every byte was its own
 * fputc. Nothing is kept between calls, so callers may still write to the
 * FILE themselves between JSON calls (html.c does). */
#include "json.h"

#include <inttypes.h>
#include <string.h>

typedef struct out {
    FILE *f;
    size_t n;
    char b[1024];
} out_t;

/* The analyzer writes from one thread: fwrite's locking was a tenth of a
 * 100k-stack --json report, which makes millions of these calls. */
static void out_flush(out_t *o)
{
    if (o->n)
        fwrite_unlocked(o->b, 1, o->n, o->f);
    o->n = 0;
}

static inline void out_put(out_t *o, const void *s, size_t n)
{
    if (n > sizeof o->b - o->n) {
        out_flush(o);
        if (n > sizeof o->b) {
            fwrite_unlocked(s, 1, n, o->f);
            return;
        }
    }
    memcpy(o->b + o->n, s, n);
    o->n += n;
}

static inline void out_c(out_t *o, char c)
{
    if (o->n == sizeof o->b)
        out_flush(o);
    o->b[o->n++] = c;
}

static void out_u64(out_t *o, uint64_t v)
{
    char d[20];
    size_t k = sizeof d;
    do {
        d[--k] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    out_put(o, d + k, sizeof d - k);
}

static void out_uesc(out_t *o, unsigned c)
{
    static const char hex[] = "0123456789abcdef";
    char e[6] = { '\\', 'u', hex[(c >> 12) & 15], hex[(c >> 8) & 15], hex[(c >> 4) & 15], hex[c & 15] };
    out_put(o, e, sizeof e);
}

void vt_json_init(vt_json_t *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->has_items[0] = 0;
    j->compact = 0;
    j->script_safe = 0;
}

/* 1 for the bytes written as they are: printable ASCII other than " and \
 * (and < > & when script_safe). */
static inline int plain(unsigned c, int script_safe)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' &&
           !(script_safe && (c == '<' || c == '>' || c == '&'));
}

/* plain() as a table, [script_safe][byte]: the run scan in put_escaped
 * covers every byte of ~500 MB of symbol names in a 100k-stack report. */
static unsigned char plain_tab[2][256];
static int plain_tab_ready;

static void plain_tab_init(void)
{
    for (unsigned ss = 0; ss < 2; ss++)
        for (unsigned c = 0; c < 256; c++)
            plain_tab[ss][c] = (unsigned char)plain(c, (int)ss);
    plain_tab_ready = 1;
}

static void put_escaped(const vt_json_t *j, out_t *o, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    int ss = j->script_safe;
    if (!plain_tab_ready)
        plain_tab_init();
    const unsigned char *tab = plain_tab[ss != 0];
    out_c(o, '"');
    while (p < end) {
        /* Runs of plain bytes (nearly all of a symbol name) in one copy. */
        const unsigned char *q = p;
        while (q < end && tab[*q])
            q++;
        if (q > p) {
            out_put(o, p, (size_t)(q - p));
            p = q;
            if (p == end)
                break;
        }
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            out_c(o, '\\');
            out_c(o, (char)c);
            p++;
        } else if (c < 0x80) {
            /* A control byte, or < > & under script_safe: inside an HTML
             * <script>, "</script>" or "<!--" in a string would end or
             * change the script element, so those are never written. */
            out_uesc(o, c);
            p++;
        } else {
            /* Validate one UTF-8 sequence; anything else becomes U+FFFD. */
            size_t len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
            int good = len && (size_t)(end - p) >= len;
            for (size_t i = 1; good && i < len; i++)
                good = (p[i] & 0xc0) == 0x80;
            if (good && len == 3 && c == 0xe0 && p[1] < 0xa0)
                good = 0;
            if (good && len == 3 && c == 0xed && p[1] >= 0xa0)
                good = 0;
            if (good && len == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
                good = 0;
            if (good && ss && len == 3 && c == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
                /* U+2028/2029 end a line in pre-ES2019 JavaScript. */
                out_uesc(o, 0x2000u | (p[2] - 0x80u));
                p += len;
            } else if (good) {
                out_put(o, p, len);
                p += len;
            } else {
                out_put(o, "\xef\xbf\xbd", 3);
                p++;
            }
        }
    }
    out_c(o, '"');
}

static void indent(out_t *o, int depth)
{
    static const char spaces[2 * VT_JSON_MAX_DEPTH] = { [0 ... 2 * VT_JSON_MAX_DEPTH - 1] = ' ' };
    out_c(o, '\n');
    out_put(o, spaces, 2 * (size_t)depth);
}

static void item(vt_json_t *j, out_t *o, const char *key)
{
    o->f = j->f;
    o->n = 0;
    if (j->has_items[j->depth])
        out_c(o, ',');
    if (j->depth > 0 && !j->compact)
        indent(o, j->depth);
    j->has_items[j->depth] = 1;
    if (key) {
        put_escaped(j, o, key, strlen(key));
        if (j->compact)
            out_c(o, ':');
        else
            out_put(o, ": ", 2);
    }
}

static void open_(vt_json_t *j, const char *key, char c)
{
    out_t o;
    item(j, &o, key);
    out_c(&o, c);
    out_flush(&o);
    if (j->depth + 1 < VT_JSON_MAX_DEPTH)
        j->depth++;
    j->has_items[j->depth] = 0;
}

static void close_(vt_json_t *j, char c)
{
    out_t o = { .f = j->f, .n = 0 };
    int had = j->has_items[j->depth];
    if (j->depth > 0)
        j->depth--;
    if (had && !j->compact)
        indent(&o, j->depth);
    out_c(&o, c);
    out_flush(&o);
}

void vt_json_obj(vt_json_t *j, const char *key) { open_(j, key, '{'); }
void vt_json_obj_end(vt_json_t *j) { close_(j, '}'); }
void vt_json_arr(vt_json_t *j, const char *key) { open_(j, key, '['); }
void vt_json_arr_end(vt_json_t *j) { close_(j, ']'); }

void vt_json_u64(vt_json_t *j, const char *key, uint64_t v)
{
    out_t o;
    item(j, &o, key);
    out_u64(&o, v);
    out_flush(&o);
}

void vt_json_i64(vt_json_t *j, const char *key, int64_t v)
{
    out_t o;
    item(j, &o, key);
    if (v < 0)
        out_c(&o, '-');
    /* 0 - (uint64_t)v is |v| for INT64_MIN too. */
    out_u64(&o, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
    out_flush(&o);
}

void vt_json_num(vt_json_t *j, const char *key, double v)
{
    out_t o;
    item(j, &o, key);
    /* JSON has no NaN/Inf; a ratio that is undefined is written as 0. */
    if (v != v || v > 1e300 || v < -1e300)
        v = 0;
    char d[320];
    int n = snprintf(d, sizeof d, "%.4f", v);
    out_put(&o, d, n > 0 ? (size_t)n : 0);
    out_flush(&o);
}

void vt_json_bool(vt_json_t *j, const char *key, int v)
{
    out_t o;
    item(j, &o, key);
    if (v)
        out_put(&o, "true", 4);
    else
        out_put(&o, "false", 5);
    out_flush(&o);
}

void vt_json_null(vt_json_t *j, const char *key)
{
    out_t o;
    item(j, &o, key);
    out_put(&o, "null", 4);
    out_flush(&o);
}

void vt_json_str(vt_json_t *j, const char *key, const char *s)
{
    vt_json_strn(j, key, s ? s : "", s ? strlen(s) : 0);
}

void vt_json_strn(vt_json_t *j, const char *key, const char *s, size_t len)
{
    out_t o;
    item(j, &o, key);
    put_escaped(j, &o, s, len);
    out_flush(&o);
}

void vt_json_finish(vt_json_t *j)
{
    fputc('\n', j->f);
}
