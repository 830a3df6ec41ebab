# The shim: build/libvramtrace.so. Never links libcuda or libcudart; libzstd
# and libunwind are dlopen'ed on the first CUDA call, so DT_NEEDED is libc.
PRELOAD_SRCS := $(wildcard preload/*.c)
PRELOAD_OBJS := $(patsubst preload/%.c,$(B)/obj/preload/%.o,$(PRELOAD_SRCS))
PRELOAD_CFLAGS := $(CFLAGS_COMMON) -fPIC -fvisibility=hidden -ftls-model=initial-exec -pthread

all: $(B)/libvramtrace.so

$(B)/obj/preload/%.o: preload/%.c preload/shim.h preload/symbols.h include/vramtrace/*.h include/vramtrace/entrypoints.def | $(B)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_COMMON) $(PRELOAD_CFLAGS) -c $< -o $@

$(B)/libvramtrace.so: $(PRELOAD_OBJS) preload/vramtrace.map
	$(CC) -shared -o $@ $(PRELOAD_OBJS) $(LDFLAGS_COMMON) -pthread -ldl \
	    -Wl,--version-script=preload/vramtrace.map -Wl,-z,now -Wl,-soname,libvramtrace.so
