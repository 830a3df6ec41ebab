/* `vramtrace report --html FILE`: one self-contained page (no network: a
 * Content-Security-Policy forbids every fetch) with, per process, the
 * verdict, device / pinned host / managed timelines stacked by tag (drawn
 * as inline SVG by inline JS from bucketed series, at most ~2000 points a
 * series), the tipping event linked from its chart marker, the top sites
 * with expandable stacks and each device's address space at peak.
 *
 * Contract:
 *  - Everything from a trace (names, paths, argv) is untrusted: text goes
 *    through vt_html_esc; the chart data is JSON written script_safe
 *    (json.h) inside <script type="application/json">.
 *  - vt_html_new attaches the series recorder to r, so it is called before
 *    vt_report_load; vt_html_write reads the finished report.
 *  - vt_html_write returns 0, or VT_EXIT_BAD_INPUT after printing why (the
 *    file could not be written).
 */
#ifndef VT_HTML_H
#define VT_HTML_H

#include <stdio.h>

#include "report.h"
#include "report_series.h"

#define VT_HTML_BUCKETS 1000      /* 2 points a bucket: <= 2000 per series */
#define VT_HTML_MAX_RANGES 1500   /* address-space ranges drawn per device */

typedef struct vt_html {
    vt_report_t *r;
    vt_series_set_t *series;
} vt_html_t;

vt_html_t *vt_html_new(vt_report_t *r);
int vt_html_write(vt_html_t *h, const char *path);
void vt_html_free(vt_html_t *h);

/* Writes s with & < > " ' as character references. */
void vt_html_esc(FILE *f, const char *s);

/* html_data.c: the page's JSON (charts and layouts, keyed "pNdM", "pNh",
 * "pNm") into the open <script> element. */
void vt_html_data(FILE *f, const vt_html_t *h);
/* html_js.c: the page's script and style sheet. */
extern const char vt_html_script[];
extern const char vt_html_style[];

#endif
