/* C++ symbol names for people and for rules.
 *
 * Contract:
 *  - vt_demangle() returns a malloc'd, NUL-terminated display name: the
 *    demangled form of an Itanium-mangled name, else the input unchanged
 *    (C functions such as ggml_gallocr_reserve_n), or NULL only when out of
 *    memory. Input is untrusted bytes of any length <= VT_MAX_STRING.
 *  - vt_qualified_name() derives the name rules match against: the
 *    qualified function name without parameter list, cv/ref qualifiers,
 *    "[clone .cold]" suffixes or the return type of a template function:
 *    "llama_kv_cache::llama_kv_cache(llama_model const&, ...)" becomes
 *    "llama_kv_cache::llama_kv_cache". Template arguments are kept.
 */
#ifndef VT_DEMANGLE_H
#define VT_DEMANGLE_H

#include <stddef.h>

char *vt_demangle(const char *name, size_t len);

/* Writes the qualified name of a demangled display name into a new
 * malloc'd string (NULL when out of memory). */
char *vt_qualified_name(const char *display);

#endif
