/* Rule loading and stack matching (contract and matching order: rules.h). */
#include "rules.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules_builtin.h"

#define MAX_PATTERN 1024
#define MAX_RULES_FILE (16u << 20)

typedef struct rule {
    int tag;
    int on_module;
    int py_only;         /* "py:PATTERN": Python frames only, prefix removed */
    char *pattern;       /* without the "module:" prefix when on_module */
    const char *origin;  /* owned by vt_rules_t.origins */
    unsigned line;       /* 0 for built-ins */
} rule_t;

typedef struct rule_set {
    rule_t *v;
    size_t n, cap;
} rule_set_t;

struct vt_rules {
    rule_set_t user, builtin;
    char *tags[VT_MAX_TAGS];
    int ntags;
    char **origins;
    size_t norigins;
};

static const char *const base_tags[] = {
    [VT_TAG_WEIGHTS] = "weights", [VT_TAG_KV] = "kv", [VT_TAG_SCRATCH] = "scratch", [VT_TAG_UNKNOWN] = "unknown",
};
_Static_assert(sizeof base_tags / sizeof base_tags[0] == VT_TAG_BUILTIN_COUNT, "one name per built-in tag");

int vt_glob_match(const char *p, const char *s)
{
    /* Iterative glob with one backtrack point: linear-ish, no recursion, so
     * a hostile pattern or name cannot blow the stack. */
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*p == '*') {
            star = p++;
            resume = s;
        } else if (*p == *s) {
            p++;
            s++;
        } else if (star) {
            p = star + 1;
            s = ++resume;
        } else {
            return 0;
        }
    }
    while (*p == '*')
        p++;
    return *p == 0;
}

static int tag_id(vt_rules_t *r, const char *name, int create)
{
    for (int i = 0; i < r->ntags; i++)
        if (!strcmp(r->tags[i], name))
            return i;
    if (!create || r->ntags >= VT_MAX_TAGS)
        return -1;
    r->tags[r->ntags] = strdup(name);
    if (!r->tags[r->ntags])
        return VT_E_NOMEM;
    return r->ntags++;
}

static int add_rule(rule_set_t *set, int tag, const char *pattern, size_t plen, const char *origin, unsigned line)
{
    if (set->n == set->cap) {
        size_t ncap = set->cap ? set->cap * 2 : 32;
        rule_t *v = realloc(set->v, ncap * sizeof *v);
        if (!v)
            return VT_E_NOMEM;
        set->v = v;
        set->cap = ncap;
    }
    rule_t *ru = &set->v[set->n];
    ru->on_module = plen > 7 && !memcmp(pattern, "module:", 7);
    if (ru->on_module) {
        pattern += 7;
        plen -= 7;
    }
    ru->py_only = !ru->on_module && plen > 3 && !memcmp(pattern, "py:", 3);
    if (ru->py_only) {
        pattern += 3;
        plen -= 3;
    }
    ru->pattern = strndup(pattern, plen);
    if (!ru->pattern)
        return VT_E_NOMEM;
    ru->tag = tag;
    ru->origin = origin;
    ru->line = line;
    set->n++;
    return 0;
}

static const char *keep_origin(vt_rules_t *r, const char *origin)
{
    char **v = realloc(r->origins, (r->norigins + 1) * sizeof *v);
    if (!v)
        return NULL;
    r->origins = v;
    v[r->norigins] = strdup(origin);
    return v[r->norigins] ? v[r->norigins++] : NULL;
}

vt_rules_t *vt_rules_new(void)
{
    vt_rules_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    for (int i = 0; i < VT_TAG_BUILTIN_COUNT; i++)
        if (tag_id(r, base_tags[i], 1) < 0)
            goto fail;
    for (unsigned i = 0; i < vt_builtin_rule_count; i++) {
        const vt_builtin_rule_t *b = &vt_builtin_rules[i];
        int t = tag_id(r, b->tag, 0);
        if (t < 0 || add_rule(&r->builtin, t, b->pattern, strlen(b->pattern), b->origin, 0))
            goto fail;
    }
    return r;
fail:
    vt_rules_free(r);
    return NULL;
}

void vt_rules_free(vt_rules_t *r)
{
    if (!r)
        return;
    rule_set_t *sets[2] = { &r->user, &r->builtin };
    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; i < sets[s]->n; i++)
            free(sets[s]->v[i].pattern);
        free(sets[s]->v);
    }
    for (int i = 0; i < r->ntags; i++)
        free(r->tags[i]);
    for (size_t i = 0; i < r->norigins; i++)
        free(r->origins[i]);
    free(r->origins);
    free(r);
}

static int valid_tag(const char *t, size_t n)
{
    if (n == 0 || n > 32)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)t[i]) || isdigit((unsigned char)t[i]) || t[i] == '_'))
            return 0;
    return 1;
}

static int bad(vt_error_t *err, const char *origin, unsigned line, const char *fmt, const char *what, size_t wlen)
{
    if (err) {
        snprintf(err->path, sizeof err->path, "%s", origin);
        char shown[80];
        snprintf(shown, sizeof shown, "%.*s", (int)(wlen > 60 ? 60 : wlen), what ? what : "");
        vt_error_set(err, VT_E_RULES, line, fmt, shown);
    }
    return VT_E_RULES;
}

int vt_rules_load_text(vt_rules_t *r, const char *origin, const char *text, size_t len, vt_error_t *err)
{
    const char *org = keep_origin(r, origin);
    if (!org)
        return VT_E_NOMEM;
    unsigned line = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        line++;
        /* Cut the comment: '#' at line start or after a blank. */
        const char *stop = eol;
        for (const char *q = p; q < eol; q++)
            if (*q == '#' && (q == p || isspace((unsigned char)q[-1]))) {
                stop = q;
                break;
            }
        const char *tok[3];
        size_t tlen[3];
        int nt = 0;
        for (const char *q = p; q < stop;) {
            while (q < stop && isspace((unsigned char)*q))
                q++;
            if (q >= stop)
                break;
            const char *s = q;
            while (q < stop && !isspace((unsigned char)*q))
                q++;
            if (nt < 3) {
                tok[nt] = s;
                tlen[nt] = (size_t)(q - s);
            }
            nt++;
        }
        for (const char *q = p; q < stop; q++)
            if (*q == 0)
                return bad(err, origin, line, "NUL byte in line%s", "", 0);
        if (nt == 1)
            return bad(err, origin, line, "expected \"TAG PATTERN\", got only \"%s\"", tok[0], tlen[0]);
        if (nt > 2)
            return bad(err, origin, line, "expected \"TAG PATTERN\", extra field \"%s\" (patterns have no blanks)",
                       tok[2], tlen[2]);
        if (nt == 2) {
            if (!valid_tag(tok[0], tlen[0]))
                return bad(err, origin, line,
                           "bad tag \"%s\": use weights, kv, scratch, unknown or a name of [a-z0-9_]",
                           tok[0], tlen[0]);
            if (tlen[1] > MAX_PATTERN)
                return bad(err, origin, line, "pattern too long: \"%s...\"", tok[1], tlen[1]);
            if (tlen[1] == 7 && !memcmp(tok[1], "module:", 7))
                return bad(err, origin, line, "empty module pattern \"%s\"", tok[1], tlen[1]);
            char name[33];
            memcpy(name, tok[0], tlen[0]);
            name[tlen[0]] = 0;
            int t = tag_id(r, name, 1);
            if (t == VT_E_NOMEM)
                return t;
            if (t < 0)
                return bad(err, origin, line, "too many tags (at most 16 in all), at \"%s\"", tok[0], tlen[0]);
            int rc = add_rule(&r->user, t, tok[1], tlen[1], org, line);
            if (rc)
                return rc;
        }
        p = eol + 1;
    }
    return 0;
}

int vt_rules_load_file(vt_rules_t *r, const char *path, vt_error_t *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (err) {
            snprintf(err->path, sizeof err->path, "%s", path);
            vt_error_set(err, VT_E_RULES, 0, "cannot open: %s", strerror(errno));
        }
        return VT_E_RULES;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            if (cap >= MAX_RULES_FILE) {
                free(buf);
                fclose(f);
                if (err) {
                    snprintf(err->path, sizeof err->path, "%s", path);
                    vt_error_set(err, VT_E_RULES, 0, "file larger than 16 MiB");
                }
                return VT_E_RULES;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (!got)
            break;
        n += got;
    }
    fclose(f);
    if (!buf)
        return VT_E_NOMEM;
    int rc = vt_rules_load_text(r, path, buf, n, err);
    free(buf);
    return rc;
}

/* A Python frame "py:QUALNAME (FILE:LINE)" matches on its qualname or on
 * the qualname's last dotted part, so "load_model" matches
 * "py:Worker.load_model (w.py:3)" and "CacheEngine.*" its methods. */
static int py_matches(const char *pattern, const char *display)
{
    char q[256];
    size_t n = strcspn(display + 3, " (");
    if (n >= sizeof q)
        n = sizeof q - 1;
    memcpy(q, display + 3, n);
    q[n] = 0;
    const char *last = strrchr(q, '.');
    return vt_glob_match(pattern, q) || (last && vt_glob_match(pattern, last + 1));
}

static int rule_matches(const rule_t *ru, const vt_frame_t *f)
{
    if (ru->on_module)
        return f->module_base[0] && vt_glob_match(ru->pattern, f->module_base);
    /* Pseudo frames (trace_format.h) match on their whole name, which the
     * C++ signature parser would cut at a blank. */
    if (f->module_id == 0 && f->display && !strncmp(f->display, "py:", 3))
        return py_matches(ru->pattern, f->display);
    if (ru->py_only)
        return 0;
    if (f->module_id == 0 && f->display && (!strncmp(f->display, "tag:", 4) || !strncmp(f->display, "nvtx:", 5)))
        return vt_glob_match(ru->pattern, f->display);
    return f->name[0] && vt_glob_match(ru->pattern, f->name);
}

/* The first rule of set matching f alone, or -1. */
static int32_t first_rule(const rule_set_t *set, const vt_frame_t *f)
{
    for (size_t k = 0; k < set->n; k++)
        if (rule_matches(&set->v[k], f))
            return (int32_t)k;
    return -1;
}

vt_frame_verdict_t vt_rules_verdict(const vt_rules_t *r, const vt_frame_t *f)
{
    vt_frame_verdict_t v = { first_rule(&r->user, f), first_rule(&r->builtin, f) };
    return v;
}

/* Within a set the innermost frame with a verdict decides, at its first
 * rule: the order the header documents, walked frame by frame. */
vt_match_t vt_rules_match_verdicts(const vt_rules_t *r, const vt_frame_verdict_t *v, int n)
{
    int user = -1, builtin = -1;
    for (int i = 0; i < n && user < 0; i++)
        if (v[i].user >= 0)
            user = i;
    for (int i = 0; i < n && user < 0 && builtin < 0; i++)
        if (v[i].builtin >= 0)
            builtin = i;
    return vt_rules_match_nearest(r, user >= 0 ? v[user].user : -1, user, builtin >= 0 ? v[builtin].builtin : -1,
                                  builtin);
}

vt_match_t vt_rules_match_nearest(const vt_rules_t *r, int32_t user, int user_frame, int32_t builtin, int builtin_frame)
{
    vt_match_t m = { VT_TAG_UNKNOWN, -1, -1 };
    if (user >= 0) {
        m.tag = r->user.v[user].tag;
        m.rule = user;
        m.frame = user_frame;
    } else if (builtin >= 0) {
        m.tag = r->builtin.v[builtin].tag;
        m.rule = builtin + (int)r->user.n;
        m.frame = builtin_frame;
    }
    return m;
}

static int match_set(const rule_set_t *set, const vt_frame_t *frames, int n, vt_match_t *m)
{
    for (int i = 0; i < n; i++) {
        int32_t k = first_rule(set, &frames[i]);
        if (k >= 0) {
            m->tag = set->v[k].tag;
            m->rule = k;
            m->frame = i;
            return 1;
        }
    }
    return 0;
}

vt_match_t vt_rules_match(const vt_rules_t *r, const vt_frame_t *frames, int n)
{
    vt_match_t m = { VT_TAG_UNKNOWN, -1, -1 };
    if (match_set(&r->user, frames, n, &m))
        return m;
    if (match_set(&r->builtin, frames, n, &m))
        m.rule += (int)r->user.n;
    return m;
}

int vt_rules_is_user(const vt_rules_t *r, int rule)
{
    return rule >= 0 && (size_t)rule < r->user.n;
}

int vt_rules_tag_count(const vt_rules_t *r)
{
    return r->ntags;
}

const char *vt_rules_tag_name(const vt_rules_t *r, int tag)
{
    return tag >= 0 && tag < r->ntags ? r->tags[tag] : "unknown";
}

void vt_rules_describe(const vt_rules_t *r, const vt_match_t *m, char *buf, size_t size)
{
    if (!size)
        return;
    buf[0] = 0;
    if (m->rule < 0)
        return;
    size_t k = (size_t)m->rule;
    const rule_t *ru = k < r->user.n ? &r->user.v[k] : k - r->user.n < r->builtin.n ? &r->builtin.v[k - r->user.n] : NULL;
    if (!ru)
        return;
    char where[600];
    if (ru->line)
        snprintf(where, sizeof where, "%s:%u", ru->origin, ru->line);
    else
        snprintf(where, sizeof where, "%s", ru->origin);
    snprintf(buf, size, "%s %s %s%s @ frame %d", where, vt_rules_tag_name(r, ru->tag),
             ru->on_module ? "module:" : ru->py_only ? "py:" : "", ru->pattern, m->frame);
}
