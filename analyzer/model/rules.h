/* Tagging: which of weights / kv / scratch / unknown (or a user's own tag)
 * an allocation belongs to, decided from its call stack.
 *
 * MATCHING ORDER (documented for users in docs/report.md):
 *  1. Rule sets are tried in order: user rules (every --rules FILE in
 *     command-line order, else the file named by VRAMTRACE_RULES), then the
 *     built-in rules. The first set that matches decides, so a user rule
 *     always beats a built-in one.
 *  2. Within a set, frames are walked from the innermost (frame 0, the
 *     allocation call) outwards, and the FIRST FRAME that matches any rule
 *     of the set decides; at that frame the first matching rule in order
 *     wins. Generic pass-through frames (ggml_backend_alloc_ctx_tensors_
 *     from_buft, ggml_backend_cuda_buffer_type_alloc_buffer, cudaMalloc,
 *     c10::cuda::CUDACachingAllocator) have no rule, so the walk passes them
 *     and reaches the specific outer frame (llama_model::load_tensors vs
 *     llama_kv_cache::llama_kv_cache). Innermost-wins still lets a more
 *     specific inner frame (ggml_gallocr_reserve_n called while a KV cache
 *     method runs) beat an outer one.
 *  3. No match: tag unknown, rule "".
 *
 * PATTERNS: a pattern matches a frame when it equals the frame's qualified
 * function name (demangled, without parameters, see demangle.h), or when it
 * is a glob where `*` matches any run of characters ("llama_kv_cache_iswa::*",
 * "cublas*"). A pattern "module:GLOB" matches the basename of the frame's
 * module instead ("module:libcublas*").
 * Pseudo frames (trace_format.h): a Python frame "py:QUALNAME (FILE:LINE)"
 * matches a pattern on QUALNAME or on its last dotted part ("load_model",
 * "CacheEngine.*"); a pattern "py:GLOB" matches Python frames only. Range
 * frames ("tag:NAME", "nvtx:NAME") match on their whole name.
 *
 * RULES FILE: one "TAG PATTERN" per line, separated by blanks; '#' starts a
 * comment (at line start or after a blank); blank lines are ignored. TAG is
 * weights, kv, scratch, unknown, or a custom [a-z0-9_]{1,32} name (at most
 * VT_MAX_TAGS tags in all). Anything else is VT_E_RULES with err->offset =
 * the line number and err->path = the file.
 *
 * Functions returning int return 0 or a negative VT_E_*.
 */
#ifndef VT_RULES_H
#define VT_RULES_H

#include <stddef.h>

#include "errors.h"
#include "stack_tree.h"

enum {
    VT_TAG_WEIGHTS = 0,
    VT_TAG_KV = 1,
    VT_TAG_SCRATCH = 2,
    VT_TAG_UNKNOWN = 3,
    VT_TAG_BUILTIN_COUNT = 4,
};
#define VT_MAX_TAGS 16

typedef struct vt_rules vt_rules_t;

typedef struct vt_match {
    int tag;    /* tag id, VT_TAG_UNKNOWN when nothing matched */
    int rule;   /* index for vt_rules_describe(), -1 when nothing matched */
    int frame;  /* index of the matching frame, innermost = 0, or -1 */
} vt_match_t;

/* Rules with the built-in sets loaded, no user rules yet. */
vt_rules_t *vt_rules_new(void);
void vt_rules_free(vt_rules_t *r);

/* Appends the user rules in PATH (after earlier user rules, before the
 * built-ins). */
int vt_rules_load_file(vt_rules_t *r, const char *path, vt_error_t *err);
/* Same from memory; origin names the source in messages and descriptions. */
int vt_rules_load_text(vt_rules_t *r, const char *origin, const char *text, size_t len, vt_error_t *err);

vt_match_t vt_rules_match(const vt_rules_t *r, const vt_frame_t *frames, int n);

/* What one frame says on its own: the index of the first rule of each set
 * that matches it, -1 for none. It depends only on the frame's fields, so a
 * caller may cache it per frame (the model does, per ip) and then get
 * exactly vt_rules_match's answer from vt_rules_match_verdicts over the
 * stack's frames, innermost first. */
typedef struct vt_frame_verdict {
    int32_t user, builtin;
} vt_frame_verdict_t;
vt_frame_verdict_t vt_rules_verdict(const vt_rules_t *r, const vt_frame_t *f);
vt_match_t vt_rules_match_verdicts(const vt_rules_t *r, const vt_frame_verdict_t *v, int n);
/* The match vt_rules_match_verdicts gives when the first user hit is rule
 * `user` at frame user_frame and the first built-in hit is `builtin` at
 * builtin_frame (-1: none). */
vt_match_t vt_rules_match_nearest(const vt_rules_t *r, int32_t user, int user_frame, int32_t builtin, int builtin_frame);

/* 1 when rule (a vt_match_t's) is one of the user's, 0 built-in or none. */
int vt_rules_is_user(const vt_rules_t *r, int rule);

int vt_rules_tag_count(const vt_rules_t *r);
const char *vt_rules_tag_name(const vt_rules_t *r, int tag);

/* "builtin:llama.cpp weights llama_model::load_tensors @ frame 4" or
 * "my.rules:3 kv myapp::* @ frame 2"; "" when m->rule < 0. */
void vt_rules_describe(const vt_rules_t *r, const vt_match_t *m, char *buf, size_t size);

/* Glob match exposed for tests: `*` = any run of characters. */
int vt_glob_match(const char *pattern, const char *s);

#endif
