/* cmd_export.c: `vramtrace export --format perfetto|folded [--by peak|total]
 * TRACE|DIR... [-o FILE]`: the report's numbers in formats other tools
 * read (output/perfetto.c, output/export_folded.c).
 *
 * Exit status: 0 written, 2 unusable input or bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "export.h"
#include "json.h"
#include "report_series.h"
#include "sizes.h"

#define EXPORT_BUCKETS 5000   /* up to 10000 counter samples per track */

static void usage(FILE *f)
{
    fprintf(f, "usage: vramtrace export --format perfetto|folded [options] TRACE|DIR...\n"
               "\n"
               "  --format perfetto  Chrome trace-event JSON for ui.perfetto.dev / chrome://tracing:\n"
               "                     memory counters per GPU and tag, driver free memory, pinned\n"
               "                     host and managed memory, failures and spill events with stacks\n"
               "  --format folded    folded stacks (`outer;...;inner bytes`) of device allocations for\n"
               "                     flamegraph.pl, inferno and speedscope\n"
               "  --by peak|total    folded weight: bytes live at the GPU's peak (default; the lines\n"
               "                     sum to the peak) or total bytes allocated\n"
               "  -o, --output FILE  write to FILE (default stdout)\n"
               "  --rules FILE       tagging rules, as for report; --margin PCT likewise\n"
               "\n"
               "Exit status: 0 written, 2 unusable input.\n");
}


int vt_cmd_export(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "format", required_argument, NULL, 'F' },
        { "by", required_argument, NULL, 'b' },
        { "output", required_argument, NULL, 'o' },
        { "margin", required_argument, NULL, VT_OPT_MARGIN },
        { "rules", required_argument, NULL, VT_OPT_RULES },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    vt_report_t *r = vt_report_new();
    if (!r)
        return VT_EXIT_BAD_INPUT;
    const char *format = NULL, *out = NULL;
    int by_total = 0, rc = VT_EXIT_OK, c;
    vt_series_set_t *set = NULL;
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
        switch (c) {
        case 'F':
            format = optarg;
            break;
        case 'b':
            if (strcmp(optarg, "peak") && strcmp(optarg, "total")) {
                fprintf(stderr, "vramtrace: export: --by wants peak or total, got '%s'\n", optarg);
                rc = VT_EXIT_BAD_INPUT;
                goto out;
            }
            by_total = !strcmp(optarg, "total");
            break;
        case 'o':
            out = optarg;
            break;
        case VT_OPT_MARGIN:
        case VT_OPT_RULES:
            if ((rc = vt_report_opt(r, "export", c, optarg)))
                goto out;
            break;
        case 'h':
            usage(stdout);
            goto out;
        default:
            usage(stderr);
            rc = VT_EXIT_BAD_INPUT;
            goto out;
        }
    }
    int perf = format && !strcmp(format, "perfetto"), folded = format && !strcmp(format, "folded");
    if ((!perf && !folded) || optind >= argc) {
        if (format && !perf && !folded)
            fprintf(stderr, "vramtrace: export: unknown --format '%s' (perfetto or folded)\n", format);
        usage(stderr);
        rc = VT_EXIT_BAD_INPUT;
        goto out;
    }
    if (perf && !(set = vt_series_attach(r, EXPORT_BUCKETS))) {
        rc = VT_EXIT_BAD_INPUT;
        goto out;
    }
    if ((rc = vt_report_load(r, argv + optind, argc - optind)))
        goto out;
    if (set && set->nomem) {
        fprintf(stderr, "vramtrace: export: out of memory\n");
        rc = VT_EXIT_BAD_INPUT;
        goto out;
    }
    FILE *f = out && strcmp(out, "-") ? fopen(out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "vramtrace: %s: %s\n", out, strerror(errno));
        rc = VT_EXIT_BAD_INPUT;
        goto out;
    }
    if (perf)
        vt_export_perfetto(f, r, set);
    else
        vt_export_folded(f, r, by_total);
    int bad = ferror(f) | (f != stdout ? fclose(f) != 0 : fflush(f) != 0);
    if (bad) {
        fprintf(stderr, "vramtrace: %s: write failed\n", out ? out : "stdout");
        rc = VT_EXIT_BAD_INPUT;
    }
out:
    vt_series_free(set);
    vt_report_free(r);
    return rc;
}
