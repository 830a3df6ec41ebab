/* `vramtrace report`: shared state of the report command, built by
 * report.c (options, reading, merge), report_gpus.c (per-GPU combined view)
 * and printed by report_text.c or report_json.c.
 *
 * Contract: the printers only read a finished vt_report_t (every model
 * finished); they never fail and never touch the files.
 */
#ifndef VT_REPORT_H
#define VT_REPORT_H

#include <stdio.h>

#include "model.h"
#include "rules.h"
#include "trace_reader.h"

#define VT_GPU_MAX_PROCS 64
#define VT_MAX_GPUS 64

typedef struct vt_report_opts {
    int json;
    int fail_on_spill;
    double margin_pct;
    int top;   /* sites shown per process */
} vt_report_opts_t;

typedef struct vt_report_input {
    char *path;
    vt_reader_t *reader;
    vt_model_t *model;
    int has_event;        /* `pending` holds the next event */
    vt_event_t pending;
    int done;
    int truncated;        /* stopped at a partial chunk */
    uint64_t stop_offset;
    char stop_reason[256];
} vt_report_input_t;

/* One GPU (by UUID) across every process that used it. */
typedef struct vt_gpu {
    uint8_t uuid[16];
    char name[128];
    int ordinal;                  /* as the first process numbered it */
    uint64_t total;
    int nprocs;
    const vt_model_t *procs[VT_GPU_MAX_PROCS];
    int dev_index[VT_GPU_MAX_PROCS];
    uint64_t contrib[VT_GPU_MAX_PROCS];     /* tracked bytes now */
    uint64_t tracked;
    uint64_t peak_bytes, peak_time_abs;
    int have_peak;
    uint64_t peak_by_tag[VT_MAX_TAGS];
    uint64_t peak_contrib[VT_GPU_MAX_PROCS];
    int have_min;
    uint64_t min_free, min_free_time_abs;
} vt_gpu_t;

typedef struct vt_report {
    vt_report_opts_t opts;
    vt_rules_t *rules;
    vt_report_input_t *in;
    int nin;
    vt_gpu_t gpus[VT_MAX_GPUS];
    int ngpus;
    uint64_t t0;   /* earliest mono_start_ns: the combined timeline's zero */
} vt_report_t;

void vt_gpus_hook(void *ctx, const vt_model_t *m, int dev, uint64_t abs_time_ns);
void vt_gpus_finish(vt_report_t *r);

void vt_report_text(const vt_report_t *r, FILE *out);
void vt_report_json(const vt_report_t *r, FILE *out);

/* Helpers shared by the printers (report_common.c). */
void vt_uuid_str(const uint8_t uuid[16], char out[48]);
int vt_uuid_known(const uint8_t uuid[16]);
/* Sites of p ordered by bytes at peak (desc), then total bytes; returns a
 * malloc'd index array of p->nsites entries, NULL when out of memory. */
size_t *vt_sites_ranked(const vt_proc_t *p);
const char *vt_api_name(unsigned api);
/* Basename of a path-like string. */
const char *vt_base(const char *path);

#endif
