/* Fitting text output to 80 columns (fit.h). */
#include <stdlib.h>
#include <string.h>

#include "fit.h"

/* Bytes of the unit at s (n left): a whole SGR sequence, or one UTF-8
 * character (a stray continuation byte on its own); *cols gets its width. */
static size_t unit(const char *s, size_t n, size_t *cols)
{
    const unsigned char *p = (const unsigned char *)s;
    if (p[0] == 0x1b && n > 1 && p[1] == '[') {
        size_t k = 2;
        while (k < n && !(p[k] >= 0x40 && p[k] <= 0x7e))
            k++;
        *cols = 0;
        return k < n ? k + 1 : n;
    }
    size_t k = 1;
    while (k < n && (p[k] & 0xc0) == 0x80)
        k++;
    *cols = 1;
    return k;
}

size_t vt_fit_cols(const char *s, size_t n)
{
    size_t cols = 0, c;
    for (size_t i = 0; i < n; cols += c)
        i += unit(s + i, n - i, &c);
    return cols;
}

const char *vt_fit_elide_args(char *dst, size_t cap, const char *s)
{
    const char *close = strrchr(s, ')');
    if (!close)
        return s;
    int depth = 0;
    const char *open = close;
    for (; open >= s; open--) {
        depth += *open == ')' ? 1 : *open == '(' ? -1 : 0;
        if (!depth)
            break;
    }
    if (open < s || open == s || close - open < 2)
        return s;   /* unbalanced, no name before it, or nothing to cut */
    size_t head = (size_t)(open - s) + 1, tail = strlen(close);
    if (head + 3 + tail + 1 > cap)
        return s;
    memcpy(dst, s, head);
    memcpy(dst + head, "\xe2\x80\xa6", 3);
    memcpy(dst + head + 3, close, tail + 1);
    return dst;
}

const char *vt_fit_elide(char *dst, size_t cap, const char *s, size_t cols)
{
    size_t n = strlen(s), total = vt_fit_cols(s, n), c;
    if (cols < 8)
        cols = 8;
    if (total <= cols || cap < 4)
        return s;
    /* More of the start than of the end: a name's scope reads left to right. */
    size_t keep_head = (cols - 1) * 3 / 5, keep_tail = cols - 1 - keep_head;
    size_t head = 0, seen = 0;
    while (head < n && seen < keep_head) {
        head += unit(s + head, n - head, &c);
        seen += c;
    }
    size_t tail = head, skip = total - keep_tail;
    for (seen = vt_fit_cols(s, head); tail < n && seen < skip; seen += c)
        tail += unit(s + tail, n - tail, &c);
    if (head + 3 + (n - tail) + 1 > cap)
        return s;
    memcpy(dst, s, head);
    memcpy(dst + head, "\xe2\x80\xa6", 3);
    memcpy(dst + head + 3, s + tail, n - tail);
    dst[head + 3 + n - tail] = 0;
    return dst;
}

static void put_line(FILE *o, const char *s, size_t n, size_t width)
{
    if (vt_fit_cols(s, n) <= width) {
        fwrite(s, 1, n, o);
        fputc('\n', o);
        return;
    }
    size_t indent = 0;
    while (indent < n && s[indent] == ' ')
        indent++;
    size_t hang = indent + 2 < width / 2 ? indent + 2 : width / 2;
    size_t room = width, lead = indent;   /* spaces at the start are no break point */
    for (;;) {
        size_t i = 0, cols = 0, brk = 0, c;
        while (i < n) {
            size_t k = unit(s + i, n - i, &c);
            if (cols + c > room)
                break;
            /* "24 GiB", "at 7 ms", "3 live": a number keeps its word. */
            if (s[i] == ' ' && i > lead && !(s[i - 1] >= '0' && s[i - 1] <= '9' && i + 1 < n &&
                                             ((s[i + 1] | 0x20) >= 'a' && (s[i + 1] | 0x20) <= 'z')))
                brk = i;
            i += k;
            cols += c;
        }
        if (i == n) {
            fwrite(s, 1, n, o);
            fputc('\n', o);
            return;
        }
        size_t cut = brk ? brk : i ? i : unit(s, n, &c), end = cut;
        while (end > 0 && s[end - 1] == ' ')
            end--;
        fwrite(s, 1, end, o);
        fputc('\n', o);
        s += cut;
        n -= cut;
        while (n && *s == ' ')
            s++, n--;
        if (!n)
            return;
        fprintf(o, "%*s", (int)hang, "");
        room = width - hang;
        lead = 0;
    }
}

/* The stream's writes: each complete line goes out fitted as soon as its
 * newline arrives, so what is held is one line, not the whole report (a
 * report of 1,000 traces buffered 16 MB of text before its first line). */
static ssize_t fit_write(void *cookie, const char *p, size_t n)
{
    vt_fit_t *f = cookie;
    if (f->len + n > f->cap) {
        size_t ncap = f->cap ? f->cap : 256;
        while (ncap < f->len + n)
            ncap *= 2;
        char *nb = realloc(f->mem, ncap);
        if (!nb)
            return -1;
        f->mem = nb;
        f->cap = ncap;
    }
    memcpy(f->mem + f->len, p, n);
    f->len += n;
    const char *s = f->mem, *end = f->mem + f->len, *nl;
    while (s < end && (nl = memchr(s, '\n', (size_t)(end - s)))) {
        put_line(f->out, s, (size_t)(nl - s), (size_t)f->width);
        s = nl + 1;
    }
    f->len = (size_t)(end - s);
    memmove(f->mem, s, f->len);
    return (ssize_t)n;
}

FILE *vt_fit_begin(vt_fit_t *f, FILE *out, int width)
{
    memset(f, 0, sizeof *f);
    f->out = out;
    f->width = width;
    if (width > 0)
        f->buf = fopencookie(f, "w", (cookie_io_functions_t){ .write = fit_write });
    return f->buf ? f->buf : out;
}

void vt_fit_end(vt_fit_t *f)
{
    if (!f->buf)
        return;
    fclose(f->buf);
    /* A last line without its newline stays without one. */
    if (f->len)
        fwrite(f->mem, 1, f->len, f->out);
    free(f->mem);
    f->buf = NULL;
    f->mem = NULL;
    f->len = f->cap = 0;
}
