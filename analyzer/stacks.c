/* Calling-context tree storage (see stacks.h). Nodes are dense arrays by id
 * (ids are dense from 1 in the writer); frames are deduplicated by ip. */
#include "stacks.h"

#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "model_map.h"

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
} module_rec_t;

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
};

vt_stacks_t *vt_stacks_new(void)
{
    vt_stacks_t *s = calloc(1, sizeof *s);
    if (s)
        vt_map_init(&s->frame_by_ip);
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
    free(s);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q)
        return VT_E_NOMEM;
    *p = q;
    *cap = n;
    return 0;
}

int vt_stacks_add_module(vt_stacks_t *s, const vt_rec_module_t *m)
{
    /* A module id seen again (fork child re-reports) replaces the entry. */
    module_rec_t *dst = NULL;
    for (size_t i = 0; i < s->nmodules; i++)
        if (s->modules[i].id == m->module_id)
            dst = &s->modules[i];
    if (!dst) {
        if (grow((void **)&s->modules, &s->modules_cap, s->nmodules + 1, sizeof *s->modules))
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
    const char *slash = strrchr(path, '/');
    dst->basename = slash ? slash + 1 : path;
    return 0;
}

int vt_stacks_add_frame(vt_stacks_t *s, const vt_rec_frame_t *f)
{
    uint32_t idx;
    if (vt_map_get(&s->frame_by_ip, f->ip, &idx))
        return 0;   /* first name wins: the writer reports each ip once */
    if (grow((void **)&s->frames, &s->frames_cap, s->nframes + 1, sizeof *s->frames))
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
        if (grow((void **)&s->parent, &cap_p, (size_t)id + 1, sizeof *s->parent) ||
            grow((void **)&s->ip, &cap_i, (size_t)id + 1, sizeof *s->ip))
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
    for (size_t i = 0; i < s->nmodules; i++)
        if (ip >= s->modules[i].base && ip - s->modules[i].base < s->modules[i].size)
            return &s->modules[i];
    return NULL;
}

int vt_stacks_get(const vt_stacks_t *s, uint32_t leaf, vt_frame_t *out, int max)
{
    int n = 0;
    uint32_t id = leaf;
    while (id != 0 && id < s->nodes_cap && s->parent[id] != UINT32_MAX && n < max && n < (int)VT_MAX_STACK_DEPTH) {
        vt_frame_t *f = &out[n++];
        uint32_t idx;
        const module_rec_t *mod;
        f->ip = s->ip[id];
        if (vt_map_get(&s->frame_by_ip, f->ip, &idx)) {
            const frame_rec_t *fr = &s->frames[idx];
            f->sym_offset = fr->sym_offset;
            f->module_id = fr->module_id;
            f->display = fr->display;
            f->name = fr->name;
            mod = fr->module_id ? module_by_id(s, fr->module_id) : module_by_ip(s, f->ip);
        } else {
            f->sym_offset = 0;
            f->display = f->name = "";
            mod = module_by_ip(s, f->ip);
            f->module_id = mod ? (uint32_t)mod->id : 0;
        }
        f->module = mod ? mod->path : "";
        f->module_base = mod ? mod->basename : "";
        id = s->parent[id];
    }
    return n;
}

uint64_t vt_stacks_bad_nodes(const vt_stacks_t *s)
{
    return s->bad_nodes;
}
