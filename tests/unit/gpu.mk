# tests/unit/gpu.mk: `make test-gpu`, the suite for a machine with an
# NVIDIA GPU (tests/gpu/run.sh, docs/python.md). Not part of `make test`:
# CI has no GPU. `make test-gpu-dry` runs the same script's C parts against
# the simulated driver, to check the script itself.
.PHONY: test-gpu test-gpu-dry gpu-carry
test-gpu: all
	@CUDA_HOME=$(CUDA_HOME) sh tests/gpu/run.sh

test-gpu-dry: all $(SIM_LIBS)
	@CUDA_HOME=$(CUDA_HOME) VT_GPU_SIM=$(abspath $(B)/sim) sh tests/gpu/run.sh

# A GPU machine that reaches no package registry may lack the libraries the
# shim dlopens and the analyzer links (an Ubuntu 24.04 H100 image had
# libzstd and libelf but neither libunwind nor libdw). `make gpu-carry`
# copies this machine's into $(B)/gpulibs; carry $(B) over and run.sh
# appends that directory to LD_LIBRARY_PATH, after the system's own.
GPU_CARRY_LIBS := libzstd.so.1 libunwind.so.8 libunwind-x86_64.so.8 liblzma.so.5 libdw.so.1 libelf.so.1 \
	libz.so.1 libbz2.so.1.0
gpu-carry: all
	@mkdir -p $(B)/gpulibs
	@for l in $(GPU_CARRY_LIBS); do \
	    p=$$(ldconfig -p | awk -v l=$$l '$$1 == l && /x86-64/ { print $$NF; exit }'); \
	    if [ -n "$$p" ]; then cp -L "$$p" $(B)/gpulibs/; else echo "gpu-carry: $$l not found here"; fi; \
	done
	@echo "gpu-carry: $$(ls $(B)/gpulibs | wc -l) libraries in $(B)/gpulibs; carry $(B), then: sh tests/gpu/run.sh"
