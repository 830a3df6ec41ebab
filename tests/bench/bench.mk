# tests/bench/bench.mk: `make bench`, the overhead benchmark (never part of
# `make test`; tests/t/90-bench-smoke.t runs only its quick mode). Included
# by the top Makefile before tests/tests.mk reads TEST_BINS.
#
#   make bench                 the full table (a few minutes)
#   make bench BENCH_QUICK=1   a ~30 s smoke of every row, small sizes
#   make bench BENCH_EVENTS=N  the analyzer's big trace holds N events
#                              (default 50000000)
# tests/bench/run.sh prints the table; docs/performance.md explains it.

BENCH_BINS := $(B)/bench/hotpath $(B)/bench/vtspawn $(B)/bench/gentrace

# The hot-path program: -O2 like a server, no sibling calls so every one of
# its recursive frames is a real frame the unwinder walks.
$(B)/bench/hotpath: tests/bench/hotpath.c tests/bench/bench.mk $(SIM_LIBS) | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -O2 -fno-optimize-sibling-calls -o $@ $< \
	    $(LDFLAGS_COMMON) $(SHIM_TEST_LDFLAGS)

$(B)/bench/vtspawn: tests/bench/vtspawn.c tests/bench/bench.mk | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -o $@ $< $(LDFLAGS_COMMON)

$(B)/bench/gentrace: tests/bench/gentrace.c tests/bench/bench.mk $(TRACEGEN_OBJ) | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -Itests/tools -o $@ $< $(TRACEGEN_OBJ) $(LDFLAGS_COMMON) -lzstd

TEST_BINS += $(BENCH_BINS)

bench: $(B)/libvramtrace.so $(B)/vramtrace $(BENCH_BINS) $(SIM_LIBS)
	@BENCH_QUICK=$(BENCH_QUICK) BENCH_EVENTS=$(BENCH_EVENTS) sh tests/bench/run.sh

# The startup floor: LD_PRELOAD of a library that does nothing.
$(B)/bench/libempty.so: tests/bench/empty.c tests/bench/bench.mk | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -fPIC -shared -o $@ $< $(LDFLAGS_COMMON)

BENCH_BINS += $(B)/bench/libempty.so
TEST_BINS += $(B)/bench/libempty.so
bench: $(B)/bench/libempty.so
