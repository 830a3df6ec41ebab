# analyzer/analyzer.mk: $(B)/vramtrace (the offline analyzer, every .c in
# its rooms) and the test tools $(B)/vtgen and $(B)/test_reader.
#
# Rooms, in the order data flows (docs/architecture.md): base (errors,
# sizes, JSON writer, 80 columns, the u64 map), reader (the trace file),
# symbols (stack tree, DWARF lines, demangling), model (one process's
# state, tagging rules, ggml marks), pipeline (reading every trace in one
# merged order, per-GPU view, time series), output (text, JSON, HTML,
# Perfetto, folded), commands (main and one cmd_*.c per subcommand). A room
# includes only headers of rooms before it; every room is on the include
# path, so a file names a header by its bare name.
#
# ANALYZER_LIBS is defined here, first; other fragments add their libraries
# with `ANALYZER_LIBS += ...` (never :=). It is expanded only in the link
# recipe, so additions made after this file is included still count.
ANALYZER_LIBS := -lzstd -lm

ANALYZER_ROOMS := base reader symbols model pipeline output commands
ANALYZER_SRCS := $(foreach r,$(ANALYZER_ROOMS),$(wildcard analyzer/$(r)/*.c))
ANALYZER_OBJS := $(patsubst analyzer/%.c,$(B)/obj/analyzer/%.o,$(ANALYZER_SRCS))
ANALYZER_CFLAGS = $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) $(addprefix -Ianalyzer/,$(ANALYZER_ROOMS)) -MMD -MP
# The objects of the first rooms, without pipeline, output or commands: what
# a unit test of the model or the reader links.
ANALYZER_CORE_OBJS := $(filter $(addprefix $(B)/obj/analyzer/,base/% reader/% symbols/% model/%),$(ANALYZER_OBJS))

$(B)/obj/analyzer/%.o: analyzer/%.c | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(ANALYZER_CFLAGS) -c $< -o $@
# Named as targets, so make never takes them for intermediate files: the
# fuzz replays reach most of them only through a pattern rule, and make
# deleted those ~17 objects after the first build, to recompile them in
# the next.
$(ANALYZER_OBJS):

# The vramtrace binary itself is built from its own objects with
# ANALYZER_OPT: -O3 and link-time optimization, so the per-event path
# (reader, reading loop, model, map) inlines across files; measured on the
# 10M-event bench trace, ~10 % less CPU than -O2 without LTO. Tests, fuzz
# replays, sanitized builds (SANITIZE set) and builds with an OPT of their
# own (OPT=-O0 to debug) keep the plain objects above, so they build as
# before; `make ANALYZER_OPT=` builds vramtrace from them too. The link
# repeats the warning flags: LTO warnings appear only there. No frame
# pointer in this binary alone (the project's flags keep it elsewhere): one
# more register for the reading loop, ~4 % less CPU on the 10M-event trace;
# `perf --call-graph dwarf` still profiles it.
ANALYZER_OPT ?= $(if $(SANITIZE)$(filter-out -O2,$(OPT)),,-O3 -flto=auto -fomit-frame-pointer)
VRAMTRACE_OBJS := $(if $(ANALYZER_OPT),$(patsubst analyzer/%.c,$(B)/obj/analyzer-opt/%.o,$(ANALYZER_SRCS)),$(ANALYZER_OBJS))

# analyzer.mk is a prerequisite: ANALYZER_OPT's flags are set here, and an
# object built with other flags must not survive a change of them.
$(B)/obj/analyzer-opt/%.o: analyzer/%.c analyzer/analyzer.mk | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(ANALYZER_CFLAGS) $(ANALYZER_OPT) -c $< -o $@

$(B)/vramtrace: $(VRAMTRACE_OBJS) | $(B)/.deps-ok
	$(CC) $(LDFLAGS_COMMON) $(if $(ANALYZER_OPT),$(CFLAGS_COMMON) $(ANALYZER_OPT)) -o $@ $(VRAMTRACE_OBJS) $(ANALYZER_LIBS)

all: $(B)/vramtrace

# Test tools: a trace writer library shared by vtgen and the reader's unit
# test, which links the reader's objects directly.
TRACEGEN_OBJ := $(B)/obj/tests/tools/tracegen.o

$(B)/obj/tests/tools/%.o: tests/tools/%.c | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(ANALYZER_CFLAGS) -Itests/tools -c $< -o $@

$(B)/obj/tests/unit/test_reader.o: tests/unit/test_reader.c | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(ANALYZER_CFLAGS) -Itests/tools -Itests -c $< -o $@

$(B)/vtgen: $(B)/obj/tests/tools/vtgen.o $(TRACEGEN_OBJ)
	$(CC) $(LDFLAGS_COMMON) -o $@ $^ -lzstd

$(B)/test_reader: $(B)/obj/tests/unit/test_reader.o $(TRACEGEN_OBJ) \
		$(B)/obj/analyzer/reader/trace_reader.o $(B)/obj/analyzer/base/errors.o
	$(CC) $(LDFLAGS_COMMON) -o $@ $^ -lzstd

TEST_BINS += $(B)/vtgen $(B)/test_reader

-include $(ANALYZER_OBJS:.o=.d) $(if $(ANALYZER_OPT),$(VRAMTRACE_OBJS:.o=.d)) $(B)/obj/tests/tools/vtgen.d $(TRACEGEN_OBJ:.o=.d) \
	$(B)/obj/tests/unit/test_reader.d
