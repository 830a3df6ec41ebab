/* RTLD_NEXT test, first library: defines which() and asks for the next
 * definition after itself. Loaded after the shim, so a dlsym that forgot the
 * caller would answer with this library's own which(). */
#include <dlfcn.h>
__attribute__((visibility("default"))) const char *which(void) { return "a"; }
__attribute__((visibility("default"))) const char *next_which(void)
{
    const char *(*fn)(void) = (const char *(*)(void))dlsym(RTLD_NEXT, "which");
    return fn ? fn() : "none";
}
