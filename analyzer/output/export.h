/* The export formats of `vramtrace export` (commands/cmd_export.c):
 * perfetto.c and export_folded.c. Writers read a finished vt_report_t and
 * never fail. */
#ifndef VT_EXPORT_H
#define VT_EXPORT_H

#include <stdio.h>

#include "json.h"
#include "report.h"
#include "report_series.h"

/* Chrome trace-event JSON of r, its counter tracks from set (perfetto.c). */
void vt_export_perfetto(FILE *f, const vt_report_t *r, const vt_series_set_t *set);

/* Folded stacks of device allocation sites, outermost frame first, one
 * line per site with a non-zero weight: bytes live at its GPU's peak, or
 * (by_total) bytes allocated over the run. With --by peak the lines of one
 * GPU sum exactly to its peak tracked bytes. */
void vt_export_folded(FILE *f, const vt_report_t *r, int by_total);

/* "stack": ["function [module]", ...] innermost first, for event args. */
void vt_export_stack_args(vt_json_t *j, const vt_model_t *m, uint32_t leaf);

#endif
