# Unit test of libunwind's redirected address checks (preload/unwind_fds.c,
# the slot rewriter it uses, preload/got.c,
# with the module-walk lock it takes, preload/loader_lock.c, and the
# readability check, preload/state.c), linked
# straight into a test binary, plus the two libraries it redirects: lazy
# binding, and -z now (a read-only GOT). Objects get their own directory,
# apart from the shim's. Needs to be included before tests/tests.mk.

UNWFDS_OBJ := $(B)/obj/tests/unit/unwind_fds
UNWFDS_CFLAGS = $(CFLAGS_COMMON) $(CPPFLAGS_COMMON) -Ipreload -Itests

$(UNWFDS_OBJ)/%.o: preload/%.c preload/shim.h preload/loader_lock.h | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(UNWFDS_CFLAGS) -c $< -o $@

$(UNWFDS_OBJ)/test_unwind_fds.o: tests/unit/test_unwind_fds.c preload/shim.h tests/tap.h | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(UNWFDS_CFLAGS) -c $< -o $@

$(B)/tests/unwfds/libunwfds_lazy.so: tests/unit/unwfds_lib.c tests/unit/unwind_fds.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -fPIC -shared -Wl,-z,lazy $(LDFLAGS_COMMON) -o $@ $<

$(B)/tests/unwfds/libunwfds_now.so: tests/unit/unwfds_lib.c tests/unit/unwind_fds.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -fPIC -shared -Wl,-z,now -Wl,-z,relro $(LDFLAGS_COMMON) -o $@ $<

$(B)/tests/test_unwind_fds: $(UNWFDS_OBJ)/test_unwind_fds.o $(UNWFDS_OBJ)/unwind_fds.o $(UNWFDS_OBJ)/got.o $(UNWFDS_OBJ)/loader_lock.o $(UNWFDS_OBJ)/state.o \
		| $(B)/tests/unwfds/libunwfds_lazy.so $(B)/tests/unwfds/libunwfds_now.so
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_COMMON) -o $@ $^ -ldl -pthread

TEST_BINS += $(B)/tests/test_unwind_fds $(B)/tests/unwfds/libunwfds_lazy.so $(B)/tests/unwfds/libunwfds_now.so
