/* The built-in tagging rules. Every name here is a real frame of the
 * project it cites; the comment says which allocation it catches. Order
 * matters only among rules that match the same frame (see rules.h). */
#include "rules_builtin.h"

const vt_builtin_rule_t vt_builtin_rules[] = {
    /* llama.cpp / ggml (ollama runs the same code). Weights and KV both go
     * through ggml_backend_alloc_ctx_tensors_from_buft ->
     * ggml_backend_cuda_buffer_type_alloc_buffer, which deliberately have no
     * rule: the outer frame decides. */
    /* Checked against the llama.cpp node-llama-cpp 3.21.1 ships
     * (its llama.cpp.info.json: ggml-org/llama.cpp tag v0.4.0)
     * (tests/t/63-llama-real.t): weights are loaded in
     * llama_model_base::load_tensors, per architecture in
     * llama_model_<arch>::load_arch_tensors; both are in .dynsym, so they
     * survive strip. The older names stay for older builds. */
    { "builtin:llama.cpp", "weights", "llama_model_base::load_tensors" },
    { "builtin:llama.cpp", "weights", "llama_model_*::load_arch_tensors" },
    { "builtin:llama.cpp", "weights", "llama_model::load_tensors" },
    { "builtin:llama.cpp", "weights", "llm_load_tensors" },
    { "builtin:llama.cpp", "weights", "llama_model_load" },
    { "builtin:llama.cpp", "kv", "llama_kv_cache::llama_kv_cache" },
    { "builtin:llama.cpp", "kv", "llama_kv_cache::*" },
    { "builtin:llama.cpp", "kv", "llama_kv_cache_unified" },
    { "builtin:llama.cpp", "kv", "llama_kv_cache_unified::*" },
    { "builtin:llama.cpp", "kv", "llama_kv_cache_iswa" },
    { "builtin:llama.cpp", "kv", "llama_kv_cache_iswa::*" },
    { "builtin:llama.cpp", "kv", "llama_kv_cache_init" },
    { "builtin:llama.cpp", "kv", "llama_memory_recurrent" },
    { "builtin:llama.cpp", "kv", "llama_memory_recurrent::*" },
    { "builtin:llama.cpp", "scratch", "ggml_gallocr_reserve_n" },
    { "builtin:llama.cpp", "scratch", "ggml_backend_sched_reserve" },
    { "builtin:llama.cpp", "scratch", "llama_context::graph_reserve" },
    { "builtin:llama.cpp", "scratch", "ggml_cuda_pool_leg::alloc" },
    { "builtin:llama.cpp", "scratch", "ggml_cuda_pool_vmm::alloc" },
    /* cuBLAS workspace: ggml_cuda_mul_mat_cublas allocates it with
     * cudaMalloc on first use and hands it to cublasSetWorkspace_v2 (the
     * accessor is inlined); llama.cpp v0.4.0 as in node-llama-cpp 3.21.1. */
    { "builtin:llama.cpp", "scratch", "ggml_cuda_mul_mat_cublas" },
    /* Anything a backend allocates while it computes a graph is working
     * memory of that computation (pools, library workspaces): weights and
     * KV are allocated before any graph runs. These ggml-base frames are
     * exported, so they decide when strip has hidden the backend's own
     * frames (llama.cpp v0.4.0, node-llama-cpp 3.21.1). */
    { "builtin:llama.cpp", "scratch", "ggml_backend_sched_graph_compute_async" },
    { "builtin:llama.cpp", "scratch", "ggml_backend_sched_graph_compute" },
    { "builtin:llama.cpp", "scratch", "ggml_backend_graph_compute_async" },
    { "builtin:llama.cpp", "scratch", "ggml_backend_graph_compute" },
    /* Pinned staging buffers for async weight upload: inside load_tensors,
     * but not weights. Innermost-wins picks this first. */
    { "builtin:llama.cpp", "scratch", "llama_model_loader::load_all_data" },
    /* Logits/embeddings output buffer. */
    { "builtin:llama.cpp", "scratch", "llama_context::output_reserve" },

    /* CUDA libraries: their own allocations are workspaces. Function names
     * first (exported API frames), modules for stripped internal frames. */
    { "builtin:cuda-libs", "scratch", "cublas*" },
    { "builtin:cuda-libs", "scratch", "cudnn*" },
    { "builtin:cuda-libs", "scratch", "nccl*" },
    { "builtin:cuda-libs", "scratch", "module:libcublas*" },
    { "builtin:cuda-libs", "scratch", "module:libcudnn*" },
    { "builtin:cuda-libs", "scratch", "module:libnccl*" },

    /* PyTorch native frames (vLLM and transformers allocate through it).
     * The allocator's own frames have no rule on purpose: they serve
     * weights, KV and activations alike, so only outer (Python) frames can
     * say. That holds for all three backends: caching-allocator segments
     * (c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::
     * malloc -> cudaMalloc), expandable segments (PYTORCH_CUDA_ALLOC_CONF=
     * expandable_segments:True: ...::Native::ExpandableSegment::map ->
     * cuMemCreate/cuMemMap, one event per page grown, each tagged by the
     * Python frames that grew it) and backend:cudaMallocAsync
     * (...::CudaMallocAsync::CudaMallocAsyncAllocator -> cudaMallocAsync,
     * one event per tensor). tests/python/faketorch.cc has frames of
     * these names and tests/t/80-python.t checks the tags through them. */
    { "builtin:pytorch", "scratch", "at::cuda::getCurrentCUDABlasHandle" },
    { "builtin:pytorch", "scratch", "at::cuda::getCurrentCUDABlasLtHandle" },
    { "builtin:pytorch", "scratch", "at::cuda::getCUDABlasLtWorkspace" },
    { "builtin:pytorch", "scratch", "at::cuda::blas::*" },
    { "builtin:pytorch", "scratch", "at::native::*cudnn*" },
    { "builtin:pytorch", "scratch", "c10d::ProcessGroupNCCL::*" },

    /* Python frames (pseudo frames "py:QUALNAME (FILE:LINE)", see rules.h):
     * "py:NAME" matches a function NAME in any class, "py:CLS.*" any method
     * of CLS. The innermost match wins, so a KV cache made inside forward
     * is kv, and the dummy runs inside capture_model are scratch. */

    /* vLLM (vllm/worker/, vllm/v1/worker/gpu_model_runner.py,
     * vllm/model_executor/model_loader/). Weights: Worker.load_model ->
     * GPUModelRunner.load_model -> model_loader.load_model -> the model's
     * load_weights. */
    { "builtin:vllm", "weights", "py:load_model" },
    { "builtin:vllm", "weights", "py:load_weights" },
    /* --cpu-offload-gb: vllm/model_executor/models/utils.py's
     * maybe_offload_to_cpu pins a layer's parameters in host memory
     * (torch.empty_strided(..., device="cpu", pin_memory=True)) while the
     * model is built; they stay there and are streamed to the GPU per
     * forward pass. */
    { "builtin:vllm", "weights", "py:maybe_offload_to_cpu" },
    /* KV: v1 GPUModelRunner.initialize_kv_cache ->
     * _allocate_kv_cache_tensors; v0 CacheEngine._allocate_kv_cache. */
    { "builtin:vllm", "kv", "py:_allocate_kv_cache_tensors" },
    { "builtin:vllm", "kv", "py:initialize_kv_cache" },
    { "builtin:vllm", "kv", "py:CacheEngine.*" },
    { "builtin:vllm", "kv", "py:_allocate_kv_cache" },
    /* Scratch: the memory-profiling forward pass, dummy batches and CUDA
     * graph capture. */
    { "builtin:vllm", "scratch", "py:profile_run" },
    { "builtin:vllm", "scratch", "py:_dummy_run" },
    { "builtin:vllm", "scratch", "py:_dummy_sampler_run" },
    { "builtin:vllm", "scratch", "py:capture_model" },

    /* transformers (src/transformers/modeling_utils.py, cache_utils.py).
     * Weights: from_pretrained (device_map loads straight to the GPU), and
     * moving a model there afterwards: model.to()/.cuda() reach every
     * parameter through torch's Module._apply (Module.to is named too, for
     * stacks cut short). */
    { "builtin:transformers", "weights", "py:from_pretrained" },
    { "builtin:transformers", "weights", "py:Module._apply" },
    { "builtin:transformers", "weights", "py:Module.to" },
    { "builtin:transformers", "weights", "py:Module.cuda" },
    /* transformers 5 (core_model_loading.py) copies each checkpoint tensor
     * to the device in a ThreadPoolExecutor: the worker's stack is
     * _materialize_copy <- spawn_materialize.<locals>._job <- the pool's
     * _worker, with no from_pretrained frame. Seen on an H100 with torch
     * 2.11 / transformers 5.17 under backend:cudaMallocAsync, where each
     * tensor is its own allocation (the caching allocator served them from
     * the segment caching_allocator_warmup had reserved). */
    { "builtin:transformers", "weights", "py:_materialize_copy" },
    { "builtin:transformers", "weights", "py:spawn_materialize.*" },
    { "builtin:transformers", "weights", "py:spawn_tp_materialize.*" },
    /* KV: StaticCache allocates in its constructor (<= 4.5x) or lazily in
     * its layers (StaticLayer.lazy_initialization, newer); DynamicCache
     * grows in update. */
    { "builtin:transformers", "kv", "py:StaticCache.*" },
    { "builtin:transformers", "kv", "py:StaticLayer.*" },
    { "builtin:transformers", "kv", "py:StaticSlidingWindowLayer.*" },
    { "builtin:transformers", "kv", "py:SlidingWindowCache.*" },
    { "builtin:transformers", "kv", "py:HybridCache.*" },
    { "builtin:transformers", "kv", "py:DynamicCache.update" },
    { "builtin:transformers", "kv", "py:DynamicLayer.update" },
    /* Scratch: activations of any module's forward. */
    { "builtin:transformers", "scratch", "py:forward" },

    /* Explicit tags from the annotation API (include/vramtrace/annotate.h)
     * named after a built-in tag. They are the outermost frames, so any
     * rule above that matches inside them wins. */
    { "builtin:annotate", "weights", "tag:weights" },
    { "builtin:annotate", "kv", "tag:kv" },
    { "builtin:annotate", "scratch", "tag:scratch" },

    /* vLLM custom all-reduce IPC buffers. */
    { "builtin:vllm", "scratch", "vllm::CustomAllreduce::*" },
    { "builtin:vllm", "scratch", "init_custom_ar" },
    { "builtin:vllm", "scratch", "allocate_shared_buffer_and_handle" },
};

const unsigned vt_builtin_rule_count = sizeof vt_builtin_rules / sizeof vt_builtin_rules[0];
