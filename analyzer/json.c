/* Streaming JSON writer (see json.h). Two-space indentation so the output
 * greps well line by line ("tracked_bytes": N on its own line), which the
 * scenario tests and shell users rely on. */
#include "json.h"

#include <inttypes.h>
#include <string.h>

void vt_json_init(vt_json_t *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->has_items[0] = 0;
    j->compact = 0;
    j->script_safe = 0;
}

static void put_escaped(const vt_json_t *j, const char *s, size_t n)
{
    FILE *f = j->f;
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    fputc('"', f);
    while (p < end) {
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc((int)c, f);
            p++;
        } else if (c < 0x20 || (j->script_safe && (c == '<' || c == '>' || c == '&'))) {
            /* Inside an HTML <script>, "</script>" or "<!--" in a string
             * would end or change the script element: never write < > &. */
            fprintf(f, "\\u%04x", c);
            p++;
        } else if (c < 0x80) {
            fputc((int)c, f);
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
            if (good && j->script_safe && len == 3 && c == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
                /* U+2028/2029 end a line in pre-ES2019 JavaScript. */
                fprintf(f, "\\u%04x", 0x2000u | (p[2] - 0x80u));
                p += len;
            } else if (good) {
                fwrite(p, 1, len, f);
                p += len;
            } else {
                fputs("\xef\xbf\xbd", f);
                p++;
            }
        }
    }
    fputc('"', f);
}

static void item(vt_json_t *j, const char *key)
{
    if (j->has_items[j->depth])
        fputc(',', j->f);
    if (j->depth > 0 && !j->compact) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; i++)
            fputs("  ", j->f);
    }
    j->has_items[j->depth] = 1;
    if (key) {
        put_escaped(j, key, strlen(key));
        fputs(j->compact ? ":" : ": ", j->f);
    }
}

static void open_(vt_json_t *j, const char *key, char c)
{
    item(j, key);
    fputc(c, j->f);
    if (j->depth + 1 < VT_JSON_MAX_DEPTH)
        j->depth++;
    j->has_items[j->depth] = 0;
}

static void close_(vt_json_t *j, char c)
{
    int had = j->has_items[j->depth];
    if (j->depth > 0)
        j->depth--;
    if (had && !j->compact) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; i++)
            fputs("  ", j->f);
    }
    fputc(c, j->f);
}

void vt_json_obj(vt_json_t *j, const char *key) { open_(j, key, '{'); }
void vt_json_obj_end(vt_json_t *j) { close_(j, '}'); }
void vt_json_arr(vt_json_t *j, const char *key) { open_(j, key, '['); }
void vt_json_arr_end(vt_json_t *j) { close_(j, ']'); }

void vt_json_u64(vt_json_t *j, const char *key, uint64_t v)
{
    item(j, key);
    fprintf(j->f, "%" PRIu64, v);
}

void vt_json_i64(vt_json_t *j, const char *key, int64_t v)
{
    item(j, key);
    fprintf(j->f, "%" PRId64, v);
}

void vt_json_num(vt_json_t *j, const char *key, double v)
{
    item(j, key);
    /* JSON has no NaN/Inf; a ratio that is undefined is written as 0. */
    if (v != v || v > 1e300 || v < -1e300)
        v = 0;
    fprintf(j->f, "%.4f", v);
}

void vt_json_bool(vt_json_t *j, const char *key, int v)
{
    item(j, key);
    fputs(v ? "true" : "false", j->f);
}

void vt_json_null(vt_json_t *j, const char *key)
{
    item(j, key);
    fputs("null", j->f);
}

void vt_json_str(vt_json_t *j, const char *key, const char *s)
{
    vt_json_strn(j, key, s ? s : "", s ? strlen(s) : 0);
}

void vt_json_strn(vt_json_t *j, const char *key, const char *s, size_t len)
{
    item(j, key);
    put_escaped(j, s, len);
}

void vt_json_finish(vt_json_t *j)
{
    fputc('\n', j->f);
}
