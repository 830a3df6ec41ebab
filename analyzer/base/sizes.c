/* Byte and time formatting for the text report (see sizes.h). GiB is used
 * from 1 GiB up because LLM memory is discussed in GiB; below it MiB keeps
 * KV and scratch buffers readable. */
#include "sizes.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

char *vt_fmt_bytes(char buf[VT_SIZE_BUF], uint64_t b)
{
    if (b >= (1ull << 30))
        snprintf(buf, VT_SIZE_BUF, "%.2f GiB", (double)b / VT_GIB);
    else if (b >= (1ull << 20))
        snprintf(buf, VT_SIZE_BUF, "%.1f MiB", (double)b / VT_MIB);
    else if (b >= (1ull << 10))
        snprintf(buf, VT_SIZE_BUF, "%.1f KiB", (double)b / 1024.0);
    else
        snprintf(buf, VT_SIZE_BUF, "%" PRIu64 " B", b);
    return buf;
}

char *vt_fmt_sbytes(char buf[VT_SIZE_BUF], int64_t b)
{
    if (b >= 0)
        return vt_fmt_bytes(buf, (uint64_t)b);
    char tmp[VT_SIZE_BUF];
    snprintf(buf, VT_SIZE_BUF, "-%s", vt_fmt_bytes(tmp, (uint64_t)(-(b + 1)) + 1));
    return buf;
}

static uint64_t time_grain;

void vt_fmt_set_time_grain(uint64_t ns)
{
    time_grain = ns;
}

/* Decimals that stay at or above the grain in a unit of `unit` ns. */
static int decimals(uint64_t unit, int most)
{
    int d = 0;
    for (uint64_t step = unit; d < most && step > time_grain && step >= 10; step /= 10)
        d++;
    return d;
}

static char *fmt_time_at(char buf[VT_SIZE_BUF], uint64_t ns)
{
    if (ns >= 1000000000ull)
        snprintf(buf, VT_SIZE_BUF, "%.*f s", decimals(1000000000ull, 3), (double)ns / 1e9);
    else if (ns >= 1000000ull)
        snprintf(buf, VT_SIZE_BUF, "%.*f ms", decimals(1000000ull, 1), (double)ns / 1e6);
    else
        snprintf(buf, VT_SIZE_BUF, "%.*f us", decimals(1000ull, 1), (double)ns / 1e3);
    return buf;
}

char *vt_fmt_time(char buf[VT_SIZE_BUF], uint64_t ns)
{
    if (time_grain > 1000 && ns < time_grain) {
        char g[VT_SIZE_BUF];
        snprintf(buf, VT_SIZE_BUF, "<%s", fmt_time_at(g, time_grain));
        return buf;
    }
    return fmt_time_at(buf, ns);
}

int vt_parse_size(const char *text, uint64_t *bytes)
{
    static const struct {
        const char *unit[3];
        double mul;
    } units[] = {
        { { "b", NULL, NULL }, 1.0 },
        { { "k", "kib", "kb" }, 1024.0 },
        { { "m", "mib", "mb" }, VT_MIB },
        { { "g", "gib", "gb" }, VT_GIB },
        { { "t", "tib", "tb" }, VT_GIB * 1024.0 },
    };
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    /* strtod takes "nan", "inf" and hex floats; a size is plain decimal. */
    if (errno || end == text || !isfinite(v) || v < 0 || strpbrk(text, "xXpP"))
        return VT_SIZE_BAD;
    while (*end == ' ')
        end++;
    if (!*end) {
        if (v != 0)
            return VT_SIZE_NO_UNIT;
        *bytes = 0;
        return 0;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        for (int k = 0; k < 3 && units[i].unit[k]; k++)
            if (!strcasecmp(end, units[i].unit[k])) {
                if (v * units[i].mul > 1.8e19)
                    return VT_SIZE_BAD;
                *bytes = (uint64_t)(v * units[i].mul + 0.5);
                return 0;
            }
    return VT_SIZE_BAD;
}
