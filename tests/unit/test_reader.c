/* Unit tests for analyzer/trace_reader.c: exact decoded values, and the
 * error code, offset and detail for each kind of damage. Traces are built
 * with tests/tools/tracegen so every byte is known. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "trace_reader.h"
#include "tracegen.h"

#include <zstd.h>

#define START 1000000ull

static char dir[256];
static char path[300];

/* ---- building traces --------------------------------------------------- */

static tg_t G;

static void begin(const char *name)
{
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    tg_init(&G, f);
}

static void finish(void)
{
    FILE *f = G.out;
    tg_finish(&G);
    fclose(f);
}

static void process(uint32_t argc)
{
    tg_buf_t p = { 0 };
    tg_buf_varint(&p, 4242);
    tg_buf_varint(&p, 1);
    tg_buf_varint(&p, START);
    tg_buf_varint(&p, 1700000000000000000ull);
    tg_buf_str(&p, "0.1.0", 5);
    tg_buf_str(&p, "/bin/srv", 8);
    tg_buf_str(&p, "host\0x", 6);
    tg_buf_varint(&p, argc);
    for (uint32_t i = 0; i < argc && i < 3; i++)
        tg_buf_str(&p, i == 1 ? "-m" : "srv", i == 1 ? 2 : 3);
    tg_record(&G, VT_REC_PROCESS, p.p, p.len);
    tg_set_start(&G, START);
    tg_buf_free(&p);
}

static void event(uint64_t t, uint64_t api, int64_t dev, uint64_t ptr, uint64_t size, const char *extra)
{
    tg_buf_t p = { 0 };
    tg_event_t e = { .api = api, .time_ns = START + t, .tid = 77, .device = dev, .ptr = ptr, .size = size,
                     .reserved = 4096, .aux = 0xabc, .flags = VT_EF_RUNTIME, .result = 2, .stack = 9 };
    tg_buf_event(&G, &p, &e);
    if (extra)
        tg_buf_bytes(&p, extra, strlen(extra));
    tg_record(&G, VT_REC_EVENT, p.p, p.len);
    tg_buf_free(&p);
}

static void raw_record(uint8_t type, const void *payload, size_t len)
{
    tg_record(&G, type, payload, len);
}

/* ---- reading ----------------------------------------------------------- */

typedef struct result {
    int open_rc, rc;
    int n;               /* records returned */
    vt_record_t last;    /* last record returned */
    vt_error_t err;
} result_t;

static result_t read_all(void)
{
    result_t res = { 0 };
    vt_reader_t *r;
    res.open_rc = vt_reader_open(path, &r, &res.err);
    if (res.open_rc < 0) {
        res.rc = res.open_rc;
        return res;
    }
    vt_record_t rec;
    while ((res.rc = vt_reader_next(r, &rec, &res.err)) > 0) {
        res.n++;
        res.last = rec;
    }
    vt_reader_close(r);
    return res;
}

/* ---- tests ------------------------------------------------------------- */

/* Version 2 also checks that an EVENT's trailing bytes are ignored; in
 * version 3 an EVENT record's bytes are all events (test_version3). */
static void test_valid(uint16_t version)
{
    begin("valid.trace");
    G.version = version;
    process(3);
    tg_write_header(&G);
    event(100, 2, 0, 0x7f0000000000, 1 << 20, NULL);
    event(50, 3, -1, 0x7f0000000000, 0, version < 3 ? "trailing" : NULL);  /* dt < 0 */
    raw_record(200, "junk", 4);                        /* unknown: skipped */
    tg_chunk(&G, NULL);
    event(7, 999, 32767, 1, 2, NULL);                  /* base resets to START */
    finish();

    vt_reader_t *r;
    vt_error_t err;
    TAP_EQ_U64(vt_reader_open(path, &r, &err), 0, "valid: opens");
    const vt_rec_process_t *p = vt_reader_process(r);
    TAP_EQ_U64(p->pid, 4242, "process pid");
    TAP_EQ_U64(p->mono_start_ns, START, "process mono_start_ns");
    TAP_EQ_U64(p->argc, 3, "process argc");
    TAP_OK(p->argv[1].len == 2 && !memcmp(p->argv[1].data, "-m", 2), "argv[1] is -m");
    TAP_OK(p->hostname.len == 6 && !memcmp(p->hostname.data, "host\0x", 6), "hostname keeps its NUL byte");

    vt_record_t rec;
    TAP_EQ_U64(vt_reader_next(r, &rec, &err), 1, "header record first");
    TAP_EQ_U64(rec.type, VT_REC_PROCESS, "it is the PROCESS record");
    TAP_EQ_U64(rec.chunk_seq, UINT32_MAX, "header records have chunk_seq UINT32_MAX");
    TAP_EQ_U64(rec.file_offset, 16, "header records point at the header body");

    TAP_EQ_U64(vt_reader_next(r, &rec, &err), 1, "event 1");
    TAP_EQ_U64(rec.u.event.time_ns, START + 100, "event 1 time absolute");
    TAP_EQ_U64(rec.u.event.api, 2, "event 1 api");
    TAP_EQ_U64(rec.u.event.tid, 77, "event 1 tid");
    TAP_EQ_U64(rec.u.event.device, 0, "event 1 device");
    TAP_EQ_U64(rec.u.event.ptr, 0x7f0000000000, "event 1 ptr");
    TAP_EQ_U64(rec.u.event.size, 1 << 20, "event 1 size");
    TAP_EQ_U64(rec.u.event.reserved, 4096, "event 1 reserved");
    TAP_EQ_U64(rec.u.event.aux, 0xabc, "event 1 aux");
    TAP_EQ_U64(rec.u.event.flags, VT_EF_RUNTIME, "event 1 flags");
    TAP_EQ_U64(rec.u.event.result, 2, "event 1 result");
    TAP_EQ_U64(rec.u.event.stack, 9, "event 1 stack");
    TAP_EQ_U64(rec.chunk_seq, 0, "event 1 in chunk 0");
    uint64_t chunk0 = rec.file_offset;

    TAP_EQ_U64(vt_reader_next(r, &rec, &err), 1, "version %u: event 2", version);
    TAP_EQ_U64(rec.u.event.time_ns, START + 50, "event 2: negative delta");
    TAP_EQ_U64((uint64_t)(int64_t)rec.u.event.device, (uint64_t)(int64_t)-1, "event 2 device -1");
    TAP_EQ_U64(rec.u.event.ptr, 0x7f0000000000, "event 2 ptr: delta 0 from event 1");

    TAP_EQ_U64(vt_reader_next(r, &rec, &err), 1, "event 3 (unknown record type skipped)");
    TAP_EQ_U64(rec.u.event.time_ns, START + 7, "event 3: delta restarts per chunk");
    TAP_EQ_U64(rec.u.event.api, 999, "unknown api id returned as is");
    TAP_EQ_U64(rec.u.event.device, 32767, "device 32767 fits");
    TAP_EQ_U64(rec.u.event.ptr, 1, "event 3 ptr: the ptr delta restarts per chunk too");
    TAP_EQ_U64(rec.chunk_seq, 1, "event 3 in chunk 1");
    TAP_OK(rec.file_offset > chunk0, "chunk 1 offset after chunk 0");
    uint64_t chunk1 = rec.file_offset;

    TAP_EQ_U64(vt_reader_next(r, &rec, &err), 0, "clean end");
    TAP_EQ_U64(vt_reader_next(r, &rec, &err), 0, "clean end again");
    TAP_EQ_U64(vt_reader_offset(r), vt_reader_file_size(r), "offset == size at the end");
    vt_reader_close(r);

    /* Every cut inside the chunks: complete chunks' records, then TRUNCATED
     * at the partial chunk's offset. */
    struct stat st;
    stat(path, &st);
    char *whole = malloc((size_t)st.st_size);
    FILE *f = fopen(path, "rb");
    if (fread(whole, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        abort();
    fclose(f);
    int bad = 0;
    for (off_t cut = 1; cut < st.st_size; cut++) {
        f = fopen(path, "wb");
        fwrite(whole, 1, (size_t)cut, f);
        fclose(f);
        result_t res = read_all();
        /* A cut on a chunk boundary leaves a complete, shorter trace. */
        if (cut == (off_t)chunk0 || cut == (off_t)chunk1) {
            if (res.rc != 0 && !bad++)
                printf("# cut at boundary %lld: rc %d\n", (long long)cut, res.rc);
            continue;
        }
        int want_n = cut < (off_t)chunk0 ? 0 : cut < (off_t)chunk1 ? 1 : 3;
        if (res.rc != VT_E_TRUNCATED || (res.open_rc == 0 && res.n != want_n) ||
            res.err.offset != (cut < (off_t)chunk0 ? (cut < 16 ? 0 : 16) : cut < (off_t)chunk1 ? chunk0 : chunk1)) {
            if (!bad++)
                printf("# cut at %lld: rc %d n %d offset %llu (%s)\n", (long long)cut, res.rc, res.n,
                       (unsigned long long)res.err.offset, res.err.detail);
        }
    }
    TAP_EQ_U64(bad, 0, "every cut gives TRUNCATED after the complete chunks' records");
    free(whole);
}

static result_t one_record(const char *name, uint8_t type, const void *payload, size_t len)
{
    begin(name);
    process(1);
    tg_write_header(&G);
    raw_record(type, payload, len);
    finish();
    return read_all();
}

static void test_payloads(void)
{
    static const uint8_t long_varint[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 };
    result_t res = one_record("varint11", VT_REC_STACK, long_varint, sizeof long_varint);
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_CORRUPT, "11-byte varint is corrupt");
    TAP_OK(strstr(res.err.detail, "node_id") != NULL, "detail names the field: %s", res.err.detail);

    static const uint8_t overflow[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02 };
    res = one_record("overflow", VT_REC_STACK, overflow, sizeof overflow);
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_CORRUPT, "varint over 64 bits is corrupt");

    static const uint8_t max64[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
    tg_buf_t p = { 0 };
    tg_buf_bytes(&p, max64, sizeof max64);
    tg_buf_varint(&p, 1);
    tg_buf_bytes(&p, max64, sizeof max64);
    res = one_record("max64", VT_REC_STACK, p.p, p.len);
    tg_buf_free(&p);
    TAP_EQ_U64(res.rc, 0, "10-byte varint of UINT64_MAX is fine");
    TAP_EQ_U64(res.last.u.stack.node_id, UINT64_MAX, "node id UINT64_MAX");
    TAP_EQ_U64(res.last.u.stack.ip, UINT64_MAX, "ip UINT64_MAX");

    static const uint8_t cyc[] = { 5, 5, 1 };
    res = one_record("cycle", VT_REC_STACK, cyc, sizeof cyc);
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_CORRUPT, "stack parent == node is corrupt");

    static const uint8_t shortrec[] = { 1, 0 };
    res = one_record("short", VT_REC_STACK, shortrec, sizeof shortrec);
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_CORRUPT, "payload missing a field is corrupt");
    TAP_EQ_U64(res.n, 1, "the header record came before the error");

    p = (tg_buf_t){ 0 };
    tg_buf_varint(&p, 1);
    tg_buf_varint(&p, VT_MAX_STRING + 1);
    res = one_record("longstr", VT_REC_NOTE, p.p, p.len);
    tg_buf_free(&p);
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_LIMIT, "string over VT_MAX_STRING is LIMIT");

    p = (tg_buf_t){ 0 };
    tg_buf_varint(&p, 1);
    tg_buf_varint(&p, 100);
    tg_buf_bytes(&p, "abc", 3);
    res = one_record("strpast", VT_REC_NOTE, p.p, p.len);
    tg_buf_free(&p);
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_CORRUPT, "string past the record end is corrupt");

    /* Event api/device range */
    begin("api70k");
    process(1);
    tg_write_header(&G);
    event(1, 70000, 0, 0, 0, NULL);
    finish();
    res = read_all();
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_CORRUPT, "api id over 16 bits is corrupt");

    begin("dev");
    process(1);
    tg_write_header(&G);
    event(1, 2, -32768, 0, 0, NULL);
    event(2, 2, 32768, 0, 0, NULL);
    finish();
    res = read_all();
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_CORRUPT, "device 32768 is corrupt");
    TAP_EQ_U64((uint64_t)(int64_t)res.last.u.event.device, (uint64_t)(int64_t)-32768, "device -32768 fits");

    /* A record whose length runs past the chunk. */
    begin("framing");
    process(1);
    tg_write_header(&G);
    event(1, 2, 0, 0, 0, NULL);
    tg_buf_bytes(&G.chunk, "\x06\x7f\x01", 3);
    finish();
    res = read_all();
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_CORRUPT, "record longer than its chunk is corrupt");
    TAP_EQ_U64(res.n, 2, "records before it are returned");
    TAP_OK(strstr(res.err.detail, "chunk 0") != NULL, "detail names the chunk: %s", res.err.detail);

    /* argc over the bound. */
    p = (tg_buf_t){ 0 };
    for (int i = 0; i < 4; i++)
        tg_buf_varint(&p, 1);
    for (int i = 0; i < 3; i++)
        tg_buf_str(&p, "x", 1);
    tg_buf_varint(&p, VT_MAX_ARGC + 1);
    res = one_record("argc", VT_REC_PROCESS, p.p, p.len);
    tg_buf_free(&p);
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_LIMIT, "argc over VT_MAX_ARGC is LIMIT");
}

/* Version 1 files (absolute EVENT ptr) still read the same. */
static void test_version1(void)
{
    begin("v1.trace");
    G.version = 1;
    process(1);
    tg_write_header(&G);
    event(100, 2, 0, 0x7f0000000000, 1 << 20, NULL);
    event(150, 3, 0, 0x7f0000200000, 0, NULL);
    tg_chunk(&G, NULL);
    event(7, 3, 0, 0x7f0000000000, 0, NULL);
    finish();
    vt_reader_t *r;
    vt_error_t err;
    vt_record_t rec;
    TAP_EQ_U64(vt_reader_open(path, &r, &err), 0, "version 1: opens");
    TAP_EQ_U64(vt_reader_next(r, &rec, &err), 1, "version 1: header record");
    uint64_t want[3] = { 0x7f0000000000, 0x7f0000200000, 0x7f0000000000 };
    for (int i = 0; i < 3; i++) {
        TAP_EQ_U64(vt_reader_next(r, &rec, &err), 1, "version 1: event %d", i + 1);
        TAP_EQ_U64(rec.u.event.ptr, want[i], "version 1: event %d ptr is the address itself", i + 1);
    }
    TAP_EQ_U64(vt_reader_next(r, &rec, &err), 0, "version 1: clean end");
    vt_reader_close(r);
}

/* Version 3 EVENTs, byte by byte: the presence byte leaves out zeros,
 * forced zeros read the same, and a field it leaves out reads as 0. */
static void test_version3(void)
{
    begin("v3.trace");
    process(1);
    tg_write_header(&G);
    /* api 2, present = size only, ptr zz(0x1000) = 0x2000, size 64, stack 9 */
    static const uint8_t lean[] = { 2, VT_EV_HAS_SIZE, 0x80, 0x40, 0x40, 9 };
    /* the same event with every optional field written, as zeros; ptr is
     * a delta from the previous event: 0. Both in one EVENT record. */
    static const uint8_t full[] = { 2, 0xff, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 9 };
    uint8_t both[sizeof lean + sizeof full];
    memcpy(both, lean, sizeof lean);
    memcpy(both + sizeof lean, full, sizeof full);
    raw_record(VT_REC_EVENT, both, sizeof both);
    /* present names device and flags, the payload ends in device */
    static const uint8_t cut[] = { 3, VT_EV_HAS_DEVICE | VT_EV_HAS_FLAGS, 1 };
    raw_record(VT_REC_EVENT, cut, sizeof cut);
    finish();
    TAP_EQ_U64(G.version, 3, "tracegen writes version 3 by default");
    vt_reader_t *r;
    vt_error_t err;
    vt_record_t rec;
    TAP_EQ_U64(vt_reader_open(path, &r, &err), 0, "version 3: opens");
    TAP_EQ_U64(vt_reader_next(r, &rec, &err), 1, "version 3: header record");
    for (int i = 0; i < 2; i++) {
        TAP_EQ_U64(vt_reader_next(r, &rec, &err), 1, "version 3: event %d", i + 1);
        const vt_event_t *e = &rec.u.event;
        TAP_OK(e->api == 2 && e->time_ns == START && e->tid == 0 && e->device == 0 && e->ptr == 0x1000 &&
                   e->size == 64 && e->reserved == 0 && e->aux == 0 && e->flags == 0 && e->result == 0 &&
                   e->stack == 9,
               "version 3: event %d (%s) reads api 2, ptr 0x1000, size 64, stack 9, the rest 0", i + 1,
               i ? "zeros written" : "zeros left out");
    }
    TAP_EQ_U64((uint64_t)-vt_reader_next(r, &rec, &err), (uint64_t)-VT_E_CORRUPT, "version 3: a field the presence byte names must be there");
    TAP_OK(strstr(err.detail, "ptr") != NULL, "the error names the missing field: %s", err.detail);
    vt_reader_close(r);

    /* the writer's side: zeros stay off the wire */
    tg_t saved = G;
    tg_buf_t b = { 0 };
    tg_event_t e = { .api = 2, .time_ns = G.prev_event_ns, .ptr = G.prev_event_ptr + 0x1000, .size = 64, .stack = 9 };
    tg_buf_event(&G, &b, &e);
    TAP_OK(b.len == sizeof lean && !memcmp(b.p, lean, sizeof lean), "tg_buf_event writes the lean form (%zu bytes)",
           b.len);
    tg_buf_free(&b);
    G = saved;

    /* an EVENT record's bytes are all events: an empty one, or one with
     * bytes left after its last event, is corrupt */
    static const struct {
        const char *what;
        uint8_t payload[8];
        size_t len;
        uint64_t at;   /* byte of the failing event in the chunk */
        const char *field;
    } bad[] = {
        { "an empty EVENT record", { 0 }, 0, 2, "api" },
        { "a byte after the last event", { 2, 0, 0, 9, 2 }, 5, 6, "present" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        begin("v3-bad.trace");
        process(1);
        tg_write_header(&G);
        raw_record(VT_REC_EVENT, bad[k].payload, bad[k].len);
        finish();
        result_t res = read_all();
        TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_CORRUPT, "version 3: %s is corrupt", bad[k].what);
        char want[64];
        snprintf(want, sizeof want, "EVENT at byte %llu: field %s", (unsigned long long)bad[k].at, bad[k].field);
        TAP_OK(strstr(res.err.detail, want) != NULL, "version 3: %s: '%s' says '%s'", bad[k].what,
               res.err.detail, want);
    }
}

static void test_file_level(void)
{
    result_t res;
    begin("version");
    G.version = VT_FORMAT_VERSION + 1;
    process(1);
    finish();
    res = read_all();
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_VERSION, "newer version refused");
    char newer[32], ours[32];
    snprintf(newer, sizeof newer, "version %u", VT_FORMAT_VERSION + 1);
    snprintf(ours, sizeof ours, "version %u", VT_FORMAT_VERSION);
    TAP_OK(strstr(res.err.detail, newer) && strstr(res.err.detail, ours),
           "detail names both versions: %s", res.err.detail);
    TAP_EQ_U64(res.err.offset, 8, "version error at offset 8");
    TAP_OK(strstr(res.err.path, "version") != NULL, "error names the file");

    begin("magic");
    memcpy(G.magic, "VRAMTRX", 8);
    process(1);
    finish();
    res = read_all();
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_NOT_TRACE, "bad magic: not a trace");

    begin("empty");
    finish();
    FILE *f = fopen(path, "wb");
    fclose(f);
    res = read_all();
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_NOT_TRACE, "empty file: not a trace");

    snprintf(path, sizeof path, "%s", dir);
    res = read_all();
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_IO, "directory: IO error");

    snprintf(path, sizeof path, "%s/does-not-exist", dir);
    res = read_all();
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_IO, "missing file: IO error");

    begin("hdrlen");
    G.has_header_len = 1;
    G.header_len = VT_MAX_HEADER + 1;
    process(1);
    finish();
    res = read_all();
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_LIMIT, "header_len over the bound: LIMIT");

    begin("noprocess");
    raw_record(200, "x", 1);
    finish();
    res = read_all();
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_CORRUPT, "header without PROCESS: corrupt");

    begin("twoprocess");
    process(1);
    process(1);
    finish();
    res = read_all();
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_CORRUPT, "header with two PROCESS: corrupt");

    struct { const char *name; tg_chunk_opts_t o; int code; uint64_t at; } bad[] = {
        { "seq", { .has_seq = 1, .seq = 5 }, VT_E_CORRUPT, 12 },
        { "cmagic", { .has_magic = 1, .magic = 0x12345678 }, VT_E_CORRUPT, 0 },
        { "zsize", { .has_zsize = 1, .zsize = VT_MAX_CHUNK_ZSIZE + 1 }, VT_E_LIMIT, 4 },
        { "rawsize", { .has_rawsize = 1, .rawsize = VT_MAX_CHUNK_RAW + 1 }, VT_E_LIMIT, 8 },
        { "rawlie", { .has_rawsize = 1, .rawsize = 3 }, VT_E_CORRUPT, 16 },
        { "zbig", { .has_zsize = 1, .zsize = 1000 }, VT_E_TRUNCATED, 0 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        begin(bad[i].name);
        process(1);
        tg_write_header(&G);
        event(1, 2, 0, 0, 0, NULL);
        tg_chunk(&G, NULL);
        uint64_t off = (uint64_t)ftell(G.out);
        event(2, 2, 0, 0, 0, NULL);
        tg_chunk(&G, &bad[i].o);
        finish();
        res = read_all();
        TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-bad[i].code, "chunk %s: code", bad[i].name);
        TAP_EQ_U64(res.err.offset, off + bad[i].at, "chunk %s: offset (%s)", bad[i].name, res.err.detail);
        TAP_EQ_U64(res.n, 2, "chunk %s: records of the good chunk returned", bad[i].name);
    }

    /* Bytes after the zstd frame inside zsize; then two frames in one chunk. */
    for (int twice = 0; twice < 2; twice++) {
        begin(twice ? "twoframes" : "afterframe");
        process(1);
        tg_write_header(&G);
        static const uint8_t rec_end[] = { VT_REC_END, 3, 1, 0, 0 };
        uint8_t z[64];
        size_t zn = ZSTD_compress(z, sizeof z, rec_end, sizeof rec_end, 1);
        size_t total = twice ? 2 * zn : zn + 2;
        uint32_t h[4] = { VT_CHUNK_MAGIC, (uint32_t)total, twice ? 2 * sizeof rec_end : sizeof rec_end, 0 };
        fwrite(h, 4, 4, G.out);  /* the test host is little-endian */
        fwrite(z, 1, zn, G.out);
        fwrite(twice ? (const void *)z : "XY", 1, twice ? zn : 2, G.out);
        finish();
        res = read_all();
        TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_CORRUPT, "%s: corrupt (%s)",
                   twice ? "two zstd frames in a chunk" : "bytes after the zstd frame", res.err.detail);
    }

    /* After an error, the reader keeps answering it. */
    vt_reader_t *r;
    vt_error_t err;
    snprintf(path, sizeof path, "%s/seq", dir);
    vt_reader_open(path, &r, &err);
    vt_record_t rec;
    int rc;
    while ((rc = vt_reader_next(r, &rec, &err)) > 0)
        ;
    vt_error_t again;
    TAP_EQ_U64((uint64_t)-vt_reader_next(r, &rec, &again), (uint64_t)-rc, "error repeats");
    TAP_EQ_U64(again.offset, err.offset, "with the same offset");
    vt_reader_close(r);
}

/* Damage inside a chunk's record stream (below the zstd layer, where a
 * checksum would otherwise catch it): every flipped byte and every cut must
 * give records or CORRUPT/LIMIT, never anything else (ASan builds check the
 * memory side). */
static void test_stream_mutations(void)
{
    begin("stream-src");
    process(2);
    tg_write_header(&G);
    event(5, 2, 0, 0x1234, 1 << 30, NULL);
    static const uint8_t dev[] = { 2, 30, 0, 10, 0x80, 0x80, 0x04, 0x80, 0x80, 0x02, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15, 3, 'G', 'P', 'U' };
    raw_record(VT_REC_DEVICE, dev, sizeof dev);
    static const uint8_t mod[] = { 1, 0x80, 0x80, 0x01, 0x80, 0x20, 2, 0xde, 0xad, 4, '/', 'l', 'i', 'b' };
    raw_record(VT_REC_MODULE, mod, sizeof mod);
    static const uint8_t frm[] = { 0x81, 0x80, 0x01, 1, 16, 3, 'f', 'o', 'o' };
    raw_record(VT_REC_FRAME, frm, sizeof frm);
    static const uint8_t stk[] = { 1, 0, 0x81, 0x80, 0x01 };
    raw_record(VT_REC_STACK, stk, sizeof stk);
    static const uint8_t rng[] = { 9, 1, 0, 1, 2, 'x', 'y' };
    raw_record(VT_REC_RANGE, rng, sizeof rng);
    static const uint8_t note[] = { 9, 2, 'h', 'i' };
    raw_record(VT_REC_NOTE, note, sizeof note);
    static const uint8_t drop[] = { 9, 1, 1 };
    raw_record(VT_REC_DROPPED, drop, sizeof drop);
    static const uint8_t end[] = { 9, 1, 1 };
    raw_record(VT_REC_END, end, sizeof end);
    tg_buf_t src = { 0 };
    tg_buf_bytes(&src, G.chunk.p, G.chunk.len);
    G.chunk.len = 0;
    finish();

    int bad = 0, n = 0;
    static const uint8_t masks[] = { 0xff, 0x80, 0x01, 0x7f };
    for (size_t i = 0; i <= src.len; i++) {
        for (size_t m = 0; m < sizeof masks / sizeof masks[0] + 1; m++) {
            size_t len = m == 0 ? i : src.len;  /* m == 0: cut at i */
            if (m > 0 && i == src.len)
                continue;
            begin("stream-mut");
            process(1);
            tg_write_header(&G);
            tg_buf_bytes(&G.chunk, src.p, len);
            if (m > 0)
                G.chunk.p[i] ^= masks[m - 1];
            finish();
            result_t res = read_all();
            n++;
            if (res.rc != 0 && res.rc != VT_E_CORRUPT && res.rc != VT_E_LIMIT && !bad++)
                printf("# byte %zu mask %zu: rc %d (%s)\n", i, m, res.rc, res.err.detail);
        }
    }
    TAP_EQ_U64(bad, 0, "%d damaged record streams: records, CORRUPT or LIMIT only", n);
    tg_buf_free(&src);
}

/* ---- bulk decoding against one record at a time ----------------------- */

/* vt_reader_events (the report's bulk path) must give exactly the events
 * vt_reader_next gives one by one, and both exactly what the field-by-field
 * checks give (vt_reader_set_checked), on any bytes: the same records, then
 * the same error (code, offset, text). Each mutated trace is read all three
 * ways and the three logs compared. */

static uint64_t rng_state;

/* Records in the stream: every byte of it is cut, flipped three ways and
 * every length rewritten ten, so this sets the test's run time (~20k
 * traces, each read three times). */
#define DIFF_RECORDS 160

static uint64_t rnd(void)
{
    /* xorshift64*: a fixed seed, so a failure names a reproducible input */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

/* A value whose varint is 1 to 10 bytes long, biased to the short ones
 * real traces hold. */
static uint64_t rnd_field(void)
{
    unsigned bits = (unsigned)(rnd() % 8 ? rnd() % 22 : rnd() % 65);
    return bits >= 64 ? rnd() : rnd() & ((1ull << bits) - 1);
}

typedef struct dlog {
    uint64_t *v;
    size_t n, cap;
    int rc;
    vt_error_t err;
    size_t bulk;   /* events that came from vt_reader_events */
    size_t events;
    size_t bulk_stacks, stacks;   /* STACK records: from vt_reader_stack, in all */
} dlog_t;

static void dlog_put(dlog_t *l, uint64_t x)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 1024;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (!l->v)
            abort();
    }
    l->v[l->n++] = x;
}

/* Events go in without their chunk's offset, which vt_reader_events does
 * not give; other records with it (they all come from vt_reader_next). */
static void dlog_event(dlog_t *l, const vt_event_t *e)
{
    uint64_t f[] = { VT_REC_EVENT, e->time_ns, e->ptr, e->size, e->reserved, e->aux, e->tid,
                     e->flags, e->result, e->stack, e->api, (uint64_t)(int64_t)e->device };
    l->events++;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        dlog_put(l, f[i]);
}

/* STACK records too: vt_reader_stack gives no offset either. */
static void dlog_stack(dlog_t *l, const vt_rec_stack_t *s)
{
    l->stacks++;
    dlog_put(l, VT_REC_STACK);
    dlog_put(l, s->node_id);
    dlog_put(l, s->parent_id);
    dlog_put(l, s->ip);
}

static void dlog_record(dlog_t *l, const vt_record_t *rec)
{
    if (rec->type == VT_REC_EVENT) {
        dlog_event(l, &rec->u.event);
        return;
    }
    if (rec->type == VT_REC_STACK) {
        dlog_stack(l, &rec->u.stack);
        return;
    }
    dlog_put(l, rec->type);
    dlog_put(l, rec->file_offset);
    dlog_put(l, rec->chunk_seq);
}

enum { READ_CHECKED, READ_NEXT, READ_BULK };

/* Reads path one way into l. The bulk way asks for 1-16 events at a time
 * and now and then takes a record with vt_reader_next even when events
 * are there, as a caller may. */
static void read_way(int way, dlog_t *l, uint64_t seed)
{
    l->n = 0;
    l->bulk = l->events = l->bulk_stacks = l->stacks = 0;
    memset(&l->err, 0, sizeof l->err);
    vt_reader_t *r;
    l->rc = vt_reader_open(path, &r, &l->err);
    if (l->rc < 0)
        return;
    if (way == READ_CHECKED)
        vt_reader_set_checked(r, 1);
    uint64_t saved = rng_state;
    rng_state = seed | 1;
    vt_record_t rec;
    for (;;) {
        if (way == READ_BULK && rnd() % 8) {
            vt_event_t ev[16];
            size_t got = vt_reader_events(r, ev, 1 + rnd() % 16);
            for (size_t i = 0; i < got; i++)
                dlog_event(l, &ev[i]);
            l->bulk += got;
            if (got)
                continue;
        }
        if (way == READ_BULK && rnd() % 8) {
            vt_rec_stack_t st;
            if (vt_reader_stack(r, &st)) {
                dlog_stack(l, &st);
                l->bulk_stacks++;
                continue;
            }
        }
        l->rc = vt_reader_next(r, &rec, &l->err);
        if (l->rc <= 0)
            break;
        dlog_record(l, &rec);
    }
    rng_state = saved;
    vt_reader_close(r);
}

/* A varint of v, as the writer would encode it, into d (10 bytes). */
static size_t put_varint(uint8_t *d, uint64_t v)
{
    size_t k = 0;
    while (v >= 0x80) {
        d[k++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    d[k++] = (uint8_t)v;
    return k;
}

/* A valid record stream: ~150 events of every field width (and a few with
 * trailing bytes a newer writer may add), other records between runs of
 * them. starts[] gets each record's offset (in version 3, a run of events
 * is one record). */
static uint16_t diff_version;   /* the format version the differential test writes */

static void diff_stream(tg_buf_t *out, size_t *starts, size_t *nstarts, size_t max_starts)
{
    begin("diff-src");
    G.version = diff_version;
    process(1);
    tg_write_header(&G);
    uint64_t t = 0, ptr = 0x7f0000000000ull;
    *nstarts = 0;
    for (int i = 0; i < DIFF_RECORDS; i++) {
        size_t at = G.chunk.len;
        int noted = *nstarts < max_starts;
        if (noted)
            starts[(*nstarts)++] = at;
        if (i % 7 == 3) {
            /* a valid node of random widths: the mutations below make
             * the ones decode_stack rejects (node 0, parent not below) */
            uint8_t stk[40];
            uint64_t node = 1 + (rnd_field() >> (rnd() % 2 ? 0 : 60));
            uint64_t parent = rnd() % 2 ? node - 1 : rnd() % node;
            size_t n = put_varint(stk, node);
            n += put_varint(stk + n, parent);
            n += put_varint(stk + n, rnd_field() | (rnd() % 2 ? 0x7f0000000000ull : 0));
            if (rnd() % 8 == 0)
                stk[n++] = 0x05;   /* a byte a newer writer may add */
            raw_record(VT_REC_STACK, stk, n);
            continue;
        }
        if (i % 23 == 22) {
            static const uint8_t frm[] = { 0x81, 0x80, 0x01, 1, 16, 3, 'f', 'o', 'o' };
            static const uint8_t stk[] = { 1, 0, 0x81, 0x80, 0x01 };
            static const uint8_t note[] = { 9, 2, 'h', 'i' };
            int k = i / 23 % 3;
            raw_record(k == 0 ? VT_REC_FRAME : k == 1 ? VT_REC_STACK : VT_REC_NOTE,
                       k == 0 ? frm : k == 1 ? stk : note, k == 0 ? sizeof frm : k == 1 ? sizeof stk : sizeof note);
            continue;
        }
        t += rnd() % 4 ? rnd() % 2000 : rnd_field();
        ptr = rnd() % 4 ? ptr + (rnd() % 65536) * 256 - (1u << 23) : rnd();
        /* Fields in wire order: the draws, and so the stream, are the
         * same whatever the version. */
        tg_event_t e = { .api = rnd() % 16 ? rnd() % 48 : rnd() % 65536 };
        e.time_ns = START + t;
        e.tid = rnd() % 8 ? 1000 + rnd() % 8 : rnd_field() & 0xffffffffu;
        e.device = rnd() % 8 ? (int64_t)(rnd() % 4) : (int64_t)(rnd() % 65536) - 32768;
        e.ptr = ptr;
        e.size = rnd_field();
        e.reserved = rnd_field();
        e.aux = rnd_field();
        e.flags = rnd_field() & 0xffffffffu;
        e.result = rnd() % 8 ? 0 : rnd_field() & 0xffffffffu;
        e.stack = rnd_field() & 0xffffffffu;
        /* Version 3 readers take a zero written out as well as left out. */
        e.force = rnd() % 8 ? 0 : (unsigned)rnd() & 0xff;
        if (rnd() % 16 || diff_version >= 3) {
            tg_event(&G, &e);   /* version 3: runs of them share a record */
            if (noted && G.batch_buf && G.batch_len_at != at + 1)
                (*nstarts)--;   /* it joined the open record: no record starts here */
        } else {
            /* bytes after the fields, which a version 2 reader skips */
            tg_buf_t p = { 0 };
            tg_buf_event(&G, &p, &e);
            tg_buf_bytes(&p, "\x05\x80\x01", 1 + rnd() % 3);
            tg_record(&G, VT_REC_EVENT, p.p, p.len);
            tg_buf_free(&p);
        }
    }
    out->len = 0;
    tg_buf_bytes(out, G.chunk.p, G.chunk.len);
    G.chunk.len = 0;
    finish();
}

/* Writes a trace whose first chunk holds s[0..len) as its record stream and
 * whose second is a few valid events, so a stream the damage left valid is
 * followed across a chunk boundary. */
static void diff_trace(const uint8_t *s, size_t len)
{
    begin("diff-mut");
    G.version = diff_version;
    process(1);
    tg_write_header(&G);
    tg_buf_bytes(&G.chunk, s, len);
    tg_chunk(&G, NULL);
    for (int i = 0; i < 20; i++)
        event(10 + (uint64_t)i, 2, 0, 0x1000 + (uint64_t)i * 64, 64, NULL);
    finish();
}

typedef struct diff_stats {
    int traces, bad, errors;
    size_t bulk, events, bulk_stacks, stacks;
} diff_stats_t;

static dlog_t dl[3];

/* Reads the current trace all three ways; counts it and any disagreement. */
static void diff_check(diff_stats_t *st, const char *what, size_t at, unsigned arg)
{
    for (int w = 0; w < 3; w++)
        read_way(w, &dl[w], (uint64_t)st->traces * 0x9e3779b97f4a7c15ull);
    st->traces++;
    st->bulk += dl[READ_BULK].bulk;
    st->errors += dl[READ_NEXT].rc < 0;
    st->events += dl[READ_NEXT].events;
    st->bulk_stacks += dl[READ_BULK].bulk_stacks;
    st->stacks += dl[READ_NEXT].stacks;
    for (int w = 0; w < 3; w += 2) {
        const dlog_t *a = &dl[READ_NEXT], *b = &dl[w];
        int same = a->rc == b->rc && a->n == b->n && !memcmp(a->v, b->v, a->n * sizeof *a->v) &&
                   a->err.code == b->err.code && a->err.offset == b->err.offset &&
                   !strcmp(a->err.detail, b->err.detail);
        if (!same && st->bad++ < 5)
            printf("# %s at %zu (%u): %s differs: rc %d/%d, %zu/%zu words, offset %llu/%llu, '%s' / '%s'\n", what,
                   at, arg, w == READ_BULK ? "bulk" : "checked", a->rc, b->rc, a->n, b->n,
                   (unsigned long long)a->err.offset, (unsigned long long)b->err.offset, a->err.detail,
                   b->err.detail);
    }
}

static void test_bulk_differential(uint16_t version)
{
    diff_version = version;
    rng_state = 0x5eed0fb01cull;
    tg_buf_t src = { 0 };
    size_t starts[512], nstarts;
    diff_stream(&src, starts, &nstarts, 512);
    uint8_t *m = malloc(src.len + 64);
    if (!m)
        abort();
    diff_stats_t st = { 0 };

    /* the stream as written: the bulk path must carry nearly all of it
     * (not all: read_way takes an eighth of the records one by one, and
     * the last of a chunk go that way too) */
    diff_trace(src.p, src.len);
    diff_check(&st, "valid", 0, 0);
    TAP_OK(dl[READ_NEXT].rc == 0 && dl[READ_BULK].bulk >= dl[READ_NEXT].events * 4 / 5,
           "version %u, valid stream: %zu of the %zu events decoded in bulk (rc %d)", version, dl[READ_BULK].bulk,
           dl[READ_NEXT].events, dl[READ_NEXT].rc);

    /* every truncation */
    for (size_t i = 0; i < src.len; i++) {
        diff_trace(src.p, i);
        diff_check(&st, "cut", i, 0);
    }
    /* bit flips: every byte, three masks */
    static const uint8_t masks[] = { 0x80, 0x01, 0x40 };
    for (size_t i = 0; i < src.len; i++)
        for (size_t k = 0; k < sizeof masks; k++) {
            memcpy(m, src.p, src.len);
            m[i] ^= masks[k];
            diff_trace(m, src.len);
            diff_check(&st, "flip", i, masks[k]);
        }
    /* each record's length: off by one, zero, far too long, overlong forms */
    for (size_t r = 0; r < nstarts; r++) {
        size_t at = starts[r] + 1, end = at;
        uint64_t len = 0;
        for (unsigned sh = 0; end < src.len; sh += 7) {
            len |= (uint64_t)(src.p[end] & 0x7f) << sh;
            if (!(src.p[end++] & 0x80))
                break;
        }
        static const uint8_t overlong[][10] = { { 0x80, 0x80, 0x00 }, { 0xff, 0xff, 0xff, 0xff, 0x0f },
                                                { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 },
                                                { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80 } };
        uint64_t vals[] = { 0, len - 1, len + 1, len + 11, len + 111, 1u << 20 };
        for (size_t v = 0; v < sizeof vals / sizeof vals[0] + 4; v++) {
            uint8_t lv[10];
            size_t lk;
            if (v < sizeof vals / sizeof vals[0]) {
                lk = put_varint(lv, vals[v]);
            } else {
                memcpy(lv, overlong[v - sizeof vals / sizeof vals[0]], sizeof lv);
                lk = v - sizeof vals / sizeof vals[0] == 0 ? 3 : v - sizeof vals / sizeof vals[0] == 1 ? 5 : 10;
            }
            memcpy(m, src.p, at);
            memcpy(m + at, lv, lk);
            memcpy(m + at + lk, src.p + end, src.len - end);
            diff_trace(m, at + lk + src.len - end);
            diff_check(&st, "length", starts[r], (unsigned)v);
        }
    }
    /* random damage: 1-4 bytes overwritten (continuation bytes, 0xff, 0 or
     * anything), sometimes cut short after */
    for (int n = 0; n < 2000; n++) {
        memcpy(m, src.p, src.len);
        size_t len = src.len, first = (size_t)(rnd() % src.len);
        for (int k = 1 + (int)(rnd() % 4); k > 0; k--) {
            size_t i = rnd() % 2 ? first + rnd() % 24 : (size_t)(rnd() % src.len);
            static const uint8_t special[] = { 0x80, 0xff, 0x00, 0x7f, 0x81 };
            if (i < len)
                m[i] = rnd() % 2 ? special[rnd() % sizeof special] : (uint8_t)rnd();
        }
        size_t cut = first + (size_t)(rnd() % 200);
        if (rnd() % 4 == 0 && cut < len)
            len = cut;
        diff_trace(m, len);
        diff_check(&st, "random", first, (unsigned)n);
    }
    TAP_EQ_U64(st.bad, 0,
               "version %u: %d mutated traces (%d ending in an error): bulk, one-by-one and field-by-field "
               "readers give the same records and errors",
               version, st.traces, st.errors);
    TAP_OK(st.bulk > st.events / 2, "version %u: the bulk path decoded %zu of the %zu events", version, st.bulk,
           st.events);
    TAP_OK(st.bulk_stacks > st.stacks / 2, "version %u: vt_reader_stack decoded %zu of the %zu STACK records",
           version, st.bulk_stacks, st.stacks);
    for (int w = 0; w < 3; w++) {
        free(dl[w].v);
        dl[w] = (dlog_t){ 0 };
    }
    free(m);
    tg_buf_free(&src);
}

/* Chunks stored uncompressed (a shim without libzstd): the same records,
 * and the same bounds as a zstd chunk's. */
static void test_stored(void)
{
    result_t res;
    begin("stored");
    G.stored = 1;
    G.version = VT_FORMAT_VERSION_STORED;
    process(1);
    tg_write_header(&G);
    event(1000, 2, 0, 0x1000, 64, NULL);
    tg_chunk(&G, NULL);
    event(2000, 2, 1, 0x2000, 128, NULL);
    finish();
    res = read_all();
    TAP_EQ_U64((uint64_t)res.rc, 0, "stored chunks: read to a clean end (%s)", res.err.detail);
    TAP_EQ_U64((uint64_t)res.n, 3, "stored chunks: PROCESS and both events");
    TAP_OK(res.last.type == VT_REC_EVENT && res.last.u.event.size == 128 && res.last.u.event.ptr == 0x2000 &&
               res.last.u.event.time_ns == START + 2000 && res.last.chunk_seq == 1,
           "stored chunks: the second chunk's event decodes against its own chunk's bases");

    begin("stored-v3");
    G.stored = 1;
    process(1);
    tg_write_header(&G);
    event(1000, 2, 0, 0x1000, 64, NULL);
    finish();
    res = read_all();
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_CORRUPT, "a stored chunk in a version 3 file is corrupt");
    TAP_OK(strstr(res.err.detail, "bad chunk magic") != NULL, "... a bad chunk magic there: %s", res.err.detail);

    begin("stored-zsize");
    G.stored = 1;
    G.version = VT_FORMAT_VERSION_STORED;
    process(1);
    tg_write_header(&G);
    /* The 16-byte prelude, then the header body: where the first chunk is. */
    uint64_t chunk_at = 16 + G.header.len;
    event(1000, 2, 0, 0x1000, 64, NULL);
    tg_chunk(&G, &(tg_chunk_opts_t){ .has_zsize = 1, .zsize = 3 });
    finish();
    res = read_all();
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_CORRUPT, "stored chunk whose zsize is not its rawsize: corrupt");
    TAP_EQ_U64(res.err.offset, chunk_at + 4, "... at its zsize field");

    begin("stored-cut");
    G.stored = 1;
    G.version = VT_FORMAT_VERSION_STORED;
    process(1);
    tg_write_header(&G);
    chunk_at = 16 + G.header.len;
    event(1000, 2, 0, 0x1000, 64, NULL);
    finish();
    struct stat st;
    if (stat(path, &st) != 0 || truncate(path, st.st_size - 2) != 0)
        perror(path);
    res = read_all();
    TAP_EQ_U64((uint64_t)-res.rc, (uint64_t)-VT_E_TRUNCATED, "stored chunk cut short: truncated");
    TAP_EQ_U64(res.err.offset, chunk_at, "... at the chunk's start");
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/vt-reader.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_valid(VT_FORMAT_VERSION);
    test_valid(2);
    test_version1();
    test_version3();
    test_payloads();
    test_file_level();
    test_stored();
    test_stream_mutations();
    test_bulk_differential(VT_FORMAT_VERSION);
    test_bulk_differential(2);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", dir);
    return tap_done();
}
