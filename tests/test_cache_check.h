/* Helpers shared by the cache tests (CHECK itself is tests/test_check.h). */
#ifndef DSSPEC_TEST_CACHE_CHECK_H
#define DSSPEC_TEST_CACHE_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "tests/test_check.h"

static inline int check_report(const char *name)
{
    if (test_failures) { fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures); return 1; }
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
