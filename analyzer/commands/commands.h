/* The vramtrace subcommands, dispatched by main.c.
 *
 * Contract for every vt_cmd_*: argv[0] is the command name, options follow
 * (getopt-style, each command parses its own); the return value is the exit
 * status: 0 ok, 2 unusable input or bad usage (a message is already on
 * stderr). `vramtrace CMD --help` reaches the command as argv[1] == "--help"
 * and must print its usage on stdout and return 0.
 */
#ifndef VT_ANALYZER_COMMANDS_H
#define VT_ANALYZER_COMMANDS_H

#include "errors.h"   /* VT_EXIT_*: the exit statuses */

int vt_cmd_dump(int argc, char **argv);    /* cmd_dump.c */
int vt_cmd_report(int argc, char **argv);  /* cmd_report.c */
int vt_cmd_record(int argc, char **argv);  /* cmd_record.c */
int vt_cmd_export(int argc, char **argv);  /* cmd_export.c */
int vt_cmd_diff(int argc, char **argv);    /* cmd_diff.c */
int vt_cmd_replay(int argc, char **argv);  /* cmd_replay.c */
int vt_cmd_serve(int argc, char **argv);   /* cmd_serve.c */
int vt_cmd_top(int argc, char **argv);     /* cmd_top.c */

#endif
