/* symtest_lib.c: a shared library for test_symbols. Built with
 * -fvisibility=hidden, so only st_exported_fn and st_functions are in
 * .dynsym; the static, hidden and asm-labelled (C++-mangled) functions are
 * only in .symtab, like ggml's allocators. Bodies differ so identical-code
 * folding cannot merge them.
 */
#define ST_EXPORT __attribute__((visibility("default")))

volatile int st_sink;

static __attribute__((noinline)) int st_static_fn(int x)
{
    st_sink = x;
    return x * 3 + st_sink;
}

__attribute__((noinline)) int st_hidden_fn(int x)
{
    st_sink = x + 7;
    return x ^ st_sink;
}

/* A C++ name as the symbol table spells it; the lookup must not demangle. */
__attribute__((noinline)) int st_mangled_fn(int x) __asm__("_ZN11llama_model12load_tensorsEv");
__attribute__((noinline)) int st_mangled_fn(int x)
{
    st_sink = x - 11;
    return x + st_sink * 5;
}

ST_EXPORT __attribute__((noinline)) int st_exported_fn(int x)
{
    st_sink = x * 13;
    return st_sink - x;
}

typedef int (*st_fn_t)(int);

/* Hands out the addresses the test cannot get from dlsym. */
ST_EXPORT void st_functions(st_fn_t out[4])
{
    out[0] = st_exported_fn;
    out[1] = st_hidden_fn;
    out[2] = st_static_fn;
    out[3] = st_mangled_fn;
}
