/* ctoralloc: the program's first CUDA call comes from a library's
 * constructor, inside dlopen, with the dynamic loader's lock held: the
 * shim starts its writer thread there and waits for it to open the trace,
 * so nothing that thread does before then may need that lock.
 *
 *   ctoralloc LIB     dlopen()s LIB (libctoralloc.so: 1 MiB cudaMalloc in
 *                     its constructor), prints "dlopen ok" */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    void *lib = dlopen(argv[1], RTLD_NOW);
    printf("dlopen %s\n", lib ? "ok" : dlerror());
    return !lib;
}
