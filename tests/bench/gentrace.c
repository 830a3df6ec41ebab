/* gentrace: writes a large synthetic trace for the analyzer benchmark, fast
 * enough that `make bench` can make a 50M-event trace in seconds (built on
 * tests/tools/tracegen.h and include/vramtrace/encode.h).
 *
 *   gentrace -o OUT [-e EVENTS] [-l LIVE] [-s STACKS] [-d DEPTH] [-r SEED]
 *     EVENTS  events in total (default 1000000)
 *     LIVE    allocations kept live in the steady state (default 10000)
 *     STACKS  distinct allocation stacks (default 1000)
 *     DEPTH   frames per stack (default 20, at most VT_MAX_STACK_DEPTH)
 *     -L      stack nodes written at first use, as the shim writes them
 *             (default: the whole tree before the first event)
 *     -z      stacks drawn with Zipf weights (the k-th most used 1/k), as
 *             real servers reuse a few call paths for most allocations;
 *             default: uniformly, every stack as likely (the worst case
 *             for the report's caches)
 *
 * Shape: one process, one 80 GiB device, one module. The stacks share a
 * trunk of frames and branch in their innermost levels (like real servers:
 * one main loop, many layers), so the calling-context tree holds
 * STACKS leaves and about 1.1 * STACKS nodes. Every frame has a mangled C++
 * name so the report's demangler runs. Events: LIVE allocations, then free a
 * random live allocation / allocate a new one, alternating, with random
 * sizes (1 byte to 8 MiB), random stacks and a few threads; a cuMemGetInfo
 * sample every 1000 events, as the shim takes them; event times ~1 us
 * apart, written in the shim's default grain (VRAMTRACE_TIME_RES_US=1000:
 * rounded down to the millisecond after the process's start). Chunks close
 * at 1 MiB of records, as the shim's writer does, and the file ends with an
 * END record. Prints `events=N bytes=B` on stdout.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracegen.h"
#include "vramtrace/encode.h"
#include "vramtrace/entrypoints.h"

#define CHUNK_RAW (1u << 20)
#define MODULE_BASE 0x7f3a00000000ull
#define VA_BASE 0x7e0000000000ull
#define VA_STRIDE (16ull << 20)
#define DEVICE_TOTAL (80ull << 30)
#define BRANCH 10

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dull;
}

static tg_t g;
static uint64_t now_ns = 1000000000ull;
#define SHIM_TIME_GRAIN_NS 1000000ull /* VRAMTRACE_TIME_RES_US's default, in ns */

static void maybe_chunk(void)
{
    if (g.chunk.len >= CHUNK_RAW)
        tg_chunk(&g, NULL);
}

static void record(uint8_t type, const uint8_t *payload, size_t len)
{
    tg_record(&g, type, payload, len);
    maybe_chunk();
}

static void frame(uint64_t ip, const char *name)
{
    uint8_t buf[512], *p = buf;
    p = vt_put_varint(p, ip);
    p = vt_put_varint(p, 1);
    p = vt_put_varint(p, 0x40);
    p = vt_put_str(p, name, strlen(name), 256);
    record(VT_REC_FRAME, buf, (size_t)(p - buf));
}

static uint32_t node_count;

static void stack_record(uint32_t id, uint32_t parent, uint64_t ip)
{
    uint8_t buf[32], *p = buf;
    p = vt_put_varint(p, id);
    p = vt_put_varint(p, parent);
    p = vt_put_varint(p, ip);
    record(VT_REC_STACK, buf, (size_t)(p - buf));
}

/* -L: the shim's order. A node is written just before the first event
 * whose stack holds it, numbered in that order; build_stacks only shapes
 * the tree (vparent, vip by tree index) and node() returns tree indexes. */
static int lazy;
static uint32_t *vparent, *vid, nvnodes, vcap;
static uint64_t *vip;

static uint32_t node(uint32_t parent, uint64_t ip)
{
    if (!lazy) {
        uint32_t id = ++node_count;
        stack_record(id, parent, ip);
        return id;
    }
    if (nvnodes + 1 >= vcap) {
        vcap = vcap ? 2 * vcap : 1024;
        vparent = realloc(vparent, vcap * sizeof *vparent);
        vid = realloc(vid, vcap * sizeof *vid);
        vip = realloc(vip, vcap * sizeof *vip);
        if (!vparent || !vid || !vip)
            exit(1);
        if (!nvnodes)
            vid[0] = 0;   /* tree index 0 is the root: id 0 */
    }
    uint32_t v = ++nvnodes;
    vparent[v] = parent;
    vip[v] = ip;
    vid[v] = 0;
    return v;
}

/* -z: cumulative Zipf weights of the stacks, by rank (NULL: uniform). */
static double *zipf_cdf;

static int zipf_table(uint32_t stacks)
{
    zipf_cdf = malloc(stacks * sizeof *zipf_cdf);
    if (!zipf_cdf)
        return -1;
    double sum = 0;
    for (uint32_t k = 0; k < stacks; k++)
        zipf_cdf[k] = sum += 1.0 / (k + 1);
    for (uint32_t k = 0; k < stacks; k++)
        zipf_cdf[k] /= sum;
    return 0;
}

/* A stack's index: uniform, or by rank from the Zipf table. */
static uint32_t pick_stack(uint32_t stacks)
{
    if (!zipf_cdf)
        return (uint32_t)(next_rand() % stacks);
    double u = (double)(next_rand() >> 11) * 0x1.0p-53;
    uint32_t lo = 0, hi = stacks - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (zipf_cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The node id of tree index v, writing it and its unwritten ancestors. */
static uint32_t stack_id(uint32_t v)
{
    if (!lazy || v == 0)
        return v;
    if (!vid[v]) {
        uint32_t parent = stack_id(vparent[v]);
        vid[v] = ++node_count;
        stack_record(vid[v], parent, vip[v]);
    }
    return vid[v];
}

/* Builds STACKS leaves: a trunk of depth - levels frames, then `levels`
 * branching levels of BRANCH children each, numbered so leaf s is the path
 * of s's base-BRANCH digits. Returns the leaf ids. */
static uint32_t *build_stacks(uint32_t stacks, int depth)
{
    int levels = 1;
    uint64_t cap = BRANCH;
    while (cap < stacks) {
        cap *= BRANCH;
        levels++;
    }
    if (levels > depth)
        levels = depth;
    char name[256];
    uint32_t id = 0;
    uint64_t ip = MODULE_BASE + 0x1000;
    for (int d = 0; d < depth - levels; d++, ip += 0x40) {
        snprintf(name, sizeof name, "_ZN5bench6server4loopILi%dEE3runEv", d);
        frame(ip, name);
        id = node(id, ip);
    }
    uint32_t trunk = id;
    /* Frames for every (level, digit): their ips are shared by every node
     * at that level with that digit, as inlined layers share code. */
    uint64_t level_ip[32][BRANCH];
    for (int l = 0; l < levels; l++)
        for (int b = 0; b < BRANCH; b++, ip += 0x40) {
            level_ip[l][b] = ip;
            snprintf(name, sizeof name, "_ZN5bench5layerILi%dEE7forwardILi%dEEEvRKNS_6tensorE", l, b);
            frame(ip, name);
        }
    uint32_t *leaf = malloc(stacks * sizeof *leaf);
    /* prefix ids for the current path, reused while digits match */
    uint32_t path_id[32];
    int path_digit[32];
    for (int l = 0; l < levels; l++)
        path_digit[l] = -1;
    if (!leaf)
        exit(1);
    for (uint32_t s = 0; s < stacks; s++) {
        uint32_t parent = trunk, v = s;
        int digits[32];
        for (int l = levels - 1; l >= 0; l--) {
            digits[l] = (int)(v % BRANCH);
            v /= BRANCH;
        }
        int same = 1;
        for (int l = 0; l < levels; l++) {
            if (!same || path_digit[l] != digits[l]) {
                same = 0;
                path_digit[l] = digits[l];
                path_id[l] = node(parent, level_ip[l][digits[l]]);
            }
            parent = path_id[l];
        }
        leaf[s] = parent;
    }
    return leaf;
}

static void event(uint16_t api, uint32_t tid, uint64_t ptr, uint64_t size, uint64_t aux, uint32_t flags,
                  uint32_t stack)
{
    now_ns += 100 + next_rand() % 1900;
    stack = stack_id(stack);
    tg_event_t e = { .api = api, .tid = tid, .ptr = ptr, .size = size, .aux = aux, .flags = flags, .stack = stack };
    e.time_ns = g.start_ns + (now_ns - g.start_ns) / SHIM_TIME_GRAIN_NS * SHIM_TIME_GRAIN_NS;
    tg_event(&g, &e);
    maybe_chunk();
}

int main(int argc, char **argv)
{
    const char *out = NULL;
    uint64_t events = 1000000, live = 10000, stacks = 1000;
    int depth = 20, c, zipf = 0;
    while ((c = getopt(argc, argv, "o:e:l:s:d:r:Lz")) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'e': events = strtoull(optarg, NULL, 10); break;
        case 'l': live = strtoull(optarg, NULL, 10); break;
        case 's': stacks = strtoull(optarg, NULL, 10); break;
        case 'd': depth = atoi(optarg); break;
        case 'r': rng = strtoull(optarg, NULL, 10) * 0x9e3779b97f4a7c15ull | 1; break;
        case 'L': lazy = 1; break;
        case 'z': zipf = 1; break;
        default: return 2;
        }
    }
    if (!out || live < 1 || stacks < 1 || stacks > (1u << 24) || depth < 1 || depth > (int)VT_MAX_STACK_DEPTH) {
        fprintf(stderr, "usage: gentrace -o OUT [-e EVENTS] [-l LIVE] [-s STACKS] [-d DEPTH] [-r SEED] [-L] [-z]\n");
        return 2;
    }
    FILE *f = fopen(out, "wb");
    if (!f) {
        perror(out);
        return 1;
    }
    static char iobuf[1 << 20];
    setvbuf(f, iobuf, _IOFBF, sizeof iobuf);
    tg_init(&g, f);
    g.level = 1; /* as the shim's writer compresses */
    g.raw_literals = 1;

    /* PROCESS, in the header. */
    tg_buf_t b = { 0 };
    const char *exe = "/usr/bin/bench-server", *argv0 = "bench-server";
    tg_buf_varint(&b, 4242);
    tg_buf_varint(&b, 1);
    tg_buf_varint(&b, now_ns);
    tg_buf_varint(&b, 1700000000000000000ull);
    tg_buf_str(&b, "0.1.0", 5);
    tg_buf_str(&b, exe, strlen(exe));
    tg_buf_str(&b, "benchhost", 9);
    tg_buf_varint(&b, 1);
    tg_buf_str(&b, argv0, strlen(argv0));
    tg_record(&g, VT_REC_PROCESS, b.p, b.len);
    tg_set_start(&g, now_ns);
    tg_write_header(&g);

    b.len = 0;
    uint8_t uuid[16] = { 0xbe, 0x4c };
    tg_buf_zz(&b, 0);
    tg_buf_varint(&b, now_ns);
    tg_buf_varint(&b, DEVICE_TOTAL);
    tg_buf_varint(&b, DEVICE_TOTAL - (512ull << 20));
    tg_buf_bytes(&b, uuid, 16);
    tg_buf_str(&b, "Simulated H100", 14);
    record(VT_REC_DEVICE, b.p, b.len);

    b.len = 0;
    const char *mod = "/usr/lib/libbench.so";
    tg_buf_varint(&b, 1);
    tg_buf_varint(&b, MODULE_BASE);
    tg_buf_varint(&b, 64ull << 20);
    tg_buf_str(&b, "\x12\x34\x56\x78", 4);
    tg_buf_str(&b, mod, strlen(mod));
    record(VT_REC_MODULE, b.p, b.len);
    tg_buf_free(&b);

    uint32_t *leaf = build_stacks((uint32_t)stacks, depth);
    if (zipf && zipf_table((uint32_t)stacks))
        return 1;
    /* Live allocations by slot: slot i's address is fixed, so a freed
     * address comes back, as the driver's do. The live slots are kept dense
     * in live_list (pos_of is the inverse), the free ones on a stack, so
     * picking either is O(1) however full the table is. */
    uint64_t *size = calloc(live, sizeof *size);
    uint32_t *live_list = calloc(live, sizeof *live_list), *pos_of = calloc(live, sizeof *pos_of);
    uint32_t *free_stack = calloc(live, sizeof *free_stack);
    if (!size || !live_list || !pos_of || !free_stack)
        return 1;
    uint64_t nlive = 0, nfree = live;
    for (uint64_t i = 0; i < live; i++)
        free_stack[i] = (uint32_t)(live - 1 - i);
    uint64_t n = 0, tracked = 0;
    while (n < events) {
        uint32_t tid = 100 + (uint32_t)(next_rand() % 4);
        if (n % 1000 == 999) {
            event(VT_API_cuMemGetInfo_v2, tid, 0, DEVICE_TOTAL - (512ull << 20) - tracked, DEVICE_TOTAL,
                  VT_EF_SAMPLE, 0);
        } else if (nfree == 0 || (nlive && n >= live && (n & 1))) {
            /* Free a random live allocation: after the ramp of LIVE
             * allocations, frees and allocations alternate. */
            uint32_t k = (uint32_t)(next_rand() % nlive), slot = live_list[k];
            event(VT_API_cudaFree, tid, VA_BASE + slot * VA_STRIDE, 0, 0, VT_EF_RUNTIME,
                  leaf[pick_stack((uint32_t)stacks)]);
            tracked -= size[slot];
            size[slot] = 0;
            live_list[k] = live_list[--nlive];
            pos_of[live_list[k]] = k;
            free_stack[nfree++] = slot;
        } else {
            uint32_t slot = free_stack[--nfree];
            uint64_t sz = 1 + next_rand() % (8u << 20);
            event(VT_API_cudaMalloc, tid, VA_BASE + slot * VA_STRIDE, sz, 0, VT_EF_RUNTIME,
                  leaf[pick_stack((uint32_t)stacks)]);
            size[slot] = sz;
            tracked += sz;
            pos_of[slot] = (uint32_t)nlive;
            live_list[nlive++] = slot;
        }
        n++;
    }
    uint8_t buf[3 * VT_VARINT_MAX], *p = buf;
    p = vt_put_varint(p, now_ns + 1000);
    p = vt_put_varint(p, n);
    p = vt_put_varint(p, 0);
    tg_record(&g, VT_REC_END, buf, (size_t)(p - buf));
    tg_finish(&g);
    fclose(f);
    struct stat st;
    stat(out, &st);
    printf("events=%llu bytes=%lld nodes=%u\n", (unsigned long long)n, (long long)st.st_size, node_count);
    free(size);
    free(live_list);
    free(pos_of);
    free(free_stack);
    free(leaf);
    free(zipf_cdf);
    return 0;
}
