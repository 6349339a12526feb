/* What bench_attention.c and attention_ab.c share: a monotonic clock, the order for medians, and
 * the values their cache copies hold. */
#ifndef DSSPEC_ATTENTION_BENCH_H
#define DSSPEC_ATTENTION_BENCH_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* 12 independent FMA chains of AVX2 vectors (enough to cover the FMA latency times the FMA ports of
 * current cores), iters x 12 FMAs, their sum in out[0..8): bench_attention's compute probe on the
 * AVX2 path, and the peak that tile_ceiling and few_phases hold their loops against. Call it only
 * where the CPU has AVX2 and FMA. */
__attribute__((target("avx2,fma"), noinline, unused)) static void bench_fma_probe_avx2(long iters, float *out)
{
    __m256 a[12], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], x, y);
    for (int i = 1; i < 12; i++) a[0] = _mm256_add_ps(a[0], a[i]);
    _mm256_storeu_ps(out, a[0]);
}

/* The p-quantile of v[0..n) (sorts v). */
__attribute__((unused)) static double bench_percentile(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[(int)(p * (n - 1) + 0.5)];
}

/* The command line of an AVX2 probe tool (tile_ceiling, few_phases): --help (usage) and --seconds S
 * (into *seconds), and a CPU with AVX2 and FMA. Returns -1 to go on, else the exit status (0 after
 * --help), with one line to stderr naming the problem. */
__attribute__((unused)) static int bench_avx2_tool_args(int argc, char **argv, const char *prog, const char *usage,
                                                        double *seconds)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            printf("usage: %s %s\n", prog, usage);
            return 0;
        }
        if (!strcmp(argv[i], "--seconds")) {
            char *end = NULL;
            *seconds = i + 1 < argc ? strtod(argv[i + 1], &end) : 0;
            if (!end || *end || !(*seconds > 0 && *seconds <= 3600)) {
                fprintf(stderr, "%s: --seconds needs a number of seconds in (0, 3600], got '%s'\n", prog,
                        i + 1 < argc ? argv[i + 1] : "");
                return 2;
            }
            i++;
            continue;
        }
        fprintf(stderr, "%s: unknown option '%s' (see --help)\n", prog, argv[i]);
        return 2;
    }
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        fprintf(stderr, "%s: this CPU has no AVX2 and FMA (what it measures is the AVX2 path's)\n", prog);
        return 1;
    }
    return -1;
}

#endif
