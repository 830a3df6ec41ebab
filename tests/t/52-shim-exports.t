#!/bin/sh
# What the shim exports and how its dlsym behaves for everyone else.
. tests/t/lib.sh

# Exactly the table's entry points, the annotation API
# (include/vramtrace/annotate.h), the NVTX injection entry point, dlclose
# (frames are named before a library goes), ggml's four buffer hooks
# (preload/ggml_buffers.c), the calls that end an image without exit()
# (preload/exec_hooks.c: the exec family, _exit, abort and assert's
# __assert_fail) and the two versioned dlsym and dlopen names.
want=$( (sed -n 's/^VT_ENTRY([a-zA-Z_]*, *\([A-Za-z0-9_]*\),.*/\1/p' include/vramtrace/entrypoints.def;
         echo vramtrace_tag_push; echo vramtrace_tag_pop; echo InitializeInjectionNvtx2; echo dlclose;
         echo ggml_backend_buffer_set_usage; echo ggml_backend_alloc_ctx_tensors_from_buft;
         echo ggml_backend_tensor_alloc; echo ggml_backend_buffer_free;
         for f in execve execv execvp execvpe execl execle execlp fexecve execveat _exit _Exit quick_exit abort __assert_fail; do echo $f; done) | sort)
got=$(nm -D --defined-only $SHIM | awk '$2 == "T" && $3 !~ /^dl(sym|open)@/ {print $3}' | sort)
is "$got" "$want" "exports exactly the entry points of entrypoints.def, the annotation API, the NVTX injection, dlclose, ggml's buffer hooks, the exec family, _exit and abort"
is "$(nm -D --defined-only $SHIM | awk '$3 ~ /^dlsym@/ {print $3}' | sort | tr '\n' ' ')" \
   "dlsym@@GLIBC_2.34 dlsym@GLIBC_2.2.5 " "exports dlsym under both glibc versions"
is "$(nm -D --defined-only $SHIM | awk '$3 ~ /^dlopen@/ {print $3}' | sort | tr '\n' ' ')" \
   "dlopen@@GLIBC_2.34 dlopen@GLIBC_2.2.5 " "exports dlopen under both glibc versions"
# A sanitized build links its sanitizer runtimes; nothing else, ever.
is "$(readelf -d $SHIM | grep NEEDED | grep -v -e 'libc.so' -e 'libasan' -e 'libubsan' -e 'libtsan' | wc -l)" 0 \
   "links nothing but libc (never libcuda or libcudart)"

# RTLD_NEXT resolves relative to the caller, not to the shim.
is "$(LD_PRELOAD="$SHIM_PRELOAD" $B/tests/shim/next_main)" b "dlsym(RTLD_NEXT) keeps the caller's identity"
# dlopen searches its caller's RUNPATH (libopener.so's), not the shim's:
# "target", as without the shim. (A sanitizer's own dlopen interceptor
# loses the caller's RUNPATH: there the answer is the sanitizer's alone.)
without=$(LD_PRELOAD="${VT_SAN_RT:-}" $B/tests/shim/runpath_main)
[ -n "${VT_SAN_RT:-}" ] || is "$without" target "without the shim, libopener's dlopen finds libtarget through its RUNPATH"
is "$(LD_PRELOAD="$SHIM_PRELOAD" $B/tests/shim/runpath_main)" "$without" "dlopen keeps the caller's identity (its RUNPATH): the answer is the same as without the shim"
is "$(LD_PRELOAD="$SHIM_PRELOAD" python3 -c 'import ctypes; print(ctypes.CDLL(None).getpid() > 0)')" True \
   "a dlsym-heavy program (python ctypes) runs unchanged"
done_testing
