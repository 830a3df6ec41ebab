/* One error convention for the analyzer: functions return 0 (or a count)
 * on success and a negative VT_E_* code on failure. The list below generates
 * both the codes and their messages. A vt_error_t carries the file and byte
 * offset, so every bad-input message can name where it went wrong.
 */
#ifndef VT_ANALYZER_ERRORS_H
#define VT_ANALYZER_ERRORS_H

#include <stddef.h>
#include <stdint.h>

#define VT_ERROR_LIST(X)                                                   \
    X(IO, "cannot read file")                                              \
    X(NOT_TRACE, "not a vramtrace trace (bad magic)")                      \
    X(VERSION, "trace format version is newer than this vramtrace")        \
    X(CORRUPT, "corrupt trace")                                            \
    X(TRUNCATED, "trace ends in the middle of a chunk")                    \
    X(NOMEM, "out of memory")                                              \
    X(LIMIT, "trace exceeds a hard limit")                                 \
    X(USAGE, "bad command line")                                           \
    X(RULES, "bad rules file")

enum vt_error_code {
    VT_OK = 0,
#define VT_E_ENUM(name, msg) VT_E_##name,
    VT_E_FIRST_ = -100,
    VT_ERROR_LIST(VT_E_ENUM)
#undef VT_E_ENUM
};

typedef struct vt_error {
    int code;              /* VT_E_* */
    uint64_t offset;       /* byte offset in the file where it went wrong */
    char path[512];
    char detail[256];      /* specific reason, e.g. "chunk seq 7, expected 6" */
} vt_error_t;

const char *vt_error_message(int code);

/* Records code/offset/detail (printf-style) into err, returns code. */
int vt_error_set(vt_error_t *err, int code, uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Prints "vramtrace: PATH: offset N: message: detail" on stderr. */
void vt_error_print(const vt_error_t *err);

/* s as a terminal may show it: every control byte, C1 or bidi control and
 * invalid UTF-8 byte as \xNN (a trace can hold escape sequences and
 * newlines that would forge report lines). Returns s itself when nothing
 * needs escaping, else one of a few static buffers reused in turn: valid
 * until 8 more calls. vt_text_raw (--raw-strings) returns s unchanged. */
const char *vt_text(const char *s);
extern int vt_text_raw;
/* The length of the character at p (n bytes left) when vt_text would keep
 * it as it is; 0 when it would escape the byte at p. */
size_t vt_text_glyph_len(const unsigned char *p, size_t n);

/* Exit statuses of the commands (commands.h): what the pipeline and the
 * outputs return on their way out. */
#define VT_EXIT_OK 0
#define VT_EXIT_BAD_INPUT 2
/* report: a trace stops inside a chunk, so its verdict covers only part of
 * the run (a spill with --fail-on-spill still exits 1). */
#define VT_EXIT_INCOMPLETE 3

/* Bad usage of `vramtrace CMD`: "vramtrace CMD: WHAT" (skipped when what
 * is NULL: getopt has said it) and one line pointing at --help, never the
 * whole usage, on stderr. @return VT_EXIT_BAD_INPUT. */
int vt_usage_error(const char *cmd, const char *what, ...) __attribute__((format(printf, 2, 3)));

#endif
