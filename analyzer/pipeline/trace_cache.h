/* The traces of a directory kept between two looks at them (serve's
 * scrapes, top's frames), so a look costs what changed, not the directory.
 *
 * Contract:
 *  - An entry is one trace file, known by its path and by the (device,
 *    inode, size, mtime) lstat gave when it was last read. A scan lists
 *    the paths again (vt_report_list), stats each, and reads only the new
 *    and the changed ones, each alone; a trace whose identity is
 *    unchanged is not opened. A trace replaced (new inode) or cut
 *    (smaller, or rewritten at its size) is read afresh.
 *  - A trace still being written (no END read, not damaged, no ggml
 *    marks) keeps its report (keep_open: its reader, closed, and its
 *    model, viewed) in `open`; when it grows, only what follows its last
 *    complete chunk is read (vt_report_read_on), afresh if that cannot
 *    be. So a scan costs the stat of every trace plus the new bytes of
 *    each grown one (a chunk left partial is read again once complete).
 *  - Of an ended or unreadable trace only what the command's summarize
 *    made of it is kept (its exposition, its rows): no reader, no model.
 *    A model per live trace is what memory holds beyond that.
 *  - Entries are in vt_report_list's order; a trace that is gone is
 *    dropped. A trace that could not be read is an entry with bad set
 *    (and no summary) until it changes.
 */
#ifndef VT_TRACE_CACHE_H
#define VT_TRACE_CACHE_H

#include <stdint.h>
#include <sys/types.h>

#include "report.h"

typedef struct vt_tcache_entry {
    char *path;
    int from_dir;            /* found in a directory: regular files only */
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_ns;
    int bad;                 /* left out at its last read (said on stderr) */
    void *summary;           /* summarize's, NULL when bad */
    /* Whether its process gets rows or series of its own (vt_tcache_idle):
     * idle, a probe that ended (vt_report_input_idle; a ggml program that
     * ran on the CPU is not idle, its verdict being the news); probe, one
     * that allocated nothing and has not ended yet, idle once its pid is
     * gone (vt_pid_gone), which needs no read: its trace does not change. */
    int idle, probe;
    uint64_t pid;
    char *hostname;          /* a probe's, else NULL */
    vt_report_t *open;       /* its report, to read on from, while it may grow; else NULL */
} vt_tcache_entry_t;

/* What the command keeps of input `i` of a loaded report r (r->in[i]'s
 * model is viewed: vt_model_view). NULL when out of memory: the trace is
 * then counted bad. */
typedef void *(*vt_tcache_summarize_fn)(void *ctx, const vt_report_t *r, int i);

typedef struct vt_tcache {
    vt_tcache_entry_t *e;
    int n, cap;
    vt_tcache_summarize_fn summarize;
    void (*drop)(void *summary);
    /* A fresh report set up as the command wants (options, quiet,
     * keep_going); NULL when it cannot be made. */
    vt_report_t *(*fresh)(void *ctx);
    void *ctx;
    /* Of the last scan: traces read, and their bytes (of a trace read on,
     * those after where it went on). */
    int reads;
    uint64_t bytes_read;
} vt_tcache_t;

/* Lists args, drops what is gone, reads what is new or changed. @return
 * 0, or a VT_E_* when args cannot be listed (said on stderr; the entries
 * are kept as they were). */
int vt_tcache_scan(vt_tcache_t *c, char *const *args, int nargs);
/* 1 when e's process is an idle one now (see the entry's idle and probe). */
int vt_tcache_idle(const vt_tcache_entry_t *e);
/* Drops every entry (drop on each summary). */
void vt_tcache_clear(vt_tcache_t *c);

#endif
