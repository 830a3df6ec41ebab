/* fuzz_report.c: libFuzzer target for everything the analyzer does with a
 * trace after reading it: `vramtrace dump --stacks` (its own stack tables),
 * and `vramtrace report` in text and --json (the model, stacks, demangler,
 * rules, spill and fragmentation logic, the GPU view, the JSON writer).
 * These take record values (ids, sizes, devices, parents) as given by the
 * reader, so they are where a hostile number becomes an index.
 *
 * Output goes to /dev/null through stdio (fuzz_quiet_stdio); the exit
 * status only has to be 0, 2 or 3 (a trace cut inside a chunk).
 */
#include <stdint.h>
#include <stdlib.h>

#include "commands.h"
#include "fuzz_input.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    unsetenv("VRAMTRACE_RULES"); /* the built-in rules only, whatever the caller's environment */
    fuzz_quiet_stdio();
    return 0;
}

static void check_status(int rc)
{
    if (rc != VT_EXIT_OK && rc != VT_EXIT_BAD_INPUT && rc != VT_EXIT_INCOMPLETE)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_trace_path(data, size);
    if (!path)
        return 0;
    char *dump[] = { "dump", "--stacks", (char *)path, NULL };
    check_status(vt_cmd_dump(3, dump));
    char *text[] = { "report", (char *)path, NULL };
    check_status(vt_cmd_report(2, text));
    char *json[] = { "report", "--json", "--top", "3", (char *)path, NULL };
    check_status(vt_cmd_report(5, json));
    return 0;
}
