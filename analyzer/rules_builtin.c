/* The built-in tagging rules. Every name here is a real frame of the
 * project it cites; the comment says which allocation it catches. Order
 * matters only among rules that match the same frame (see rules.h). */
#include "rules_builtin.h"

const vt_builtin_rule_t vt_builtin_rules[] = {
    /* llama.cpp / ggml (ollama runs the same code). Weights and KV both go
     * through ggml_backend_alloc_ctx_tensors_from_buft ->
     * ggml_backend_cuda_buffer_type_alloc_buffer, which deliberately have no
     * rule: the outer frame decides. */
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
     * c10::cuda::CUDACachingAllocator has no rule on purpose: it serves
     * weights, KV and activations alike, so only outer frames can say. */
    { "builtin:pytorch", "scratch", "at::cuda::getCurrentCUDABlasHandle" },
    { "builtin:pytorch", "scratch", "at::cuda::getCurrentCUDABlasLtHandle" },
    { "builtin:pytorch", "scratch", "at::cuda::getCUDABlasLtWorkspace" },
    { "builtin:pytorch", "scratch", "at::cuda::blas::*" },
    { "builtin:pytorch", "scratch", "at::native::*cudnn*" },
    { "builtin:pytorch", "scratch", "c10d::ProcessGroupNCCL::*" },
    /* vLLM custom all-reduce IPC buffers. */
    { "builtin:vllm", "scratch", "vllm::CustomAllreduce::*" },
    { "builtin:vllm", "scratch", "init_custom_ar" },
    { "builtin:vllm", "scratch", "allocate_shared_buffer_and_handle" },
};

const unsigned vt_builtin_rule_count = sizeof vt_builtin_rules / sizeof vt_builtin_rules[0];
