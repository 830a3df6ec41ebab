/* Placeholder for `vramtrace report` until analyzer/report*.c lands; the
 * report engineer deletes this file. */
#include <stdio.h>

#include "commands.h"

int vt_cmd_report(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "vramtrace: report: not implemented\n");
    return VT_EXIT_BAD_INPUT;
}
