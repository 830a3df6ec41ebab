"""A program shaped like a vLLM worker (vllm/worker/worker.py and
vllm/v1/worker/gpu_model_runner.py): load_model -> load_weights, then
profile_run -> _dummy_run, then initialize_kv_cache ->
_allocate_kv_cache_tensors, and capture_model. Every allocation reaches
cudaMalloc through ctypes from a worker thread, the way torch's caching
allocator reaches it with the GIL released.

With VLLM_CPU_OFFLOAD_LAYERS=N, as `--cpu-offload-gb` does, the first N
layers' weights are pinned in host memory by maybe_offload_to_cpu
(vllm/model_executor/models/utils.py: torch.empty_strided(...,
device="cpu", pin_memory=True)) and stay there for the run.

Prints one line per tag with the exact bytes it allocated, for the test
to compare with the report:  weights=N kv=N scratch=N, then
offloaded=N (pinned weight bytes).
"""
import os
import threading

from simcuda import cuda_free, cuda_host_alloc, cuda_malloc

MiB = 1 << 20
LAYERS = 4
WEIGHT_BYTES = [3 * MiB, 5 * MiB]     # per layer: qkv, mlp
KV_BYTES = 6 * MiB                    # per layer
SCRATCH_BYTES = 7 * MiB               # activations of the profiling pass
GRAPH_BYTES = 1 * MiB                 # cuda graph pool


def torch_empty(nbytes):
    return cuda_malloc(nbytes)


class LlamaForCausalLM:
    def __init__(self):
        self.params = []

    def load_weights(self, weights):
        for nbytes in weights:
            self.params.append(torch_empty(nbytes))


OFFLOAD_LAYERS = int(os.environ.get("VLLM_CPU_OFFLOAD_LAYERS", "0"))


def maybe_offload_to_cpu(layer, weights):
    layer.params.extend(cuda_host_alloc(nbytes) for nbytes in weights)


class DefaultModelLoader:
    def load_model(self):
        model = LlamaForCausalLM()
        for i in range(LAYERS):
            if i < OFFLOAD_LAYERS:
                maybe_offload_to_cpu(model, WEIGHT_BYTES)
            else:
                model.load_weights(WEIGHT_BYTES)
        return model


class GPUModelRunner:
    def load_model(self):
        self.model = DefaultModelLoader().load_model()

    def _dummy_run(self, nbytes):
        buf = torch_empty(nbytes)
        cuda_free(buf)

    def profile_run(self):
        self._dummy_run(SCRATCH_BYTES)

    def _allocate_kv_cache_tensors(self):
        return [torch_empty(KV_BYTES) for _ in range(LAYERS)]

    def initialize_kv_cache(self):
        self.kv_caches = self._allocate_kv_cache_tensors()

    def capture_model(self):
        self.graph_pool = torch_empty(GRAPH_BYTES)


class Worker:
    def __init__(self):
        self.model_runner = GPUModelRunner()

    def load_model(self):
        self.model_runner.load_model()

    def determine_num_available_blocks(self):
        self.model_runner.profile_run()

    def initialize_cache(self):
        self.model_runner.initialize_kv_cache()
        self.model_runner.capture_model()


def run_worker():
    w = Worker()
    w.load_model()
    w.determine_num_available_blocks()
    w.initialize_cache()


def main():
    t = threading.Thread(target=run_worker, name="worker")
    t.start()
    t.join()
    print("weights=%d kv=%d scratch=%d" % (LAYERS * sum(WEIGHT_BYTES), LAYERS * KV_BYTES,
                                           SCRATCH_BYTES + GRAPH_BYTES))
    print("offloaded=%d" % (OFFLOAD_LAYERS * sum(WEIGHT_BYTES)))


if __name__ == "__main__":
    main()
