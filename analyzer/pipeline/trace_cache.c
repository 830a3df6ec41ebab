/* trace_cache.c: the traces of a look kept for the next one (trace_cache.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "errors.h"
#include "trace_cache.h"

static void entry_free(vt_tcache_t *c, vt_tcache_entry_t *e)
{
    if (e->summary && c->drop)
        c->drop(e->summary);
    free(e->path);
    free(e->hostname);
    vt_report_free(e->open);
    e->summary = NULL;
    e->path = NULL;
    e->hostname = NULL;
    e->open = NULL;
}

int vt_tcache_idle(const vt_tcache_entry_t *e)
{
    return e->summary && (e->idle || (e->probe && vt_pid_gone(e->pid, e->hostname)));
}

/* Sets e's idle and probe from input in. @return 0, or -1 out of memory. */
static int classify(vt_tcache_entry_t *e, const vt_report_input_t *in)
{
    const vt_proc_t *p = vt_model_proc(in->model);
    e->idle = vt_report_input_idle(in) && !vt_proc_ran_on_cpu(p);
    e->probe = !e->idle && !p->ended && !in->truncated && !in->damaged && vt_proc_allocated_nothing(p) &&
               !p->placement.known;
    e->pid = p->pid;
    free(e->hostname);
    e->hostname = NULL;
    return e->probe && p->hostname && !(e->hostname = strdup(p->hostname)) ? -1 : 0;
}

void vt_tcache_clear(vt_tcache_t *c)
{
    for (int i = 0; i < c->n; i++)
        entry_free(c, &c->e[i]);
    free(c->e);
    c->e = NULL;
    c->n = c->cap = 0;
}

/* The old entry for path, -1 when none; *hint is where the last one was
 * found, since a listing comes in the same order from one scan to the
 * next. */
static int find(const vt_tcache_t *c, const char *path, int *hint)
{
    for (int k = 0; k < c->n; k++) {
        int i = (*hint + k) % c->n;
        if (c->e[i].path && !strcmp(c->e[i].path, path)) {
            *hint = i + 1;
            return i;
        }
    }
    return -1;
}

/* e's summary from r, just read (NULL: it could not be), and r kept for
 * the next scan while its one trace can still grow. */
static void keep(vt_tcache_t *c, vt_tcache_entry_t *e, vt_report_t *r)
{
    if (e->summary && c->drop)
        c->drop(e->summary);
    e->summary = r && r->nin == 1 && !classify(e, &r->in[0]) ? c->summarize(c->ctx, r, 0) : NULL;
    e->bad = !e->summary;
    c->reads++;
    uint64_t from = r && r->nin == 1 ? r->in[0].read_from : 0;
    c->bytes_read += (uint64_t)e->size > from ? (uint64_t)e->size - from : 0;
    if (e->summary && !vt_model_proc(r->in[0].model)->ended && !r->in[0].damaged &&
        !vt_model_marks_seen(r->in[0].model))
        e->open = r;
    else
        vt_report_free(r);
}

/* Reads entry e alone, into a report of its own, and keeps its summary.
 * Alone, not with the other changed traces: no process's figures depend
 * on another's (only report's combined GPU view, which these commands do
 * not show), and one model at a time is all a scan holds, where a merged
 * reading keeps every trace's model and current chunk at once. */
static void read_one(vt_tcache_t *c, vt_tcache_entry_t *e)
{
    vt_report_t *r = c->fresh(c->ctx);
    if (r) {
        r->found_in_dir = e->from_dir;
        r->keep_open = 1;
        (void)vt_report_load(r, &e->path, 1);   /* a trace left out said why */
    }
    keep(c, e, r);
}

/* Reads on e's trace, which grew, from where its last reading stopped;
 * afresh when that cannot be (vt_report_read_on). */
static void read_on(vt_tcache_t *c, vt_tcache_entry_t *e)
{
    vt_report_t *r = e->open;
    e->open = NULL;
    if (vt_report_read_on(r)) {
        vt_report_free(r);
        read_one(c, e);
        return;
    }
    keep(c, e, r);
}

int vt_tcache_scan(vt_tcache_t *c, char *const *args, int nargs)
{
    char **paths;
    unsigned char *from_dir;
    int np;
    c->reads = 0;
    c->bytes_read = 0;
    int rc = vt_report_list(args, nargs, &paths, &from_dir, &np);
    if (rc)
        return rc;
    vt_tcache_entry_t *ne = calloc((size_t)(np ? np : 1), sizeof *ne);
    unsigned char *stale = calloc((size_t)(np ? np : 1), 1);
    if (!ne || !stale) {
        for (int i = 0; i < np; i++)
            free(paths[i]);
        free(paths);
        free(from_dir);
        free(ne);
        free(stale);
        return VT_E_NOMEM;
    }
    int nn = 0, hint = 0;
    for (int i = 0; i < np; i++) {
        struct stat st;
        /* lstat, as vt_report_load: a symlink in a directory is refused by
         * the reader, not taken for its target. Gone since the listing:
         * dropped. */
        if (lstat(paths[i], &st) != 0) {
            free(paths[i]);
            continue;
        }
        int dup = 0;
        for (int k = 0; k < nn && !dup && st.st_ino; k++)
            dup = ne[k].dev == st.st_dev && ne[k].ino == st.st_ino;
        int old = find(c, paths[i], &hint);
        if (dup) {
            if (old < 0)   /* said once, when first met */
                fprintf(stderr, "vramtrace: %s: named twice, read once\n", vt_text(paths[i]));
            free(paths[i]);
            continue;
        }
        int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        vt_tcache_entry_t *o = old >= 0 ? &c->e[old] : NULL;
        int same = o && o->dev == st.st_dev && o->ino == st.st_ino && o->from_dir == from_dir[i];
        if ((same && o->size == st.st_size && o->mtime_ns == mtime) || (same && o->open && st.st_size > o->size)) {
            ne[nn] = *o;
            o->path = NULL;   /* moved */
            o->summary = NULL;
            o->hostname = NULL;
            o->open = NULL;
            if (ne[nn].size != st.st_size) {   /* grown: read on */
                ne[nn].size = st.st_size;
                ne[nn].mtime_ns = mtime;
                stale[nn] = 2;
            }
            nn++;
            free(paths[i]);
            continue;
        }
        if (o)
            entry_free(c, o);
        ne[nn] = (vt_tcache_entry_t){ .path = paths[i], .from_dir = from_dir[i], .dev = st.st_dev,
                                      .ino = st.st_ino, .size = st.st_size, .mtime_ns = mtime };
        stale[nn++] = 1;
    }
    free(paths);
    free(from_dir);
    vt_tcache_clear(c);
    c->e = ne;
    c->n = nn;
    c->cap = np;
    for (int i = 0; i < nn; i++) {
        if (stale[i] == 1)
            read_one(c, &c->e[i]);
        else if (stale[i] == 2)
            read_on(c, &c->e[i]);
    }
    free(stale);
    return 0;
}
