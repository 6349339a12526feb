/* What bench_attention.c and attention_ab.c share: a monotonic clock, the order for medians, and
 * the values their cache copies hold. */
#ifndef DSSPEC_ATTENTION_BENCH_H
#define DSSPEC_ATTENTION_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* xorshift64 */
static inline uint64_t bench_rng_next(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* Every 16-bit half a BF16 value in +-[2^-7, 2): valid as BF16 and, read in pairs, as F32. */
static inline void bench_fill_cache_values(void *buf, size_t bytes, uint64_t *rng)
{
    uint16_t *h = buf;
    for (size_t i = 0; i < bytes / 2; i++) {
        uint64_t r = bench_rng_next(rng);
        h[i] = (uint16_t)((r & 0x8000) | ((120 + (r >> 16) % 8) << 7) | ((r >> 32) & 0x7F));
    }
}

#endif
