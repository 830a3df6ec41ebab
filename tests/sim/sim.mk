# tests/sim: the simulated GPU every test runs against (no GPU needed).
#   $(B)/sim/libcuda.so.1       simulated driver (+ libcuda.so symlink)
#   $(B)/sim/libcudart.so.13    runtime that reaches it via cuGetProcAddress
#                               (symbols under the libcudart.so.13 version node)
#   $(B)/sim/libcublas.so.13    cuBLAS stub: what libggml-cuda.so imports
#   $(B)/sim12/                 a CUDA 12 program's libraries: the same runtime
#                               and cuBLAS stub under the .so.12 names and
#                               version nodes, a libnccl.so.2 stub, and the
#                               driver (@fugood/llama.node's CUDA build)
#   $(B)/sim-nov2/libcuda.so.1  the same driver without cuGetProcAddress_v2
#                               and cuMemAllocFromPoolAsync_ptsz (pre-12.0)
#   $(B)/sim/test_sim           its TAP test (tests/t/10-sim.t)
# Included by the top Makefile, which provides B, CPPFLAGS_COMMON,
# CFLAGS_COMMON, LDFLAGS_COMMON and SANITIZE.

SIM_DRV_SRCS := $(addprefix tests/sim/,sim_config.c sim_map.c sim_shared.c sim_core.c \
	sim_device.c sim_ctx.c sim_mem.c sim_pool.c sim_vmm.c sim_host.c sim_procaddr.c sim_array.c sim_graph.c \
	sim_ipc.c)
SIM_RT_SRCS := $(addprefix tests/sim/,cudart_driver.c cudart_api.c)
SIM_DRV_OBJS := $(SIM_DRV_SRCS:tests/sim/%.c=$(B)/obj/sim/%.o)
SIM_NOV2_OBJS := $(SIM_DRV_SRCS:tests/sim/%.c=$(B)/obj/sim/nov2/%.o)
SIM_RT_OBJS := $(SIM_RT_SRCS:tests/sim/%.c=$(B)/obj/sim/%.o)

SIM_CFLAGS := $(CPPFLAGS_COMMON) $(CFLAGS_COMMON) -fPIC -fvisibility=hidden -pthread -MMD -MP
# -Bsymbolic-functions: the library's own references (the cuGetProcAddress
# table, internal calls) bind to its own functions even under LD_PRELOAD.
SIM_SOFLAGS := $(LDFLAGS_COMMON) -shared -pthread -Wl,-Bsymbolic-functions

SIM_LIBS := $(B)/sim/libcuda.so.1 $(B)/sim/libcuda.so $(B)/sim/libcudart.so.13 \
	$(B)/sim/libcudart.so $(B)/sim/libcublas.so.13 $(B)/sim-nov2/libcuda.so.1 $(B)/sim-nov2/libcuda.so
SIM12_LIBS := $(B)/sim12/libcudart.so.12 $(B)/sim12/libcublas.so.12 $(B)/sim12/libnccl.so.2 $(B)/sim12/libcuda.so.1
TEST_BINS += $(SIM_LIBS) $(SIM12_LIBS) $(B)/sim/test_sim

$(B)/obj/sim/%.o: tests/sim/%.c
	@mkdir -p $(@D)
	$(CC) $(SIM_CFLAGS) -c -o $@ $<

$(B)/obj/sim/nov2/%.o: tests/sim/%.c
	@mkdir -p $(@D)
	$(CC) $(SIM_CFLAGS) -DVTSIM_NO_V2 -c -o $@ $<

$(B)/sim/libcuda.so.1: $(SIM_DRV_OBJS)
	@mkdir -p $(@D)
	$(CC) $(SIM_SOFLAGS) -Wl,-soname,libcuda.so.1 -o $@ $^

$(B)/sim-nov2/libcuda.so.1: $(SIM_NOV2_OBJS)
	@mkdir -p $(@D)
	$(CC) $(SIM_SOFLAGS) -Wl,-soname,libcuda.so.1 -o $@ $^

# The runtime links no driver: it finds it with dlopen, as libcudart does.
$(B)/sim/libcudart.so.13: $(SIM_RT_OBJS) tests/sim/cudart.map
	@mkdir -p $(@D)
	$(CC) $(SIM_SOFLAGS) -Wl,-soname,libcudart.so.13 -Wl,--version-script=tests/sim/cudart.map \
		-o $@ $(SIM_RT_OBJS) -ldl

$(B)/sim/libcublas.so.13: $(B)/obj/sim/cublas.o tests/sim/cublas.map
	@mkdir -p $(@D)
	$(CC) $(SIM_SOFLAGS) -Wl,-soname,libcublas.so.13 -Wl,--version-script=tests/sim/cublas.map \
		-o $@ $(B)/obj/sim/cublas.o

# The same objects under CUDA 12's names: a program linked against 12
# asks for symbols under the libcudart.so.12 version node.
$(B)/sim12/libcudart.so.12: $(SIM_RT_OBJS) tests/sim/cudart.map
	@mkdir -p $(@D)
	sed 's/libcudart.so.13/libcudart.so.12/' tests/sim/cudart.map >$@.map
	$(CC) $(SIM_SOFLAGS) -Wl,-soname,libcudart.so.12 -Wl,--version-script=$@.map -o $@ $(SIM_RT_OBJS) -ldl

$(B)/sim12/libcublas.so.12: $(B)/obj/sim/cublas.o tests/sim/cublas.map
	@mkdir -p $(@D)
	sed 's/libcublas.so.13/libcublas.so.12/' tests/sim/cublas.map >$@.map
	$(CC) $(SIM_SOFLAGS) -Wl,-soname,libcublas.so.12 -Wl,--version-script=$@.map -o $@ $(B)/obj/sim/cublas.o

$(B)/sim12/libnccl.so.2: $(B)/obj/sim/nccl.o
	@mkdir -p $(@D)
	$(CC) $(SIM_SOFLAGS) -Wl,-soname,libnccl.so.2 -o $@ $<

$(B)/sim12/libcuda.so.1: $(B)/sim/libcuda.so.1
	@mkdir -p $(@D)
	ln -sf ../sim/libcuda.so.1 $@

$(B)/sim/libcuda.so $(B)/sim-nov2/libcuda.so: %/libcuda.so: %/libcuda.so.1
	ln -sf libcuda.so.1 $@

$(B)/sim/libcudart.so: $(B)/sim/libcudart.so.13
	ln -sf libcudart.so.13 $@

# RUNPATH (not RPATH) so LD_LIBRARY_PATH=$(B)/sim-nov2 can swap the driver.
$(B)/sim/test_sim: $(B)/obj/sim/test_sim.o $(B)/sim/libcudart.so $(B)/sim/libcuda.so
	$(CC) $(LDFLAGS_COMMON) -pthread -o $@ $< -L$(B)/sim -lcudart -lcuda -ldl \
		-Wl,--enable-new-dtags,-rpath,$(abspath $(B)/sim)

-include $(SIM_DRV_OBJS:.o=.d) $(SIM_NOV2_OBJS:.o=.d) $(SIM_RT_OBJS:.o=.d) $(B)/obj/sim/test_sim.d
