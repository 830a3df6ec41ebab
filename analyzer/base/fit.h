/* Text output that fits a terminal: every text command prints into a
 * vt_fit_t and the lines come out at most `width` display columns wide.
 * A line too long wraps at spaces, its continuation indented two more
 * than its first line; a word longer than the room left breaks where the
 * room ends, so nothing is ever lost. Width 0 (--wide) passes everything
 * through unchanged.
 *
 * Columns are counted as a terminal shows UTF-8: one per character, none
 * for the bytes of an SGR colour sequence (ESC [ ... m). Wide (CJK)
 * glyphs count one: trace strings are escaped by vt_text, and what the
 * report prints of its own is ASCII.
 *
 * Ownership: vt_fit_begin returns the stream to print into (the caller
 * does not close it); each line reaches the real output when its newline
 * is printed (the stream's buffer aside), and vt_fit_end writes the rest
 * and frees the buffer. The caller must not write to the real output
 * in between. Without memory the stream is the real
 * output itself, unwrapped: the report still prints, only wider. */
#ifndef VT_ANALYZER_FIT_H
#define VT_ANALYZER_FIT_H

#include <stddef.h>
#include <stdio.h>

#define VT_FIT_COLUMNS 80

typedef struct vt_fit {
    FILE *out;     /* the real output */
    FILE *buf;     /* what the command prints into; NULL: it prints to out */
    char *mem;     /* the line being printed, not fitted yet */
    size_t len, cap;
    int width;
} vt_fit_t;

FILE *vt_fit_begin(vt_fit_t *f, FILE *out, int width);
void vt_fit_end(vt_fit_t *f);

/* Display columns of the n bytes at s (see above). */
size_t vt_fit_cols(const char *s, size_t n);
/* s shortened to at most cols columns by cutting its middle, the cut
 * shown as one "…": the start says what the name is, the end which
 * member or overload. Writes into dst (cap bytes, always terminated);
 * returns dst, or s itself when it already fits. cols below 8 is taken
 * as 8. */
const char *vt_fit_elide(char *dst, size_t cap, const char *s, size_t cols);

/* A C++ name with its parameter list cut to "(…)", the part of a frame
 * least needed to tell it apart; s itself without one. Same dst rules. */
const char *vt_fit_elide_args(char *dst, size_t cap, const char *s);

#endif
