# The shim: build/libvramtrace.so. Never links libcuda or libcudart; libzstd
# and libunwind are dlopen'ed on the first CUDA call, so DT_NEEDED is libc.
PRELOAD_SRCS := $(wildcard preload/*.c)
PRELOAD_OBJS := $(patsubst preload/%.c,$(B)/obj/preload/%.o,$(PRELOAD_SRCS))
PRELOAD_CFLAGS := $(CFLAGS_COMMON) -fPIC -fvisibility=hidden -ftls-model=initial-exec -pthread -MMD -MP

all: $(B)/libvramtrace.so

# Header dependencies come from the compiler (-MMD), not from a list kept by
# hand: a hand list once missed loader_lock.h, the fork-sensitive one. The
# fragment itself is a prerequisite: objects built with other flags (or
# before there were .d files) must not survive a change of it.
$(B)/obj/preload/%.o: preload/%.c preload/preload.mk | $(B)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_COMMON) $(PRELOAD_CFLAGS) -c $< -o $@

-include $(PRELOAD_OBJS:.o=.d)

# Lazy binding (-z lazy), not -z now: every process the preload reaches,
# CUDA or not, would otherwise look up all ~80 libc imports at load; lazily
# it looks up the few the constructor calls (callgrind of /bin/true: ~27 %
# fewer instructions, ~5-9 us of a ~600 us exec). Why that is safe for
# this library:
#  - Re-entry: a lazy fixup (_dl_fixup) runs only ld.so code and libc's
#    IFUNC resolvers; it never calls dlsym, dlclose or a CUDA name, so it
#    cannot re-enter a hook. Every import is defined in libc (or a
#    sanitizer or allocator preloaded at startup), never in a dlopen'ed
#    library, so a fixup never takes the loader lock (glibc only does for
#    definitions in dlopen'ed objects): no deadlock with a dlclose or
#    dlopen in flight, and none after fork.
#  - dlsym: the trampoline jumps to glibc's dlsym through a data pointer
#    (vt_next_dlsym), never through a PLT slot, so the caller's return
#    address (RTLD_NEXT) is the same either way; dlvsym(RTLD_NEXT) from
#    resolve_real_dlsym is entered with our return address after the fixup.
#  - Signals: the shim installs no handler; glibc's fixup is
#    async-signal-safe anyway and saves the vector registers (xsave).
#  - Stack: a fixup takes ~1-3 KB more stack (more on AMX cores with older
#    glibc), once per import, on a thread already in the shim; the event
#    path itself keeps a 2 KB frame array (vt_stack_capture) on the stack.
# The cost: partial RELRO (.got.plt stays writable; the rest of the
# relocated data is still read-only after load). Packagers whose policy is
# BIND_NOW build with `make SHIM_BIND=now` (from clean); LD_BIND_NOW=1
# does it per run.
SHIM_BIND ?= lazy

$(B)/libvramtrace.so: $(PRELOAD_OBJS) preload/vramtrace.map
	$(CC) -shared -o $@ $(PRELOAD_OBJS) $(LDFLAGS_COMMON) -pthread -ldl \
	    -Wl,--version-script=preload/vramtrace.map -Wl,-z,$(SHIM_BIND) -Wl,-z,relro -Wl,-soname,libvramtrace.so
