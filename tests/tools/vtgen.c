/* vtgen: writes a vramtrace trace from a small text script, so tests get
 * traces with exact numbers without a GPU or the shim.
 *
 *   vtgen [-o OUT] [--no-checksum | --stored] [SCRIPT]
 *       SCRIPT defaults to stdin, OUT to stdout. The file is what the shim
 *       writes: format version 3 with zstd chunks or, with --stored, version
 *       4 with chunks stored uncompressed (a shim without libzstd).
 *       --no-checksum leaves the zstd content checksum out, so damage to a
 *       chunk reaches the record decoder instead of failing the checksum
 *       (for mutation tests).
 *
 * SCRIPT FORMAT: one directive per line; `#` starts a comment (at the start
 * of a word, outside quotes). Words are KEY=VALUE or positional. Strings are
 * bare (up to whitespace) or "quoted" with \" \\ \n \t \xNN escapes. Numbers
 * are decimal or 0x hex; sizes also take a KiB MiB GiB TiB suffix and may
 * have a fraction (23.5GiB). Times (t=) are ns since the process start and
 * may be negative. HEX is a run of hex digit pairs (may be empty).
 *
 *   process pid=1 ppid=0 exe=/usr/bin/test argv=a,b,"c d" host=localhost
 *           shim=0.1.0 start=1000000000 wall=1700000000000000000
 *           [env=NAME=V,... time_res=0 degraded=0]
 *       The header's PROCESS record (start = mono_start_ns). Optional: the
 *       values shown are the defaults, used if the first record comes first;
 *       env= (the placement variables) writes time_res and degraded first.
 *       After the header is written it lands in the current chunk instead.
 *   device ORD total=SIZE free=SIZE name=S uuid=HEX(16 bytes) t=0
 *   module ID base=N size=SIZE path=S build_id=HEX
 *   frame IP module=0 offset=0 function=S
 *   stack ID parent=0 ip=N
 *   event t=T api=NAME|#ID tid=1 dev=0 ptr=0 size=0 reserved=0 aux=0
 *         flags=0|NAME|NAME... result=0 stack=0
 *       NAME is an entrypoints.def name (cudaMalloc, cuMemAlloc_v2, ...);
 *       flag names: sample runtime ptsz via_procaddr via_dlsym
 *       first_on_device after_failure at_peak host_located late
 *       other_context, or a number.
 *   dropped t=T total=N stacks_lost=N
 *   note t=T text=S
 *   end t=T events=N dropped=N
 *   range t=T tid=1 depth=0 push|pop name=S
 *   ggml_buffer t=T buffer=N usage=WEIGHTS|COMPUTE|ANY|N base=N size=SIZE name=S
 *               [host=0|1|2]
 *       ggml's mark on a buffer (preload/ggml_buffers.c); t is exact; host
 *       (1 device, 2 host memory) only when given, as older shims wrote none.
 *   ggml_tensor t=T buffer=N data=N nbytes=SIZE name=S [rows=N]
 *       rows (ggml_nrows) only when given, as older shims wrote none.
 *   ggml_free t=T buffer=N
 *   ggml_lost t=T lost=N
 *   record type=N payload=HEX [in=header]
 *       Any record, e.g. a type the reader does not know.
 *   chunk [seq=N] [magic=N] [zsize=N] [rawsize=N]
 *       Ends the current chunk (written even if empty). The options write a
 *       wrong value into its header; later chunks keep counting seq truly.
 *       Records still pending at the end of the script form a last chunk.
 *   bytes HEX
 *       Raw bytes into the file here (pending records are flushed first).
 *   stream HEX
 *       Raw bytes into the current chunk's record stream, unframed (for a
 *       record whose length lies, say).
 *   prelude [magic=S] [version=N] [flags=N] [header_len=N]
 *       Overrides prelude fields; must come before any chunk.
 *
 * Every record line also takes extra=HEX (appended to the payload: readers
 * must ignore it, except after a version 3 EVENT, whose record holds
 * events only) and cut=N (drops the payload's last N bytes: a malformed
 * record). Each event line is a record of its own. Errors name the line
 * and exit 1.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracegen.h"
#include "vramtrace/entrypoints.h"

#define MAX_WORDS 64

typedef struct word {
    char *key;   /* NULL for a positional word */
    char *val;   /* raw text, quotes and escapes still in */
    int used;
} word_t;

typedef struct line {
    word_t w[MAX_WORDS];
    int n;
    unsigned lineno;
} line_t;

static const char *script_name = "<stdin>";
static unsigned cur_line;

static void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fatal(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "vtgen: %s:%u: ", script_name, cur_line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* ---- tokenizing -------------------------------------------------------- */

/* Splits s in place. A word ends at whitespace outside quotes. */
static void split(char *s, line_t *l)
{
    l->n = 0;
    for (;;) {
        while (isspace((unsigned char)*s))
            s++;
        if (!*s || *s == '#')
            return;
        if (l->n == MAX_WORDS)
            fatal("more than %d words", MAX_WORDS);
        char *start = s;
        int q = 0;
        while (*s && (q || !isspace((unsigned char)*s))) {
            if (*s == '\\' && q && s[1])
                s++;
            else if (*s == '"')
                q = !q;
            s++;
        }
        if (q)
            fatal("unterminated string");
        if (*s)
            *s++ = '\0';
        word_t *w = &l->w[l->n++];
        char *eq = strchr(start, '=');
        /* `KEY=` only when the part before '=' is a plain identifier. */
        int ident = eq && eq > start;
        for (char *p = start; ident && p < eq; p++)
            ident = isalnum((unsigned char)*p) || *p == '_';
        if (ident) {
            *eq = '\0';
            *w = (word_t){ start, eq + 1, 0 };
        } else {
            *w = (word_t){ NULL, start, 0 };
        }
    }
}

static word_t *find(line_t *l, const char *key)
{
    for (int i = 1; i < l->n; i++)
        if (l->w[i].key && !strcmp(l->w[i].key, key)) {
            l->w[i].used = 1;
            return &l->w[i];
        }
    return NULL;
}

static const char *positional(line_t *l, int nth, const char *what)
{
    int seen = 0;
    for (int i = 1; i < l->n; i++)
        if (!l->w[i].key && seen++ == nth) {
            l->w[i].used = 1;
            return l->w[i].val;
        }
    fatal("%s: missing %s", l->w[0].val, what);
}

static void check_all_used(line_t *l)
{
    for (int i = 1; i < l->n; i++)
        if (!l->w[i].used)
            fatal("%s: unexpected '%s%s%s'", l->w[0].val, l->w[i].key ? l->w[i].key : "",
                  l->w[i].key ? "=" : "", l->w[i].val);
}

/* ---- values ------------------------------------------------------------ */

static int64_t parse_int(const char *s, const char *what)
{
    int neg = *s == '-';
    const char *p = neg ? s + 1 : s;
    char *end;
    errno = 0;
    double frac = -1;
    uint64_t v;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        v = strtoull(p + 2, &end, 16);
        if (end == p + 2)
            fatal("%s: bad number '%s'", what, s);
    } else {
        v = strtoull(p, &end, 10);
        if (end == p)
            fatal("%s: bad number '%s'", what, s);
        if (*end == '.') {
            frac = strtod(p, &end);
        }
    }
    if (errno)
        fatal("%s: number out of range '%s'", what, s);
    static const struct { const char *sfx; uint64_t mul; } sfx[] = {
        { "", 1 }, { "B", 1 }, { "KiB", 1ull << 10 }, { "MiB", 1ull << 20 }, { "GiB", 1ull << 30 }, { "TiB", 1ull << 40 },
    };
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        if (strcmp(end, sfx[i].sfx))
            continue;
        if (frac >= 0)
            v = (uint64_t)(frac * (double)sfx[i].mul);
        else if (v > UINT64_MAX / sfx[i].mul)
            fatal("%s: number out of range '%s'", what, s);
        else
            v *= sfx[i].mul;
        if (neg && v > (uint64_t)INT64_MAX)
            fatal("%s: number out of range '%s'", what, s);
        return neg ? -(int64_t)v : (int64_t)v;
    }
    fatal("%s: bad number '%s'", what, s);
}

static uint64_t num(line_t *l, const char *key, uint64_t dflt)
{
    word_t *w = find(l, key);
    return w ? (uint64_t)parse_int(w->val, key) : dflt;
}

static int64_t snum(line_t *l, const char *key, int64_t dflt)
{
    word_t *w = find(l, key);
    return w ? parse_int(w->val, key) : dflt;
}

static uint64_t need_num(line_t *l, const char *key)
{
    word_t *w = find(l, key);
    if (!w)
        fatal("%s: missing %s=", l->w[0].val, key);
    return (uint64_t)parse_int(w->val, key);
}

static int hexval(int c)
{
    return isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
}

/* Decodes one string item starting at *sp (quoted or bare up to stop chars)
 * into out; advances *sp past it. */
static void parse_item(const char **sp, tg_buf_t *out, const char *stop)
{
    const char *s = *sp;
    if (*s != '"') {
        size_t n = strcspn(s, stop);
        tg_buf_bytes(out, s, n);
        *sp = s + n;
        return;
    }
    for (s++; *s && *s != '"'; s++) {
        char c = *s;
        if (c == '\\') {
            c = *++s;
            if (c == 'n')
                c = '\n';
            else if (c == 't')
                c = '\t';
            else if (c == 'x' && hexval((unsigned char)s[1]) >= 0 && hexval((unsigned char)s[2]) >= 0) {
                c = (char)(hexval((unsigned char)s[1]) * 16 + hexval((unsigned char)s[2]));
                s += 2;
            } else if (c != '"' && c != '\\')
                fatal("bad escape '\\%c'", c);
        }
        tg_buf_bytes(out, &c, 1);
    }
    if (*s != '"')
        fatal("unterminated string");
    *sp = s + 1;
}

/* A string value: the word's text decoded, or dflt. Caller frees. */
static tg_buf_t str(line_t *l, const char *key, const char *dflt)
{
    tg_buf_t b = { 0 };
    word_t *w = find(l, key);
    if (!w) {
        tg_buf_bytes(&b, dflt, strlen(dflt));
        return b;
    }
    const char *s = w->val;
    parse_item(&s, &b, "");
    if (*s)
        fatal("%s: junk after string", key);
    return b;
}

static tg_buf_t hex(const char *s, const char *what)
{
    tg_buf_t b = { 0 };
    size_t n = strlen(s);
    if (n % 2)
        fatal("%s: odd number of hex digits", what);
    for (size_t i = 0; i < n; i += 2) {
        int hi = hexval((unsigned char)s[i]), lo = hexval((unsigned char)s[i + 1]);
        if (hi < 0 || lo < 0)
            fatal("%s: bad hex '%s'", what, s);
        uint8_t byte = (uint8_t)(hi * 16 + lo);
        tg_buf_bytes(&b, &byte, 1);
    }
    return b;
}

static void put_strkey(tg_buf_t *p, line_t *l, const char *key, const char *dflt)
{
    tg_buf_t s = str(l, key, dflt);
    tg_buf_str(p, (const char *)s.p, s.len);
    tg_buf_free(&s);
}

static unsigned api_id(const char *s)
{
    if (s[0] == '#')
        return (unsigned)parse_int(s + 1, "api");
    for (unsigned i = 0; i < VT_API_COUNT; i++)
        if (!strcmp(vt_api_info(i)->name, s))
            return i;
    fatal("unknown api '%s' (use #ID for a raw id)", s);
}

/* Its own table, not the reader's: a name paired with the wrong bit in
 * one of them shows as a dump that does not give back the script's flag
 * (tests/t/20-reader.t). */
static uint64_t flags_value(const char *s)
{
    static const struct {
        uint32_t flag;
        const char *name;
    } flags[] = {
        { VT_EF_SAMPLE, "sample" },
        { VT_EF_RUNTIME, "runtime" },
        { VT_EF_PTSZ, "ptsz" },
        { VT_EF_VIA_PROCADDR, "via_procaddr" },
        { VT_EF_VIA_DLSYM, "via_dlsym" },
        { VT_EF_FIRST_ON_DEVICE, "first_on_device" },
        { VT_EF_AFTER_FAILURE, "after_failure" },
        { VT_EF_AT_PEAK, "at_peak" },
        { VT_EF_HOST_LOCATED, "host_located" },
        { VT_EF_LATE, "late" },
        { VT_EF_OTHER_CONTEXT, "other_context" },
    };
    uint64_t v = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save, *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
        size_t i = 0;
        while (i < sizeof flags / sizeof flags[0] && strcmp(t, flags[i].name))
            i++;
        v |= i < sizeof flags / sizeof flags[0] ? flags[i].flag : (uint64_t)parse_int(t, "flags");
    }
    return v;
}

/* ---- directives -------------------------------------------------------- */

static tg_t G;
static int have_process;

static uint64_t abs_time(line_t *l, const char *key)
{
    return G.start_ns + (uint64_t)snum(l, key, 0);
}

static void finish_record(line_t *l, uint8_t type, tg_buf_t *p);

/* A comma list of strings (argv=, env=): its count, then each string;
 * absent, the list dflt (one item, or none when empty). */
static void put_list(tg_buf_t *p, word_t *w, const char *dflt, const char *what)
{
    tg_buf_t items = { 0 };
    uint64_t count = 0;
    const char *s = w ? w->val : dflt;
    if (*s) {
        for (;;) {
            tg_buf_t one = { 0 };
            parse_item(&s, &one, ",");
            tg_buf_str(&items, (const char *)one.p, one.len);
            tg_buf_free(&one);
            count++;
            if (*s != ',')
                break;
            s++;
        }
        if (*s)
            fatal("%s: junk after list", what);
    }
    tg_buf_varint(p, count);
    tg_buf_bytes(p, items.p, items.len);
    tg_buf_free(&items);
}

static void emit_process(line_t *l)
{
    tg_buf_t p = { 0 };
    uint64_t start = num(l, "start", 1000000000ull);
    tg_buf_varint(&p, num(l, "pid", 1));
    tg_buf_varint(&p, num(l, "ppid", 0));
    tg_buf_varint(&p, start);
    tg_buf_varint(&p, num(l, "wall", 1700000000000000000ull));
    put_strkey(&p, l, "shim", "0.1.0");
    put_strkey(&p, l, "exe", "/usr/bin/test");
    put_strkey(&p, l, "host", "localhost");
    put_list(&p, find(l, "argv"), "test", "argv");
    word_t *env = find(l, "env");
    if (env) {
        tg_buf_varint(&p, num(l, "time_res", 0));
        tg_buf_varint(&p, num(l, "degraded", 0));
        put_list(&p, env, "", "env");
    }
    if (!G.header_written)
        tg_set_start(&G, start);
    have_process = 1;
    finish_record(l, VT_REC_PROCESS, &p);
}

/* Applies extra=/cut= and writes the record. */
static void finish_record(line_t *l, uint8_t type, tg_buf_t *p)
{
    word_t *w = find(l, "extra");
    if (w) {
        tg_buf_t x = hex(w->val, "extra");
        tg_buf_bytes(p, x.p, x.len);
        tg_buf_free(&x);
    }
    uint64_t cut = num(l, "cut", 0);
    if (cut > p->len)
        fatal("cut=%llu but the payload has %zu bytes", (unsigned long long)cut, p->len);
    p->len -= cut;
    check_all_used(l);
    tg_record(&G, type, p->p ? p->p : (const uint8_t *)"", p->len);
    tg_buf_free(p);
}

static void ensure_body(void)
{
    if (!have_process) {
        static char name[] = "process";
        line_t none = { .n = 1, .w = { { NULL, name, 1 } } };
        emit_process(&none);
    }
    tg_write_header(&G);
}

static void do_line(line_t *l)
{
    const char *d = l->w[0].val;
    tg_buf_t p = { 0 };
    l->w[0].used = 1;
    if (!strcmp(d, "process")) {
        emit_process(l);
        return;
    }
    if (!strcmp(d, "prelude")) {
        if (G.header_written)
            fatal("prelude must come before any chunk or record");
        word_t *w = find(l, "magic");
        if (w) {
            tg_buf_t m = str(l, "magic", "");
            memset(G.magic, 0, sizeof G.magic);
            memcpy(G.magic, m.p, m.len < 8 ? m.len : 8);
            tg_buf_free(&m);
        }
        G.version = (uint16_t)num(l, "version", G.version);
        G.flags = (uint16_t)num(l, "flags", G.flags);
        if (find(l, "header_len")) {
            G.has_header_len = 1;
            G.header_len = (uint32_t)num(l, "header_len", 0);
        }
        check_all_used(l);
        return;
    }
    word_t *in = !strcmp(d, "record") ? find(l, "in") : NULL;
    if (in) {
        if (strcmp(in->val, "header"))
            fatal("record: in= takes only 'header'");
        if (G.header_written)
            fatal("record in=header after the header was written");
        tg_buf_t x = hex(find(l, "payload") ? find(l, "payload")->val : "", "payload");
        tg_buf_bytes(&p, x.p, x.len);
        tg_buf_free(&x);
        finish_record(l, (uint8_t)need_num(l, "type"), &p);
        return;
    }
    ensure_body();
    if (!strcmp(d, "chunk")) {
        tg_chunk_opts_t o = { 0 };
        word_t *w;
        if ((w = find(l, "seq")))
            o.has_seq = 1, o.seq = (uint32_t)parse_int(w->val, "seq");
        if ((w = find(l, "magic")))
            o.has_magic = 1, o.magic = (uint32_t)parse_int(w->val, "magic");
        if ((w = find(l, "zsize")))
            o.has_zsize = 1, o.zsize = (uint32_t)parse_int(w->val, "zsize");
        if ((w = find(l, "rawsize")))
            o.has_rawsize = 1, o.rawsize = (uint32_t)parse_int(w->val, "rawsize");
        check_all_used(l);
        tg_chunk(&G, &o);
    } else if (!strcmp(d, "bytes")) {
        tg_buf_t x = hex(positional(l, 0, "HEX"), "bytes");
        check_all_used(l);
        if (G.chunk.len)
            tg_chunk(&G, NULL);
        tg_bytes(&G, x.p, x.len);
        tg_buf_free(&x);
    } else if (!strcmp(d, "stream")) {
        tg_buf_t x = hex(positional(l, 0, "HEX"), "stream");
        check_all_used(l);
        tg_buf_bytes(&G.chunk, x.p, x.len);
        tg_buf_free(&x);
    } else if (!strcmp(d, "device")) {
        tg_buf_zz(&p, parse_int(positional(l, 0, "ORD"), "ORD"));
        tg_buf_varint(&p, abs_time(l, "t"));
        tg_buf_varint(&p, num(l, "total", 0));
        tg_buf_varint(&p, num(l, "free", 0));
        word_t *w = find(l, "uuid");
        tg_buf_t u = hex(w ? w->val : "00000000000000000000000000000000", "uuid");
        if (u.len != 16)
            fatal("uuid: want 16 bytes, got %zu", u.len);
        tg_buf_bytes(&p, u.p, 16);
        tg_buf_free(&u);
        put_strkey(&p, l, "name", "");
        finish_record(l, VT_REC_DEVICE, &p);
    } else if (!strcmp(d, "module")) {
        tg_buf_varint(&p, (uint64_t)parse_int(positional(l, 0, "ID"), "ID"));
        tg_buf_varint(&p, num(l, "base", 0));
        tg_buf_varint(&p, num(l, "size", 0));
        word_t *w = find(l, "build_id");
        tg_buf_t b = hex(w ? w->val : "", "build_id");
        tg_buf_str(&p, (const char *)b.p, b.len);
        tg_buf_free(&b);
        put_strkey(&p, l, "path", "");
        finish_record(l, VT_REC_MODULE, &p);
    } else if (!strcmp(d, "frame")) {
        tg_buf_varint(&p, (uint64_t)parse_int(positional(l, 0, "IP"), "IP"));
        tg_buf_varint(&p, num(l, "module", 0));
        tg_buf_varint(&p, num(l, "offset", 0));
        put_strkey(&p, l, "function", "");
        finish_record(l, VT_REC_FRAME, &p);
    } else if (!strcmp(d, "stack")) {
        tg_buf_varint(&p, (uint64_t)parse_int(positional(l, 0, "ID"), "ID"));
        tg_buf_varint(&p, num(l, "parent", 0));
        tg_buf_varint(&p, need_num(l, "ip"));
        finish_record(l, VT_REC_STACK, &p);
    } else if (!strcmp(d, "event")) {
        word_t *w = find(l, "api");
        if (!w)
            fatal("event: missing api=");
        if (!find(l, "t"))
            fatal("event: missing t=");
        tg_event_t e = {
            .api = api_id(w->val),
            .time_ns = abs_time(l, "t"),
            .tid = num(l, "tid", 1),
            .device = snum(l, "dev", 0),
            .ptr = num(l, "ptr", 0),
            .size = num(l, "size", 0),
            .reserved = num(l, "reserved", 0),
            .aux = num(l, "aux", 0),
            .result = num(l, "result", 0),
            .stack = num(l, "stack", 0),
        };
        w = find(l, "flags");
        e.flags = w ? flags_value(w->val) : 0;
        tg_buf_event(&G, &p, &e);
        finish_record(l, VT_REC_EVENT, &p);
    } else if (!strcmp(d, "dropped")) {
        tg_buf_varint(&p, abs_time(l, "t"));
        tg_buf_varint(&p, num(l, "total", 0));
        tg_buf_varint(&p, num(l, "stacks_lost", 0));
        finish_record(l, VT_REC_DROPPED, &p);
    } else if (!strcmp(d, "note")) {
        tg_buf_varint(&p, abs_time(l, "t"));
        put_strkey(&p, l, "text", "");
        finish_record(l, VT_REC_NOTE, &p);
    } else if (!strcmp(d, "end")) {
        tg_buf_varint(&p, abs_time(l, "t"));
        tg_buf_varint(&p, num(l, "events", 0));
        tg_buf_varint(&p, num(l, "dropped", 0));
        finish_record(l, VT_REC_END, &p);
    } else if (!strcmp(d, "range")) {
        const char *pp = positional(l, 0, "push|pop");
        if (strcmp(pp, "push") && strcmp(pp, "pop"))
            fatal("range: want push or pop, got '%s'", pp);
        tg_buf_varint(&p, abs_time(l, "t"));
        tg_buf_varint(&p, num(l, "tid", 1));
        tg_buf_varint(&p, num(l, "depth", 0));
        uint8_t push = !strcmp(pp, "push");
        tg_buf_bytes(&p, &push, 1);
        put_strkey(&p, l, "name", "");
        finish_record(l, VT_REC_RANGE, &p);
    } else if (!strcmp(d, "ggml_buffer")) {
        tg_buf_varint(&p, abs_time(l, "t"));
        tg_buf_varint(&p, num(l, "buffer", 0));
        word_t *u = find(l, "usage");
        const char *uv = u ? u->val : "ANY";
        tg_buf_varint(&p, !strcmp(uv, "WEIGHTS") ? VT_GGML_USAGE_WEIGHTS : !strcmp(uv, "COMPUTE") ? VT_GGML_USAGE_COMPUTE
                          : !strcmp(uv, "ANY") ? VT_GGML_USAGE_ANY : num(l, "usage", 0));
        tg_buf_varint(&p, num(l, "base", 0));
        tg_buf_varint(&p, num(l, "size", 0));
        put_strkey(&p, l, "name", "");
        if (find(l, "host"))
            tg_buf_varint(&p, num(l, "host", 0));
        finish_record(l, VT_REC_GGML_BUFFER, &p);
    } else if (!strcmp(d, "ggml_tensor")) {
        tg_buf_varint(&p, abs_time(l, "t"));
        tg_buf_varint(&p, num(l, "buffer", 0));
        tg_buf_varint(&p, num(l, "data", 0));
        tg_buf_varint(&p, num(l, "nbytes", 0));
        put_strkey(&p, l, "name", "");
        if (find(l, "rows"))
            tg_buf_varint(&p, num(l, "rows", 0));
        finish_record(l, VT_REC_GGML_TENSOR, &p);
    } else if (!strcmp(d, "ggml_free")) {
        tg_buf_varint(&p, abs_time(l, "t"));
        tg_buf_varint(&p, num(l, "buffer", 0));
        finish_record(l, VT_REC_GGML_FREE, &p);
    } else if (!strcmp(d, "ggml_lost")) {
        tg_buf_varint(&p, abs_time(l, "t"));
        tg_buf_varint(&p, num(l, "lost", 0));
        finish_record(l, VT_REC_GGML_LOST, &p);
    } else if (!strcmp(d, "record")) {
        word_t *w = find(l, "payload");
        tg_buf_t x = hex(w ? w->val : "", "payload");
        tg_buf_bytes(&p, x.p, x.len);
        tg_buf_free(&x);
        finish_record(l, (uint8_t)need_num(l, "type"), &p);
    } else {
        fatal("unknown directive '%s'", d);
    }
}

int main(int argc, char **argv)
{
    const char *in_path = NULL, *out_path = NULL;
    int no_checksum = 0, stored = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out_path = argv[++i];
        else if (!strcmp(argv[i], "--no-checksum"))
            no_checksum = 1;
        else if (!strcmp(argv[i], "--stored"))
            stored = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: vtgen [-o OUT] [--no-checksum | --stored] [SCRIPT]\nThe script format is described at the top of "
                   "tests/tools/vtgen.c.\n");
            return 0;
        } else if (!in_path)
            in_path = argv[i];
        else {
            fprintf(stderr, "usage: vtgen [-o OUT] [--no-checksum | --stored] [SCRIPT]\n");
            return 1;
        }
    }
    FILE *in = stdin;
    if (in_path && strcmp(in_path, "-")) {
        script_name = in_path;
        if (!(in = fopen(in_path, "r"))) {
            fprintf(stderr, "vtgen: %s: %s\n", in_path, strerror(errno));
            return 1;
        }
    }
    FILE *out = stdout;
    if (out_path && !(out = fopen(out_path, "wb"))) {
        fprintf(stderr, "vtgen: %s: %s\n", out_path, strerror(errno));
        return 1;
    }
    tg_init(&G, out);
    G.checksum = !no_checksum;
    if (stored) {
        G.stored = 1;
        G.version = VT_FORMAT_VERSION_STORED;
    }
    tg_set_start(&G, 1000000000ull);
    char *buf = NULL;
    size_t cap = 0;
    while (getline(&buf, &cap, in) >= 0) {
        cur_line++;
        line_t l;
        split(buf, &l);
        if (l.n == 0)
            continue;
        if (l.w[0].key)
            fatal("a line starts with a directive, not '%s='", l.w[0].key);
        do_line(&l);
    }
    ensure_body();
    tg_finish(&G);
    free(buf);
    if (out != stdout && fclose(out)) {
        fprintf(stderr, "vtgen: %s: %s\n", out_path, strerror(errno));
        return 1;
    }
    return 0;
}
