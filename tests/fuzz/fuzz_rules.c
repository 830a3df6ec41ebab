/* fuzz_rules.c: libFuzzer target for the rules parser and matcher
 * (analyzer/rules.h): a user's rules file is untrusted text, and the frame
 * names it is matched against come from untrusted traces.
 *
 * Input: RULES_TEXT [ "\0\0" FRAMES ], FRAMES being lines of
 * "qualified_name[\tmodule_basename]". The rules are loaded after the
 * built-ins, then matched against the frames; the answer must name a tag
 * and rule that exist, and the glob matcher is run on pairs of frame names
 * (pattern against name) to look for runaway backtracking.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "rules.h"

#define MAX_FRAMES 64

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet_stdio();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    size_t text_len = size;
    const char *frames_text = NULL;
    size_t frames_len = 0;
    for (size_t i = 0; i + 1 < size; i++)
        if (data[i] == 0 && data[i + 1] == 0) {
            text_len = i;
            frames_text = text + i + 2;
            frames_len = size - i - 2;
            break;
        }

    vt_rules_t *r = vt_rules_new();
    if (!r)
        return 0;
    vt_error_t err;
    memset(&err, 0, sizeof err);
    int rc = vt_rules_load_text(r, "fuzz.rules", text, text_len, &err);
    if (rc != 0 && rc != VT_E_RULES && rc != VT_E_NOMEM)
        abort();

    /* Frames: copies with NUL terminators, as the analyzer builds them. */
    char *copy = malloc(frames_len + 1);
    vt_frame_t frames[MAX_FRAMES];
    int n = 0;
    if (copy) {
        memcpy(copy, frames_text ? frames_text : "", frames_len);
        copy[frames_len] = 0;
        for (char *line = copy; line && *line && n < MAX_FRAMES;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = 0;
            char *tab = strchr(line, '\t');
            if (tab)
                *tab = 0;
            memset(&frames[n], 0, sizeof frames[n]);
            frames[n].ip = (uint64_t)n + 1;
            frames[n].display = line;
            frames[n].name = line;
            frames[n].module = tab ? tab + 1 : "";
            frames[n].module_base = tab ? tab + 1 : "";
            n++;
            line = nl ? nl + 1 : NULL;
        }
    }
    vt_match_t m = vt_rules_match(r, frames, n);
    int ntags = vt_rules_tag_count(r);
    if (ntags < VT_TAG_BUILTIN_COUNT || ntags > VT_MAX_TAGS)
        abort();
    if (m.tag < 0 || m.tag >= ntags || !vt_rules_tag_name(r, m.tag))
        abort();
    if ((m.rule < 0) != (m.frame < 0) || m.frame >= n)
        abort();
    char desc[256];
    vt_rules_describe(r, &m, desc, sizeof desc);
    if (!memchr(desc, 0, sizeof desc))
        abort();
    for (int i = 0; i + 1 < n; i++)
        (void)vt_glob_match(frames[i].name, frames[i + 1].name);
    free(copy);
    vt_rules_free(r);
    return 0;
}
