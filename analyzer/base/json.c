/* Streaming JSON writer (see json.h). Two-space indentation so the output
 * greps well line by line ("tracked_bytes": N on its own line), which the
 * scenario tests and shell users rely on.
 *
 * Bytes collect in the writer's own buffer and go to stdio in VT_JSON_BUF
 * blocks: a 100k-stack report makes ~14 million calls for ~500 MB, and one
 * fwrite per call (stdio's dispatch and its copy) was most of their cost.
 * The buffer is handed over whenever the outermost value closes, so the
 * FILE is current between documents, where html.c writes to it. */
#include "json.h"

#include <string.h>

/* The fixed part of one item: ',' '\n', the widest indentation, ": " and
 * the longest number. Reserved at once so they need no per-byte checks. */
#define ITEM_MAX (2 + 2 * VT_JSON_MAX_DEPTH + 2 + 24)

static const char spaces[2 * VT_JSON_MAX_DEPTH] = { [0 ... 2 * VT_JSON_MAX_DEPTH - 1] = ' ' };
static const char digits2[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";

/* The analyzer writes from one thread, so stdio's locking is not needed. */
static void flush(vt_json_t *j)
{
    if (j->n)
        fwrite_unlocked(j->buf, 1, j->n, j->f);
    j->n = 0;
}

/* @return where n (<= VT_JSON_BUF) bytes can be written; the caller adds
 * what it used to j->n. */
static inline char *reserve(vt_json_t *j, size_t n)
{
    if (n > VT_JSON_BUF - j->n)
        flush(j);
    return j->buf + j->n;
}

static inline void put(vt_json_t *j, const void *s, size_t n)
{
    if (n > VT_JSON_BUF - j->n) {
        flush(j);
        if (n > VT_JSON_BUF) {
            fwrite_unlocked(s, 1, n, j->f);
            return;
        }
    }
    memcpy(j->buf + j->n, s, n);
    j->n += n;
}

static inline void put_c(vt_json_t *j, char c)
{
    *reserve(j, 1) = c;
    j->n++;
}

/* Writes v at d, which has 20 bytes of room. @return its length. */
static inline size_t fmt_u64(char *d, uint64_t v)
{
    /* Digits are built at the end of the first 20 bytes; the 20 after them
     * let the copy out be one fixed-size move whatever the length (the
     * bytes past the number are overwritten by whatever comes next). */
    char t[40];
    size_t k = 20;
    while (v >= 100) {
        unsigned r = (unsigned)(v % 100);
        v /= 100;
        k -= 2;
        memcpy(t + k, digits2 + 2 * r, 2);
    }
    if (v >= 10) {
        k -= 2;
        memcpy(t + k, digits2 + 2 * v, 2);
    } else {
        t[--k] = (char)('0' + v);
    }
    memcpy(d, t + k, 20);
    return 20 - k;
}

static void put_uesc(vt_json_t *j, unsigned c)
{
    static const char hex[] = "0123456789abcdef";
    char e[6] = { '\\', 'u', hex[(c >> 12) & 15], hex[(c >> 8) & 15], hex[(c >> 4) & 15], hex[c & 15] };
    put(j, e, sizeof e);
}

void vt_json_init(vt_json_t *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->has_items[0] = 0;
    j->compact = 0;
    j->script_safe = 0;
    j->n = 0;
}

/* 1 for the bytes written as they are: printable ASCII other than " and \
 * (and < > & when script_safe). */
static inline int plain(unsigned c, int script_safe)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' &&
           !(script_safe && (c == '<' || c == '>' || c == '&'));
}

/* plain() as a table, [script_safe][byte], for the bytes around the
 * word-at-a-time scan. */
static unsigned char plain_tab[2][256];
static int plain_tab_ready;

static void plain_tab_init(void)
{
    for (unsigned ss = 0; ss < 2; ss++)
        for (unsigned c = 0; c < 256; c++)
            plain_tab[ss][c] = (unsigned char)plain(c, (int)ss);
    plain_tab_ready = 1;
}

#define ONES 0x0101010101010101ull
#define HIGH 0x8080808080808080ull

/* Nonzero if some byte of v is 0. Exact as a yes/no answer: the lowest
 * zero byte always sets its high bit, borrows only come from below it. */
static inline uint64_t has_zero(uint64_t v)
{
    return (v - ONES) & ~v & HIGH;
}

/* 1 if all 8 bytes are plain(): symbol names are long runs of them, and
 * 8 at a time is what keeps the scan of ~500 MB of names cheap. */
static inline int plain8(const unsigned char *p, int ss)
{
    uint64_t x;
    memcpy(&x, p, sizeof x);
    uint64_t bad = x & HIGH;                       /* not ASCII */
    bad |= (x - 0x20 * ONES) & ~x & HIGH;          /* a control byte */
    bad |= has_zero(x ^ ('"' * ONES)) | has_zero(x ^ ('\\' * ONES));
    if (ss)
        bad |= has_zero(x ^ ('<' * ONES)) | has_zero(x ^ ('>' * ONES)) | has_zero(x ^ ('&' * ONES));
    return !bad;
}

/* The general path: escapes, UTF-8 checks, strings of any length. */
static void put_escaped_slow(vt_json_t *j, const unsigned char *p, const unsigned char *end)
{
    int ss = j->script_safe != 0;
    const unsigned char *tab = plain_tab[ss];
    while (p < end) {
        /* Runs of plain bytes (nearly all of a symbol name) in one copy. */
        const unsigned char *q = p;
        while (end - q >= 8 && plain8(q, ss))
            q += 8;
        while (q < end && tab[*q])
            q++;
        if (q > p) {
            put(j, p, (size_t)(q - p));
            p = q;
            if (p == end)
                break;
        }
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            put(j, e, 2);
            p++;
        } else if (c < 0x80) {
            /* A control byte, or < > & under script_safe: inside an HTML
             * <script>, "</script>" or "<!--" in a string would end or
             * change the script element, so those are never written. */
            put_uesc(j, c);
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
                put_uesc(j, 0x2000u | (p[2] - 0x80u));
                p += len;
            } else if (good) {
                put(j, p, len);
                p += len;
            } else {
                put(j, "\xef\xbf\xbd", 3);
                p++;
            }
        }
    }
    put_c(j, '"');
}

/* Most strings (symbol names, paths) are plain from end to end: they are
 * copied into the buffer 8 bytes at a time as they are checked, the last
 * word overlapping the one before. At the first byte that is not plain,
 * what was checked stays and put_escaped_slow takes the rest. */
static void put_escaped(vt_json_t *j, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    int ss = j->script_safe != 0;
    if (!plain_tab_ready)
        plain_tab_init();
    size_t i = 0;
    if (n <= VT_JSON_BUF / 2) {
        char *d = reserve(j, n + 2);
        *d++ = '"';
        if (n >= 8) {
            for (; i + 8 <= n && plain8(p + i, ss); i += 8)
                memcpy(d + i, p + i, 8);
            if (i + 8 > n && plain8(p + n - 8, ss)) {
                memcpy(d + n - 8, p + n - 8, 8);
                i = n;
            }
        } else {
            const unsigned char *tab = plain_tab[ss];
            for (; i < n && tab[p[i]]; i++)
                d[i] = (char)p[i];
        }
        if (i == n) {
            d[n] = '"';
            j->n += n + 2;
            return;
        }
        j->n += 1 + i;
    } else {
        put_c(j, '"');
    }
    put_escaped_slow(j, p + i, p + n);
}

/* A key is a short C string, nearly always plain: scanned, measured and
 * copied in one pass, with the quotes and the colon. */
static void put_key(vt_json_t *j, const char *key)
{
    enum { KEY_FAST = 48 };
    if (!plain_tab_ready)
        plain_tab_init();
    const unsigned char *tab = plain_tab[j->script_safe != 0];
    const unsigned char *k = (const unsigned char *)key;
    char *d = reserve(j, KEY_FAST + 4);
    size_t i = 0;
    d[0] = '"';
    /* tab[0] is 0: the scan stops at the terminator. */
    for (; i < KEY_FAST && tab[k[i]]; i++)
        d[1 + i] = (char)k[i];
    if (!k[i]) {
        d[1 + i] = '"';
        d[2 + i] = ':';
        d[3 + i] = ' ';
        j->n += i + (j->compact ? 3 : 4);
        return;
    }
    put_escaped(j, key, strlen(key));
    put(j, ": ", j->compact ? 1 : 2);
}

/* Separator and indentation of a new item at the current depth, in the
 * ITEM_MAX bytes at d. @return bytes written. */
static inline size_t lead(vt_json_t *j, char *d)
{
    size_t k = 0;
    if (j->has_items[j->depth])
        d[k++] = ',';
    if (j->depth > 0 && !j->compact) {
        d[k++] = '\n';
        /* The whole row of spaces: a fixed-size copy, then only
         * 2 * depth of it counts. */
        memcpy(d + k, spaces, sizeof spaces);
        k += 2 * (size_t)j->depth;
    }
    j->has_items[j->depth] = 1;
    return k;
}

/* Starts an item; for scalars, returns room for ITEM_MAX - (lead) bytes,
 * at least the 24 a number needs. */
static char *item(vt_json_t *j, const char *key)
{
    char *d = reserve(j, ITEM_MAX);
    j->n += lead(j, d);
    if (key)
        put_key(j, key);
    return reserve(j, 24);
}

/* The outermost value is complete: hand it to the FILE, so the caller may
 * write there before the next document. */
static inline void done(vt_json_t *j)
{
    if (!j->depth)
        flush(j);
}

static void open_(vt_json_t *j, const char *key, char c)
{
    *item(j, key) = c;
    j->n++;
    if (j->depth + 1 < VT_JSON_MAX_DEPTH)
        j->depth++;
    j->has_items[j->depth] = 0;
}

static void close_(vt_json_t *j, char c)
{
    int had = j->has_items[j->depth];
    if (j->depth > 0)
        j->depth--;
    char *d = reserve(j, ITEM_MAX);
    size_t k = 0;
    if (had && !j->compact) {
        d[k++] = '\n';
        memcpy(d + k, spaces, sizeof spaces);
        k += 2 * (size_t)j->depth;
    }
    d[k++] = c;
    j->n += k;
    done(j);
}

void vt_json_obj(vt_json_t *j, const char *key) { open_(j, key, '{'); }
void vt_json_obj_end(vt_json_t *j) { close_(j, '}'); }
void vt_json_arr(vt_json_t *j, const char *key) { open_(j, key, '['); }
void vt_json_arr_end(vt_json_t *j) { close_(j, ']'); }

void vt_json_u64(vt_json_t *j, const char *key, uint64_t v)
{
    char *d = item(j, key);
    j->n += fmt_u64(d, v);
    done(j);
}

void vt_json_i64(vt_json_t *j, const char *key, int64_t v)
{
    char *d = item(j, key);
    size_t k = 0;
    if (v < 0)
        d[k++] = '-';
    /* 0 - (uint64_t)v is |v| for INT64_MIN too. */
    k += fmt_u64(d + k, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
    j->n += k;
    done(j);
}

void vt_json_num(vt_json_t *j, const char *key, double v)
{
    item(j, key);
    /* JSON has no NaN/Inf; a ratio that is undefined is written as 0. */
    if (v != v || v > 1e300 || v < -1e300)
        v = 0;
    char d[320];
    int n = snprintf(d, sizeof d, "%.4f", v);
    put(j, d, n > 0 ? (size_t)n : 0);
    done(j);
}

void vt_json_bool(vt_json_t *j, const char *key, int v)
{
    item(j, key);
    if (v)
        put(j, "true", 4);
    else
        put(j, "false", 5);
    done(j);
}

void vt_json_null(vt_json_t *j, const char *key)
{
    item(j, key);
    put(j, "null", 4);
    done(j);
}

void vt_json_str(vt_json_t *j, const char *key, const char *s)
{
    vt_json_strn(j, key, s ? s : "", s ? strlen(s) : 0);
}

void vt_json_str_or_null(vt_json_t *j, const char *key, const char *s)
{
    if (s)
        vt_json_str(j, key, s);
    else
        vt_json_null(j, key);
}

void vt_json_strn(vt_json_t *j, const char *key, const char *s, size_t len)
{
    item(j, key);
    put_escaped(j, s, len);
    done(j);
}

void vt_json_finish(vt_json_t *j)
{
    put_c(j, '\n');
    flush(j);
}
