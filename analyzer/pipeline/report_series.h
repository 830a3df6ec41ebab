/* Memory over time, aggregated while the events stream by: per process,
 * one series per device, one for pinned host and one for managed memory,
 * stacked by tag; the driver's free samples per device; and a capped list
 * of instants (failed device requests and spill events) with their stacks.
 * Drawn by the HTML page and written by `export --format perfetto`.
 *
 * Contract:
 *  - Memory is bounded by max_buckets per series and VT_SERIES_MAX_INSTANTS,
 *    never by the number of events: buckets double their width and merge
 *    pairwise when time runs past the last one.
 *  - A bucket keeps the moment of its highest total (with the by-tag split
 *    then) and its last state, so a peak is never averaged away and a drop
 *    inside a bucket still shows: at most 2 points per bucket.
 *  - Times are ns since the process's trace start.
 *  - By-tag arrays hold the rules' tags (vt_rules_tag_count); entries past
 *    them are 0, as the model's are.
 *  - Functions returning int return 0 or VT_E_NOMEM.
 */
#ifndef VT_REPORT_SERIES_H
#define VT_REPORT_SERIES_H

#include "report.h"

#define VT_SERIES_MAX_INSTANTS 10000

typedef struct vt_bucket {
    int used;
    uint64_t max_t, max_total, last_t, last_total;
    uint64_t max_tag[VT_MAX_TAGS], last_tag[VT_MAX_TAGS];
    int have_free;
    uint64_t free_t, min_free;   /* lowest driver sample in the bucket */
} vt_bucket_t;

typedef struct vt_series {
    uint64_t width;   /* ns per bucket */
    int nb, max;      /* buckets in use (index of last + 1), capacity */
    vt_bucket_t *b;
    uint64_t cur;     /* total as last recorded */
    int seen;
    vt_bucket_t *hot; /* the bucket found last, starting at hot_lo ns */
    uint64_t hot_lo;
} vt_series_t;

enum { VT_INSTANT_FAILURE, VT_INSTANT_SPILL };

typedef struct vt_instant {
    uint64_t time_ns, bytes;
    uint32_t stack, result, tid;
    uint16_t api;
    int8_t tag, kind;   /* kind: VT_INSTANT_*; spill kind in spill */
    int8_t spill;
    int16_t device;     /* ordinal, -1 host */
} vt_instant_t;

typedef struct vt_proc_series {
    vt_series_t dev[VT_MAX_DEVICES], host, managed;
    vt_instant_t *inst;
    size_t ninst, inst_cap;
    uint64_t inst_dropped;
    uint64_t spills_seen;
    const vt_model_t *model;   /* the input's, as vt_report_load made it */
    const vt_proc_t *proc;
} vt_proc_series_t;

typedef struct vt_series_set {
    int nproc, max_buckets;
    int ntags;   /* the rules' tag count rounded up to 4: by-tag entries past it stay 0 */
    vt_proc_series_t *p;
    int nomem;
} vt_series_set_t;

/* Attaches a recorder to r (r->series) before vt_report_load; one
 * vt_proc_series_t per input, each series at most max_buckets buckets. */
vt_series_set_t *vt_series_attach(vt_report_t *r, int max_buckets);
/* pipeline/load.c's reading loop: the recorder's look at the models after each
 * event (the on_event contract of report.h). */
void vt_series_on_event(vt_series_set_t *set, vt_report_t *r, int input, const vt_event_t *ev);
void vt_series_free(vt_series_set_t *s);
/* Forgets what was recorded, for a reading from the start (pipeline/load.c). */
void vt_series_rewind(vt_series_set_t *s);

/* Points of a series in time order: calls fn(ctx, t, total, by_tag) at most
 * twice per bucket, then once at end_ns with the final state. */
typedef void (*vt_point_fn)(void *ctx, uint64_t t, uint64_t total, const uint64_t *by_tag);
void vt_series_points(const vt_series_t *s, uint64_t end_ns, vt_point_fn fn, void *ctx);

/* The end of a process's timeline: its END record, else its last event. */
uint64_t vt_proc_end_ns(const vt_proc_t *p);

#endif
