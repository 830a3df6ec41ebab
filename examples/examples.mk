# examples/examples.mk: the field stories as programs (examples/README.md),
# built under $(B)/examples/ the way llama.cpp builds: libggml-base.so,
# libggml-cuda.so and libllama.so, and executables linking them.
#
#   make examples    build them (also part of `make test-bins`)
#   make demo        story 1 under the shim on a simulated 24 GiB card, then
#                    `vramtrace report` on its trace
#
# The libraries link the CUDA runtime only (-lcudart), never libcuda: the VMM
# pool reaches the driver through cudaGetDriverEntryPointByVersion. They are
# linked against the simulated runtime in $(B)/sim with a RUNPATH, which
# LD_LIBRARY_PATH overrides, so on a machine with a GPU the same binaries run
# on the real runtime:
#   LD_LIBRARY_PATH=/usr/local/cuda/lib64 build/examples/llama-cli ...
# Frames must survive for vramtrace's tagging, hence -O1 with frame
# pointers, noinline on every named function, and no sanitizer (an
# LD_PRELOADed shim must come before the ASan runtime).

EX := $(B)/examples
EX_CUDART_DIR ?= $(abspath $(B)/sim)
EX_CXXFLAGS := -std=gnu++17 -O1 -g -fno-omit-frame-pointer $(WARN) -fPIC -MMD -MP
EX_CFLAGS := -std=gnu11 -O1 -g -fno-omit-frame-pointer $(WARN) -MMD -MP
EX_CPPFLAGS := -I$(CUDA_HOME)/include -D_GNU_SOURCE
EX_RPATH := -Wl,--enable-new-dtags,-rpath,'$$ORIGIN':$(EX_CUDART_DIR)
EX_CUDART := -L$(EX_CUDART_DIR) -lcudart

EX_LIBS := $(EX)/libggml-base.so $(EX)/libggml-cuda.so $(EX)/libllama.so $(EX)/libc10_cuda.so
EX_PROGS := $(EX)/llama-cli $(EX)/llama-server $(EX)/llama-server-chat $(EX)/gpu-hog $(EX)/torch-swap \
	$(EX)/ollama-serve $(EX)/ollama-engine $(EX)/vmm-pool
TEST_BINS += $(EX_LIBS) $(EX_PROGS)

.PHONY: examples
examples: $(EX_LIBS) $(EX_PROGS)

$(EX)/obj/%.o: examples/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(EX_CPPFLAGS) $(EX_CXXFLAGS) -c -o $@ $<

$(EX)/obj/%.o: examples/%.c
	@mkdir -p $(@D)
	$(CC) $(EX_CPPFLAGS) $(EX_CFLAGS) -c -o $@ $<

# Order-only on the simulated runtime: relinking every example when the
# sim changes would buy nothing, its ABI is CUDA's.
$(EX)/libggml-base.so: $(EX)/obj/ggml/ggml-base.o
	$(CXX) -shared -Wl,-soname,libggml-base.so -o $@ $^

$(EX)/libggml-cuda.so: $(EX)/obj/ggml/ggml-cuda.o $(EX)/libggml-base.so | $(SIM_LIBS)
	$(CXX) -shared -Wl,-soname,libggml-cuda.so -o $@ $< -L$(EX) -lggml-base $(EX_CUDART) $(EX_RPATH)

$(EX)/libllama.so: $(EX)/obj/llama/llama.o $(EX)/libggml-cuda.so
	$(CXX) -shared -Wl,-soname,libllama.so -o $@ $< -L$(EX) -lggml-cuda -lggml-base $(EX_RPATH)

$(EX)/libc10_cuda.so: $(EX)/obj/c10/c10_cuda.o | $(SIM_LIBS)
	$(CXX) -shared -Wl,-soname,libc10_cuda.so -o $@ $< $(EX_CUDART) $(EX_RPATH)

EX_LLAMA_LINK = $(CXX) -o $@ $(filter %.o,$^) -L$(EX) -lllama -lggml-cuda -lggml-base $(EX_CUDART) $(EX_RPATH)

$(EX)/llama-cli: $(EX)/obj/llama-cli.o $(EX)/obj/common/common.o $(EX)/libllama.so
	$(EX_LLAMA_LINK)

$(EX)/llama-server: $(EX)/obj/llama-server.o $(EX)/obj/common/common.o $(EX)/libllama.so
	$(EX_LLAMA_LINK)

$(EX)/llama-server-chat: $(EX)/obj/llama-server-chat.o $(EX)/obj/common/common.o $(EX)/libllama.so
	$(EX_LLAMA_LINK)

# The server starts llama-server, its sibling, as the model's runner.
$(EX)/ollama-serve: $(EX)/obj/ollama-serve.o $(EX)/libllama.so | $(EX)/llama-server
	$(EX_LLAMA_LINK)

# ollama's Go engine links ggml only, never libllama.
$(EX)/ollama-engine: $(EX)/obj/ollama-engine.o $(EX)/libggml-cuda.so
	$(CXX) -o $@ $< -L$(EX) -lggml-cuda -lggml-base $(EX_CUDART) $(EX_RPATH)

$(EX)/vmm-pool: $(EX)/obj/vmm-pool.o $(EX)/libggml-cuda.so $(EX)/libc10_cuda.so
	$(CXX) -o $@ $< -L$(EX) -lc10_cuda -lggml-cuda -lggml-base $(EX_CUDART) $(EX_RPATH)

$(EX)/torch-swap: $(EX)/obj/torch-swap.o $(EX)/libc10_cuda.so
	$(CXX) -o $@ $< -L$(EX) -lc10_cuda $(EX_CUDART) $(EX_RPATH)

$(EX)/gpu-hog: $(EX)/obj/gpu-hog.o | $(SIM_LIBS)
	$(CC) -o $@ $< $(EX_CUDART) $(EX_RPATH)

# Story 1 on a fresh simulated 24 GiB card, traced into a fresh directory:
# the server and the runner it starts (llama-server with the -ngl the
# server chose). The programs' own log goes next to the traces, not on
# screen: the report is the point, and its verdict and offload estimate
# must be on the first screen.
demo-bins: $(B)/libvramtrace.so $(B)/vramtrace $(EX_PROGS) $(SIM_LIBS)

demo-run: demo-bins
	@d=$$(mktemp -d "$${TMPDIR:-/tmp}/vramtrace-demo.XXXXXX") && mkdir -p $$d/traces && \
	echo "demo: ollama-serve -m llama-70b-q4_k_m -c 8192 on a simulated 24 GiB GPU" && \
	env -u VTSIM_SHARED -u VTSIM_EXTERNAL -u VTSIM_RESERVE -u GGML_CUDA_ENABLE_UNIFIED_MEMORY \
	    VTSIM_DEVICES=24GiB VRAMTRACE_DIR=$$d/traces LD_LIBRARY_PATH=$(abspath $(B)/sim) \
	    LD_PRELOAD=$(abspath $(B)/libvramtrace.so) \
	    $(EX)/ollama-serve -m llama-70b-q4_k_m -c 8192 >$$d/ollama-serve.log 2>&1; \
	rc=$$?; echo "demo: its runner: $$(sed -n 's/^server.go: starting runner: //p' $$d/ollama-serve.log)" && \
	echo "demo: the server exited with status $$rc (log: $$d/ollama-serve.log)" && \
	echo "demo: now: vramtrace report $$d/traces" && echo && \
	$(B)/vramtrace report $$d/traces

-include $(patsubst %.o,%.d,$(wildcard $(EX)/obj/*.o $(EX)/obj/*/*.o))
