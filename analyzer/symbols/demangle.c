/* Demangling through the C++ runtime's __cxa_demangle (the ABI function
 * every C++ toolchain ships; linked with -lstdc++), plus the small parser
 * that strips a demangled signature down to the name rules match. */
#include "demangle.h"

#include <stdlib.h>
#include <string.h>

char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

char *vt_demangle(const char *name, size_t len)
{
    char *raw = malloc(len + 1);
    if (!raw)
        return NULL;
    if (len)
        memcpy(raw, name, len);
    raw[len] = 0;
    /* A NUL inside the bytes cuts the name there: names are C strings in ELF. */
    if (len >= 2 && raw[0] == '_' && raw[1] == 'Z') {
        int status = -1;
        char *d = __cxa_demangle(raw, NULL, NULL, &status);
        if (d && status == 0) {
            free(raw);
            return d;
        }
        free(d);
    }
    return raw;
}

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

char *vt_qualified_name(const char *display)
{
    size_t n = strlen(display);
    /* Trailing decorations, repeatedly: " [clone .cold.1]", " const", "&". */
    for (int changed = 1; changed;) {
        changed = 0;
        while (n && display[n - 1] == ' ')
            n--;
        if (n && display[n - 1] == ']') {
            const char *open = NULL;
            for (size_t i = n; i-- > 0;)
                if (display[i] == '[') {
                    open = display + i;
                    break;
                }
            if (open && strncmp(open, "[clone ", 7) == 0) {
                n = (size_t)(open - display);
                changed = 1;
                continue;
            }
        }
        static const char *const quals[] = { " const", " volatile", " &&", " &", "&&", "&", " noexcept" };
        for (size_t q = 0; q < sizeof quals / sizeof quals[0]; q++)
            if (ends_with(display, n, quals[q]) && n > strlen(quals[q]) && display[n - strlen(quals[q]) - 1] != '(') {
                /* "&" only as a ref-qualifier after ")", never "operator&". */
                if (quals[q][strlen(quals[q]) - 1] == '&' && display[n - strlen(quals[q]) - 1] != ')' &&
                    quals[q][0] != ' ')
                    continue;
                n -= strlen(quals[q]);
                changed = 1;
                break;
            }
    }
    /* The parameter list: the last balanced "(...)" at the end. */
    size_t end = n;
    if (end && display[end - 1] == ')') {
        int depth = 0;
        for (size_t i = end; i-- > 0;) {
            if (display[i] == ')')
                depth++;
            else if (display[i] == '(' && --depth == 0) {
                /* "operator()(int)" keeps its "operator()" */
                end = i;
                break;
            }
        }
    }
    /* A template function's return type: the last space outside <> and ()
     * that is not part of "operator new" style names or "(anonymous namespace)". */
    size_t start = 0;
    int angle = 0, paren = 0;
    for (size_t i = 0; i < end; i++) {
        char c = display[i];
        if (c == '<')
            angle++;
        else if (c == '>' && angle > 0 && !(i > 0 && display[i - 1] == '-'))
            angle--;
        else if (c == '(')
            paren++;
        else if (c == ')' && paren > 0)
            paren--;
        else if (c == ' ' && angle == 0 && paren == 0) {
            if (i >= 8 && memcmp(display + i - 8, "operator", 8) == 0)
                continue;
            start = i + 1;
        }
    }
    if (start >= end)
        start = 0;
    char *out = malloc(end - start + 1);
    if (!out)
        return NULL;
    memcpy(out, display + start, end - start);
    out[end - start] = 0;
    return out;
}
