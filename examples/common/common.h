/* Command-line parsing and model/context setup shared by the llama.cpp
 * shaped example programs (llama-cli, llama-server-chat, ollama-serve's
 * runner), as llama.cpp's libcommon is.
 */
#ifndef EXAMPLES_COMMON_H
#define EXAMPLES_COMMON_H

#include "../llama/llama.h"

struct common_params {
    llama_model_shape shape;      /* a built-in shape, with overrides applied */
    llama_model_params mparams;
    llama_context_params cparams;
    bool fit;                     /* lower an unset -ngl to what fits (llama.cpp's --fit) */
    size_t fit_margin;            /* what fit leaves free on each GPU (--fit-target) */
    int n_prompt, n_predict;      /* tokens to process / generate */
};

/* Defaults, llama.cpp's: -ngl not set (all layers, or what --fit finds),
 * mmap on, fit on with a 1024 MiB target; and the examples' own: model
 * llama-70b-q4_k_m, -c 8192, -ub 512, 512 prompt tokens, 16 generated.
 * Returns 0, or 1 after printing usage
 * (argv[i] it did not understand is left for the caller when extra != 0).
 * `extra` is called for flags this parser does not know; it returns how
 * many arguments it consumed (0 = unknown). */
typedef int (*common_extra_arg)(int argc, char **argv, int i, void *user);
int common_params_parse(int argc, char **argv, common_params &p, common_extra_arg extra, void *user,
                        const char *usage_extra);

/* Fits the parameters (fit on and -ngl unset: llama_params_fit, before
 * anything is allocated), loads the model and creates a context, as
 * llama.cpp's common_init_from_params does. A load or context that fails
 * is an error: nothing is retried. */
bool common_init_from_params(common_params &p, llama_model **model, llama_context **ctx);

#endif
