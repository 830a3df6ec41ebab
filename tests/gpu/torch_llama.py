"""A small Llama-shaped transformers model on a real GPU, for make test-gpu.

    torch_llama.py MODEL_DIR OUT.json

Random weights, no download: the first call saves a LlamaForCausalLM built
from a small LlamaConfig into MODEL_DIR (on the CPU); every call loads it
with from_pretrained onto the GPU (device_map="cuda" when accelerate is
there, else .to("cuda")), makes a StaticCache large enough to own its
segments, generates a few tokens with it, and writes torch's own figures
to OUT.json for tests/gpu/run.sh to hold the vramtrace report against:
parameter and KV-cache bytes, memory_reserved/allocated (current and max),
and cudaMemGetInfo through torch.cuda.mem_get_info() (a traced call, so the
trace holds the same figure).

The allocator is whatever PYTORCH_CUDA_ALLOC_CONF says (run.sh runs the
default, expandable_segments:True and backend:cudaMallocAsync).
"""
import json
import os
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

BATCH = 4
MAX_CACHE_LEN = 4096   # 2 x 8 layers x 4 x 8 heads x 4096 x 64 x 2 B = 128 MiB, 16 MiB a tensor


def config():
    return LlamaConfig(vocab_size=8192, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                       num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=MAX_CACHE_LEN,
                       torch_dtype="float16")


def static_cache(cfg):
    """StaticCache's constructor changed across transformers versions."""
    from transformers import StaticCache
    tries = [
        dict(config=cfg, max_batch_size=BATCH, max_cache_len=MAX_CACHE_LEN, device="cuda", dtype=torch.float16),
        dict(config=cfg, batch_size=BATCH, max_cache_len=MAX_CACHE_LEN, device="cuda", dtype=torch.float16),
        dict(config=cfg, max_cache_len=MAX_CACHE_LEN),
    ]
    for kw in tries:
        try:
            return StaticCache(**kw)
        except TypeError:
            continue
    raise SystemExit("torch_llama: cannot build a StaticCache with this transformers")


def cache_tensors(cache):
    """The cache's key/value tensors, old layout (key_cache lists) or new (layers)."""
    out = []
    for name in ("key_cache", "value_cache"):
        out += [t for t in getattr(cache, name, []) or [] if isinstance(t, torch.Tensor)]
    for layer in getattr(cache, "layers", []) or []:
        for name in ("keys", "values"):
            t = getattr(layer, name, None)
            if isinstance(t, torch.Tensor):
                out.append(t)
    return out


def main():
    model_dir, out_path = sys.argv[1], sys.argv[2]
    cfg = config()
    if not os.path.exists(os.path.join(model_dir, "config.json")):
        torch.manual_seed(0)
        LlamaForCausalLM(cfg).to(torch.float16).save_pretrained(model_dir)

    t0 = time.time()
    try:
        import accelerate  # noqa: F401  (device_map needs it)
        model = LlamaForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float16, device_map="cuda")
        how = "from_pretrained(device_map=cuda)"
    except ImportError:
        model = LlamaForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float16).to("cuda")
        how = "from_pretrained + .to(cuda)"
    torch.cuda.synchronize()
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    param_bytes += sum(b.numel() * b.element_size() for b in model.buffers())

    cache = static_cache(cfg)
    ids = torch.randint(0, cfg.vocab_size, (BATCH, 32), device="cuda")
    gen = dict(past_key_values=cache, max_new_tokens=16, do_sample=False, pad_token_id=0, eos_token_id=None)
    # transformers compiles the forward of a static-cache generate with CUDA
    # graphs, and torch's graph pools cannot run on the cudaMallocAsync
    # backend ("cudaMallocAsync does not yet support
    # checkPoolLiveAllocations", torch 2.11): that backend generates eagerly.
    if "cudaMallocAsync" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""):
        gen["disable_compile"] = True
    try:
        model.generate(ids, **gen)
    except TypeError:  # a transformers without disable_compile never compiles
        gen.pop("disable_compile", None)
        model.generate(ids, **gen)
    torch.cuda.synchronize()
    kv_bytes = sum(t.numel() * t.element_size() for t in cache_tensors(cache))

    free, total = torch.cuda.mem_get_info()
    stats = dict(
        allocator=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") or "default",
        how=how,
        torch=torch.__version__,
        param_bytes=param_bytes,
        kv_bytes=kv_bytes,
        memory_reserved=torch.cuda.memory_reserved(),
        max_memory_reserved=torch.cuda.max_memory_reserved(),
        memory_allocated=torch.cuda.memory_allocated(),
        max_memory_allocated=torch.cuda.max_memory_allocated(),
        free=free,
        total=total,
        seconds=round(time.time() - t0, 2),
        compiled=not gen.get("disable_compile", False),
    )
    with open(out_path, "w") as f:
        json.dump(stats, f)
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
