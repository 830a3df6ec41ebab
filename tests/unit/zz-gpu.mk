# tests/unit/zz-gpu.mk: `make test-gpu`, the suite for a machine with an
# NVIDIA GPU (tests/gpu/run.sh, docs/python.md). Not part of `make test`:
# CI has no GPU. `make test-gpu-dry` runs the same script's C parts against
# the simulated driver, to check the script itself.
.PHONY: test-gpu test-gpu-dry
test-gpu: all
	@CUDA_HOME=$(CUDA_HOME) sh tests/gpu/run.sh

test-gpu-dry: all $(SIM_LIBS)
	@CUDA_HOME=$(CUDA_HOME) VT_GPU_SIM=$(abspath $(B)/sim) sh tests/gpu/run.sh
