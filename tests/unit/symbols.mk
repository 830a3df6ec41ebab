# Unit test of the shim's symbolizer (preload/symbols.c, preload/elf_symtab.c,
# the module-walk lock they take, preload/loader_lock.c, and the
# readability check, preload/state.c)
# linked straight into a test binary, plus the shared library it dlopens.
# Objects get their own directory so they never collide with the shim's
# (-fvisibility=hidden -fPIC) objects of the same sources.
# Needs to be included before tests/tests.mk, which reads TEST_BINS.

SYMTEST_OBJ := $(B)/obj/tests/unit/symbols
SYMTEST_CFLAGS = $(CFLAGS_COMMON) $(CPPFLAGS_COMMON) -Ipreload -Itests

$(SYMTEST_OBJ)/%.o: preload/%.c preload/symbols.h preload/elf_symtab.h preload/loader_lock.h preload/shim.h
	@mkdir -p $(@D)
	$(CC) $(SYMTEST_CFLAGS) -c $< -o $@

# Scans even the test's own small tables, so prefetched lookups go through
# the scan path.
$(SYMTEST_OBJ)/symbols.o: SYMTEST_CFLAGS += -DVT_SCAN_MIN_SYMBOLS=0

$(SYMTEST_OBJ)/test_symbols.o: tests/unit/test_symbols.c preload/symbols.h preload/elf_symtab.h tests/tap.h
	@mkdir -p $(@D)
	$(CC) $(SYMTEST_CFLAGS) -c $< -o $@

# Hidden visibility puts everything but the two exported functions in
# .symtab only; no ICF so each test function keeps its own address; a sha1
# build-id so the test can check the 20 bytes.
$(B)/tests/libsymtest.so: tests/unit/symtest_lib.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -fPIC -shared -fvisibility=hidden -fno-ipa-icf \
		-Wl,--build-id=sha1 $(LDFLAGS_COMMON) -o $@ $<

$(B)/tests/test_symbols: $(SYMTEST_OBJ)/test_symbols.o $(SYMTEST_OBJ)/symbols.o \
		$(SYMTEST_OBJ)/elf_symtab.o $(SYMTEST_OBJ)/loader_lock.o $(SYMTEST_OBJ)/state.o | $(B)/tests/libsymtest.so
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_COMMON) -o $@ $^ -ldl

TEST_BINS += $(B)/tests/test_symbols $(B)/tests/libsymtest.so
