/* Preloaded before the shim: the libraries named in VT_HIDE_LIBS (sonames,
 * separated by commas) cannot be loaded, as in a container image that lacks
 * their packages. The loader finds system libraries through ld.so.cache and
 * its default directories, which LD_LIBRARY_PATH cannot take away; a mount
 * namespace or chroot could, but needs privileges a test run may not have.
 * So dlopen of a hidden soname is passed on as a path in a directory that
 * does not exist: the real loader fails it, with its own dlerror() text,
 * exactly as it fails a missing file.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *(*dlopen_fn)(const char *, int);

static int hidden(const char *file)
{
    const char *list = getenv("VT_HIDE_LIBS");
    size_t len = strlen(file);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && memcmp(p, file, n) == 0)
            return 1;
        p = end ? end + 1 : p + n;
    }
    return 0;
}

void *dlopen(const char *file, int mode)
{
    static dlopen_fn real;
    if (!real)
        real = (dlopen_fn)dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.34");
    if (!real)
        real = (dlopen_fn)dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.2.5");
    if (!real)
        abort();
    char missing[512];
    if (file && !strchr(file, '/') && hidden(file) &&
        snprintf(missing, sizeof missing, "/nonexistent.vt-hidden/%s", file) < (int)sizeof missing)
        return real(missing, mode);
    return real(file, mode);
}
