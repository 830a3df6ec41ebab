/* main.c: `vramtrace <command> [options] ...` dispatch. All a command needs
 * is one line in the table below; everything else lives in its own file. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

#ifndef VT_VERSION
#define VT_VERSION "?"
#endif

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    { "record", vt_cmd_record, "run CMD under the shim, tracing into DIR; print the verdict" },
    { "report", vt_cmd_report, "explain the VRAM use of traces: TRACE|DIR..." },
    { "dump", vt_cmd_dump, "print every record of TRACE, decoded, one per line" },
    { "export", vt_cmd_export, "write traces as Perfetto JSON or folded stacks (flamegraphs)" },
    { "diff", vt_cmd_diff, "compare two runs: weights/KV/scratch, reserve, fragmentation, peak" },
    { "replay", vt_cmd_replay, "would the run fit a card of --capacity SIZE? first failing request" },
    { "serve", vt_cmd_serve, "serve the traces as Prometheus metrics (--metrics [ADDR:]PORT)" },
    { "top", vt_cmd_top, "what the traced processes hold now, refreshed in place (q quits)" },
};

static void usage(FILE *out)
{
    fprintf(out, "usage: vramtrace <command> [options] ...\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\n`vramtrace <command> --help` describes a command's options.\n"
                 "Exit status: 0 ok; 1 report --fail-on-spill found a spill, failure or\n"
                 "offload, or replay's run would not fit; 2 unusable input or bad usage;\n"
                 "3 report: a trace cut short (its verdict covers part of the run), replay:\n"
                 "cannot tell; record: the command's own status.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return VT_EXIT_BAD_INPUT;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return VT_EXIT_OK;
    }
    if (!strcmp(cmd, "--version")) {
        printf("vramtrace %s\n", VT_VERSION);
        return VT_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "vramtrace: unknown command '%s'\nTry 'vramtrace --help' for the commands.\n", cmd);
    return VT_EXIT_BAD_INPUT;
}
