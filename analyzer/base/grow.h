/* grow.h: amortised growth of the analyzer's dense arrays.
 *
 * Contract: vt_grow(&p, &cap, need, elem, first) makes p hold at least need
 * elements of elem bytes: it doubles cap, starting from first when cap is
 * 0, and reallocs. On failure p and cap are untouched and it returns
 * VT_E_NOMEM; the caller's count is its own. Elements past the old
 * capacity are uninitialised.
 */
#ifndef VRAMTRACE_GROW_H
#define VRAMTRACE_GROW_H

#include <stdint.h>
#include <stdlib.h>

#include "errors.h"

static inline int vt_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : first;
    while (n < need)
        n *= 2;
    if (n > SIZE_MAX / elem)
        return VT_E_NOMEM;
    void *q = realloc(*p, n * elem);
    if (!q)
        return VT_E_NOMEM;
    *p = q;
    *cap = n;
    return 0;
}

#endif
