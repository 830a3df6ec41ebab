/* fuzz_args.c: libFuzzer target for the analyzer's small parsers: the byte
 * and time formatters (analyzer/sizes.h), the demangler and qualified-name
 * cutter that every frame name from a trace goes through
 * (analyzer/demangle.h), and `vramtrace report`'s option parsing (--margin,
 * --top, --json, ...).
 *
 * Input: 24 bytes of numbers for the formatters, then the rest: a function
 * name for the demangler up to the first NUL, then NUL-separated argv
 * words for `report`. Words that would make report open a file (anything
 * not starting with '-', and --rules in any abbreviation) are replaced by a
 * path that does not exist: the point is the option parser, not the disk.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "demangle.h"
#include "fuzz_input.h"
#include "sizes.h"

#define MAX_ARGS 16

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    unsetenv("VRAMTRACE_RULES");
    fuzz_quiet_stdio();
    return 0;
}

static void check_fmt(const char *s)
{
    size_t n = strnlen(s, VT_SIZE_BUF);
    if (n == 0 || n >= VT_SIZE_BUF)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t v[3] = { 0, 0, 0 };
    memcpy(v, data, size < sizeof v ? size : sizeof v);
    char buf[VT_SIZE_BUF];
    check_fmt(vt_fmt_bytes(buf, v[0]));
    check_fmt(vt_fmt_sbytes(buf, (int64_t)v[1]));
    check_fmt(vt_fmt_time(buf, v[2]));
    check_fmt(vt_fmt_sbytes(buf, INT64_MIN));
    if (size <= sizeof v)
        return 0;
    data += sizeof v;
    size -= sizeof v;

    char *copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = 0;
    size_t name_len = strlen(copy);
    char *display = vt_demangle(copy, name_len);
    if (display) {
        char *q = vt_qualified_name(display);
        free(q);
        free(display);
    }

    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "report";
    for (size_t i = name_len + 1; i < size && argc < MAX_ARGS;) {
        char *w = copy + i;
        size_t len = strlen(w);
        int opens_file = w[0] != '-' || (len >= 3 && !strncmp(w, "--r", 3)) || !strncmp(w, "-r", 2);
        argv[argc++] = opens_file ? "/nonexistent/vt-fuzz.vtrace" : w;
        i += len + 1;
    }
    argv[argc] = NULL;
    int rc = vt_cmd_report(argc, argv);
    if (rc != 0 && rc != 2)
        abort();
    free(copy);
    return 0;
}
