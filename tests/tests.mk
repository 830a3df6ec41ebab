# Test harness. Every fragment appends the binaries its TAP scripts need to
# TEST_BINS; scripts live in tests/t/*.t and run from the repo root under
# `prove`, whose closing line CI reads.
TEST_BINS += $(B)/libvramtrace.so $(B)/vramtrace

test: $(B)/.deps-ok $(TEST_BINS)
	@prove -j1 tests/t/

.PHONY: test-bins
test-bins: $(TEST_BINS)
