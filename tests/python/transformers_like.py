"""A program shaped like transformers' generate on a small Llama
(src/transformers/modeling_utils.py, cache_utils.py): from_pretrained loads
some weights straight to the GPU and model.to("cuda") moves the rest
(torch's Module._apply) and, as transformers 5 does, checkpoint tensors are
copied to the device by a thread pool whose stacks hold no from_pretrained
frame (core_model_loading.py: spawn_materialize); generate() makes a StaticCache, then runs forward
steps whose activations are scratch; a second generate grows a
DynamicCache inside forward, which must still be kv (innermost wins).

Allocations go through build/tests/python/libfaketorch.so, whose native
frames are named like PyTorch's three allocator backends: caching
(cudaMalloc) for weights and the dynamic cache, expandable segments
(cuMemCreate/cuMemMap) for the static cache, cudaMallocAsync for
activations.

Prints: weights=N kv=N scratch=N, the exact bytes allocated per tag.
"""
import concurrent.futures
import ctypes
import os
import sys

MiB = 1 << 20
LAYERS = 2
STEPS = 3

_lib = ctypes.CDLL(os.environ.get("FAKETORCH", "libfaketorch.so"))
_lib.faketorch_caching_malloc.restype = ctypes.c_void_p
_lib.faketorch_caching_malloc.argtypes = [ctypes.c_size_t]
_lib.faketorch_expandable_map.argtypes = [ctypes.c_size_t]
_lib.faketorch_async_malloc.restype = ctypes.c_void_p
_lib.faketorch_async_malloc.argtypes = [ctypes.c_size_t]
_lib.faketorch_async_free.argtypes = [ctypes.c_void_p]

totals = {"weights": 0, "kv": 0, "scratch": 0}


def empty(nbytes, tag):
    p = _lib.faketorch_caching_malloc(nbytes)
    assert p, "caching malloc failed"
    totals[tag] += nbytes
    return p


class Tensor:
    def __init__(self, nbytes):
        self.nbytes = nbytes
        self.ptr = None

    def cuda(self):
        self.ptr = empty(self.nbytes, "weights")
        return self


class Module:
    """torch.nn.Module's shape: to() applies a function to every parameter."""

    def __init__(self):
        self.params = []

    def _apply(self, fn):
        for p in self.params:
            fn(p)
        return self

    def to(self, device):
        return self._apply(lambda t: t.cuda())


class PreTrainedModel(Module):
    @classmethod
    def from_pretrained(cls, name, device_map=None):
        model = cls()
        model._load_pretrained_model(device_map)
        return model

    def _load_pretrained_model(self, device_map):
        # Embeddings and lm_head loaded straight to the GPU (device_map),
        # the decoder layers left on the CPU for .to() to move.
        self.embed = empty(4 * MiB, "weights")
        self.lm_head = empty(4 * MiB, "weights")
        self.params = [Tensor(2 * MiB) for _ in range(3)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            jobs = [spawn_materialize(pool, 1 * MiB) for _ in range(4)]
            self.materialized = [job.result() for job in jobs]
        assert all(self.materialized), "materialize failed"
        totals["weights"] += 4 * MiB


def _materialize_copy(nbytes):
    return _lib.faketorch_async_malloc(nbytes)


def spawn_materialize(executor, nbytes):
    def _job():
        return _materialize_copy(nbytes)
    return executor.submit(_job)


class StaticCache:
    def __init__(self, layers):
        for _ in range(layers):
            for _kv in ("key", "value"):
                assert _lib.faketorch_expandable_map(2 * MiB) == 0
                totals["kv"] += 2 * MiB


class DynamicCache:
    def __init__(self):
        self.blocks = []

    def update(self, layer):
        self.blocks.append(empty(1 * MiB, "kv"))


class LlamaAttention:
    def forward(self, cache, layer):
        act = _lib.faketorch_async_malloc(3 * MiB // 2)
        totals["scratch"] += 3 * MiB // 2
        if isinstance(cache, DynamicCache):
            cache.update(layer)
        _lib.faketorch_async_free(act)


class LlamaForCausalLM(PreTrainedModel):
    def __init__(self):
        super().__init__()
        self.layers = [LlamaAttention() for _ in range(LAYERS)]

    def forward(self, cache):
        for i, layer in enumerate(self.layers):
            layer.forward(cache, i)

    def generate(self, cache_implementation="static"):
        cache = StaticCache(LAYERS) if cache_implementation == "static" else DynamicCache()
        for _ in range(STEPS if cache_implementation == "static" else 1):
            self.forward(cache)
        return cache


def main():
    model = LlamaForCausalLM.from_pretrained("tiny-llama", device_map="cuda")
    model.to("cuda")
    model.generate(cache_implementation="static")
    model.generate(cache_implementation="dynamic")
    print("weights=%d kv=%d scratch=%d" % (totals["weights"], totals["kv"], totals["scratch"]))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
