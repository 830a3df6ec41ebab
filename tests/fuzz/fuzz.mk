# tests/fuzz/fuzz.mk: fuzzing the analyzer's input parsers.
#
#   make fuzz            each target under libFuzzer for FUZZ_SECONDS (60)
#   make fuzz-smoke      the same, 30 s per target (CI)
#   make test            replays tests/fuzz/corpus and tests/fuzz/regressions
#                        through plain-cc builds of the same targets
#                        (tests/t/70-fuzz-replay.t), sanitized or not
#
# Targets (tests/fuzz/fuzz_*.c): reader (trace_reader), report (dump and
# report over a whole trace), rules (rules parser and matcher), args (byte
# formatters, demangler, report's options).
#
# libFuzzer builds use clang (FUZZ_CC) with ASan+UBSan and their own copy
# of the analyzer objects under $(B)/fuzz/obj; replay builds reuse the
# normal analyzer objects. A crash leaves its input in
# $(B)/fuzz/crashes/TARGET/; once fixed, copy it into
# tests/fuzz/regressions/TARGET/ so every `make test` replays it.
# Included by the top Makefile, before tests/tests.mk reads TEST_BINS.

FUZZ_TARGETS := reader report rules args
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_DIR := $(B)/fuzz
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
# Others' code is gated by gcc's -Werror; clang warnings there are reported,
# not fatal. Our own fuzz sources keep -Werror.
FUZZ_CFLAGS = $(CPPFLAGS_COMMON) $(addprefix -Ianalyzer/,$(ANALYZER_ROOMS)) -Itests/fuzz -std=gnu11 -g -O1 -fno-omit-frame-pointer \
	$(FUZZ_SAN) -fsanitize=fuzzer-no-link -Wall -Wextra -Wno-missing-field-initializers -MMD -MP
FUZZ_LIBS := -lzstd -lm -lstdc++
FUZZ_ANALYZER_OBJS = $(filter-out %/main.o,$(ANALYZER_OBJS))

# ---- replay builds (plain $(CC), part of make test) ----
REPLAY_BINS := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/replay-%)
TEST_BINS += $(REPLAY_BINS) $(FUZZ_DIR)/unpack

$(B)/obj/tests/fuzz/%.o: tests/fuzz/%.c tests/fuzz/fuzz_input.h | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(ANALYZER_CFLAGS) -Itests/fuzz -c $< -o $@

$(FUZZ_DIR)/replay-%: $(B)/obj/tests/fuzz/fuzz_%.o $(B)/obj/tests/fuzz/replay.o \
		$(B)/obj/tests/fuzz/fuzz_input.o $(FUZZ_ANALYZER_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_COMMON) -o $@ $^ $(FUZZ_LIBS)

$(FUZZ_DIR)/unpack: $(B)/obj/tests/fuzz/unpack.o $(B)/obj/tests/fuzz/fuzz_input.o
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_COMMON) -o $@ $^ -lzstd

# ---- libFuzzer builds ----
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz-%)
FUZZ_LF_ANALYZER_OBJS = $(patsubst $(B)/obj/analyzer/%,$(FUZZ_DIR)/obj/analyzer/%,$(FUZZ_ANALYZER_OBJS))

$(FUZZ_DIR)/obj/analyzer/%.o: analyzer/%.c | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_DIR)/obj/fuzz/%.o: tests/fuzz/%.c tests/fuzz/fuzz_input.h | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Werror -c $< -o $@

$(FUZZ_DIR)/fuzz-%: $(FUZZ_DIR)/obj/fuzz/fuzz_%.o $(FUZZ_DIR)/obj/fuzz/fuzz_input.o $(FUZZ_LF_ANALYZER_OBJS)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(FUZZ_LIBS)

# ---- seed corpus: committed seeds plus traces made by the shim now ----
# Real traces from the shim scenario programs and the field stories, raw
# (reader/report seeds) and unpacked to structured form; the vtgen scripts
# of tests/golden and tests/corrupt likewise.
FUZZ_SEEDS := $(FUZZ_DIR)/seeds.stamp
$(FUZZ_SEEDS): tests/fuzz/gen-seeds.sh $(B)/libvramtrace.so $(B)/vtgen $(B)/tests/shim/paths \
		$(FUZZ_DIR)/unpack $(SIM_LIBS) $(EX_LIBS) $(EX_PROGS)
	sh tests/fuzz/gen-seeds.sh $(B) $(FUZZ_DIR)/seeds
	@touch $@

.PHONY: fuzz fuzz-smoke fuzz-bins
fuzz-bins: $(FUZZ_BINS) $(FUZZ_SEEDS)

fuzz: fuzz-bins
	@sh tests/fuzz/run-fuzz.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-smoke: fuzz-bins
	@sh tests/fuzz/run-fuzz.sh $(FUZZ_DIR) 30 $(FUZZ_TARGETS)

# Pattern-built objects are intermediate to make; keep them between builds.
.SECONDARY: $(addprefix $(B)/obj/tests/fuzz/,$(FUZZ_TARGETS:%=fuzz_%.o) replay.o fuzz_input.o unpack.o) \
	$(addprefix $(FUZZ_DIR)/obj/fuzz/,$(FUZZ_TARGETS:%=fuzz_%.o) fuzz_input.o) $(FUZZ_LF_ANALYZER_OBJS)

# Header dependencies: a struct that changes under a stale harness object
# reads as a crash (it did once: vt_frame_t grew, fuzz_rules.o did not).
-include $(wildcard $(B)/obj/tests/fuzz/*.d $(FUZZ_DIR)/obj/fuzz/*.d $(FUZZ_DIR)/obj/analyzer/*/*.d)
