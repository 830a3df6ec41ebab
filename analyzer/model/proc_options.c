/* proc_options.c: llama.cpp's options of one process, read from the
 * command line and the environment its PROCESS record holds, the way
 * common/arg.cpp reads them: the environment's LLAMA_ARG_* first, then the
 * command line over it, the last of an option given winning. The model's
 * estimate and the pipeline's sentences ask here, so both read an option
 * alike (contracts in model.h). */
#include <stdlib.h>
#include <string.h>

#include "model.h"

const char *vt_proc_arg_value(const vt_proc_t *p, const char *const *names, size_t nnames, const char **name)
{
    const char *v = NULL;
    for (uint32_t i = 1; i < p->argc; i++)
        for (size_t k = 0; k < nnames; k++) {
            size_t len = strlen(names[k]);
            if (strncmp(p->argv[i], names[k], len))
                continue;
            if (p->argv[i][len] == '=')
                v = p->argv[i] + len + 1;
            else if (!p->argv[i][len] && i + 1 < p->argc)
                v = p->argv[i + 1];
            else
                continue;
            if (name)
                *name = names[k];
        }
    return v;
}

const char *vt_proc_arg_flag(const vt_proc_t *p, const char *const *names, size_t nnames)
{
    for (uint32_t i = 1; i < p->argc; i++)
        for (size_t k = 0; k < nnames; k++)
            if (!strcmp(p->argv[i], names[k]))
                return names[k];
    return NULL;
}

const char *vt_proc_env_value(const vt_proc_t *p, const char *name)
{
    size_t len = strlen(name);
    for (uint32_t i = 0; i < p->envc; i++)
        if (!strncmp(p->env[i], name, len) && p->env[i][len] == '=')
            return p->env[i] + len + 1;
    return NULL;
}

int vt_llama_truthy(const char *v)
{
    return v && (!strcmp(v, "on") || !strcmp(v, "enabled") || !strcmp(v, "true") || !strcmp(v, "1"));
}

int vt_llama_falsey(const char *v)
{
    return v && (!strcmp(v, "off") || !strcmp(v, "disabled") || !strcmp(v, "false") || !strcmp(v, "0"));
}

int vt_proc_no_kv_offload(const vt_proc_t *p)
{
    /* One option, two spellings each way (common/arg.cpp: -kvo, -nkvo). */
    int off = -1;
    for (uint32_t i = 1; i < p->argc; i++) {
        const char *a = p->argv[i];
        if (!strcmp(a, "-nkvo") || !strcmp(a, "--no-kv-offload"))
            off = 1;
        else if (!strcmp(a, "-kvo") || !strcmp(a, "--kv-offload"))
            off = 0;
    }
    return off >= 0 ? off : vt_llama_falsey(vt_proc_env_value(p, "LLAMA_ARG_KV_OFFLOAD"));
}

/* The shares of a -ts list above 0 (common/arg.cpp splits it at ',' and
 * '/' and reads each with std::stof). */
static int positive_shares(const char *v)
{
    int n = 0;
    while (v && *v) {
        while (*v == ',' || *v == '/')
            v++;
        if (!*v)
            break;
        char *end;
        double share = strtod(v, &end);
        n += end != v && share > 0;
        v = end;
        while (*v && *v != ',' && *v != '/')
            v++;
    }
    return n;
}

const char *vt_proc_option(const vt_proc_t *p, const char *const *names, size_t nnames, const char *env, int *from_env)
{
    const char *v = vt_proc_arg_value(p, names, nnames, NULL);
    if (from_env)
        *from_env = !v;
    return v ? v : vt_proc_env_value(p, env);
}

int vt_proc_one_gpu(const vt_proc_t *p)
{
    static const char *const sm[] = { "-sm", "--split-mode" }, *const dev[] = { "-dev", "--device" },
                             *const ts[] = { "-ts", "--tensor-split" };
    const char *mode = vt_proc_option(p, sm, 2, "LLAMA_ARG_SPLIT_MODE", NULL);
    if (mode && !strcmp(mode, "none"))
        return 1;
    /* A list of one device (parse_device_list: names split at ','); "none"
     * offloads nothing, and so no layer more either. */
    const char *devices = vt_proc_option(p, dev, 2, "LLAMA_ARG_DEVICE", NULL);
    if (devices && devices[0] && !strchr(devices, ',') && strcmp(devices, "none"))
        return 1;
    /* A split that gives every layer to one GPU (-ts 1,0). */
    return positive_shares(vt_proc_option(p, ts, 2, "LLAMA_ARG_TENSOR_SPLIT", NULL)) == 1;
}
