# tests/fault/fault.mk: helpers of the fault, security and soak tests
# (tests/t/7x-*.t). Included by the top Makefile, before
# tests/tests.mk reads TEST_BINS.
#
#   $(B)/tests/fault/faultprog         the host program (modes: see its header)
#   $(B)/tests/fault/libfaultdl_{a,b}.so  libraries for the dlclose test
#   $(B)/tests/fault/libfaultunw_{a,b}.so the reload test's pair: one return
#                                      address, two frame layouts (x86-64)
#   $(B)/tests/fault/libvtfault.so     write(2) fault injector (EINTR, short
#                                      writes, ENOSPC mid-chunk)
#   $(B)/tests/fault/faultprog-linked  faultprog with the shim as its first
#                                      DT_NEEDED (absolute RUNPATH), so the
#                                      loader loads it even in a secure-
#                                      execution (setuid) process
#   $(B)/tests/fault/faultprog.o       the object both are linked from, kept
#                                      so a test can link privileged copies
#                                      with a RUNPATH of its own and no
#                                      CUDA headers
#   $(B)/tests/fault/libquota.so       quota interposer (over 1 GiB refused)
#   $(B)/tests/fault/quotaprog         linked host for it
#   $(B)/tests/fault/libowntag.so      a vramtrace_tag_push of its own
#   $(B)/tests/fault/scope/            scopeprog (links no CUDA) and the
#                                      extensions libscope_{12,13,v}.so,
#                                      each linked to its own runtime: the
#                                      simulated one, a copy named
#                                      libcudart.so.12, and a vendored one
#                                      named libcudart-1a2b3c4d.so.11.0;
#                                      libaddon_{a,b}.so, each with its own
#                                      ggml-base (b: another soname and
#                                      buffer layout); libdeep_{lazy,now}.so,
#                                      linked to the runtime and driver,
#                                      which scopeprog loads RTLD_DEEPBIND;
#                                      libdeep_many.so, the same with 70
#                                      empty libraries after them in its
#                                      group (more than the shim settles)
#   make soak                          the 10-million-event soak
#
# faultprog links the simulated runtime and driver like tests/shim/paths,
# at -O1 with frame pointers and no sibling calls so its recursion keeps
# one frame per level (the soak counts distinct stacks).

FAULT := $(B)/tests/fault
FAULT_BINS := $(FAULT)/faultprog $(FAULT)/faultprog-linked $(FAULT)/faultprog.o $(FAULT)/libfaultdl_a.so $(FAULT)/libfaultdl_b.so \
	$(FAULT)/libfaultunw_a.so $(FAULT)/libfaultunw_b.so $(FAULT)/libvtfault.so \
	$(FAULT)/libquota.so $(FAULT)/libowntag.so $(FAULT)/quotaprog $(FAULT)/scope/scopeprog $(FAULT)/scope/libscope_12.so \
	$(FAULT)/scope/libscope_13.so $(FAULT)/scope/libscope_v.so $(FAULT)/scope/libaddon_a.so $(FAULT)/scope/libaddon_b.so \
	$(FAULT)/scope/libdeep_lazy.so $(FAULT)/scope/libdeep_now.so $(FAULT)/scope/libdeep_many.so
TEST_BINS += $(FAULT_BINS)

$(FAULT)/faultprog.o: tests/fault/faultprog.c tests/fault/fault.mk | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -O1 -fno-optimize-sibling-calls -c -o $@ $<

$(FAULT)/faultprog: $(FAULT)/faultprog.o tests/fault/fault.mk $(SIM_LIBS)
	$(CC) $(LDFLAGS_COMMON) -o $@ $< $(SHIM_TEST_LDFLAGS)

$(FAULT)/faultprog-linked: $(FAULT)/faultprog.o tests/fault/fault.mk $(SIM_LIBS) $(B)/libvramtrace.so
	$(CC) $(LDFLAGS_COMMON) -o $@ $< -L$(B) -Wl,--no-as-needed -Wl,-rpath,$(abspath $(B)) -l:libvramtrace.so $(SHIM_TEST_LDFLAGS)

# Same code, same size (only an immediate differs, so the test can tell
# their events apart): b is likely mapped where a was.
$(FAULT)/libfaultdl_%.so: tests/fault/faultdl.c tests/fault/fault.mk $(SIM_LIBS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -O1 -fPIC -shared -fvisibility=hidden \
	    -DFAULTDL_NAME=$* -DFAULTDL_SIZE="(7 * 1048576 + $(if $(filter a,$*),1,4097))" -o $@ $< \
	    $(LDFLAGS_COMMON) -L$(B)/sim -Wl,-rpath,$(abspath $(B)/sim) -lcudart

$(FAULT)/libfaultunw_%.so: tests/fault/faultunw.S tests/fault/fault.mk $(SIM_LIBS)
	@mkdir -p $(@D)
	$(CC) -fPIC -shared $(if $(filter a,$*),-DFAULTUNW_A) -DFAULTUNW_FN=faultunw_$*_alloc \
	    -DFAULTUNW_SIZE="$(if $(filter a,$*),5242880,6291456)" -o $@ $< \
	    $(LDFLAGS_COMMON) -L$(B)/sim -Wl,-rpath,$(abspath $(B)/sim) -lcudart

$(FAULT)/libvtfault.so: tests/fault/vtfault.c tests/fault/fault.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -fPIC -shared -o $@ $< $(LDFLAGS_COMMON)

$(FAULT)/libquota.so: tests/fault/quota.c tests/fault/fault.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -fPIC -shared -o $@ $< $(LDFLAGS_COMMON) -ldl

$(FAULT)/libowntag.so: tests/fault/owntag.c tests/fault/fault.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -fPIC -shared -o $@ $< $(LDFLAGS_COMMON)

$(FAULT)/quotaprog: tests/fault/quotaprog.c tests/fault/fault.mk $(SIM_LIBS) | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -o $@ $< $(LDFLAGS_COMMON) $(SHIM_TEST_LDFLAGS)

# Runtime copies: the simulated runtime's objects under another soname and
# version node.
SCOPE := $(FAULT)/scope
$(SCOPE)/rt12/libcudart.so.12 $(SCOPE)/vendored/libcudart-1a2b3c4d.so.11.0: $(SIM_RT_OBJS) tests/sim/cudart.map tests/fault/fault.mk
	@mkdir -p $(@D)
	sed 's/libcudart.so.13/$(if $(findstring rt12,$@),libcudart.so.12,libcudart.so.11.0)/' tests/sim/cudart.map >$@.map
	$(CC) $(SIM_SOFLAGS) -Wl,-soname,$(@F) -Wl,--version-script=$@.map -o $@ $(SIM_RT_OBJS) -ldl

$(SCOPE)/scopeext.o: tests/fault/scopeext.c tests/fault/fault.mk | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -fPIC -fvisibility=hidden -c -o $@ $<

$(SCOPE)/libscope_13.so: $(SCOPE)/scopeext.o $(SIM_LIBS)
	$(CC) -shared -o $@ $< $(LDFLAGS_COMMON) -L$(B)/sim -Wl,-rpath,$(abspath $(B)/sim) -l:libcudart.so.13

$(SCOPE)/libscope_12.so: $(SCOPE)/scopeext.o $(SCOPE)/rt12/libcudart.so.12
	$(CC) -shared -o $@ $< $(LDFLAGS_COMMON) -L$(SCOPE)/rt12 -Wl,-rpath,$(abspath $(SCOPE)/rt12) -l:libcudart.so.12

$(SCOPE)/libscope_v.so: $(SCOPE)/scopeext.o $(SCOPE)/vendored/libcudart-1a2b3c4d.so.11.0
	$(CC) -shared -o $@ $< $(LDFLAGS_COMMON) -L$(SCOPE)/vendored -Wl,-rpath,$(abspath $(SCOPE)/vendored) \
	    -l:libcudart-1a2b3c4d.so.11.0

$(SCOPE)/libdeep_lazy.so $(SCOPE)/libdeep_now.so: $(SCOPE)/libdeep_%.so: tests/fault/deepext.c tests/fault/fault.mk $(SIM_LIBS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -fPIC -shared -fvisibility=hidden -Wl,-z,$* -Wl,-z,relro \
	    -o $@ $< $(LDFLAGS_COMMON) -L$(B)/sim -Wl,-rpath,$(abspath $(B)/sim) -lcudart -lcuda

# The runtime and driver come first among its needed libraries: the shim
# settles the library and the first of its group, in load order.
DEEP_FILLERS := $(foreach i,$(shell seq 0 69),libdeepfill$(i).so)
$(SCOPE)/libdeep_many.so: tests/fault/deepext.c tests/fault/fault.mk $(SIM_LIBS)
	@mkdir -p $(SCOPE)/fill
	printf 'int deep_filler;\n' | $(CC) -x c -fPIC -shared -o $(SCOPE)/fill/filler.so -
	for f in $(DEEP_FILLERS); do cp $(SCOPE)/fill/filler.so $(SCOPE)/fill/$$f; done
	$(CC) $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -fPIC -shared -fvisibility=hidden -Wl,-z,now -Wl,-z,relro \
	    -o $@ $< $(LDFLAGS_COMMON) -L$(B)/sim -Wl,-rpath,$(abspath $(B)/sim) -lcudart -lcuda \
	    -L$(SCOPE)/fill -Wl,-rpath,$(abspath $(SCOPE)/fill) -Wl,--no-as-needed $(addprefix -l:,$(DEEP_FILLERS))

$(SCOPE)/ggml-b/libggml-base-b.so: examples/ggml/ggml-base.cpp examples/ggml/ggml.h tests/fault/fault.mk
	@mkdir -p $(@D)
	$(CXX) $(EX_CPPFLAGS) $(EX_CXXFLAGS) -DGGML_EXAMPLE_LAYOUT_B -shared -Wl,-soname,libggml-base-b.so -o $@ $<

$(SCOPE)/ggmladdon.o: tests/fault/ggmladdon.cpp examples/ggml/ggml.h tests/fault/fault.mk
	@mkdir -p $(@D)
	$(CXX) $(EX_CPPFLAGS) $(EX_CXXFLAGS) -fvisibility=hidden -c -o $@ $<

$(SCOPE)/libaddon_a.so: $(SCOPE)/ggmladdon.o $(EX)/libggml-base.so
	$(CXX) -shared -o $@ $< -L$(EX) -Wl,-rpath,$(abspath $(EX)) -lggml-base

$(SCOPE)/libaddon_b.so: $(SCOPE)/ggmladdon.o $(SCOPE)/ggml-b/libggml-base-b.so
	$(CXX) -shared -o $@ $< -L$(SCOPE)/ggml-b -Wl,-rpath,$(abspath $(SCOPE)/ggml-b) -lggml-base-b

$(SCOPE)/scopeprog: tests/fault/scopeprog.c tests/fault/fault.mk | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -rdynamic -o $@ $< $(LDFLAGS_COMMON) -ldl

.PHONY: soak
soak: $(TEST_BINS)
	@SOAK_EVENTS=$${SOAK_EVENTS:-10000000} prove -v tests/t/79-soak.t

# ThreadSanitizer over the multi-threaded shim paths, in its own build tree.
TSAN_B := build-thread
.PHONY: tsan
tsan:
	$(MAKE) B=$(TSAN_B) SANITIZE=thread $(addprefix $(TSAN_B)/,libvramtrace.so vramtrace tests/shim/paths tests/fault/faultprog \
	    tests/fault/libfaultdl_a.so tests/fault/drvcases)
	sh tests/fault/tsan.sh $(TSAN_B)

# drvcases: driver behaviours the report must follow (76-fault-driver.t).
TEST_BINS += $(FAULT)/drvcases
$(FAULT)/drvcases: tests/fault/drvcases.c tests/fault/fault.mk $(SIM_LIBS) | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -O1 -pthread -o $@ $< $(LDFLAGS_COMMON) $(SHIM_TEST_LDFLAGS)
