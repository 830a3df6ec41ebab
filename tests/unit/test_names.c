/* Every table that names the values of an enum, checked by content: each
 * value has a name, no name is empty, no two values share one. The tables'
 * asserts check only their length, and a value left out in the middle of
 * a designated initialiser compiles as NULL. */
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "report.h"
#include "rules.h"
#include "tap.h"
#include "trace_reader.h"
#include "vramtrace/entrypoints.h"

#define MAX_NAMES 512

typedef struct names {
    const char *v[MAX_NAMES];
    size_t n;
} names_t;

typedef struct faults {
    unsigned missing, empty, twice;
    char first[160]; /* the first fault, for the diagnostic line */
} faults_t;

static faults_t faults_of(const names_t *t)
{
    faults_t f = { 0 };
    for (size_t i = 0; i < t->n; i++) {
        const char *why = NULL;
        if (!t->v[i])
            f.missing++, why = "no name";
        else if (!*t->v[i])
            f.empty++, why = "an empty name";
        else
            for (size_t j = 0; j < i; j++)
                if (t->v[j] && !strcmp(t->v[i], t->v[j])) {
                    f.twice++, why = "the name of an earlier value";
                    break;
                }
        if (why && !f.first[0])
            snprintf(f.first, sizeof f.first, "value %zu has %s (%s)", i, why, t->v[i] ? t->v[i] : "NULL");
    }
    return f;
}

static void check(const char *what, const names_t *t)
{
    faults_t f = faults_of(t);
    TAP_EQ_U64(f.missing + f.empty + f.twice, 0, "%s: every value has its own name", what);
    if (f.first[0])
        printf("#   %s\n", f.first);
}

static void add(names_t *t, const char *name)
{
    if (t->n < MAX_NAMES)
        t->v[t->n++] = name;
}

/* The checker itself finds each kind of fault. */
static void test_checker(void)
{
    names_t t = { .v = { "a", NULL, "", "b", "a" }, .n = 5 };
    faults_t f = faults_of(&t);
    TAP_EQ_U64(f.missing, 1, "checker: a value without a name is found");
    TAP_EQ_U64(f.empty, 1, "checker: an empty name is found");
    TAP_EQ_U64(f.twice, 1, "checker: a name given twice is found");
    TAP_EQ_STR(f.first, "value 1 has no name (NULL)", "checker: the first fault is named");
}

static void test_record_types(void)
{
    names_t t = { 0 };
    for (unsigned k = VT_REC_PROCESS; k < VT_REC_TYPES; k++)
        add(&t, vt_record_type_name(k));
    check("record types", &t);
    TAP_OK(!vt_record_type_name(0) && !vt_record_type_name(VT_REC_TYPES), "record types: 0 and one past the last have none");
}

/* Flags are masks: bit k's name, for the bits that have one. */
static void test_event_flags(void)
{
    names_t t = { 0 };
    uint32_t named = 0;
    for (unsigned b = 0; b < 32; b++) {
        const char *name = vt_event_flag_name(1u << b);
        if (name) {
            add(&t, name);
            named |= 1u << b;
        }
    }
    TAP_EQ_U64(t.n, 12, "event flags: 12 bits have a name");
    check("event flags", &t);
    TAP_EQ_U64(named,
               VT_EF_SAMPLE | VT_EF_RUNTIME | VT_EF_PTSZ | VT_EF_VIA_PROCADDR | VT_EF_VIA_DLSYM |
                   VT_EF_FIRST_ON_DEVICE | VT_EF_AFTER_FAILURE | VT_EF_AT_PEAK | VT_EF_HOST_LOCATED | VT_EF_LATE |
                   VT_EF_OTHER_CONTEXT | VT_EF_CAPTURED,
               "event flags: the named bits are the VT_EF_* bits");
    TAP_OK(!vt_event_flag_name(0) && !vt_event_flag_name(VT_EF_SAMPLE | VT_EF_RUNTIME),
           "event flags: no bits or two bits have no name");
}

static void test_entry_points(void)
{
    names_t api = { 0 }, kinds = { 0 }, spaces = { 0 };
    for (unsigned k = 0; k < VT_API_COUNT; k++)
        add(&api, vt_api_info(k)->name);
    for (unsigned k = 0; k < VT_KIND_COUNT; k++)
        add(&kinds, vt_kind_name(k));
    for (unsigned k = 0; k < VT_SPACE_COUNT; k++)
        add(&spaces, vt_space_name(k));
    check("entry points", &api);
    check("entry point kinds", &kinds);
    check("memory spaces", &spaces);
}

static void test_report_words(void)
{
    names_t usage = { 0 }, spill = { 0 }, decided = { 0 }, lost_key = { 0 }, lost_text = { 0 }, tags = { 0 };
    for (unsigned k = 0; k < VT_GGML_USAGES; k++)
        add(&usage, vt_ggml_usage_name(k));
    for (int k = 0; k < VT_SPILL_KINDS; k++)
        add(&spill, vt_spill_kind_name(k));
    for (int k = 0; k <= VT_DECIDED_BUILTIN_RULE; k++)
        add(&decided, vt_decided_name(k));
    for (int k = 0; k < VT_LOST_REASONS; k++) {
        add(&lost_key, vt_lost_reason_key(k));
        add(&lost_text, vt_lost_reason_text(k));
    }
    vt_rules_t *rules = vt_rules_new();
    for (int k = 0; k < VT_TAG_BUILTIN_COUNT; k++)
        add(&tags, rules ? vt_rules_tag_name(rules, k) : NULL);
    check("ggml usages", &usage);
    check("spill kinds", &spill);
    check("decisions", &decided);
    check("loss reasons (JSON keys)", &lost_key);
    check("loss reasons (report words)", &lost_text);
    check("built-in tags", &tags);
    vt_rules_free(rules);
}

int main(void)
{
    test_checker();
    test_record_types();
    test_event_flags();
    test_entry_points();
    test_report_words();
    return tap_done();
}
