/* Minimal TAP producer for C tests, read by `prove`. Each check is one test
 * line; exact-number checks print both values on failure. */
#ifndef VT_TAP_H
#define VT_TAP_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define TAP_OK(cond, ...)                                                   \
    do {                                                                    \
        int tap_c_ = !!(cond);                                              \
        printf("%s %d - ", tap_c_ ? "ok" : "not ok", ++tap_n);              \
        printf(__VA_ARGS__);                                                \
        printf("\n");                                                       \
        if (!tap_c_) {                                                      \
            tap_failed++;                                                   \
            printf("#   failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                   \
    } while (0)

#define TAP_EQ_U64(got, want, ...)                                          \
    do {                                                                    \
        uint64_t tap_g_ = (uint64_t)(got), tap_w_ = (uint64_t)(want);       \
        TAP_OK(tap_g_ == tap_w_, __VA_ARGS__);                              \
        if (tap_g_ != tap_w_)                                               \
            printf("#   got %" PRIu64 ", want %" PRIu64 "\n", tap_g_, tap_w_); \
    } while (0)

#define TAP_EQ_STR(got, want, ...)                                          \
    do {                                                                    \
        const char *tap_g_ = (got), *tap_w_ = (want);                       \
        int tap_same_ = tap_g_ && tap_w_ && strcmp(tap_g_, tap_w_) == 0;    \
        TAP_OK(tap_same_, __VA_ARGS__);                                     \
        if (!tap_same_)                                                     \
            printf("#   got \"%s\", want \"%s\"\n", tap_g_ ? tap_g_ : "(null)", \
                   tap_w_ ? tap_w_ : "(null)");                             \
    } while (0)

static inline int tap_done(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}

#endif
