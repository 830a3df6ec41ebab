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
    e->summary = NULL;
    e->path = NULL;
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

/* Reads the entries marked in stale with from_dir == dir, in one report,
 * and keeps each one's summary. */
static void read_group(vt_tcache_t *c, const unsigned char *stale, int dir)
{
    char **args = malloc((size_t)(c->n ? c->n : 1) * sizeof *args);
    int *at = malloc((size_t)(c->n ? c->n : 1) * sizeof *at), k = 0;
    for (int i = 0; args && at && i < c->n; i++)
        if (stale[i] && c->e[i].from_dir == dir) {
            at[k] = i;
            args[k++] = c->e[i].path;
        }
    vt_report_t *r = k ? c->fresh(c->ctx) : NULL;
    if (r) {
        r->found_in_dir = dir;
        (void)vt_report_load(r, args, k);   /* what it left out is bad below, each said why */
    }
    /* r->in keeps the order of args, less what was left out. */
    int next = 0;
    for (int j = 0; j < k; j++) {
        vt_tcache_entry_t *e = &c->e[at[j]];
        if (r && next < r->nin && !strcmp(r->in[next].path, e->path)) {
            e->summary = c->summarize(c->ctx, r, next++);
            e->bad = !e->summary;
        } else {
            e->bad = 1;
        }
        c->reads++;
        c->bytes_read += (uint64_t)e->size;
    }
    vt_report_free(r);
    free(args);
    free(at);
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
        if (o && o->dev == st.st_dev && o->ino == st.st_ino && o->size == st.st_size && o->mtime_ns == mtime &&
            o->from_dir == from_dir[i]) {
            ne[nn++] = *o;
            o->path = NULL;   /* moved */
            o->summary = NULL;
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
    read_group(c, stale, 1);
    read_group(c, stale, 0);
    free(stale);
    return 0;
}
