/* The built-in rule table (rules_builtin.c), loaded by vt_rules_new() after
 * any user rules. Contract: static data, never modified. */
#ifndef VT_RULES_BUILTIN_H
#define VT_RULES_BUILTIN_H

typedef struct vt_builtin_rule {
    const char *origin;   /* "builtin:llama.cpp": shown in each site's rule */
    const char *tag;
    const char *pattern;
} vt_builtin_rule_t;

extern const vt_builtin_rule_t vt_builtin_rules[];
extern const unsigned vt_builtin_rule_count;

#endif
