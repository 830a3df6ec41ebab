/* u64 -> u32 open-addressing map (see model_map.h). Keys are mixed with a
 * 64-bit finalizer because device addresses share their low and high bits. */
#include "model_map.h"

#include <stdlib.h>

#include "errors.h"

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

void vt_map_init(vt_map_t *m)
{
    m->keys = NULL;
    m->vals = NULL;
    m->used = NULL;
    m->cap = m->count = 0;
}

void vt_map_free(vt_map_t *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    vt_map_init(m);
}

static int grow(vt_map_t *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    vt_map_t n = { calloc(ncap, sizeof(uint64_t)), calloc(ncap, sizeof(uint32_t)), calloc(ncap, 1), ncap, 0 };
    if (!n.keys || !n.vals || !n.used) {
        vt_map_free(&n);
        return VT_E_NOMEM;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->used[i])
            vt_map_put(&n, m->keys[i], m->vals[i]);
    vt_map_free(m);
    *m = n;
    return 0;
}

int vt_map_put(vt_map_t *m, uint64_t key, uint32_t val)
{
    if ((m->count + 1) * 4 > m->cap * 3) {
        int rc = grow(m);
        if (rc)
            return rc;
    }
    size_t mask = m->cap - 1, i = mix(key) & mask;
    while (m->used[i]) {
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return 0;
        }
        i = (i + 1) & mask;
    }
    m->used[i] = 1;
    m->keys[i] = key;
    m->vals[i] = val;
    m->count++;
    return 0;
}

static int find(const vt_map_t *m, uint64_t key, size_t *slot)
{
    if (!m->cap)
        return 0;
    size_t mask = m->cap - 1, i = mix(key) & mask;
    while (m->used[i]) {
        if (m->keys[i] == key) {
            *slot = i;
            return 1;
        }
        i = (i + 1) & mask;
    }
    return 0;
}

int vt_map_get(const vt_map_t *m, uint64_t key, uint32_t *val)
{
    size_t i;
    if (!find(m, key, &i))
        return 0;
    *val = m->vals[i];
    return 1;
}

int vt_map_del(vt_map_t *m, uint64_t key, uint32_t *val)
{
    size_t i;
    if (!find(m, key, &i))
        return 0;
    if (val)
        *val = m->vals[i];
    size_t mask = m->cap - 1, j = i;
    m->used[i] = 0;
    m->count--;
    /* Backward shift: move later entries of the run into the hole when
     * their home slot is not between the hole and their position. */
    for (;;) {
        j = (j + 1) & mask;
        if (!m->used[j])
            break;
        size_t home = mix(m->keys[j]) & mask;
        int movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            m->used[i] = 1;
            m->used[j] = 0;
            i = j;
        }
    }
    return 1;
}
