/* Calling-context tree storage (see stack_tree.h). Nodes are dense arrays by id
 * (ids are dense from 1 in the writer); frames are deduplicated by ip, the
 * whole of it: two frames at one address in different load epochs
 * (trace_format.h, VT_REC_STACK) are different code. Where the ip is an
 * address (module, source line), its epoch bits are masked.
 * Source lines live in a separate cache (struct srccache) filled only by
 * vt_stacks_get_src. */
#include "stack_tree.h"

#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "dwarf_lines.h"
#include "grow.h"
#include "u64map.h"
#include "vramtrace/trace_format.h"

/* A gap in node ids larger than this is treated as corruption: it would
 * make us allocate for ids that never come. Stacks lost by the shim (see
 * VT_REC_DROPPED) leave small gaps at most. */
#define MAX_NODE_GAP (1u << 20)

typedef struct frame_rec {
    uint64_t ip, sym_offset;
    uint32_t module_id;
    char *display, *name;
} frame_rec_t;

typedef struct module_rec {
    uint64_t id, base, size;
    char *path;
    const char *basename;
    uint8_t build_id[VT_DWARF_MAX_BUILD_ID];
    size_t build_id_len;   /* 0: absent (or too long): never resolved */
} module_rec_t;

typedef struct src_line {
    char *file;   /* NULL: no line for this ip */
    uint32_t line;
} src_line_t;

/* Mutable behind a const vt_stacks_t: a cache of lookups. */
/* One DWARF reader for every stack tree of the process: a report of a
 * directory of runners has a tree per trace, and each opening the same
 * libraries' debug info again kept about 17 MB a trace (100 copies of one
 * runner's trace: 1.69 GB). Opened on first use, closed with the last
 * tree; the analyzer is single-threaded. */
static struct {
    vt_dwarf_t *dw;
    size_t trees;
} shared_dwarf;

typedef struct srccache {
    vt_dwarf_t *dw;          /* shared_dwarf.dw once used */
    vt_map_t by_ip;          /* ip -> index in lines */
    src_line_t *lines;
    size_t nlines, lines_cap;
    vt_map_t bad_module;     /* module ids found unusable */
    int failed;              /* out of memory once: stop trying */
} srccache_t;

struct vt_stacks {
    uint32_t *parent;   /* by node id; UINT32_MAX = absent */
    uint64_t *ip;
    size_t nodes_cap;
    uint32_t max_id;
    frame_rec_t *frames;
    size_t nframes, frames_cap;
    vt_map_t frame_by_ip;
    module_rec_t *modules;
    size_t nmodules, modules_cap;
    uint64_t bad_nodes;
    int source_off;
    srccache_t *src;
};

vt_stacks_t *vt_stacks_new(void)
{
    vt_stacks_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    vt_map_init(&s->frame_by_ip);
    if (!(s->src = calloc(1, sizeof *s->src))) {
        free(s);
        return NULL;
    }
    vt_map_init(&s->src->by_ip);
    vt_map_init(&s->src->bad_module);
    shared_dwarf.trees++;
    return s;
}

void vt_stacks_free(vt_stacks_t *s)
{
    if (!s)
        return;
    free(s->parent);
    free(s->ip);
    for (size_t i = 0; i < s->nframes; i++) {
        free(s->frames[i].display);
        free(s->frames[i].name);
    }
    free(s->frames);
    vt_map_free(&s->frame_by_ip);
    for (size_t i = 0; i < s->nmodules; i++)
        free(s->modules[i].path);
    free(s->modules);
    if (s->src) {
        if (--shared_dwarf.trees == 0) {
            vt_dwarf_free(shared_dwarf.dw);
            shared_dwarf.dw = NULL;
        }
        vt_map_free(&s->src->by_ip);
        vt_map_free(&s->src->bad_module);
        for (size_t i = 0; i < s->src->nlines; i++)
            free(s->src->lines[i].file);
        free(s->src->lines);
        free(s->src);
    }
    free(s);
}

int vt_stacks_add_module(vt_stacks_t *s, const vt_rec_module_t *m)
{
    /* A module id seen again (fork child re-reports) replaces the entry. */
    module_rec_t *dst = NULL;
    for (size_t i = 0; i < s->nmodules; i++)
        if (s->modules[i].id == m->module_id)
            dst = &s->modules[i];
    if (!dst) {
        if (vt_grow((void **)&s->modules, &s->modules_cap, s->nmodules + 1, sizeof *s->modules, 64))
            return VT_E_NOMEM;
        dst = &s->modules[s->nmodules++];
        dst->path = NULL;
    }
    char *path = malloc((size_t)m->path.len + 1);
    if (!path)
        return VT_E_NOMEM;
    if (m->path.len)
        memcpy(path, m->path.data, m->path.len);
    path[m->path.len] = 0;
    free(dst->path);
    dst->id = m->module_id;
    dst->base = m->base;
    dst->size = m->size;
    dst->path = path;
    dst->build_id_len = m->build_id.len <= VT_DWARF_MAX_BUILD_ID ? m->build_id.len : 0;
    if (dst->build_id_len)
        memcpy(dst->build_id, m->build_id.data, dst->build_id_len);
    /* A re-reported module may be another file now: forget its verdict. */
    vt_map_del(&s->src->bad_module, m->module_id, NULL);
    const char *slash = strrchr(path, '/');
    dst->basename = slash ? slash + 1 : path;
    return 0;
}

int vt_stacks_add_frame(vt_stacks_t *s, const vt_rec_frame_t *f)
{
    uint32_t idx;
    if (vt_map_get(&s->frame_by_ip, f->ip, &idx))
        return 0;   /* first name wins: the writer reports each ip once */
    if (vt_grow((void **)&s->frames, &s->frames_cap, s->nframes + 1, sizeof *s->frames, 64))
        return VT_E_NOMEM;
    frame_rec_t *fr = &s->frames[s->nframes];
    fr->ip = f->ip;
    fr->sym_offset = f->sym_offset;
    fr->module_id = f->module_id > UINT32_MAX ? 0 : (uint32_t)f->module_id;
    fr->display = vt_demangle(f->function.data, f->function.len);
    fr->name = fr->display ? vt_qualified_name(fr->display) : NULL;
    if (!fr->display || !fr->name) {
        free(fr->display);
        free(fr->name);
        return VT_E_NOMEM;
    }
    if (vt_map_put(&s->frame_by_ip, f->ip, (uint32_t)s->nframes)) {
        free(fr->display);
        free(fr->name);
        return VT_E_NOMEM;
    }
    s->nframes++;
    return 0;
}

int vt_stacks_add_node(vt_stacks_t *s, const vt_rec_stack_t *n)
{
    if (n->node_id == 0 || n->parent_id >= n->node_id || n->node_id > (uint64_t)s->max_id + MAX_NODE_GAP) {
        s->bad_nodes++;
        return 0;
    }
    uint32_t id = (uint32_t)n->node_id;
    size_t old = s->nodes_cap;
    if (id >= s->nodes_cap) {
        size_t cap_p = s->nodes_cap, cap_i = s->nodes_cap;
        if (vt_grow((void **)&s->parent, &cap_p, (size_t)id + 1, sizeof *s->parent, 64) ||
            vt_grow((void **)&s->ip, &cap_i, (size_t)id + 1, sizeof *s->ip, 64))
            return VT_E_NOMEM;
        s->nodes_cap = cap_p < cap_i ? cap_p : cap_i;
        for (size_t i = old; i < s->nodes_cap; i++)
            s->parent[i] = UINT32_MAX;
    }
    s->parent[id] = (uint32_t)n->parent_id;
    s->ip[id] = n->ip;
    if (id > s->max_id)
        s->max_id = id;
    return 0;
}

static const module_rec_t *module_by_id(const vt_stacks_t *s, uint64_t id)
{
    for (size_t i = 0; i < s->nmodules; i++)
        if (s->modules[i].id == id)
            return &s->modules[i];
    return NULL;
}

static const module_rec_t *module_by_ip(const vt_stacks_t *s, uint64_t ip)
{
    if (ip & VT_PSEUDO_BIT)
        return NULL;
    ip &= VT_IP_ADDR_MASK;
    for (size_t i = 0; i < s->nmodules; i++)
        if (ip >= s->modules[i].base && ip - s->modules[i].base < s->modules[i].size)
            return &s->modules[i];
    return NULL;
}

/* id is a node a walk passes: not the root, in range, added. */
static inline int is_node(const vt_stacks_t *s, uint32_t id)
{
    return id != 0 && id < s->nodes_cap && s->parent[id] != UINT32_MAX;
}

/* The walk every stack reader shares: leaf to root, at most max (and
 * VT_MAX_STACK_DEPTH) nodes, stopping at an absent node. */
#define WALK(s, leaf, max, n, id)                                                                  \
    for (uint32_t id = (leaf); is_node(s, id) && (n) < (max) && (n) < (int)VT_MAX_STACK_DEPTH; \
         id = (s)->parent[id])

void vt_stacks_frame(const vt_stacks_t *s, uint64_t ip, vt_frame_t *f)
{
    uint32_t idx;
    const module_rec_t *mod;
    f->ip = ip;
    if (vt_map_get(&s->frame_by_ip, ip, &idx)) {
        const frame_rec_t *fr = &s->frames[idx];
        f->sym_offset = fr->sym_offset;
        f->module_id = fr->module_id;
        f->display = fr->display;
        f->name = fr->name;
        mod = fr->module_id ? module_by_id(s, fr->module_id) : module_by_ip(s, ip);
    } else {
        f->sym_offset = 0;
        f->display = f->name = "";
        mod = module_by_ip(s, ip);
        f->module_id = mod ? (uint32_t)mod->id : 0;
    }
    f->module = mod ? mod->path : "";
    f->module_base = mod ? mod->basename : "";
    f->file = "";
    f->line = 0;
}

int vt_stacks_get(const vt_stacks_t *s, uint32_t leaf, vt_frame_t *out, int max)
{
    int n = 0;
    WALK(s, leaf, max, n, id)
    {
        vt_stacks_frame(s, s->ip[id], &out[n]);
        n++;
    }
    return n;
}

int vt_stacks_ips(const vt_stacks_t *s, uint32_t leaf, uint64_t *out, int max)
{
    int n = 0;
    WALK(s, leaf, max, n, id)
    out[n++] = s->ip[id];
    return n;
}

int vt_stacks_node(const vt_stacks_t *s, uint32_t id, uint64_t *ip, uint32_t *parent)
{
    if (!is_node(s, id))
        return 0;
    *ip = s->ip[id];
    *parent = s->parent[id];
    return 1;
}

void vt_stacks_prefetch(const vt_stacks_t *s, uint32_t leaf)
{
    if (leaf < s->nodes_cap) {
        __builtin_prefetch(&s->parent[leaf]);
        __builtin_prefetch(&s->ip[leaf]);
    }
}

uint32_t vt_stacks_max_id(const vt_stacks_t *s)
{
    return s->max_id;
}

void vt_stacks_set_source(vt_stacks_t *s, int on)
{
    s->source_off = !on;
}

/* Looks frame f up (uncached). @return 1 with *file (libdw's, copy it) and
 * *line, else 0. */
static int lookup(const vt_stacks_t *s, const vt_frame_t *f, const char **file, uint32_t *line)
{
    srccache_t *c = s->src;
    uint32_t dummy;
    if (f->ip & VT_PSEUDO_BIT)
        return 0;
    const module_rec_t *mod = f->module_id ? module_by_id(s, f->module_id) : module_by_ip(s, f->ip);
    if (!mod || !mod->build_id_len || vt_map_get(&c->bad_module, mod->id, &dummy))
        return 0;
    /* Every ip in a shim stack is a return address (backtrace(), the shim's
     * own frames skipped, so frame 0 too is the return address into the
     * caller of the CUDA entry point): it points after the call. One byte
     * back lands inside the call instruction, which is the line that
     * called; the return address itself may already be the next line. */
    uint64_t ip = VT_IP_ADDR(f->ip);
    if (ip <= mod->base)
        return 0;
    uint64_t addr = ip - mod->base - 1;
    if (!shared_dwarf.dw)
        shared_dwarf.dw = vt_dwarf_new();
    c->dw = shared_dwarf.dw;
    if (!c->dw) {
        c->failed = 1;
        return 0;
    }
    int rc = vt_dwarf_line(c->dw, mod->path, mod->build_id, mod->build_id_len, addr, file, line);
    if (rc == VT_E_IO && vt_map_put(&c->bad_module, mod->id, 1))
        c->failed = 1;
    if (rc == VT_E_NOMEM)
        c->failed = 1;
    return rc == 1;
}

static void fill_src(const vt_stacks_t *s, vt_frame_t *f)
{
    srccache_t *c = s->src;
    uint32_t idx;
    if (!vt_map_get(&c->by_ip, f->ip, &idx)) {
        if (c->failed)
            return;
        const char *file = NULL;
        uint32_t line = 0;
        int found = lookup(s, f, &file, &line);
        if (vt_grow((void **)&c->lines, &c->lines_cap, c->nlines + 1, sizeof *c->lines, 64)) {
            c->failed = 1;
            return;
        }
        src_line_t *l = &c->lines[c->nlines];
        l->file = found ? strdup(file) : NULL;
        l->line = l->file ? line : 0;
        if (vt_map_put(&c->by_ip, f->ip, (uint32_t)c->nlines)) {
            free(l->file);
            c->failed = 1;
            return;
        }
        idx = (uint32_t)c->nlines++;
    }
    const src_line_t *l = &c->lines[idx];
    if (l->file) {
        f->file = l->file;
        f->line = l->line;
    }
}

void vt_stacks_src(const vt_stacks_t *s, vt_frame_t *frames, int n)
{
    if (!s->source_off)
        for (int i = 0; i < n; i++)
            fill_src(s, &frames[i]);
}

int vt_stacks_get_src(const vt_stacks_t *s, uint32_t leaf, vt_frame_t *out, int max)
{
    int n = vt_stacks_get(s, leaf, out, max);
    vt_stacks_src(s, out, n);
    return n;
}

uint64_t vt_stacks_bad_nodes(const vt_stacks_t *s)
{
    return s->bad_nodes;
}
