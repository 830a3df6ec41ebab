# tests/unit/report.mk: the report's libraries and unit tests.
# __cxa_demangle (analyzer/symbols/demangle.c) lives in the C++ runtime.
ANALYZER_LIBS += -lstdc++

# Unit tests link the report's own modules directly (no main.c).
REPORT_UNIT_OBJS := $(ANALYZER_CORE_OBJS) $(B)/obj/analyzer/output/report_common.o

$(B)/obj/tests/unit/test_model.o $(B)/obj/tests/unit/test_rules.o $(B)/obj/tests/unit/test_names.o $(B)/obj/tests/unit/test_u64map.o: $(B)/obj/tests/unit/%.o: tests/unit/%.c | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(ANALYZER_CFLAGS) -Itests -c $< -o $@

$(B)/test_model: $(B)/obj/tests/unit/test_model.o $(REPORT_UNIT_OBJS)
	$(CC) $(LDFLAGS_COMMON) -o $@ $^ -lstdc++ -ldw -lelf -lzstd

$(B)/test_rules: $(B)/obj/tests/unit/test_rules.o $(REPORT_UNIT_OBJS)
	$(CC) $(LDFLAGS_COMMON) -o $@ $^ -lstdc++ -ldw -lelf -lzstd

$(B)/test_names: $(B)/obj/tests/unit/test_names.o $(REPORT_UNIT_OBJS)
	$(CC) $(LDFLAGS_COMMON) -o $@ $^ -lstdc++ -ldw -lelf -lzstd

$(B)/test_u64map: $(B)/obj/tests/unit/test_u64map.o $(B)/obj/analyzer/base/u64map.o
	$(CC) $(LDFLAGS_COMMON) -o $@ $^

TEST_BINS += $(B)/test_model $(B)/test_rules $(B)/test_names $(B)/test_u64map

-include $(B)/obj/tests/unit/test_model.d $(B)/obj/tests/unit/test_rules.d $(B)/obj/tests/unit/test_names.d $(B)/obj/tests/unit/test_u64map.d

# Source lines (analyzer/symbols/dwarf_lines.c) come from elfutils. The fuzz replay and
# libFuzzer builds link every analyzer object with their own FUZZ_LIBS,
# which tests/fuzz/fuzz.mk sets with := after this file is read: a
# pattern-specific append survives that.
ANALYZER_LIBS += -ldw -lelf
$(B)/fuzz/replay-% $(B)/fuzz/fuzz-%: FUZZ_LIBS += -ldw -lelf
