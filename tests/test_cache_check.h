/* Tiny assertion helpers shared by the cache tests. */
#ifndef DSSPEC_TEST_CACHE_CHECK_H
#define DSSPEC_TEST_CACHE_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_failures;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            check_failures++;                                                         \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

static inline int check_report(const char *name)
{
    if (check_failures) { fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures); return 1; }
    printf("%s: ok\n", name);
    return 0;
}

/* Deterministic xorshift so failures reproduce. */
static inline unsigned long long rng_next(unsigned long long *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}
static inline int rng_below(unsigned long long *s, int n) { return (int)(rng_next(s) % (unsigned long long)n); }

#endif
