/* Minimal streaming JSON writer for the report's --json output.
 *
 * Contract:
 *  - The caller nests begin/end calls correctly; the writer inserts commas,
 *    indentation and key quoting, so output is always syntactically valid
 *    for a correctly nested call sequence.
 *  - key is NULL inside arrays and at the top level, a C string inside
 *    objects.
 *  - Strings from traces are untrusted bytes: they are escaped, and bytes
 *    that are not valid UTF-8 are replaced by U+FFFD, so the output is
 *    always valid JSON text.
 *  - Integers are written exactly (bytes are never floats).
 *  - compact (set after init): no newlines or indentation.
 *  - script_safe (set after init): strings never contain < > & U+2028
 *    U+2029 (written as \u escapes), so the document can sit inside an
 *    HTML <script> element whatever the trace holds.
 *  - Output is buffered in the writer and reaches the FILE when the buffer
 *    fills, when the outermost value is complete and in vt_json_finish().
 *    A caller may write to the FILE itself only between documents (html.c
 *    does, around the chart data), never while one is open.
 */
#ifndef VT_JSON_H
#define VT_JSON_H

#include <stdint.h>
#include <stdio.h>

#define VT_JSON_MAX_DEPTH 32
#define VT_JSON_BUF (32u << 10)

typedef struct vt_json {
    FILE *f;
    int depth;
    unsigned char has_items[VT_JSON_MAX_DEPTH];
    int compact, script_safe;
    size_t n;                 /* bytes in buf not yet handed to f */
    char buf[VT_JSON_BUF];
} vt_json_t;

void vt_json_init(vt_json_t *j, FILE *f);
void vt_json_obj(vt_json_t *j, const char *key);
void vt_json_obj_end(vt_json_t *j);
void vt_json_arr(vt_json_t *j, const char *key);
void vt_json_arr_end(vt_json_t *j);
void vt_json_u64(vt_json_t *j, const char *key, uint64_t v);
void vt_json_i64(vt_json_t *j, const char *key, int64_t v);
void vt_json_num(vt_json_t *j, const char *key, double v);
void vt_json_bool(vt_json_t *j, const char *key, int v);
void vt_json_null(vt_json_t *j, const char *key);
void vt_json_str(vt_json_t *j, const char *key, const char *s);
/* s, or null where s is NULL (a value not given). */
void vt_json_str_or_null(vt_json_t *j, const char *key, const char *s);
void vt_json_strn(vt_json_t *j, const char *key, const char *s, size_t len);
/* Ends the document with a newline. */
void vt_json_finish(vt_json_t *j);

#endif
