/* cmd_dump.c: `vramtrace dump [--stacks] TRACE`, every record decoded, one line
 * each, in file order; `vramtrace dump --count TRACE`, how many of each.
 *
 * Contract: the output is line-oriented `kind key=value ...` that tests and
 * users grep, so it stays stable. Strings from the trace are never printed
 * raw: bare values (exe=, path=, function=, host=, shim=) escape space, '"',
 * '\\' and every byte outside printable ASCII as \xNN (so a value never
 * contains a space); quoted values (name=, text=, argv items) escape '"' and
 * '\\' with a backslash and the same bytes as \xNN. Times are t=<ns since the
 * PROCESS record's mono_start_ns>, signed.
 *
 * --stacks keeps the STACK, FRAME and MODULE records seen so far in hash
 * tables (bounded: DUMP_MAX_*; past a cap new entries are dropped and one
 * warning says so) and prints each event's stack below it, innermost first.
 *
 * --count reads the way the report does (the bulk paths of trace_reader.h)
 * and prints `kind count` lines, so it also times the reading alone: the
 * floor under every report (`make bench`).
 *
 * On a reader error everything before it has been printed; the error goes to
 * stderr and the exit status is 2.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "report.h"
#include "trace_reader.h"
#include "u64map.h"
#include "vramtrace/entrypoints.h"

#define DUMP_MAX_NODES (1u << 22)
#define DUMP_MAX_FRAMES (1u << 22)
#define DUMP_MAX_MODULES (1u << 16)
#define DUMP_MAX_STRING_BYTES ((size_t)256 << 20)

/* ---- escaping ---------------------------------------------------------- */

static void put_escaped(FILE *out, const char *s, uint32_t len, int quoted)
{
    for (uint32_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            if (quoted)
                fprintf(out, "\\%c", ch);
            else
                fprintf(out, "\\x%02x", ch);
        } else if (ch < 0x20 || ch >= 0x7f || (!quoted && ch == ' ')) {
            fprintf(out, "\\x%02x", ch);
        } else {
            putc(ch, out);
        }
    }
}

static void put_bare(FILE *out, vt_bytes_t b)
{
    put_escaped(out, b.data, b.len, 0);
}

static void put_quoted(FILE *out, vt_bytes_t b)
{
    putc('"', out);
    put_escaped(out, b.data, b.len, 1);
    putc('"', out);
}

static void put_hex(FILE *out, const void *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        fprintf(out, "%02x", ((const unsigned char *)p)[i]);
}

/* ---- bounded id -> entry tables for --stacks --------------------------- */

typedef struct node { uint64_t parent, ip; } node_t;
typedef struct frame { uint64_t module_id; char *function; uint32_t function_len; } frame_t;
typedef struct module { char *path; uint32_t path_len; } module_t;

/* key -> index into an entry array (the analyzer's address map, whose
 * hash no trace can aim at), at most max entries. */
typedef struct idmap {
    vt_map_t map;
    size_t n, max;
    int full_warned;
} idmap_t;

/* @return the entry index for key, creating one (*added = 1) if absent;
 * -1 when the table is at its cap or memory ran out. */
static long idmap_get(idmap_t *m, uint64_t key, int create, int *added)
{
    *added = 0;
    size_t hole;
    size_t slot = vt_map_find_hole(&m->map, key, &hole);
    if (slot != SIZE_MAX)
        return (long)m->map.slots[slot].val;
    if (!create || m->n >= m->max || vt_map_put_hole(&m->map, hole, key, (uint32_t)m->n))
        return -1;
    *added = 1;
    return (long)m->n++;
}

typedef struct stacks {
    idmap_t node_map, frame_map, module_map;
    node_t *nodes;
    frame_t *frames;
    module_t *modules;
    size_t node_cap, frame_cap, module_cap;
    size_t string_bytes;
    const char *path;
} stacks_t;

/* Grows arr (of elem-size entries) to hold index i. */
/* " lost=KEY:N,..." for the loss by reason, when the record states it; ends
 * the line. */
static void dump_lost(FILE *out, const vt_lost_t *l)
{
    for (uint32_t i = 0; i < l->reasons && i < VT_LOST_REASONS; i++)
        fprintf(out, "%s%s:%" PRIu64, i ? "," : " lost=", vt_lost_reason_key((int)i), l->lost[i]);
}

static int ensure(void **arr, size_t *cap, size_t i, size_t elem)
{
    if (i < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 1024;
    while (ncap <= i)
        ncap *= 2;
    void *na = realloc(*arr, ncap * elem);
    if (!na)
        return -1;
    *arr = na;
    *cap = ncap;
    return 0;
}

static void warn_full(stacks_t *st, idmap_t *m, const char *what)
{
    if (m->full_warned++)
        return;
    fprintf(stderr, "vramtrace: %s: dump --stacks keeps at most %zu %s; later ones are not shown\n", st->path,
            m->max, what);
}

/* Copies a string into *dst, within the overall string budget. */
static int keep_string(stacks_t *st, char **dst, uint32_t *dst_len, vt_bytes_t b)
{
    if (st->string_bytes + b.len > DUMP_MAX_STRING_BYTES)
        return -1;
    char *s = malloc(b.len ? b.len : 1);
    if (!s)
        return -1;
    if (b.len)
        memcpy(s, b.data, b.len);
    if (*dst)
        st->string_bytes -= *dst_len;
    free(*dst);
    *dst = s;
    *dst_len = b.len;
    st->string_bytes += b.len;
    return 0;
}

static void stacks_add(stacks_t *st, const vt_record_t *rec)
{
    int added;
    long i;
    switch (rec->type) {
    case VT_REC_STACK:
        /* Room first, so a table never holds an index without an entry. */
        if (ensure((void **)&st->nodes, &st->node_cap, st->node_map.n, sizeof *st->nodes))
            return;
        i = idmap_get(&st->node_map, rec->u.stack.node_id, 1, &added);
        if (i < 0) {
            warn_full(st, &st->node_map, "stack nodes");
            return;
        }
        st->nodes[i] = (node_t){ rec->u.stack.parent_id, rec->u.stack.ip };
        break;
    case VT_REC_FRAME:
        if (ensure((void **)&st->frames, &st->frame_cap, st->frame_map.n, sizeof *st->frames))
            return;
        i = idmap_get(&st->frame_map, rec->u.frame.ip, 1, &added);
        if (i < 0) {
            warn_full(st, &st->frame_map, "frames");
            return;
        }
        if (added)
            st->frames[i] = (frame_t){ 0 };
        st->frames[i].module_id = rec->u.frame.module_id;
        if (keep_string(st, &st->frames[i].function, &st->frames[i].function_len, rec->u.frame.function))
            st->frames[i].function_len = 0;
        break;
    case VT_REC_MODULE:
        if (ensure((void **)&st->modules, &st->module_cap, st->module_map.n, sizeof *st->modules))
            return;
        i = idmap_get(&st->module_map, rec->u.module.module_id, 1, &added);
        if (i < 0) {
            warn_full(st, &st->module_map, "modules");
            return;
        }
        if (added)
            st->modules[i] = (module_t){ 0 };
        if (keep_string(st, &st->modules[i].path, &st->modules[i].path_len, rec->u.module.path))
            st->modules[i].path_len = 0;
        break;
    }
}

static void stacks_print(FILE *out, stacks_t *st, uint64_t leaf)
{
    uint64_t id = leaf;
    unsigned depth = 0;
    int added;
    for (; id != 0 && depth < VT_MAX_STACK_DEPTH; depth++) {
        long ni = idmap_get(&st->node_map, id, 0, &added);
        if (ni < 0) {
            fprintf(out, "    #%u <stack node %" PRIu64 " not in trace>\n", depth, id);
            return;
        }
        const node_t *n = &st->nodes[ni];
        fprintf(out, "    #%u 0x%" PRIx64 " ", depth, VT_IP_ADDR(n->ip));
        long fi = idmap_get(&st->frame_map, n->ip, 0, &added);
        const frame_t *f = fi < 0 ? NULL : &st->frames[fi];
        if (f && f->function_len)
            put_escaped(out, f->function, f->function_len, 0);
        else
            fputs("??", out);
        long mi = f ? idmap_get(&st->module_map, f->module_id, 0, &added) : -1;
        fputs(" (", out);
        if (mi >= 0 && st->modules[mi].path_len)
            put_escaped(out, st->modules[mi].path, st->modules[mi].path_len, 0);
        else
            fputs("?", out);
        fputs(")\n", out);
        id = n->parent;  /* the reader guarantees parent < node: this ends */
    }
    if (id != 0)
        fprintf(out, "    ... deeper than %u frames\n", VT_MAX_STACK_DEPTH);
}

static void stacks_free(stacks_t *st)
{
    for (size_t i = 0; i < st->frame_map.n; i++)
        free(st->frames[i].function);
    for (size_t i = 0; i < st->module_map.n; i++)
        free(st->modules[i].path);
    free(st->nodes);
    free(st->frames);
    free(st->modules);
    idmap_t *maps[] = { &st->node_map, &st->frame_map, &st->module_map };
    for (size_t i = 0; i < 3; i++)
        vt_map_free(&maps[i]->map);
}

/* ---- record lines ------------------------------------------------------ */

static void put_flags(FILE *out, uint32_t flags)
{
    if (!flags) {
        fputs("0", out);
        return;
    }
    const char *sep = "";
    uint32_t unknown = 0;
    for (unsigned b = 0; b < 32; b++) {
        uint32_t bit = flags & (1u << b);
        const char *name = bit ? vt_event_flag_name(bit) : NULL;
        if (name) {
            fprintf(out, "%s%s", sep, name);
            sep = "|";
        } else {
            unknown |= bit;
        }
    }
    if (unknown)
        fprintf(out, "%s0x%" PRIx32, sep, unknown);
}

static void put_event(FILE *out, const vt_event_t *e, int64_t t)
{
    const vt_api_info_t *api = vt_api_info(e->api);
    fprintf(out, "event t=%" PRId64 " api=", t);
    if (api)
        fprintf(out, "%s kind=%s space=%s", api->name, vt_kind_name(api->kind), vt_space_name(api->space));
    else
        fprintf(out, "#%u kind=? space=?", e->api);
    fprintf(out,
            " tid=%" PRIu32 " dev=%d ptr=0x%" PRIx64 " size=%" PRIu64 " reserved=%" PRIu64 " aux=0x%" PRIx64
            " flags=",
            e->tid, e->device, e->ptr, e->size, e->reserved, e->aux);
    put_flags(out, e->flags);
    fprintf(out, " result=%" PRIu32 " stack=%" PRIu32 "\n", e->result, e->stack);
}

/* lead, then the strings quoted and comma-separated, then "]". */
static void put_list(FILE *out, const char *lead, const vt_bytes_t *items, uint32_t n)
{
    fputs(lead, out);
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            putc(',', out);
        put_quoted(out, items[i]);
    }
    putc(']', out);
}

static void put_process(FILE *out, const vt_rec_process_t *p)
{
    fprintf(out, "process pid=%" PRIu64 " ppid=%" PRIu64 " exe=", p->pid, p->ppid);
    put_bare(out, p->exe);
    put_list(out, " argv=[", p->argv, p->argc);
    if (p->env_recorded)
        put_list(out, " env=[", p->env, p->envc);
    fputs(" host=", out);
    put_bare(out, p->hostname);
    fputs(" shim=", out);
    put_bare(out, p->shim_version);
    fprintf(out, " start_mono=%" PRIu64 " start_wall=%" PRIu64, p->mono_start_ns, p->wall_start_ns);
    if (p->time_res_ns)
        fprintf(out, " time_res=%" PRIu64, p->time_res_ns);
    if (p->degraded) {
        static const struct { uint64_t bit; const char *name; } known[] = {
            { VT_DEGRADED_NO_ZSTD, "no-zstd" },
            { VT_DEGRADED_NO_LIBUNWIND, "no-libunwind" },
            { VT_DEGRADED_SHARED_FDS, "shared-fds" },
        };
        uint64_t rest = p->degraded;
        const char *sep = " degraded=";
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (rest & known[i].bit) {
                fprintf(out, "%s%s", sep, known[i].name);
                rest &= ~known[i].bit;
                sep = "|";
            }
        if (rest)
            fprintf(out, "%s0x%" PRIx64, sep, rest);
    }
    putc('\n', out);
}

static void put_record(FILE *out, const vt_record_t *rec, uint64_t start)
{
#define REL(t) ((int64_t)((t) - start))
    switch (rec->type) {
    case VT_REC_PROCESS:
        put_process(out, &rec->u.process);
        break;
    case VT_REC_DEVICE: {
        const vt_rec_device_t *d = &rec->u.device;
        fprintf(out, "device ordinal=%" PRId32 " total=%" PRIu64 " free=%" PRIu64 " uuid=", d->ordinal,
                d->total_bytes, d->free_bytes);
        put_hex(out, d->uuid, sizeof d->uuid);
        fputs(" name=", out);
        put_quoted(out, d->name);
        fprintf(out, " t=%" PRId64 "\n", REL(d->time_ns));
        break;
    }
    case VT_REC_MODULE: {
        const vt_rec_module_t *m = &rec->u.module;
        fprintf(out, "module id=%" PRIu64 " base=0x%" PRIx64 " size=0x%" PRIx64 " build_id=", m->module_id,
                m->base, m->size);
        put_hex(out, m->build_id.data, m->build_id.len);
        fputs(" path=", out);
        put_bare(out, m->path);
        putc('\n', out);
        break;
    }
    case VT_REC_FRAME: {
        const vt_rec_frame_t *f = &rec->u.frame;
        fprintf(out, "frame ip=0x%" PRIx64 " module=%" PRIu64 " offset=0x%" PRIx64 " function=", VT_IP_ADDR(f->ip),
                f->module_id, f->sym_offset);
        put_bare(out, f->function);
        if (VT_IP_EPOCH(f->ip))
            fprintf(out, " epoch=%u", VT_IP_EPOCH(f->ip));
        putc('\n', out);
        break;
    }
    case VT_REC_STACK:
        fprintf(out, "stack node=%" PRIu64 " parent=%" PRIu64 " ip=0x%" PRIx64, rec->u.stack.node_id,
                rec->u.stack.parent_id, VT_IP_ADDR(rec->u.stack.ip));
        if (VT_IP_EPOCH(rec->u.stack.ip))
            fprintf(out, " epoch=%u", VT_IP_EPOCH(rec->u.stack.ip));
        putc('\n', out);
        break;
    case VT_REC_EVENT:
        put_event(out, &rec->u.event, REL(rec->u.event.time_ns));
        break;
    case VT_REC_DROPPED:
        fprintf(out, "dropped t=%" PRId64 " total=%" PRIu64 " stacks_lost=%" PRIu64, REL(rec->u.dropped.time_ns),
                rec->u.dropped.dropped_total, rec->u.dropped.stacks_lost_total);
        dump_lost(out, &rec->u.dropped.by_reason);
        fputc('\n', out);
        break;
    case VT_REC_NOTE:
        fprintf(out, "note t=%" PRId64 " text=", REL(rec->u.note.time_ns));
        put_quoted(out, rec->u.note.text);
        putc('\n', out);
        break;
    case VT_REC_END:
        fprintf(out, "end t=%" PRId64 " events=%" PRIu64 " dropped=%" PRIu64, REL(rec->u.end.time_ns),
                rec->u.end.events_total, rec->u.end.dropped_total);
        dump_lost(out, &rec->u.end.by_reason);
        /* The call that ended it, where that was not exit (vt_end_how). */
        if (rec->u.end.how != VT_END_EXIT && vt_end_how_name(rec->u.end.how))
            fprintf(out, " by=%s", vt_end_how_name(rec->u.end.how));
        else if (rec->u.end.how != VT_END_EXIT)
            fprintf(out, " by=%" PRIu64, rec->u.end.how);
        fputc('\n', out);
        break;
    case VT_REC_RANGE:
        fprintf(out, "range t=%" PRId64 " tid=%" PRIu64 " depth=%" PRIu64 " %s name=", REL(rec->u.range.time_ns),
                rec->u.range.tid, rec->u.range.depth, rec->u.range.push ? "push" : "pop");
        put_quoted(out, rec->u.range.name);
        putc('\n', out);
        break;
    case VT_REC_GGML_BUFFER: {
        const vt_rec_ggml_buffer_t *g = &rec->u.ggml_buffer;
        const char *usage = vt_ggml_usage_name(g->usage);
        fprintf(out, "ggml_buffer t=%" PRId64 " buffer=0x%" PRIx64 " usage=", REL(g->time_ns), g->buffer);
        if (usage)
            fputs(usage, out);
        else
            fprintf(out, "%" PRIu64, g->usage);
        fprintf(out, " base=0x%" PRIx64 " size=%" PRIu64 " name=", g->base, g->size);
        put_quoted(out, g->name);
        if (g->host)
            fprintf(out, " host=%s", g->host == 1 ? "no" : g->host == 2 ? "yes" : "?");
        putc('\n', out);
        break;
    }
    case VT_REC_GGML_TENSOR: {
        const vt_rec_ggml_tensor_t *t = &rec->u.ggml_tensor;
        fprintf(out, "ggml_tensor t=%" PRId64 " buffer=0x%" PRIx64 " data=0x%" PRIx64 " nbytes=%" PRIu64 " name=",
                REL(t->time_ns), t->buffer, t->data, t->nbytes);
        put_quoted(out, t->name);
        if (t->rows)
            fprintf(out, " rows=%" PRIu64, t->rows);
        putc('\n', out);
        break;
    }
    case VT_REC_GGML_FREE:
        fprintf(out, "ggml_free t=%" PRId64 " buffer=0x%" PRIx64 "\n", REL(rec->u.ggml_free.time_ns),
                rec->u.ggml_free.buffer);
        break;
    case VT_REC_GGML_LOST:
        fprintf(out, "ggml_lost t=%" PRId64 " lost=%" PRIu64 "\n", REL(rec->u.ggml_lost.time_ns),
                rec->u.ggml_lost.lost_total);
        break;
    }
#undef REL
}

/* ---- the command ------------------------------------------------------- */

static void dump_usage(FILE *out)
{
    fprintf(out, "usage: vramtrace dump [--stacks | --count] TRACE\n"
                 "Prints every record of TRACE, decoded, one line each, in file order.\n"
                 "  --stacks   after each event, print its call stack, innermost frame first\n"
                 "  --count    print only how many records of each kind, `kind count` lines\n"
                 "Exit status: 0 ok, 2 unreadable, corrupt or truncated trace (records before\n"
                 "the damage are still printed).\n");
}

/* The word put_record starts a kind's line with: the reader's name for
 * the kind in lower case, so the two cannot disagree. */
static const char *kind_word(unsigned type, char *buf, size_t size)
{
    const char *name = vt_record_type_name(type);
    size_t i = 0;
    for (; name && name[i] && i + 1 < size; i++)
        buf[i] = (char)tolower((unsigned char)name[i]);
    buf[i] = '\0';
    return buf;
}

/* --count: the report's way of reading (events and stack nodes in bulk),
 * nothing kept. The reader skips kinds it does not know, so every record
 * it returns has a word. */
static int count_records(const char *path, vt_reader_t *r)
{
    uint64_t counts[VT_REC_TYPES] = { 0 };
    vt_event_t batch[256];
    vt_record_t rec;
    vt_error_t err;
    int rc;
    for (;;) {
        size_t got = vt_reader_events(r, batch, sizeof batch / sizeof batch[0]);
        counts[VT_REC_EVENT] += got;
        if (got)
            continue;
        if (vt_reader_stack(r, &rec.u.stack)) {
            counts[VT_REC_STACK]++;
            continue;
        }
        if ((rc = vt_reader_next(r, &rec, &err)) <= 0)
            break;
        if (rec.type < VT_REC_TYPES)
            counts[rec.type]++;
    }
    uint64_t total = 0;
    for (unsigned t = 0; t < VT_REC_TYPES; t++) {
        if (!counts[t])
            continue;
        char word[32];
        printf("%s %" PRIu64 "\n", kind_word(t, word, sizeof word), counts[t]);
        total += counts[t];
    }
    printf("records %" PRIu64 "\n", total);
    fflush(stdout);
    if (rc < 0) {
        if (rc == VT_E_TRUNCATED)
            fprintf(stderr, "vramtrace: %s: trace is cut short (process killed, disk full, or still writing): "
                            "counted the records of its complete chunks\n",
                    path);
        vt_error_print(&err);
        return VT_EXIT_BAD_INPUT;
    }
    return VT_EXIT_OK;
}

int vt_cmd_dump(int argc, char **argv)
{
    int with_stacks = 0, count = 0;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            dump_usage(stdout);
            return VT_EXIT_OK;
        } else if (!strcmp(argv[i], "--stacks")) {
            with_stacks = 1;
        } else if (!strcmp(argv[i], "--count")) {
            count = 1;
        } else if (!strcmp(argv[i], "--") && i + 1 < argc && !path) {
            path = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return vt_usage_error("dump", "unknown option '%s'", argv[i]);
        } else if (!path) {
            path = argv[i];
        } else {
            fprintf(stderr, "vramtrace: dump: one TRACE at a time\n");
            return VT_EXIT_BAD_INPUT;
        }
    }
    if (!path || (count && with_stacks))
        return vt_usage_error("dump", path ? "--count and --stacks are exclusive" : "no TRACE given");

    vt_reader_t *r;
    vt_error_t err;
    if (vt_reader_open(path, &r, &err) < 0) {
        vt_error_print(&err);
        return VT_EXIT_BAD_INPUT;
    }
    if (count) {
        int crc = count_records(path, r);
        vt_reader_close(r);
        return crc;
    }
    stacks_t st = { .path = path };
    st.node_map.max = DUMP_MAX_NODES;
    st.frame_map.max = DUMP_MAX_FRAMES;
    st.module_map.max = DUMP_MAX_MODULES;

    const uint64_t start = vt_reader_process(r)->mono_start_ns;
    uint64_t chunks_seen = 0;
    vt_record_t rec;
    int rc;
    while ((rc = vt_reader_next(r, &rec, &err)) > 0) {
        if (rec.chunk_seq != UINT32_MAX)
            chunks_seen = (uint64_t)rec.chunk_seq + 1;
        put_record(stdout, &rec, start);
        if (with_stacks) {
            stacks_add(&st, &rec);
            if (rec.type == VT_REC_EVENT && rec.u.event.stack)
                stacks_print(stdout, &st, rec.u.event.stack);
        }
    }
    fflush(stdout);
    if (rc < 0) {
        if (rc == VT_E_TRUNCATED)
            fprintf(stderr,
                    "vramtrace: %s: trace is cut short (process killed, disk full, or still writing): "
                    "printed the records of %" PRIu64 " complete chunks\n",
                    path, chunks_seen);
        vt_error_print(&err);
    }
    stacks_free(&st);
    vt_reader_close(r);
    return rc < 0 ? VT_EXIT_BAD_INPUT : VT_EXIT_OK;
}
