/* The export formats of `vramtrace export` (commands/cmd_export.c):
 * perfetto.c and export_folded.c. Writers read a finished vt_report_t and
 * never fail. */
#ifndef VT_EXPORT_H
#define VT_EXPORT_H

#include <stdio.h>

#include "json.h"
#include "report.h"
#include "u64map.h"
#include "report_series.h"

/* Allocation lifetimes for the Perfetto export: one slice per successful
 * allocation, registration or cuMemCreate, from its event to the free,
 * unregistration or cuMemRelease that ended it (or the end of the trace),
 * on a track per GPU, one for pinned host and one for managed memory.
 * Slices of one track go to lanes (a thread track each, so they never
 * overlap): an allocation takes the lowest lane with nothing live at its
 * start. Collected by export's on_event observer (cmd_export.c); bounded
 * by `limit` slices in all, after which allocations are only counted
 * (left_out), and by the live allocations of the slices kept. */
#define VT_SLICES_DEFAULT 200000
#define VT_SLICES_MAX 1000000   /* lanes and slice indices stay below 2^20 */

enum { VT_TRACK_HOST, VT_TRACK_MANAGED, VT_TRACK_GPU0, VT_TRACKS = VT_TRACK_GPU0 + VT_MAX_DEVICES };

typedef struct vt_slice {
    uint64_t start_ns, end_ns;   /* since the process's trace start */
    uint64_t bytes;
    uint32_t site;               /* index in the process's sites */
    uint32_t lane;
    uint16_t api;
    uint8_t track;               /* VT_TRACK_HOST, _MANAGED, or _GPU0 + index in proc->devs */
    uint8_t open;                /* live at the end: end_ns is not known yet */
} vt_slice_t;

typedef struct vt_lanes {
    uint32_t used;               /* lanes ever taken: 0..used-1 */
    uint32_t *free;              /* a min-heap of the lanes below used with nothing live */
    size_t nfree, cap;
} vt_lanes_t;

typedef struct vt_slice_proc {
    vt_slice_t *v;
    size_t n, cap;
    uint64_t left_out;           /* allocations past the limit */
    vt_map_t live[3];            /* open slices by address, VMM handle, registered address */
    vt_lanes_t lanes[VT_TRACKS];
} vt_slice_proc_t;

typedef struct vt_slices {
    size_t limit, total;
    int nproc, nomem;
    vt_slice_proc_t *p;          /* per input, from its first event */
} vt_slices_t;

/* Chrome trace-event JSON of r, its counter tracks from set (perfetto.c),
 * its allocation slices from slices (NULL: none). */
void vt_export_perfetto(FILE *f, const vt_report_t *r, const vt_series_set_t *set, const vt_slices_t *slices);

/* Folded stacks of device allocation sites, outermost frame first, one
 * line per site with a non-zero weight: bytes live at its GPU's peak, or
 * (by_total) bytes allocated over the run. With --by peak the lines of one
 * GPU sum exactly to its peak tracked bytes. */
void vt_export_folded(FILE *f, const vt_report_t *r, int by_total);

/* "stack": ["function [module]", ...] innermost first, for event args. */
void vt_export_stack_args(vt_json_t *j, const vt_model_t *m, uint32_t leaf);

#endif
