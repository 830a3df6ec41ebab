/* qsort for arrays that may be empty.
 *
 * Why: an empty array here is often a NULL pointer with 0 elements (a
 * trace with no marks, no spans, no sites), and passing NULL to qsort is
 * undefined even with 0 elements: UBSan stops the report fuzzer on it
 * (tests/fuzz/regressions/report/). vt_sort sorts nothing below 2. */
#ifndef VT_SORT_H
#define VT_SORT_H

#include <stdlib.h>

static inline void vt_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

#endif
