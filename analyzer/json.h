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
 *  - A value's text depends only on the calls that wrote it, the depth it
 *    sits at, compact and script_safe: a caller may keep the text of a value
 *    it writes often (vt_json_pos, vt_json_since) and write it again with
 *    vt_json_raw at the same depth with the same settings, byte for byte as
 *    if it had made the calls again.
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
    uint64_t handed;          /* bytes handed to f before buf[0] */
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
void vt_json_strn(vt_json_t *j, const char *key, const char *s, size_t len);
/* Where the next byte goes, counted from the writer's first byte. */
uint64_t vt_json_pos(const vt_json_t *j);
/* The bytes written from position `from` on, if they are all still in the
 * writer's buffer: @return them (valid until the next call on j) with their
 * count in *n, or NULL when some were handed to the FILE already. */
const char *vt_json_since(const vt_json_t *j, uint64_t from, size_t *n);
/* Writes the next item: key (as for the other calls), then text, the
 * complete text of one value as this writer wrote it before at this depth
 * with the same compact and script_safe (see the contract above). */
void vt_json_raw(vt_json_t *j, const char *key, const char *text, size_t n);
/* n such values in a row into the open array: the bytes of n calls of
 * vt_json_raw(j, NULL, text[i], len[i]), without a key or a call each. */
void vt_json_raw_items(vt_json_t *j, const char *const *text, const size_t *len, size_t n);
/* Ends the document with a newline. */
void vt_json_finish(vt_json_t *j);

#endif
