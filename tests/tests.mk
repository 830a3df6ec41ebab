# Test harness. Every fragment appends the binaries its TAP scripts need to
# TEST_BINS; scripts live in tests/t/*.t and run from the repo root under
# `prove`, whose closing line CI reads. Included last: the test rule reads
# TEST_BINS as it stands here.

# Shim scenario programs (tests/shim/): linked against the simulated driver
# and runtime, with RUNPATH so LD_LIBRARY_PATH can swap in another driver.
SHIM_TEST_LDFLAGS = -L$(B)/sim -Wl,--enable-new-dtags -Wl,-rpath,$(abspath $(B)/sim) -lcudart -lcuda -ldl -pthread

$(B)/tests/shim/%: tests/shim/%.c tests/tests.mk $(SIM_LIBS) | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -O1 -o $@ $< $(LDFLAGS_COMMON) $(SHIM_TEST_LDFLAGS)

# refuse's table of system call names, from the C library's own header.
$(B)/tests/shim/syscall_names.h: tests/tests.mk
	@mkdir -p $(@D)
	echo '#include <sys/syscall.h>' | $(CC) $(CPPFLAGS_COMMON) -dM -E - | \
	    sed -n 's/^#define __NR_\([a-z0-9_]*\) \([0-9][0-9]*\)$$/{ "\1", \2 },/p' | LC_ALL=C sort >$@
$(B)/tests/shim/refuse: $(B)/tests/shim/syscall_names.h
$(B)/tests/shim/refuse: CPPFLAGS_COMMON += -I$(B)/tests/shim

# RTLD_NEXT must resolve relative to the caller, not to the shim.
$(B)/tests/shim/libnext_%.so: tests/shim/next_%.c tests/tests.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -fPIC -shared -o $@ $< -ldl
$(B)/tests/shim/next_main: tests/shim/next_main.c tests/tests.mk $(B)/tests/shim/libnext_a.so $(B)/tests/shim/libnext_b.so
	$(CC) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -o $@ $< -L$(B)/tests/shim -Wl,--no-as-needed -lnext_a -lnext_b \
	    -Wl,-rpath,$(abspath $(B)/tests/shim)

# dlopen must search its caller's RUNPATH, not the shim's.
$(B)/tests/shim/runpath/libtarget.so: tests/shim/runpath_target.c tests/tests.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -fPIC -shared -o $@ $<
$(B)/tests/shim/libopener.so: tests/shim/runpath_opener.c tests/tests.mk $(B)/tests/shim/runpath/libtarget.so
	$(CC) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -fPIC -shared -o $@ $< -ldl \
	    -Wl,--enable-new-dtags -Wl,-rpath,$(abspath $(B)/tests/shim/runpath)
$(B)/tests/shim/runpath_main: tests/shim/runpath_main.c tests/tests.mk $(B)/tests/shim/libopener.so
	$(CC) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -o $@ $< -L$(B)/tests/shim -Wl,--no-as-needed -lopener \
	    -Wl,-rpath,$(abspath $(B)/tests/shim)

# A library whose constructor makes the program's first CUDA call.
$(B)/tests/shim/libctoralloc.so: tests/shim/ctoralloc_lib.c tests/tests.mk $(SIM_LIBS) | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -fPIC -shared -o $@ $< $(LDFLAGS_COMMON) $(SHIM_TEST_LDFLAGS)

# Another interposer preloaded before the shim, defining one wrapped name.
$(B)/tests/shim/libinterposer.so: tests/shim/interposer.c tests/tests.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -fPIC -shared -o $@ $< -ldl

# Preloaded before the shim: named libraries cannot be loaded.
$(B)/tests/shim/libhidelibs.so: tests/shim/hidelibs.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -fPIC -shared -o $@ $< -ldl

# ggml's record queue flooded from two threads (the examples' libggml-base).
$(B)/tests/shim/ggmlflood: tests/shim/ggmlflood.c tests/tests.mk $(EX)/libggml-base.so | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -O1 -o $@ $< -L$(EX) -lggml-base -Wl,-rpath,$(abspath $(EX)) -pthread

TEST_BINS += $(B)/libvramtrace.so $(B)/vramtrace $(B)/tests/shim/paths $(B)/tests/shim/smallstack $(B)/tests/shim/rawfork $(B)/tests/shim/forkstate $(B)/tests/shim/closefds $(B)/tests/shim/refuse $(B)/tests/shim/ctoralloc $(B)/tests/shim/libctoralloc.so $(B)/tests/shim/atexitfree $(B)/tests/shim/next_main $(B)/tests/shim/runpath_main \
	$(B)/tests/shim/libinterposer.so $(B)/tests/shim/libhidelibs.so $(B)/tests/shim/ggmlflood

# Sanitized runs (SANITIZE=address,undefined or thread): the scripts find
# the build through VT_B; every sanitizer report fails its test (UBSan would
# otherwise print and carry on); leak checking is off because the shim runs
# inside programs we do not own (sh, python) whose leaks are not ours;
# verify_asan_link_order=0 lets the instrumented shim be preloaded into
# uninstrumented programs, and VT_SAN_RT names the runtime lib.sh puts
# first in LD_PRELOAD so those programs get ASan's allocator too.
SAN_RT := $(if $(findstring address,$(SANITIZE)),$(shell $(CC) -print-file-name=libasan.so),$(if $(findstring thread,$(SANITIZE)),$(shell $(CC) -print-file-name=libtsan.so)))
TEST_ENV := VT_B=$(abspath $(B)) $(if $(SANITIZE),VT_SANITIZE=$(SANITIZE) VT_SAN_RT=$(SAN_RT) \
	ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:abort_on_error=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1)

# A script that hangs fails on its own after TEST_TIMEOUT seconds (its whole
# process group is killed) instead of eating CI's budget: a fork deadlock
# under ASan once did exactly that.
TEST_TIMEOUT ?= 300
test: $(B)/.deps-ok $(TEST_BINS)
	@$(TEST_ENV) prove -j1 --exec 'timeout -k 10 $(TEST_TIMEOUT) sh' tests/t/

.PHONY: test-bins
test-bins: $(TEST_BINS)

# Dependency files of the programs built with PROG_DEPFLAGS, wherever
# their fragment is. Those programs also depend on their fragment, so one
# built before its rule wrote a .d is rebuilt once.
-include $(addsuffix .d,$(TEST_BINS))
