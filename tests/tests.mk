# Test harness. Every fragment appends the binaries its TAP scripts need to
# TEST_BINS; scripts live in tests/t/*.t and run from the repo root under
# `prove`, whose closing line CI reads. Included last: the test rule reads
# TEST_BINS as it stands here.

# Shim scenario programs (tests/shim/): linked against the simulated driver
# and runtime, with RUNPATH so LD_LIBRARY_PATH can swap in another driver.
SHIM_TEST_LDFLAGS = -L$(B)/sim -Wl,--enable-new-dtags -Wl,-rpath,$(abspath $(B)/sim) -lcudart -lcuda -ldl -pthread

$(B)/tests/shim/%: tests/shim/%.c $(SIM_LIBS) | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) -O1 -o $@ $< $(LDFLAGS_COMMON) $(SHIM_TEST_LDFLAGS)

# RTLD_NEXT must resolve relative to the caller, not to the shim.
$(B)/tests/shim/libnext_%.so: tests/shim/next_%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -fPIC -shared -o $@ $< -ldl
$(B)/tests/shim/next_main: tests/shim/next_main.c $(B)/tests/shim/libnext_a.so $(B)/tests/shim/libnext_b.so
	$(CC) $(CFLAGS_COMMON) -o $@ $< -L$(B)/tests/shim -Wl,--no-as-needed -lnext_a -lnext_b \
	    -Wl,-rpath,$(abspath $(B)/tests/shim)

TEST_BINS += $(B)/libvramtrace.so $(B)/vramtrace $(B)/tests/shim/paths $(B)/tests/shim/next_main

test: $(B)/.deps-ok $(TEST_BINS)
	@prove -j1 tests/t/

.PHONY: test-bins
test-bins: $(TEST_BINS)
