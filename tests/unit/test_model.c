/* Unit tests of the replay model (analyzer/model*.c): vt_record_t sequences
 * fed straight in, exact numbers out. TAP on stdout. */
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "report.h"
#include "sizes.h"
#include "tap.h"

#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)
#define T0 1000000000ull

static vt_model_t *m;

/* Times print no digit finer than the trace's grain (PROCESS time_res_ns). */
static void test_time_grain(void)
{
    char b[VT_SIZE_BUF];
    vt_fmt_set_time_grain(0);
    TAP_EQ_STR(vt_fmt_time(b, 0), "0.0 us", "exact times: 0");
    TAP_EQ_STR(vt_fmt_time(b, 842752), "842.8 us", "exact times: us");
    TAP_EQ_STR(vt_fmt_time(b, 12345678), "12.3 ms", "exact times: ms");
    TAP_EQ_STR(vt_fmt_time(b, 2345678901), "2.346 s", "exact times: s");
    vt_fmt_set_time_grain(1000000);
    TAP_EQ_STR(vt_fmt_time(b, 0), "<1 ms", "1 ms grain: the first millisecond");
    TAP_EQ_STR(vt_fmt_time(b, 12000000), "12 ms", "1 ms grain: whole ms");
    TAP_EQ_STR(vt_fmt_time(b, 2345000000), "2.345 s", "1 ms grain: s to the ms");
    vt_fmt_set_time_grain(1000);
    TAP_EQ_STR(vt_fmt_time(b, 0), "0 us", "1 us grain: 0");
    TAP_EQ_STR(vt_fmt_time(b, 843000), "843 us", "1 us grain: whole us");
    vt_fmt_set_time_grain(250000);
    TAP_EQ_STR(vt_fmt_time(b, 0), "<250 us", "250 us grain: the first grain");
    TAP_EQ_STR(vt_fmt_time(b, 1250000), "1.2 ms", "250 us grain: ms to the tenth");
    vt_fmt_set_time_grain(1000000000);
    TAP_EQ_STR(vt_fmt_time(b, 0), "<1 s", "1 s grain: the first second");
    TAP_EQ_STR(vt_fmt_time(b, 3000000000), "3 s", "1 s grain: whole s");
    vt_fmt_set_time_grain(0);
}

static void feed(vt_record_t *r)
{
    if (vt_model_feed(m, r))
        TAP_OK(0, "feed failed");
}

static void frame(uint64_t ip, const char *fn)
{
    vt_record_t r = { .type = VT_REC_FRAME };
    r.u.frame.ip = ip;
    r.u.frame.function.data = fn;
    r.u.frame.function.len = (uint32_t)strlen(fn);
    feed(&r);
}

static void node(uint64_t id, uint64_t parent, uint64_t ip)
{
    vt_record_t r = { .type = VT_REC_STACK };
    r.u.stack.node_id = id;
    r.u.stack.parent_id = parent;
    r.u.stack.ip = ip;
    feed(&r);
}

static void device(int ord, uint64_t total, uint64_t freeb)
{
    vt_record_t r = { .type = VT_REC_DEVICE };
    r.u.device.ordinal = ord;
    r.u.device.time_ns = T0;
    r.u.device.total_bytes = total;
    r.u.device.free_bytes = freeb;
    r.u.device.uuid[0] = (uint8_t)(ord + 1);
    feed(&r);
}

static void ev(uint64_t t, int api, int dev, uint64_t ptr, uint64_t size, uint32_t result, uint32_t stack)
{
    vt_record_t r = { .type = VT_REC_EVENT };
    r.u.event.time_ns = T0 + t;
    r.u.event.api = (uint16_t)api;
    r.u.event.device = (int16_t)dev;
    r.u.event.ptr = ptr;
    r.u.event.size = size;
    r.u.event.result = result;
    r.u.event.stack = stack;
    r.u.event.tid = 7;
    feed(&r);
}

static void evx(uint64_t t, int api, int dev, uint64_t ptr, uint64_t size, uint64_t reserved, uint64_t aux, uint32_t flags)
{
    vt_record_t r = { .type = VT_REC_EVENT };
    r.u.event.time_ns = T0 + t;
    r.u.event.api = (uint16_t)api;
    r.u.event.device = (int16_t)dev;
    r.u.event.ptr = ptr;
    r.u.event.size = size;
    r.u.event.reserved = reserved;
    r.u.event.aux = aux;
    r.u.event.flags = flags;
    r.u.event.tid = 7;
    feed(&r);
}

/* stacks: 3 weights, 5 kv, 7 scratch, 8 unknown (leaf = cudaMalloc) */
static void setup(vt_rules_t *rules, uint64_t total, uint64_t freeb)
{
    m = vt_model_new(rules, 15);
    vt_rec_process_t p = { 0 };
    p.pid = 42;
    p.mono_start_ns = T0;
    vt_model_set_process(m, &p);
    frame(0x10, "main");
    frame(0x20, "_ZN11llama_model12load_tensorsER18llama_model_loader");
    frame(0x30, "ggml_backend_alloc_ctx_tensors_from_buft");
    frame(0x40, "_ZN14llama_kv_cacheC1ERK11llama_model9ggml_typeS3_bbjjjj");
    frame(0x50, "ggml_gallocr_reserve_n");
    frame(0x60, "cudaMalloc");
    node(1, 0, 0x10);
    node(2, 1, 0x20);
    node(3, 2, 0x60);  /* weights: cudaMalloc <- load_tensors <- main */
    node(4, 1, 0x40);
    node(5, 4, 0x60);  /* kv */
    node(6, 1, 0x50);
    node(7, 6, 0x60);  /* scratch */
    node(8, 1, 0x60);  /* unknown: cudaMalloc <- main */
    if (total)
        device(0, total, freeb);
}

/* vt_sites_ranked's first n, by a pass for a few of many and by a sort
 * otherwise, must be the full ranking's first n, ties included (many
 * sites share bytes at peak and most bytes live). */
static void test_sites_ranked(void)
{
    enum { N = 1000 };
    static vt_site_t sites[N];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < N; i++) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        sites[i].at_peak = (x >> 8) % 4 * MiB;
        sites[i].max_live = (x >> 16) % 3 * MiB;
        sites[i].total_bytes = (x >> 24) % 5;
    }
    vt_proc_t p = { 0 };
    p.sites = sites;
    p.nsites = N;
    size_t *all = vt_sites_ranked(&p, N);
    int sorted = all != NULL;
    for (int i = 1; all && i < N; i++) {
        const vt_site_t *a = &sites[all[i - 1]], *b = &sites[all[i]];
        if (a->at_peak < b->at_peak ||
            (a->at_peak == b->at_peak && (a->max_live < b->max_live ||
                                          (a->max_live == b->max_live && (a->total_bytes < b->total_bytes ||
                                                                          (a->total_bytes == b->total_bytes &&
                                                                           all[i - 1] > all[i]))))))
            sorted = 0;
    }
    TAP_OK(sorted, "all 1000 sites ranked: bytes at peak, most live, total bytes, then index");
    static const size_t ns[] = { 0, 1, 2, 10, 124, 125, 126, 999, 1000, 5000 };
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        size_t n = ns[k] < N ? ns[k] : N;
        size_t *top = vt_sites_ranked(&p, ns[k]);
        TAP_OK(top && all && !memcmp(top, all, n * sizeof *top), "the first %zu asked of 1000: the ranking's first %zu",
               ns[k], n);
        free(top);
    }
    free(all);
}

/* The device hook: every change reaches it until it returns 1 for the
 * device, then only increases do. */
static int hook_calls, hook_answer;
static int count_hook(void *ctx, const vt_model_t *hm, int dev, uint64_t t)
{
    (void)ctx, (void)hm, (void)dev, (void)t;
    hook_calls++;
    return hook_answer;
}

static void test_hook_increases_only(vt_rules_t *rules)
{
    setup(rules, 24 * GiB, 23 * GiB);
    vt_model_set_hook(m, count_hook, NULL);
    hook_answer = 0;
    ev(1000, VT_API_cudaMalloc, 0, 0x1000000, 1 * GiB, 0, 3);
    ev(2000, VT_API_cudaFree, 0, 0x1000000, 0, 0, 3);
    TAP_EQ_U64(hook_calls, 2, "hook answering 0: an allocation and a free, two calls");
    hook_answer = 1;
    ev(3000, VT_API_cudaMalloc, 0, 0x2000000, 1 * GiB, 0, 3);
    ev(4000, VT_API_cudaFree, 0, 0x2000000, 0, 0, 3);
    ev(5000, VT_API_cudaMalloc, 0, 0x3000000, 1 * GiB, 0, 3);
    TAP_EQ_U64(hook_calls, 4, "after it answered 1: the allocations only");
    vt_model_free(m);
    m = NULL;
}

/* A new stack's match comes from per-node memos (model_sites.c stack_match);
 * it must equal vt_rules_match over the stack's frames at that moment,
 * whatever arrived before: FRAME records naming ips already judged, MODULE
 * records, nodes replaced or filled in below the highest id, chains deeper
 * than the 256-frame window. Random sequences, fixed seeds. */
static uint64_t memo_rng;
static uint32_t memo_rand(uint32_t n)
{
    memo_rng ^= memo_rng << 13;
    memo_rng ^= memo_rng >> 7;
    memo_rng ^= memo_rng << 17;
    return (uint32_t)(memo_rng % n);
}

static void test_stack_memo(void)
{
    static const char *names[] = { "ua_one", "ub_two", "_ZN11llama_model12load_tensorsER18llama_model_loader",
                                   "ggml_gallocr_reserve_n", "plain_a", "plain_b", "cudaMalloc" };
    const char *txt = "kv ua_*\nweights ub_*\nscratch module:libmine*\n";
    uint64_t checks = 0, mismatches = 0, deep = 0;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        vt_error_t err;
        vt_rules_t *rules = vt_rules_new();
        if (vt_rules_load_text(rules, "memo.rules", txt, strlen(txt), &err))
            TAP_OK(0, "memo rules load");
        m = vt_model_new(rules, 15);
        vt_rec_process_t pr = { 0 };
        pr.pid = 42;
        pr.mono_start_ns = T0;
        vt_model_set_process(m, &pr);
        device(0, 80 * GiB, 79 * GiB);
        frame(0x8000, "ua_chain_top");
        memo_rng = seed * 0x9e3779b97f4a7c15ull;
        uint32_t next_id = 1;
        uint64_t ptr = 0x100000000ull;
        for (int step = 0; step < 20000; step++) {
            uint32_t op = memo_rand(100);
            uint64_t ip = 0x1000 + 16 * (uint64_t)memo_rand(64);
            if (op < 30 || next_id == 1) {
                node(next_id, memo_rand(next_id), ip);
                next_id++;
            } else if (op < 31) {
                /* a user hit, then 299 frames no rule matches: the
                 * chain's stacks reach the hit exactly at the window's edge */
                uint32_t prev = memo_rand(next_id);
                for (int j = 0; j < 300; j++) {
                    node(next_id, prev, j ? 0x9000 + 16 * (uint64_t)memo_rand(64) : 0x8000);
                    prev = next_id++;
                }
            } else if (op < 36) {
                uint32_t k = 1 + memo_rand(next_id - 1);
                node(k, memo_rand(k), ip);
            } else if (op < 38) {
                node(next_id + 1 + memo_rand(3), memo_rand(next_id), ip);   /* a gap below it */
            } else if (op < 48) {
                frame(ip, names[memo_rand(sizeof names / sizeof names[0])]);
            } else if (op < 50) {
                vt_record_t r = { .type = VT_REC_MODULE };
                r.u.module.module_id = 1 + memo_rand(2);
                r.u.module.base = memo_rand(2) ? 0x1000 : 0x1200;
                r.u.module.size = 0x200;
                r.u.module.path.data = memo_rand(2) ? "/opt/libmine.so" : "/opt/libother.so";
                r.u.module.path.len = (uint32_t)strlen(r.u.module.path.data);
                feed(&r);
            } else {
                uint32_t stack = vt_stacks_max_id(vt_model_stacks(m)) - memo_rand(next_id);
                size_t before = vt_model_proc(m)->nsites;
                ev(1000 + (uint64_t)step, VT_API_cuMemAlloc_v2, 0, ptr, 1 * MiB, 0, stack);
                ptr += 2 * MiB;
                const vt_proc_t *p = vt_model_proc(m);
                if (p->nsites == before + 1) {
                    vt_frame_t fr[VT_MAX_STACK_DEPTH];
                    int n = vt_stacks_get(vt_model_stacks(m), stack, fr, VT_MAX_STACK_DEPTH);
                    vt_match_t want = vt_rules_match(rules, fr, n);
                    const vt_match_t *got = &p->sites[p->nsites - 1].match;
                    checks++;
                    deep += n == (int)VT_MAX_STACK_DEPTH;
                    if (got->tag != want.tag || got->rule != want.rule || got->frame != want.frame) {
                        if (!mismatches)
                            printf("# seed %llu step %d stack %u: tag/rule/frame %d/%d/%d, want %d/%d/%d\n",
                                     (unsigned long long)seed, step, stack, got->tag, got->rule, got->frame,
                                     want.tag, want.rule, want.frame);
                        mismatches++;
                    }
                }
            }
        }
        vt_model_free(m);
        vt_rules_free(rules);
    }
    TAP_EQ_U64(mismatches, 0, "memoised stack matches equal vt_rules_match (%llu new stacks, %llu at the window)",
               (unsigned long long)checks, (unsigned long long)deep);
    TAP_OK(checks > 10000 && deep > 100, "the random sequences reached many stacks and the 256-frame window");
}

/* A stack used before its node is defined: its first site and match go to
 * the maps (the site hint holds only defined stacks), and stay the stack's
 * answer after the node arrives, as if computed once per stack. */
static void test_site_before_stack(vt_rules_t *rules)
{
    setup(rules, 24 * GiB, 23 * GiB);
    ev(1000, VT_API_cudaMalloc, 0, 0x1000000, 1 * MiB, 0, 50);   /* node 50 unknown yet */
    node(50, 4, 0x60);   /* then defined: cudaMalloc <- kv cache <- main */
    ev(2000, VT_API_cudaMalloc, 0, 0x2000000, 1 * MiB, 0, 50);
    ev(3000, VT_API_cudaMallocHost, -1, 0x3000000, 1 * MiB, 0, 50);
    ev(4000, VT_API_cudaMalloc, 0, 0x4000000, 1 * MiB, 0, 5);    /* kv, defined first */
    ev(5000, VT_API_cudaMallocHost, -1, 0x5000000, 1 * MiB, 0, 5);
    const vt_proc_t *p = vt_model_proc(m);
    TAP_EQ_U64(p->nsites, 4, "stack 50: one device site and one host site; stack 5 the same");
    TAP_OK(p->nsites == 4 && p->sites[0].stack == 50 && p->sites[0].calls == 2 && p->sites[0].match.tag == VT_TAG_UNKNOWN,
           "stack 50's device site, made before its node, is found again and keeps its first match");
    TAP_OK(p->nsites == 4 && p->sites[1].stack == 50 && p->sites[1].space == VT_SPACE_HOST &&
               p->sites[1].match.tag == VT_TAG_UNKNOWN,
           "stack 50's host site takes the stack's first match, not the node's");
    TAP_OK(p->nsites == 4 && p->sites[2].match.tag == VT_TAG_KV && p->sites[3].match.tag == VT_TAG_KV &&
               p->sites[3].space == VT_SPACE_HOST,
           "stack 5's host site shares its device site's match");
    TAP_EQ_U64(vt_model_stack_tag(m, 50), VT_TAG_UNKNOWN, "stack 50's tag is its first match's");
    TAP_EQ_U64(vt_model_stack_tag(m, 5), VT_TAG_KV, "stack 5's tag");
    TAP_EQ_U64(vt_model_stack_tag(m, 7), VT_TAG_UNKNOWN, "a stack no event used has no tag");
    vt_model_free(m);
}

int main(void)
{
    vt_rules_t *rules = vt_rules_new();
    test_sites_ranked();
    test_hook_increases_only(rules);
    test_stack_memo();
    test_site_before_stack(rules);
    const vt_proc_t *p;
    const vt_dev_t *d;

    /* -- tags, peaks, sites, headroom -- */
    setup(rules, 24 * GiB, 23 * GiB);
    ev(1000, VT_API_cudaMalloc, 0, 0x1000000, 10 * GiB, 0, 3);
    ev(2000, VT_API_cudaMalloc, 0, 0x400000000, 2 * GiB, 0, 5);
    ev(3000, VT_API_cudaMalloc, 0, 0x500000000, 1 * GiB, 0, 7);
    ev(4000, VT_API_cudaFree, 0, 0x500000000, 0, 0, 7);
    ev(5000, VT_API_cudaMalloc, 0, 0x600000000, 512 * MiB, 0, 8);
    evx(6000, VT_API_cuMemGetInfo_v2, 0, 0, 9 * GiB, 0, 24 * GiB, VT_EF_SAMPLE);
    vt_model_finish(m);
    p = vt_model_proc(m);
    d = &p->devs[0];
    TAP_EQ_U64(p->ndevs, 1, "one device");
    TAP_EQ_U64(d->mem.peak_bytes, 13 * GiB, "peak tracked = weights + kv + scratch");
    TAP_EQ_U64(d->mem.peak_time_ns, 3000, "peak time since trace start");
    TAP_EQ_U64(d->mem.peak_by_tag[VT_TAG_WEIGHTS], 10 * GiB, "weights at peak");
    TAP_EQ_U64(d->mem.peak_by_tag[VT_TAG_KV], 2 * GiB, "kv at peak");
    TAP_EQ_U64(d->mem.peak_by_tag[VT_TAG_SCRATCH], 1 * GiB, "scratch at peak");
    TAP_EQ_U64(d->mem.peak_by_tag[VT_TAG_UNKNOWN], 0, "unknown at peak");
    TAP_EQ_U64(d->mem.tracked, 12 * GiB + 512 * MiB, "live at end");
    TAP_EQ_U64(d->first_free, 23 * GiB, "free at first sight");
    /* untracked = (24 - 9) - 1 (reserve) - 12.5 tracked = 1.5 GiB */
    TAP_EQ_U64(d->last_free, 9 * GiB, "last sample");
    TAP_EQ_U64(d->tracked_at_sample, 12 * GiB + 512 * MiB, "tracked at the sample");
    TAP_EQ_U64(d->min_free, 9 * GiB, "min free from the sample");
    TAP_EQ_U64(d->min_free_time_ns, 6000, "min free time");
    TAP_EQ_U64(d->free_at_peak, 10 * GiB, "free at peak = 23 - 13 (estimate)");
    TAP_OK(!d->below_margin.valid, "9 GiB free stays above 15%% of 24 GiB");
    TAP_OK(!p->tip.valid, "no spill");
    TAP_EQ_U64(p->nsites, 4, "four sites");
    for (size_t i = 0; i < p->nsites; i++) {
        const vt_site_t *s = &p->sites[i];
        if (s->stack == 7) {
            TAP_EQ_U64(s->at_peak, 1 * GiB, "scratch site held 1 GiB at the peak");
            TAP_EQ_U64(s->live, 0, "scratch site freed");
        }
        if (s->stack == 8)
            TAP_EQ_U64(s->at_peak, 0, "unknown site came after the peak");
    }
    TAP_EQ_U64(p->apis[VT_API_cudaMalloc].calls, 4, "cudaMalloc calls");
    TAP_EQ_U64(p->apis[VT_API_cudaFree].bytes, 1 * GiB, "cudaFree bytes are the freed size");
    vt_model_free(m);

    /* -- bad frees, reuse, managed freed by cudaFree -- */
    setup(rules, 24 * GiB, 23 * GiB);
    ev(1000, VT_API_cudaMalloc, 0, 0x1000, 1 * MiB, 0, 8);
    ev(2000, VT_API_cudaFree, 0, 0x1000, 0, 0, 0);
    ev(3000, VT_API_cudaFree, 0, 0x1000, 0, 0, 0);
    ev(3500, VT_API_cudaFree, 0, 0, 0, 0, 0);
    ev(4000, VT_API_cudaMalloc, 0, 0x2000, 2 * MiB, 0, 8);
    ev(5000, VT_API_cudaMalloc, 0, 0x2000, 3 * MiB, 0, 8);
    ev(6000, VT_API_cudaMallocManaged, -1, 0x9000, 4 * MiB, 0, 8);
    ev(7000, VT_API_cudaFree, 0, 0x9000, 0, 0, 0);
    ev(8000, 9999, 0, 0, 0, 0, 0);
    vt_model_finish(m);
    p = vt_model_proc(m);
    TAP_EQ_U64(p->events.unmatched_frees, 1, "double free counted, not fatal; free(NULL) ignored");
    TAP_EQ_U64(p->events.implicit_frees, 1, "alloc at a live pointer frees the old one");
    TAP_EQ_U64(p->devs[0].mem.tracked, 3 * MiB, "only the newer allocation is live");
    TAP_EQ_U64(p->managed.peak_bytes, 4 * MiB, "managed peak");
    TAP_EQ_U64(p->managed.tracked, 0, "cudaFree released managed memory");
    TAP_EQ_U64(p->events.unknown_api, 1, "unknown api counted");
    TAP_EQ_U64(p->events.frees, 2, "matched frees");
    vt_model_free(m);

    /* -- OOM, smoking gun (after-failure sample), flush-and-retry -- */
    setup(rules, 16 * GiB, 15 * GiB);
    ev(1000, VT_API_cudaMalloc, 0, 0x100000000, 8 * GiB, 0, 3);
    ev(2000, VT_API_cudaMalloc, 0, 0x300000000, 1 * GiB, 0, 7);
    ev(3000, VT_API_cudaMalloc, 0, 0x400000000, 1 * GiB, 0, 7);
    ev(4000, VT_API_cudaMalloc, 0, 0, 4 * GiB, 2, 7);   /* estimate: 5 GiB free: looks free */
    evx(4100, VT_API_cuMemGetInfo_v2, 0, 0, 5 * GiB, 0, 16 * GiB, VT_EF_SAMPLE | VT_EF_AFTER_FAILURE);
    ev(5000, VT_API_cudaFree, 0, 0x300000000, 0, 0, 0);
    ev(5100, VT_API_cudaFree, 0, 0x400000000, 0, 0, 0);
    ev(6000, VT_API_cudaMalloc, 0, 0x500000000, 4 * GiB, 0, 7);
    vt_model_finish(m);
    p = vt_model_proc(m);
    d = &p->devs[0];
    TAP_OK(p->tip.valid && p->tip_kind == VT_SPILL_OOM, "oom is the tipping event");
    TAP_EQ_U64(p->tip.bytes, 4 * GiB, "tip size");
    TAP_EQ_U64(p->tip.time_ns, 4000, "tip time");
    TAP_EQ_U64(p->tip.tag, VT_TAG_SCRATCH, "tip tag");
    TAP_EQ_U64(p->tip.dev_tracked, 10 * GiB, "tracked at the tip");
    TAP_EQ_U64(d->failed_with_free, 1, "smoking gun: failed while 5 GiB were free");
    TAP_EQ_U64(d->retry_bursts, 1, "flush-and-retry burst");
    TAP_EQ_U64(d->retry_freed_bytes, 2 * GiB, "burst freed 2 GiB");
    TAP_EQ_U64(d->first_burst_frees, 2, "two frees in the burst");
    TAP_EQ_U64(p->spill_count[VT_SPILL_OOM], 1, "one oom");
    TAP_EQ_U64(p->spill_count[VT_SPILL_OVER_CAPACITY], 0, "retry within free memory is no over_capacity");
    TAP_EQ_U64(d->failures, 1, "device failures");
    vt_model_free(m);

    /* same failure, but the driver says memory really was gone */
    setup(rules, 16 * GiB, 15 * GiB);
    ev(1000, VT_API_cudaMalloc, 0, 0x100000000, 8 * GiB, 0, 3);
    ev(4000, VT_API_cudaMalloc, 0, 0, 4 * GiB, 2, 3);
    evx(4100, VT_API_cuMemGetInfo_v2, 0, 0, 1 * GiB, 0, 16 * GiB, VT_EF_SAMPLE | VT_EF_AFTER_FAILURE);
    ev(5000, VT_API_cudaMallocHost, -1, 0x7000000000, 4 * GiB, 0, 3);
    vt_model_finish(m);
    p = vt_model_proc(m);
    d = &p->devs[0];
    TAP_EQ_U64(d->failed_with_free, 0, "no smoking gun when the after-failure sample is low");
    TAP_EQ_U64(p->tip.free_est, 1 * GiB, "tip's free comes from the after-failure sample");
    TAP_EQ_U64(p->spill_count[VT_SPILL_HOST_FALLBACK], 1, "weights landed in pinned host after the failure");
    TAP_EQ_U64(p->fallback_peak, 4 * GiB, "host fallback bytes");
    TAP_EQ_U64(p->oom_shortfall, 0, "shortfall unknown-to-estimate: 4 GiB asked, 7 GiB estimated");
    TAP_EQ_U64(p->host.peak_by_tag[VT_TAG_WEIGHTS], 4 * GiB, "offloaded weights");
    /* margin: 15% of 16 GiB = 2.4 GiB. The 8 GiB allocation left about
     * 7 GiB free; the sample found 1 GiB: 6 GiB went from outside this
     * process, and the sample is the moment, not the allocation. */
    TAP_OK(d->below_margin.valid && d->below_margin.api == VT_API_cuMemGetInfo_v2,
           "the margin crossed at the report, not by the allocation that left 7 GiB free");
    TAP_EQ_U64(d->below_margin_outside, 6 * GiB, "6 GiB gone that this process's bytes do not explain");
    vt_model_free(m);

    /* -- over_capacity and managed oversubscription -- */
    setup(rules, 8 * GiB, 7 * GiB);
    ev(1000, VT_API_cudaMalloc, 0, 0x100000000, 6 * GiB, 0, 3);
    ev(2000, VT_API_cudaMalloc, 0, 0x300000000, 2 * GiB, 0, 5);   /* 1 GiB free: over capacity */
    ev(3000, VT_API_cudaMallocManaged, -1, 0x900000000, 1 * GiB, 0, 8);
    ev(4000, VT_API_cudaFree, 0, 0x900000000, 0, 0, 0);
    ev(5000, VT_API_cudaMallocManaged, -1, 0x900000000, 1 * GiB, 0, 8);
    vt_model_finish(m);
    p = vt_model_proc(m);
    TAP_OK(p->tip.valid && p->tip_kind == VT_SPILL_OVER_CAPACITY, "over_capacity tips");
    TAP_EQ_U64(p->tip.free_est, 1 * GiB, "estimated free before it");
    TAP_EQ_U64(p->spill_count[VT_SPILL_MANAGED_OVERSUB], 2, "managed oversubscription, re-armed after dropping");
    TAP_EQ_U64(p->oversub_excess, 1 * GiB, "8 device + 1 managed over an 8 GiB card");
    TAP_EQ_U64(p->nlater, 2, "two later spill events");
    vt_model_free(m);

    /* -- VMM, rounding, external fragmentation -- */
    setup(rules, 80 * GiB, 79 * GiB);
    evx(1000, VT_API_cuMemAddressReserve, 0, 0x10000000000, 32 * GiB, 0, 0, 0);
    evx(2000, VT_API_cuMemCreate, 0, 0xa1, 2 * GiB, 0, 0, 0);
    evx(3000, VT_API_cuMemMap, 0, 0x10000000000, 2 * GiB, 0, 0xa1, 0);
    evx(4000, VT_API_cudaMallocPitch, 0, 0x20000000000, 100 * MiB, 128 * MiB, 0, 0);
    evx(5000, VT_API_cudaMalloc, 0, 0x20010000000, 64 * MiB, 0, 0, 0);   /* 128 MiB after the pitch one: a hole */
    evx(6000, VT_API_cudaFree, 0, 0x20000000000, 0, 0, 0, 0);
    vt_model_finish(m);
    p = vt_model_proc(m);
    d = &p->devs[0];
    TAP_EQ_U64(d->mem.peak_bytes, 2 * GiB + 164 * MiB, "VMM physical counts as device memory");
    TAP_EQ_U64(d->peak_vmm_physical, 2 * GiB, "vmm physical at peak");
    TAP_EQ_U64(d->peak_va_reserved, 32 * GiB, "VA reserved at peak");
    TAP_EQ_U64(d->peak_va_mapped, 2 * GiB, "VA mapped at peak");
    TAP_EQ_U64(d->peak_rounding_waste, 28 * MiB, "pitch rounding waste");
    TAP_OK(d->frag_computed, "external fragmentation measured at peak");
    TAP_EQ_U64(d->frag_live_allocs, 3, "three live ranges at peak");
    TAP_EQ_U64(d->frag_largest_hole, 156 * MiB, "largest hole: between the two allocations");
    TAP_EQ_U64(d->frag_holes, 156 * MiB, "a gap larger than the card separates regions, it is no hole");
    TAP_EQ_U64(d->frag_span, 2 * GiB + 256 * MiB + 64 * MiB, "span: sum of the two regions");
    vt_model_free(m);

    /* -- VMM: cuMemRelease right after cuMemMap (ggml): alive until unmapped -- */
    setup(rules, 80 * GiB, 79 * GiB);
    evx(1000, VT_API_cuMemAddressReserve, 0, 0x10000000000, 1 * GiB, 0, 0, 0);
    evx(2000, VT_API_cuMemCreate, 0, 0xa1, 64 * MiB, 0, 0, 0);
    evx(3000, VT_API_cuMemMap, 0, 0x10000000000, 32 * MiB, 0, 0xa1, 0);
    evx(3500, VT_API_cuMemMap, 0, 0x10002000000, 32 * MiB, 0, 0xa1, 0);   /* two mappings of one handle */
    evx(4000, VT_API_cuMemRelease, 0, 0xa1, 0, 0, 0, 0);
    p = vt_model_proc(m);
    d = &p->devs[0];
    TAP_EQ_U64(d->mem.tracked, 64 * MiB, "released but mapped: still live");
    TAP_EQ_U64(p->events.frees, 1, "the release is a matched free");
    evx(4500, VT_API_cuMemRelease, 0, 0xa1, 0, 0, 0, 0);
    TAP_EQ_U64(p->events.unmatched_frees, 1, "a second release of the handle is unmatched");
    evx(5000, VT_API_cuMemCreate, 0, 0xa1, 2 * MiB, 0, 0, 0);   /* the handle value reused */
    TAP_EQ_U64(d->mem.tracked, 66 * MiB, "a reused handle value is a new allocation");
    evx(6000, VT_API_cuMemUnmap, 0, 0x10000000000, 32 * MiB, 0, 0, 0);
    TAP_EQ_U64(d->mem.tracked, 66 * MiB, "one mapping left: still live");
    evx(7000, VT_API_cuMemUnmap, 0, 0x10002000000, 32 * MiB, 0, 0, 0);
    TAP_EQ_U64(d->mem.tracked, 2 * MiB, "last unmap frees the physical memory");
    evx(8000, VT_API_cuMemRelease, 0, 0xa1, 0, 0, 0, 0);
    TAP_EQ_U64(d->mem.tracked, 0, "an unmapped handle goes at release");
    TAP_EQ_U64(d->vmm_physical, 0, "no physical memory left");
    TAP_EQ_U64(d->va_mapped, 0, "nothing mapped");
    vt_model_finish(m);
    TAP_EQ_U64(d->mem.peak_bytes, 66 * MiB, "peak counts the released-but-mapped handle");
    vt_model_free(m);

    /* -- another process's memory mapped here (PTR_IMPORT) -- */
    setup(rules, 24 * GiB, 23 * GiB);
    evx(1000, VT_API_cuIpcOpenMemHandle_v2, 0, 0x300000000000, 0, 0, 1, 0);
    evx(1500, VT_API_cuIpcOpenMemHandle_v2, 0, 0x300000000000, 0, 0, 1, 0);   /* opened again: one address */
    evx(2000, VT_API_cuIpcCloseMemHandle, 0, 0x300000000000, 0, 0, 0, 0);
    p = vt_model_proc(m);
    d = &p->devs[0];
    TAP_EQ_U64(p->events.imported_pointers, 2, "two opens counted");
    TAP_EQ_U64(p->events.imported_pointer_frees, 1, "a close drops one reference");
    TAP_EQ_U64(d->mem.tracked, 0, "an import holds nothing here");
    /* A teardown unmapped the rest unseen; this process's own memory then
     * got the address: its free is its own. */
    ev(3000, VT_API_cudaMalloc, 0, 0x300000000000, 1 * GiB, 0, 8);
    ev(4000, VT_API_cudaFree, 0, 0x300000000000, 0, 0, 8);
    TAP_EQ_U64(p->events.frees, 1, "the free of the allocation at that address is its own");
    TAP_EQ_U64(p->events.imported_pointer_frees, 1, "and no import's release");
    TAP_EQ_U64(d->mem.tracked, 0, "nothing live");
    evx(5000, VT_API_cuMemPoolImportPointer, 0, 0x300000400000, 0, 0, 0xb1, 0);
    ev(6000, VT_API_cuMemFreeAsync, 0, 0x300000400000, 0, 0, 0);
    TAP_EQ_U64(p->events.unmatched_frees, 0, "a pool pointer's import freed: no unknown pointer");
    vt_model_free(m);

    vt_rules_free(rules);
    test_time_grain();
    return tap_done();
}
