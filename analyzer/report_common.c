/* Small helpers shared by the text and JSON printers (see report.h). */
#include "report.h"

#include <stdlib.h>
#include <string.h>

void vt_uuid_str(const uint8_t u[16], char out[48])
{
    /* nvidia-smi's form, so users can match it against `nvidia-smi -L`. */
    snprintf(out, 48, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
             u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

int vt_uuid_known(const uint8_t u[16])
{
    for (int i = 0; i < 16; i++)
        if (u[i])
            return 1;
    return 0;
}

/* The ranking's order (report.h, vt_sites_ranked) over copies of a site's
 * keys: the full sort moves keys, not indexes whose comparisons would read
 * two random sites each (100k sites are 8 MB). */
typedef struct site_key {
    uint64_t at_peak, max_live, total_bytes;
    size_t i;
} site_key_t;

static inline site_key_t key_of(const vt_proc_t *p, size_t i)
{
    return (site_key_t){ p->sites[i].at_peak, p->sites[i].max_live, p->sites[i].total_bytes, i };
}

static inline int key_before(const site_key_t *x, const site_key_t *y)
{
    if (x->at_peak != y->at_peak)
        return x->at_peak > y->at_peak;
    if (x->max_live != y->max_live)
        return x->max_live > y->max_live;
    if (x->total_bytes != y->total_bytes)
        return x->total_bytes > y->total_bytes;
    return x->i < y->i;
}

/* Site i ranks before site j. */
static inline int site_before(const vt_proc_t *p, size_t i, size_t j)
{
    site_key_t a = key_of(p, i), b = key_of(p, j);
    return key_before(&a, &b);
}

/* Every site's index in rank order: a bottom-up merge sort of the keys
 * (keys are distinct, the index breaking ties, so stability is moot). */
static size_t *rank_all(const vt_proc_t *p)
{
    size_t n = p->nsites;
    site_key_t *a = malloc((n ? n : 1) * sizeof *a), *b = malloc((n ? n : 1) * sizeof *b);
    size_t *out = malloc((n ? n : 1) * sizeof *out);
    if (!a || !b || !out) {
        free(a);
        free(b);
        free(out);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        a[i] = key_of(p, i);
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t x = lo, y = mid, k = lo;
            while (x < mid && y < hi)
                b[k++] = key_before(&a[y], &a[x]) ? a[y++] : a[x++];
            while (x < mid)
                b[k++] = a[x++];
            while (y < hi)
                b[k++] = a[y++];
        }
        site_key_t *t = a;
        a = b;
        b = t;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = a[i].i;
    free(a);
    free(b);
    return out;
}

size_t *vt_sites_ranked(const vt_proc_t *p, size_t n)
{
    if (n > p->nsites)
        n = p->nsites;
    if (n > p->nsites / 8)
        return rank_all(p);
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    if (!idx)
        return NULL;
    /* A few of many (the text report's top 10 of 100k sites): keep the
     * best n seen in order; a site that does not beat the n-th costs one
     * comparison. key_before is a total order (ties go by index), so this
     * is exactly the sorted list's first n. */
    size_t have = 0;
    for (size_t i = 0; i < p->nsites && n; i++) {
        if (have == n && !site_before(p, i, idx[n - 1]))
            continue;
        size_t k = have < n ? have++ : n - 1;
        while (k > 0 && site_before(p, i, idx[k - 1])) {
            idx[k] = idx[k - 1];
            k--;
        }
        idx[k] = i;
    }
    return idx;
}

const char *vt_api_name(unsigned api)
{
    const vt_api_info_t *info = vt_api_info(api);
    return info ? info->name : "?";
}

const char *vt_base(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : path ? path : "";
}

uint64_t vt_dev_reserve(const vt_dev_t *d)
{
    return d->have_info && d->total >= d->first_free ? d->total - d->first_free : 0;
}

uint64_t vt_dev_untracked(const vt_dev_t *d)
{
    if (!d->have_free || d->total < d->last_free)
        return 0;
    /* used - reserve - tracked, floored at 0, in unsigned steps: hostile
     * sizes must not overflow a signed subtraction. */
    uint64_t used = d->total - d->last_free, reserve = vt_dev_reserve(d);
    if (used <= reserve)
        return 0;
    used -= reserve;
    return used > d->tracked_at_sample ? used - d->tracked_at_sample : 0;
}

uint64_t vt_proc_more_vram(const vt_proc_t *p)
{
    uint64_t more = p->oom_shortfall;
    if (p->fallback_peak > more)
        more = p->fallback_peak;
    if (p->oversub_excess > more)
        more = p->oversub_excess;
    return more;
}
