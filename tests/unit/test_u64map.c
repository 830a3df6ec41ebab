/* Unit tests of the address map (analyzer/base/u64map.c): every key found
 * after puts, deletions and growth, and keys aimed at the fixed multiplier
 * (all sharing one home slot) costing one long run, not one per key.
 * TAP on stdout. */
#include <stdint.h>
#include <stdlib.h>

#include "tap.h"
#include "u64map.h"

/* The longest distance from a key's home slot to where it sits: what a
 * lookup of the unluckiest key walks. */
static size_t longest_run(const vt_map_t *m)
{
    size_t longest = 0;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].tag)
            continue;
        size_t run = (i - vt_map_home(m, m->slots[i].key)) & (m->cap - 1);
        longest = run > longest ? run : longest;
    }
    return longest;
}

/* The inverse of an odd number modulo 2^64 (Newton's iteration doubles
 * the correct low bits each step: 3, 6, 12, 24, 48, 96). */
static uint64_t inverse(uint64_t odd)
{
    uint64_t x = odd;
    for (int i = 0; i < 5; i++)
        x *= 2 - odd * x;
    return x;
}

static void test_honest_keys(void)
{
    vt_map_t m;
    vt_map_init(&m);
    /* device-like addresses: 2 MiB apart in one VA range, then freed one
     * in three, then added again */
    const uint64_t base = 0x7f0000000000ull, n = 200000;
    int put_ok = 1;
    for (uint64_t i = 0; i < n; i++)
        put_ok &= vt_map_put_new(&m, base + (i << 21), (uint32_t)i) == 0;
    TAP_OK(put_ok, "200,000 addresses put");
    uint64_t deleted = 0;
    for (uint64_t i = 0; i < n; i += 3)
        deleted += (uint64_t)vt_map_del(&m, base + (i << 21), NULL);
    TAP_EQ_U64(deleted, (n + 2) / 3, "every third deleted");
    uint64_t found = 0, right = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t v;
        int got = vt_map_get(&m, base + (i << 21), &v);
        found += (uint64_t)got;
        right += (uint64_t)(got && v == i && i % 3);
    }
    TAP_EQ_U64(found, n - (n + 2) / 3, "the others are found");
    TAP_EQ_U64(right, found, "each with its own value");
    TAP_OK(!m.keyed, "honest keys keep the fixed multiplier (the same layout every run)");
    TAP_OK(longest_run(&m) <= VT_MAP_LONG_RUN, "longest run %zu slots", longest_run(&m));
    vt_map_free(&m);
}

static void test_aimed_keys(void)
{
    vt_map_t m;
    vt_map_init(&m);
    /* key * mul = i: the top bits, the home slot, are 0 for every key */
    const uint64_t inv = inverse(m.mul), n = 100000;
    TAP_EQ_U64(m.mul * inv, 1, "the keys are aimed at the fixed multiplier");
    int put_ok = 1;
    for (uint64_t i = 0; i < n; i++)
        put_ok &= vt_map_put(&m, i * inv, (uint32_t)i) == 0;
    TAP_OK(put_ok, "100,000 aimed keys put");
    TAP_OK(m.keyed, "a run past %d slots draws a random multiplier", VT_MAP_LONG_RUN);
    TAP_OK(longest_run(&m) <= VT_MAP_LONG_RUN, "after which the longest run is %zu slots, not ~%llu",
           longest_run(&m), (unsigned long long)n);
    uint64_t right = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t v;
        right += (uint64_t)(vt_map_get(&m, i * inv, &v) && v == i);
    }
    TAP_EQ_U64(right, n, "every aimed key is found with its value");
    vt_map_free(&m);

    /* The same through find_hole/put_hole, the live table's path. */
    vt_map_t z = {0};
    for (uint64_t i = 0; i < n; i++) {
        size_t hole;
        if (vt_map_find_hole(&z, i * inv, &hole) == SIZE_MAX)
            vt_map_put_hole(&z, hole, i * inv, (uint32_t)i);
    }
    TAP_EQ_U64(z.count, n, "a zeroed map (no init) takes every key by put_hole");
    TAP_OK(z.keyed && longest_run(&z) <= VT_MAP_LONG_RUN, "and draws its random multiplier too");
    vt_map_free(&z);
}

int main(void)
{
    test_honest_keys();
    test_aimed_keys();
    return tap_done();
}
