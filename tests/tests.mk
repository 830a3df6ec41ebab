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

TEST_BINS += $(B)/libvramtrace.so $(B)/vramtrace $(B)/tests/shim/paths

test: $(B)/.deps-ok $(TEST_BINS)
	@prove -j1 tests/t/

.PHONY: test-bins
test-bins: $(TEST_BINS)
