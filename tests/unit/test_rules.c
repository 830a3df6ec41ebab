/* Unit tests of tagging (analyzer/rules.c, demangle.c): built-in rules on
 * llama.cpp-shaped stacks, the matching order, user rules and bad rules
 * files with their line numbers. TAP on stdout. */
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "rules.h"
#include "tap.h"

static vt_frame_t fr(const char *name, const char *module)
{
    vt_frame_t f = { 0 };
    f.display = name;
    f.name = name;
    f.module = module;
    f.module_base = module;
    return f;
}

static int tag_of(const vt_rules_t *r, const vt_frame_t *f, int n, vt_match_t *m)
{
    *m = vt_rules_match(r, f, n);
    return m->tag;
}

int main(void)
{
    vt_rules_t *r = vt_rules_new();
    TAP_OK(r != NULL, "built-in rules load");
    vt_match_t m;
    char desc[512];

    /* weights and KV share the inner frames; the outer frame decides */
    vt_frame_t w[] = { fr("cudaMalloc", "libcudart.so.12"),
                       fr("ggml_backend_cuda_buffer_type_alloc_buffer", "libggml-cuda.so"),
                       fr("ggml_backend_buft_alloc_buffer", "libggml-base.so"),
                       fr("ggml_backend_alloc_ctx_tensors_from_buft", "libggml-base.so"),
                       fr("llama_model::load_tensors", "libllama.so"), fr("llama_model_load", "libllama.so"),
                       fr("main", "llama-server") };
    TAP_EQ_U64(tag_of(r, w, 7, &m), VT_TAG_WEIGHTS, "load_tensors stack is weights");
    TAP_EQ_U64(m.frame, 4, "decided by frame 4 (the innermost specific frame)");
    vt_rules_describe(r, &m, desc, sizeof desc);
    TAP_EQ_STR(desc, "builtin:llama.cpp weights llama_model::load_tensors @ frame 4", "rule description");

    vt_frame_t k[] = { fr("cudaMalloc", "libcudart.so.12"),
                       fr("ggml_backend_cuda_buffer_type_alloc_buffer", "libggml-cuda.so"),
                       fr("ggml_backend_alloc_ctx_tensors_from_buft", "libggml-base.so"),
                       fr("llama_kv_cache::llama_kv_cache", "libllama.so"), fr("llama_context::llama_context", "libllama.so") };
    TAP_EQ_U64(tag_of(r, k, 5, &m), VT_TAG_KV, "llama_kv_cache constructor is kv");
    vt_frame_t k2[] = { fr("cudaMalloc", ""), fr("llama_kv_cache_unified::llama_kv_cache_unified", "") };
    TAP_EQ_U64(tag_of(r, k2, 2, &m), VT_TAG_KV, "llama_kv_cache_unified is kv");
    vt_frame_t k3[] = { fr("cudaMalloc", ""), fr("llama_memory_recurrent::llama_memory_recurrent", "") };
    TAP_EQ_U64(tag_of(r, k3, 2, &m), VT_TAG_KV, "recurrent state is kv");

    vt_frame_t s[] = { fr("cudaMalloc", ""), fr("ggml_backend_cuda_buffer_type_alloc_buffer", ""),
                       fr("ggml_gallocr_reserve_n", ""), fr("ggml_backend_sched_reserve", ""),
                       fr("llama_context::graph_reserve", ""), fr("llama_kv_cache::update", "") };
    TAP_EQ_U64(tag_of(r, s, 6, &m), VT_TAG_SCRATCH, "gallocr inside a KV method is scratch (innermost wins)");
    TAP_EQ_U64(m.frame, 2, "decided at ggml_gallocr_reserve_n");
    vt_frame_t pl[] = { fr("cudaMalloc", ""), fr("ggml_cuda_pool_leg::alloc", "") };
    TAP_EQ_U64(tag_of(r, pl, 2, &m), VT_TAG_SCRATCH, "ggml legacy pool is scratch");
    vt_frame_t st[] = { fr("cudaMallocHost", ""), fr("llama_model_loader::load_all_data", ""),
                        fr("llama_model::load_tensors", "") };
    TAP_EQ_U64(tag_of(r, st, 3, &m), VT_TAG_SCRATCH, "upload staging buffers inside load_tensors are scratch");

    vt_frame_t cb[] = { fr("cudaMalloc", "libcudart.so.12"), fr("", "libcublasLt.so.12"), fr("at::native::addmm", "") };
    TAP_EQ_U64(tag_of(r, cb, 3, &m), VT_TAG_SCRATCH, "stripped cuBLASLt frame is scratch by module");
    vt_rules_describe(r, &m, desc, sizeof desc);
    TAP_EQ_STR(desc, "builtin:cuda-libs scratch module:libcublas* @ frame 1", "module rule description");
    vt_frame_t cu[] = { fr("cudaMalloc", ""), fr("cublasCreate_v2", "") };
    TAP_EQ_U64(tag_of(r, cu, 2, &m), VT_TAG_SCRATCH, "cublas API frame is scratch");
    vt_frame_t pt[] = { fr("cudaMalloc", ""), fr("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", ""),
                        fr("at::native::empty_cuda", "") };
    TAP_EQ_U64(tag_of(r, pt, 3, &m), VT_TAG_UNKNOWN, "PyTorch caching allocator alone stays unknown");
    TAP_OK(m.rule == -1 && m.frame == -1, "no rule, no frame");
    vt_rules_describe(r, &m, desc, sizeof desc);
    TAP_EQ_STR(desc, "", "no description when untagged");

    /* user rules beat built-ins, even on an inner frame */
    vt_error_t err = { 0 };
    const char *txt = "# my rules\n\nkv   myapp::*   # trailing comment\nweights module:libmine*\nactivations c10::cuda::*\n";
    TAP_EQ_U64(vt_rules_load_text(r, "my.rules", txt, strlen(txt), &err), 0, "valid user rules load");
    vt_frame_t u[] = { fr("cudaMalloc", ""), fr("ggml_gallocr_reserve_n", ""), fr("myapp::make_cache", "") };
    TAP_EQ_U64(tag_of(r, u, 3, &m), VT_TAG_KV, "user rule on an outer frame beats a built-in on an inner one");
    vt_rules_describe(r, &m, desc, sizeof desc);
    TAP_EQ_STR(desc, "my.rules:3 kv myapp::* @ frame 2", "user rule description names file:line");
    vt_frame_t u2[] = { fr("cudaMalloc", ""), fr("x", "libmine.so.1") };
    TAP_EQ_U64(tag_of(r, u2, 2, &m), VT_TAG_WEIGHTS, "user module rule");
    TAP_EQ_U64(tag_of(r, pt, 3, &m), VT_TAG_BUILTIN_COUNT, "custom tag gets the next id");
    TAP_EQ_STR(vt_rules_tag_name(r, m.tag), "activations", "custom tag name");
    TAP_EQ_U64(vt_rules_tag_count(r), 5, "four tags plus one custom");

    static const struct {
        const char *text;
        unsigned line;
    } bad[] = {
        { "weights\n", 1 },
        { "# ok\nkv a b\n", 2 },
        { "\n\nWeights foo\n", 3 },
        { "kv module:\n", 1 },
        { "we-ights foo\n", 1 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vt_rules_t *r2 = vt_rules_new();
        memset(&err, 0, sizeof err);
        int rc = vt_rules_load_text(r2, "bad.rules", bad[i].text, strlen(bad[i].text), &err);
        TAP_OK(rc == VT_E_RULES && err.offset == bad[i].line && !strcmp(err.path, "bad.rules"),
               "bad rules %zu rejected at line %u (%s)", i, bad[i].line, err.detail);
        vt_rules_free(r2);
    }
    vt_rules_t *r3 = vt_rules_new();
    TAP_EQ_U64(vt_rules_load_file(r3, "/nonexistent/rules", &err), (uint64_t)(int64_t)VT_E_RULES, "missing rules file");
    vt_rules_free(r3);

    /* globs and qualified names */
    TAP_OK(vt_glob_match("cublas*", "cublasLtMatmul"), "glob prefix");
    TAP_OK(vt_glob_match("*::alloc", "ggml_cuda_pool_leg::alloc"), "glob suffix");
    TAP_OK(!vt_glob_match("llama_kv_cache", "llama_kv_cache::llama_kv_cache"), "exact pattern is exact");
    TAP_OK(vt_glob_match("a*b*c", "aXXbYYc") && !vt_glob_match("a*b*c", "aXXbYY"), "multi-star glob");
    char *d = vt_demangle("_ZN14llama_kv_cacheC2ERK11llama_model9ggml_typeS3_bbjjjj", 50);
    char *q = vt_qualified_name(d);
    TAP_EQ_STR(q, "llama_kv_cache::llama_kv_cache", "qualified name of a demangled constructor");
    free(d);
    free(q);
    q = vt_qualified_name("void foo<int>(int) const [clone .cold]");
    TAP_EQ_STR(q, "foo<int>", "return type, cv and clone suffix stripped");
    free(q);
    q = vt_qualified_name("(anonymous namespace)::bar::operator()(int)");
    TAP_EQ_STR(q, "(anonymous namespace)::bar::operator()", "operator() and anonymous namespace kept");
    free(q);

    vt_rules_free(r);
    return tap_done();
}
