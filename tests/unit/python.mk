# tests/unit/python.mk: native helpers of the Python-frame and annotation
# tests (tests/t/80-python.t): a library with PyTorch-shaped allocator
# frames, and C programs driving the annotation API and the NVTX injection
# through the CUDA toolkit's own header-only NVTX loader.
CXX ?= c++

$(B)/tests/python/libfaketorch.so: tests/python/faketorch.cc tests/unit/python.mk $(SIM_LIBS) | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CXX) -std=c++17 $(PROG_DEPFLAGS) $(OPT) -g -Wall -Wextra -Werror -fno-omit-frame-pointer -fno-optimize-sibling-calls \
	    -I$(CUDA_HOME)/include -fPIC -shared -o $@ $< -L$(B)/sim -Wl,--enable-new-dtags \
	    -Wl,-rpath,$(abspath $(B)/sim) -lcudart -lcuda

$(B)/tests/python/%: tests/python/%.c tests/unit/python.mk $(SIM_LIBS) | $(B)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) $(PROG_DEPFLAGS) -O1 -fno-optimize-sibling-calls -o $@ $< \
	    $(LDFLAGS_COMMON) $(SHIM_TEST_LDFLAGS)

TEST_BINS += $(B)/tests/python/libfaketorch.so $(B)/tests/python/annotate_app $(B)/tests/python/nvtx_app
