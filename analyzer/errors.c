/* errors.c: messages for the VT_E_* codes and the one way they are printed.
 *
 * Contract: vt_error_message() never returns NULL (an unknown code gets a
 * generic message), vt_error_set() never overflows err->detail (long details
 * are cut), and vt_error_print() writes one line on stderr. The path is the
 * caller's business: vt_error_set() leaves err->path alone.
 */
#include "errors.h"

#include <stdarg.h>
#include <stdio.h>

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
    const char *path = err->path[0] ? err->path : "-";
    if (err->detail[0])
        fprintf(stderr, "vramtrace: %s: offset %llu: %s: %s\n", path,
                (unsigned long long)err->offset, vt_error_message(err->code), err->detail);
    else
        fprintf(stderr, "vramtrace: %s: offset %llu: %s\n", path,
                (unsigned long long)err->offset, vt_error_message(err->code));
}
