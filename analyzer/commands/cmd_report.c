/* cmd_report.c: `vramtrace report TRACE|DIR...`: its options, then the
 * traces read (pipeline/load.c) and printed as text, JSON or HTML.
 *
 * Exit status: 0 report printed; 1 with --fail-on-spill when any process
 * spilled or ran layers from host memory (vt_proc_fails_gate); 2 unusable input (not a trace, corrupt, newer version, bad rules
 * file, bad usage). A trace cut short (VT_E_TRUNCATED) is not unusable: it
 * is reported up to its last complete chunk and the report says where it
 * stopped. Among several traces a bad one costs only its own section
 * (keep_going, report.h): the rest are reported, then the exit status is 2.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "html.h"
#include "report_series.h"
#include "report.h"
#include "sizes.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: vramtrace report [options] TRACE|DIR...\n"
            "\n"
            "Explains the VRAM use of traced processes: did the model spill out of VRAM,\n"
            "which allocation tipped it, what filled the card (weights / kv / scratch),\n"
            "and how much headroom was really left. A DIR means every *.vtrace in it:\n"
            "one report, per process and per GPU.\n"
            "\n"
            "options:\n"
            "  --json            machine-readable output, schema vramtrace-report/3\n"
            "                    (docs/report.md)\n"
            "  --html FILE       one self-contained page (charts, sites, address space)\n"
            "                    into FILE\n"
            "  --color WHEN      auto (default: when stdout is a terminal and NO_COLOR is\n"
            "                    unset), always or never; --json and --html are never\n"
            "                    coloured\n"
            "  --fail-on-spill   exit 1 when any process spilled, failed a device request,\n"
            "                    or ran layers or KV cache from host memory (CI gates)\n"
            "  --accept-offload  with --fail-on-spill: a partial offload or CPU run that\n"
            "                    no failed request caused passes (a planned split)\n"
            "  --margin PCT      the free-memory margin to check, %% of total (default 15)\n"
            "  --rules FILE      tagging rules, before the built-ins (repeatable; default\n"
            "                    $VRAMTRACE_RULES when set)\n"
            "  --top N           allocation sites shown per process (default 10, 0 = all)\n"
            "  --no-source       stacks without file:line (by default read from the DWARF of\n"
            "                    binaries on this machine whose build id matches the trace)\n"
            "  --raw-strings     print strings from the trace (names, argv, paths) as\n"
            "                    they are; by default control characters and invalid\n"
            "                    UTF-8 print as \\xNN\n"
            "  --wide            text lines as long as they come; by default they fit 80\n"
            "                    columns (long lines wrap, long names lose their middle)\n"
            "  --sort KEY        order of the sites: peak (bytes live at peak, the default),\n"
            "                    bytes (allocated over the run) or calls\n"
            "  --filter FUNCTION only sites with a stack frame whose name contains FUNCTION\n"
            "  --leaks           per site: allocations never freed (live at the end)\n"
            "  --churn           per site: allocations freed again (what caching\n"
            "                    allocators hide)\n"
            "  --histogram       allocation sizes in power-of-two buckets\n"
            "  --pid PID         only this process (repeatable)\n"
            "  --last N          only the N processes that started last\n"
            "  --since TIME, --until TIME\n"
            "                    only processes started then: YYYY-MM-DD[ HH:MM[:SS]]\n"
            "                    (local time) or an age such as 30m, 2h, 7d\n"
            "  --utc             wall-clock times in UTC, read and printed\n"
            "\n"
            "Exit status: 0 report, 1 spill or offload with --fail-on-spill, 2 unusable\n"
            "input (any usable traces are still reported), 3 a trace cut short: its\n"
            "verdict covers only part of the run (INCOMPLETE TRACE).\n");
}

int vt_cmd_report(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "json", no_argument, NULL, 'j' },
        { "html", required_argument, NULL, 'H' },
        { "fail-on-spill", no_argument, NULL, 'f' },
        { "accept-offload", no_argument, NULL, 'A' },
        { "pid", required_argument, NULL, 'P' },
        { "last", required_argument, NULL, 'N' },
        { "since", required_argument, NULL, 'S' + 0x200 },
        { "until", required_argument, NULL, 'U' + 0x200 },
        { "utc", no_argument, NULL, 'u' },
        { "margin", required_argument, NULL, VT_OPT_MARGIN },
        { "rules", required_argument, NULL, VT_OPT_RULES },
        { "top", required_argument, NULL, 't' },
        { "color", required_argument, NULL, 'c' },
        { "no-source", no_argument, NULL, 'S' },
        { "raw-strings", no_argument, NULL, 'R' },
        { "wide", no_argument, NULL, 'w' },
        { "leaks", no_argument, NULL, 'L' },
        { "churn", no_argument, NULL, 'T' },
        { "histogram", no_argument, NULL, 'g' },
        { "sort", required_argument, NULL, 's' },
        { "filter", required_argument, NULL, 'F' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    vt_report_t *r = vt_report_new();
    if (!r)
        return VT_EXIT_BAD_INPUT;
    r->opts.color = -1;
    r->keep_going = 1;
    const char *html = NULL;
    const char *since_until[2] = { NULL, NULL };
    int rc = VT_EXIT_OK, c;
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'j':
            r->opts.json = 1;
            break;
        case 'H':
            html = optarg;
            break;
        case 'f':
            r->opts.fail_on_spill = 1;
            break;
        case 'A':
            r->opts.accept_offload = 1;
            break;
        case 'P': {
            unsigned long long pid = strtoull(optarg, &end, 10);
            if (end == optarg || *end || !pid) {
                rc = vt_usage_error("report", "--pid wants a process id, got '%s'", optarg);
                goto out;
            }
            if (r->opts.npids >= (int)(sizeof r->opts.pids / sizeof r->opts.pids[0])) {
                rc = vt_usage_error("report", "at most 64 --pid");
                goto out;
            }
            r->opts.pids[r->opts.npids++] = pid;
            break;
        }
        case 'N':
            r->opts.last = (int)strtol(optarg, &end, 10);
            if (end == optarg || *end || r->opts.last <= 0) {
                rc = vt_usage_error("report", "--last wants a count of processes, got '%s'", optarg);
                goto out;
            }
            break;
        case 'S' + 0x200:
        case 'U' + 0x200:
            since_until[c == 'U' + 0x200] = optarg;
            break;
        case 'u':
            r->opts.utc = 1;
            break;
        case 'S':
            r->opts.no_source = 1;
            break;
        case 'R':
            r->opts.raw_strings = 1;
            break;
        case 'w':
            r->opts.wide = 1;
            break;
        case 'L':
            r->opts.leaks = 1;
            break;
        case 'T':
            r->opts.churn = 1;
            break;
        case 'g':
            r->opts.histogram = 1;
            break;
        case 'F':
            r->opts.filter = optarg;
            break;
        case 's':
            if (!strcmp(optarg, "peak"))
                r->opts.order = VT_ORDER_PEAK;
            else if (!strcmp(optarg, "bytes"))
                r->opts.order = VT_ORDER_BYTES;
            else if (!strcmp(optarg, "calls"))
                r->opts.order = VT_ORDER_CALLS;
            else {
                fprintf(stderr, "vramtrace: report: --sort wants peak, bytes or calls, got '%s'\n", optarg);
                rc = VT_EXIT_BAD_INPUT;
                goto out;
            }
            break;
        case 'c':
            if ((rc = vt_report_color_opt(r, "report", optarg)))
                goto out;
            break;
        case VT_OPT_MARGIN:
        case VT_OPT_RULES:
            if ((rc = vt_report_opt(r, "report", c, optarg)))
                goto out;
            break;
        case 't':
            r->opts.top = (int)strtol(optarg, &end, 10);
            if (end == optarg || *end || r->opts.top < 0) {
                fprintf(stderr, "vramtrace: report: --top wants a count, got '%s'\n", optarg);
                rc = VT_EXIT_BAD_INPUT;
                goto out;
            }
            break;
        case 'h':
            usage(stdout);
            goto out;
        default:
            rc = vt_usage_error("report", NULL);
            goto out;
        }
    }
    /* After all options: --utc decides how the times are read. */
    for (int k = 0; k < 2; k++)
        if (since_until[k] &&
            vt_parse_wall_time(since_until[k], r->opts.utc, k ? &r->opts.until_ns : &r->opts.since_ns)) {
            rc = vt_usage_error("report", "--%s wants YYYY-MM-DD[ HH:MM[:SS]] or an age such as 2h, got '%s'",
                                k ? "until" : "since", since_until[k]);
            goto out;
        }
    if (html && r->opts.json) {
        rc = vt_usage_error("report", "--html and --json are exclusive");
        goto out;
    }
    /* `report --html run1` reads as "report run1 as HTML", but --html takes
     * the page to write: say which argument is missing, not only usage. */
    if (optind >= argc) {
        if (html)
            fprintf(stderr,
                    "vramtrace: report: no TRACE or DIR to report: --html %s names the page to write; "
                    "the traces come after it (vramtrace report --html page.html TRACE|DIR...)\n",
                    html);
        else
            fprintf(stderr, "vramtrace: report: no TRACE or DIR to report\n");
        fprintf(stderr, "usage: vramtrace report [options] TRACE|DIR... (--help for the options)\n");
        rc = VT_EXIT_BAD_INPUT;
        goto out;
    }
    vt_html_t *h = NULL;
    if (html) {
        r->keep_layout = 1;
        if (!(h = vt_html_new(r))) {
            fprintf(stderr, "vramtrace: out of memory\n");
            rc = VT_EXIT_BAD_INPUT;
            goto out;
        }
    }
    rc = vt_report_load(r, argv + optind, argc - optind);
    if (rc) {
        vt_html_free(h);
        goto out;
    }
    int spilled = 0;
    for (int i = 0; i < r->nin; i++)
        spilled |= vt_proc_fails_gate(vt_model_proc(r->in[i].model), r->opts.accept_offload);
    if (h) {
        rc = vt_html_write(h, html);
        vt_html_free(h);
        if (rc)
            goto out;
    } else if (r->opts.json) {
        vt_report_json(r, stdout);
    } else {
        r->opts.color = vt_report_use_color(r, stdout);
        vt_report_text(r, stdout);
    }
    fflush(stdout);
    /* 2 when a trace was left out or damaged (the others were reported),
     * else 1 for a spill with --fail-on-spill, else 3 when a trace is cut. */
    int incomplete = 0, damaged = 0;
    for (int i = 0; i < r->nin; i++) {
        incomplete |= r->in[i].truncated;
        damaged |= r->in[i].damaged;
    }
    if (rc)
        ;
    else if (r->nbad || damaged)
        rc = VT_EXIT_BAD_INPUT;
    else if (spilled && r->opts.fail_on_spill)
        rc = 1;
    else if (incomplete)
        rc = VT_EXIT_INCOMPLETE;
out:
    vt_report_free(r);
    return rc;
}
