/* libopener.so: dlopen()s "libtarget.so" by bare name. Only its own
 * RUNPATH (tests/shim/runpath/) holds that library, and glibc searches the
 * RUNPATH of dlopen's caller: a wrapper that made itself the caller would
 * make the load fail. */
#include <dlfcn.h>
#include <stdio.h>

const char *opener_open(void)
{
    void *h = dlopen("libtarget.so", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return dlerror();
    const char *(*name)(void) = (const char *(*)(void))dlsym(h, "target_name");
    return name ? name() : "no target_name";
}
