/* sim_config.c: the VTSIM_* environment, read once at cuInit.
 *
 * Contract:
 *  - Sizes are binary: "24GiB", "24G", "24gb", "512MiB", "4KiB", "4096".
 *  - A per-device list with one entry applies it to every device; a longer
 *    list is positional, and devices past its end take the default.
 *  - An invalid value prints one warning on stderr and the default is used,
 *    so a typo never silently changes a test's numbers.
 */
#include "sim.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int sim_parse_size(const char *s, uint64_t *out)
{
    static const struct { const char *unit; unsigned shift; } units[] = {
        {"", 0}, {"b", 0}, {"k", 10}, {"kb", 10}, {"kib", 10}, {"m", 20}, {"mb", 20},
        {"mib", 20}, {"g", 30}, {"gb", 30}, {"gib", 30}, {"t", 40}, {"tb", 40}, {"tib", 40},
    };
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    size_t len = strlen(end);
    while (len && isspace((unsigned char)end[len - 1]))
        len--;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strlen(units[i].unit) == len && strncasecmp(end, units[i].unit, len) == 0) {
            if (units[i].shift && v > (UINT64_MAX >> units[i].shift))
                return -1;
            *out = (uint64_t)v << units[i].shift;
            return 0;
        }
    }
    return -1;
}

static void warn(const char *var, const char *val, const char *dflt)
{
    fprintf(stderr, "vtsim: warning: invalid %s='%s', using the default %s\n", var, val, dflt);
}

/* Splits a comma list in place; returns the item count or -1 if too many. */
static int split(char *buf, char **items, int max)
{
    int n = 0;
    for (char *p = buf;; ) {
        if (n == max)
            return -1;
        items[n++] = p;
        char *c = strchr(p, ',');
        if (!c)
            break;
        *c = '\0';
        p = c + 1;
    }
    return n;
}

/* Fills vals[0..ndev) from a per-device size list; 0 on success. */
static int size_list(const char *var, int ndev, uint64_t dflt, uint64_t max, uint64_t *vals)
{
    const char *env = getenv(var);
    for (int i = 0; i < ndev; i++)
        vals[i] = dflt;
    if (!env)
        return 0;
    char buf[1024], *items[SIM_MAX_DEV];
    uint64_t tmp[SIM_MAX_DEV];
    snprintf(buf, sizeof buf, "%s", env);
    int n = split(buf, items, SIM_MAX_DEV);
    for (int i = 0; i < n; i++)
        if (sim_parse_size(items[i], &tmp[i]) || tmp[i] > max)
            n = -1;
    if (n <= 0) {
        char d[64];
        snprintf(d, sizeof d, "%llu bytes", (unsigned long long)dflt);
        warn(var, env, d);
        return -1;
    }
    for (int i = 0; i < ndev; i++)
        if (n == 1 || i < n)
            vals[i] = tmp[n == 1 ? 0 : i];
    return 0;
}

static uint64_t one_size(const char *var, uint64_t dflt, const char *dflt_text, int pow2)
{
    const char *env = getenv(var);
    uint64_t v;
    if (!env)
        return dflt;
    if (sim_parse_size(env, &v) || v == 0 || (pow2 && ((v & (v - 1)) || v < 4096))) {
        warn(var, env, dflt_text);
        return dflt;
    }
    return v;
}

static void default_name(char *out, size_t len, uint64_t cap)
{
    if (cap % SIM_GiB == 0)
        snprintf(out, len, "vramtrace sim GPU (%llu GiB)", (unsigned long long)(cap / SIM_GiB));
    else if (cap % SIM_MiB == 0)
        snprintf(out, len, "vramtrace sim GPU (%llu MiB)", (unsigned long long)(cap / SIM_MiB));
    else
        snprintf(out, len, "vramtrace sim GPU (%llu bytes)", (unsigned long long)cap);
}

void sim_config_load(sim_config_t *c)
{
    memset(c, 0, sizeof *c);
    c->gran = one_size("VTSIM_GRANULARITY", 2 * SIM_MiB, "2MiB", 1);
    c->host_limit = one_size("VTSIM_HOST_LIMIT", 512 * SIM_GiB, "512GiB", 0);

    /* Devices: "none" or "" means a machine without a GPU. */
    const char *env = getenv("VTSIM_DEVICES");
    c->ndev = 1;
    c->cap[0] = 24 * SIM_GiB;
    if (env && (!*env || strcasecmp(env, "none") == 0)) {
        c->ndev = 0;
    } else if (env) {
        char buf[1024], *items[SIM_MAX_DEV];
        snprintf(buf, sizeof buf, "%s", env);
        int n = split(buf, items, SIM_MAX_DEV);
        for (int i = 0; i < n; i++)
            if (sim_parse_size(items[i], &c->cap[i]) || c->cap[i] < c->gran ||
                c->cap[i] > SIM_MAX_CAPACITY)
                n = -1;
        if (n <= 0) {
            warn("VTSIM_DEVICES", env, "24GiB (capacities from the granularity up to 512GiB)");
            c->cap[0] = 24 * SIM_GiB;
            n = 1;
        }
        c->ndev = n;
    }

    size_list("VTSIM_RESERVE", c->ndev, 448 * SIM_MiB, SIM_MAX_CAPACITY, c->reserve);
    size_list("VTSIM_EXTERNAL", c->ndev, 0, SIM_MAX_CAPACITY, c->external);

    for (int i = 0; i < c->ndev; i++)
        default_name(c->names[i], sizeof c->names[i], c->cap[i]);
    env = getenv("VTSIM_NAMES");
    if (env) {
        char buf[4096], *items[SIM_MAX_DEV];
        snprintf(buf, sizeof buf, "%s", env);
        int n = split(buf, items, SIM_MAX_DEV);
        if (n < 0)
            warn("VTSIM_NAMES", env, "names");
        for (int i = 0; i < n && i < c->ndev; i++)
            if (*items[i])
                snprintf(c->names[i], sizeof c->names[i], "%s", items[i]);
    }

    env = getenv("VTSIM_SYSMEM_FALLBACK");
    if (env && strcmp(env, "1") == 0)
        c->fallback = 1;
    else if (env && *env && strcmp(env, "0") != 0)
        warn("VTSIM_SYSMEM_FALLBACK", env, "0 (set 1 to enable)");

    env = getenv("VTSIM_FAULT_AFTER");
    if (env && *env) {
        char *end;
        unsigned long long n = strtoull(env, &end, 10);
        if (*end || !n)
            warn("VTSIM_FAULT_AFTER", env, "no fault (a count of blocks, 1 or more)");
        else
            c->fault_after = n;
    }

    env = getenv("VTSIM_SHARED");
    if (env && *env)
        snprintf(c->shared, sizeof c->shared, "%s", env);
}
