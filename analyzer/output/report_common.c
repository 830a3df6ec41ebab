/* Small helpers shared by the text and JSON printers (see report.h). */
#include "report.h"

#include <cuda.h>
#include <driver_types.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"

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
    uint64_t first, at_peak, max_live, total_bytes;
    size_t i;
} site_key_t;

static inline uint64_t order_key(const vt_site_t *s, int order)
{
    switch (order) {
    case VT_ORDER_BYTES: return s->total_bytes;
    case VT_ORDER_CALLS: return s->calls;
    case VT_ORDER_LIVE: return s->live;
    case VT_ORDER_FREES: return s->frees;
    default: return s->at_peak;
    }
}

static inline site_key_t key_of(const vt_proc_t *p, size_t i, int order)
{
    const vt_site_t *s = &p->sites[i];
    return (site_key_t){ order_key(s, order), s->at_peak, s->max_live, s->total_bytes, i };
}

static inline int key_before(const site_key_t *x, const site_key_t *y)
{
    if (x->first != y->first)
        return x->first > y->first;
    if (x->at_peak != y->at_peak)
        return x->at_peak > y->at_peak;
    if (x->max_live != y->max_live)
        return x->max_live > y->max_live;
    if (x->total_bytes != y->total_bytes)
        return x->total_bytes > y->total_bytes;
    return x->i < y->i;
}

/* Site i ranks before site j. */
static inline int site_before(const vt_proc_t *p, size_t i, size_t j, int order)
{
    site_key_t a = key_of(p, i, order), b = key_of(p, j, order);
    return key_before(&a, &b);
}

/* Every site's index in rank order: a bottom-up merge sort of the keys
 * (keys are distinct, the index breaking ties, so stability is moot). */
static size_t *rank_all(const vt_proc_t *p, int order)
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
        a[i] = key_of(p, i, order);
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
    return vt_sites_ordered(p, n, VT_ORDER_PEAK);
}

size_t *vt_sites_ordered(const vt_proc_t *p, size_t n, int order)
{
    if (n > p->nsites)
        n = p->nsites;
    if (n > p->nsites / 8)
        return rank_all(p, order);
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    if (!idx)
        return NULL;
    /* A few of many (the text report's top 10 of 100k sites): keep the
     * best n seen in order; a site that does not beat the n-th costs one
     * comparison. key_before is a total order (ties go by index), so this
     * is exactly the sorted list's first n. */
    size_t have = 0;
    for (size_t i = 0; i < p->nsites && n; i++) {
        if (have == n && !site_before(p, i, idx[n - 1], order))
            continue;
        size_t k = have < n ? have++ : n - 1;
        while (k > 0 && site_before(p, i, idx[k - 1], order)) {
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

int vt_telling_frame(const vt_frame_t *fr, int n, int matched_frame)
{
    if (matched_frame >= 0 && matched_frame < n)
        return matched_frame;
    for (int i = 0; i < n; i++)
        if (fr[i].display[0] && strncmp(fr[i].module_base, "libcuda", 7))
            return i;
    return n > 0 ? 0 : -1;
}

const char *vt_base(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : path ? path : "";
}

const char *vt_proc_degraded_note(const vt_proc_t *p)
{
    switch (p->degraded & (VT_DEGRADED_NO_ZSTD | VT_DEGRADED_NO_LIBUNWIND)) {
    case VT_DEGRADED_NO_ZSTD:
        return "the shim could not load libzstd.so.1: the trace is uncompressed (a larger file, the same records).";
    case VT_DEGRADED_NO_LIBUNWIND:
        return "the shim could not load libunwind.so.8: frames its own unwinder could not follow were unwound by "
               "glibc's backtrace().";
    case VT_DEGRADED_NO_ZSTD | VT_DEGRADED_NO_LIBUNWIND:
        return "the shim could not load libzstd.so.1 (the trace is uncompressed: a larger file, the same records) "
               "nor libunwind.so.8 (frames its own unwinder could not follow were unwound by glibc's backtrace()).";
    default:
        return NULL;
    }
}

static const struct {
    const char *key, *text;
} lost_reasons[VT_LOST_REASONS] = {
    [VT_LOST_RING_FULL] = { "buffer_full", "buffer full" },
    [VT_LOST_IN_HANDLER] = { "signal_handler_in_shim", "from a signal handler inside the shim" },
    [VT_LOST_UNRETURNED] = { "call_not_returned", "call not returned at exit" },
    [VT_LOST_UNWRITTEN] = { "not_written", "not written: disk full or write error" },
};

const char *vt_lost_reason_key(int reason)
{
    return reason >= 0 && reason < VT_LOST_REASONS ? lost_reasons[reason].key : NULL;
}

const char *vt_lost_reason_text(int reason)
{
    return reason >= 0 && reason < VT_LOST_REASONS ? lost_reasons[reason].text : NULL;
}

/* END's how (vt_end_how): its JSON key and the words "live when the
 * process ..." end with. */
static const struct {
    const char *key, *ended;
} end_hows[] = {
    [VT_END_EXIT] = { "exit", "exited" },
    [VT_END_EXEC] = { "exec", "replaced its image (exec)" },
    [VT_END_EXIT_NOW] = { "_exit", "exited through _exit (no exit handlers)" },
    [VT_END_ABORT] = { "abort", "aborted (abort(): SIGABRT)" },
};

const char *vt_end_how_name(uint64_t how)
{
    return how < sizeof end_hows / sizeof end_hows[0] ? end_hows[how].key : NULL;
}

const char *vt_end_how_key(const vt_proc_t *p)
{
    if (!p->ended)
        return NULL;
    return vt_end_how_name(p->end_how) ? vt_end_how_name(p->end_how) : "unknown";
}

const char *vt_end_how_words(const vt_proc_t *p)
{
    return p->end_how < sizeof end_hows / sizeof end_hows[0] ? end_hows[p->end_how].ended
                                                             : "ended, in a way this version cannot name";
}

/* The names of the results an allocation reports most; the numbers are
 * the toolkit's own (cuda.h, driver_types.h), so a renumbering would not
 * compile silently wrong. Others print as their number. */
const char *vt_result_name(unsigned api, uint32_t result)
{
    int runtime = !strncmp(vt_api_name(api), "cuda", 4);
    static const struct { uint32_t code; const char *driver, *runtime; } names[] = {
        { CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "cudaErrorInvalidValue" },
        { CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation" },
        { CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "cudaErrorInitializationError" },
        { CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "cudaErrorNotSupported" },
        { CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "cudaErrorIllegalAddress" },
        { CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "cudaErrorCudartUnloading" },
        { CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "cudaErrorNoDevice" },
        { CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "cudaErrorDeviceUninitialized" },
        { CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "cudaErrorLaunchFailure" },
    };
    _Static_assert(CUDA_ERROR_OUT_OF_MEMORY == (int)cudaErrorMemoryAllocation, "driver and runtime OOM differ");
    _Static_assert(CUDA_ERROR_OUT_OF_MEMORY == VT_RESULT_OUT_OF_MEMORY, "the model's out of memory is not cuda.h's");
    _Static_assert(CUDA_ERROR_INVALID_VALUE == (int)cudaErrorInvalidValue, "driver and runtime codes differ");
    _Static_assert(CUDA_ERROR_NOT_SUPPORTED == (int)cudaErrorNotSupported, "driver and runtime codes differ");
    _Static_assert(CUDA_ERROR_ILLEGAL_ADDRESS == (int)cudaErrorIllegalAddress, "driver and runtime codes differ");
    _Static_assert(CUDA_ERROR_DEINITIALIZED == (int)cudaErrorCudartUnloading, "driver and runtime codes differ");
    _Static_assert(CUDA_ERROR_NO_DEVICE == (int)cudaErrorNoDevice, "driver and runtime codes differ");
    _Static_assert(CUDA_ERROR_INVALID_CONTEXT == (int)cudaErrorDeviceUninitialized, "driver and runtime codes differ");
    _Static_assert(CUDA_ERROR_LAUNCH_FAILED == (int)cudaErrorLaunchFailure, "driver and runtime codes differ");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].code == result)
            return runtime ? names[i].runtime : names[i].driver;
    return NULL;
}

const char *vt_site_where(const vt_site_t *s, char buf[32])
{
    if (s->space == VT_SPACE_DEVICE)
        snprintf(buf, 32, "GPU %d", s->device);
    else
        snprintf(buf, 32, "%s", s->space == VT_SPACE_HOST ? "pinned host" : "managed");
    return buf;
}

const char *vt_decided_name(int decided)
{
    static const char *const names[] = {
        [VT_DECIDED_NOTHING] = "nothing",
        [VT_DECIDED_USER_RULE] = "user_rule",
        [VT_DECIDED_GGML_MARK] = "ggml_mark",
        [VT_DECIDED_BUILTIN_RULE] = "builtin_rule",
    };
    _Static_assert(sizeof names / sizeof *names == VT_DECIDED_BUILTIN_RULE + 1, "a name per enum vt_decided");
    return decided >= 0 && decided <= VT_DECIDED_BUILTIN_RULE ? names[decided] : "nothing";
}

void vt_site_evidence(const vt_model_t *m, const vt_site_t *s, char *buf, size_t size)
{
    const vt_rules_t *rules = vt_model_rules(m);
    char rule[900];
    const char *usage = vt_ggml_usage_name(s->ggml_usage);
    switch (s->decided) {
    case VT_DECIDED_GGML_MARK:
        vt_rules_describe(rules, &s->stack_match, rule, sizeof rule);
        if (s->stack_match.rule >= 0 && s->stack_match.tag != s->match.tag)
            snprintf(buf, size, "ggml mark: %s (disagrees with rule: %s)", usage, rule);
        else
            snprintf(buf, size, "ggml mark: %s", usage);
        return;
    case VT_DECIDED_USER_RULE:
    case VT_DECIDED_BUILTIN_RULE:
        vt_rules_describe(rules, &s->match, rule, sizeof rule);
        if (s->ggml_usage)
            snprintf(buf, size, "rule: %s (disagrees with ggml mark: %s)", rule, usage);
        else
            snprintf(buf, size, "rule: %s", rule);
        return;
    default:
        snprintf(buf, size, "none (untagged: write a rule for a frame below)");
    }
}

void vt_print_frame(FILE *o, const char *indent, int i, const vt_frame_t *fr, int width)
{
    char name[1024], where[512] = "", shown[1024], noargs[1024];
    int w = 0;
    if (fr->display[0])
        snprintf(name, sizeof name, "%s", vt_text(fr->display));
    else
        snprintf(name, sizeof name, "0x%" PRIx64, VT_IP_ADDR(fr->ip));
    if (fr->line)
        w = snprintf(where, sizeof where, "  %s:%" PRIu32, vt_text(vt_base(fr->file)), fr->line);
    if (fr->module_base[0] && w >= 0 && (size_t)w < sizeof where)
        snprintf(where + w, sizeof where - (size_t)w, "  [%s]", vt_text(fr->module_base));
    const char *fit = name, *at = where;
    char where_fit[512];
    long lead = (long)strlen(indent) + (i < 100 ? 4 : 5);
    long room = (long)width - lead - (long)vt_fit_cols(where, strlen(where));
    /* Long file and module names must not push the line past the width:
     * the name keeps at least 24 columns and the location gives way,
     * eliding its middle ("[libmy…cuda.so]" still names the module). */
    if (width && room < 24) {
        /* File and module each give way by their middle, keeping the
         * line number and the brackets: the module up to 28 columns, the
         * file what is left, each at least 8. */
        char file[256], mod[256], ef[256], em[256], line[16] = "";
        snprintf(file, sizeof file, "%s", fr->line ? vt_text(vt_base(fr->file)) : "");
        snprintf(mod, sizeof mod, "%s", fr->module_base[0] ? vt_text(fr->module_base) : "");
        if (fr->line)
            snprintf(line, sizeof line, ":%" PRIu32, fr->line);
        long fixed = (fr->line ? 2 + (long)strlen(line) : 0) + (mod[0] ? 4 : 0);
        long avail = (long)width - lead - 24 - fixed;
        long mod_cols = mod[0] ? (long)vt_fit_cols(mod, strlen(mod)) : 0;
        long mod_keep = mod_cols < 28 ? mod_cols : 28;
        if (fr->line && avail - mod_keep < 8)
            mod_keep = avail - 8;
        long file_keep = avail - (mod[0] ? (mod_keep < 8 ? 8 : mod_keep) : 0);
        const char *f2 = fr->line ? vt_fit_elide(ef, sizeof ef, file, file_keep > 8 ? (size_t)file_keep : 8) : "";
        const char *m2 = mod[0] ? vt_fit_elide(em, sizeof em, mod, mod_keep > 8 ? (size_t)mod_keep : 8) : "";
        int n = fr->line ? snprintf(where_fit, sizeof where_fit, "  %s%s", f2, line) : 0;
        if (mod[0] && n >= 0 && (size_t)n < sizeof where_fit)
            snprintf(where_fit + n, sizeof where_fit - (size_t)n, "  [%s]", m2);
        at = where_fit;
        room = (long)width - lead - (long)vt_fit_cols(at, strlen(at));
    }
    if (width && vt_fit_cols(name, strlen(name)) > (size_t)(room > 0 ? room : 0)) {
        fit = vt_fit_elide_args(noargs, sizeof noargs, name);
        fit = vt_fit_elide(shown, sizeof shown, fit, room < 24 ? 24 : (size_t)room);
    }
    fprintf(o, "%s#%-2d %s%s\n", indent, i, fit, at);
}

int vt_site_matches(const vt_model_t *m, const vt_site_t *s, const char *function)
{
    if (!function)
        return 1;
    vt_frame_t fr[VT_MAX_STACK_DEPTH];
    int n = vt_stacks_get(vt_model_stacks(m), s->stack, fr, VT_MAX_STACK_DEPTH);
    for (int i = 0; i < n; i++)
        if (strstr(fr[i].display, function))
            return 1;
    return 0;
}

