/* AVX2 attention path: 8 floats per vector, 16 vector registers, so every tile is sized to keep
 * its accumulators and operands in registers (no spills in the FMA loops). Items of four heads or
 * fewer (the embedded model): scores of 4 heads x 3 positions reduced by transpose-add trees,
 * weighted latents in tiles of 4 heads x 24 columns, the cache read in place (BF16 widened in
 * registers). Items of more heads (R1's groups of 32): scores as vectors over 16 heads against
 * broadcast cache elements (no trees), weighted latents in tiles of 6 heads x 16 columns. Two
 * loops are written in assembly (few_weighted_4, wide_score6): every op beside the FMAs costs on a
 * core that retires few ops a cycle, and GCC spilled or padded them. */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "core/attention_internal.h"

#define INLINE static inline __attribute__((always_inline))

/* Lanes [0, n) set (n clipped to [0, 8]), for maskload/maskstore: a window into -1 x 8, 0 x 8. The
 * upper half of a tail of fewer than 8 values asks for a negative count: unclipped, its window
 * would start past the array. */
static const int32_t lane_window[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
INLINE __m256i lanes(int n) { return _mm256_loadu_si256((const __m256i *)(lane_window + 8 - (n < 0 ? 0 : n < 8 ? n : 8))); }

/* Within each 128-bit half, lane i of the result is the sum of a[i]'s half (4 vectors in, 4 results
 * per half out): unpack pairs, then quads, each level one add (no hadd: 3 uops each). */
INLINE __m256 sum4_halves(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
    __m256 x0 = _mm256_add_ps(_mm256_unpacklo_ps(a0, a1), _mm256_unpackhi_ps(a0, a1));
    __m256 x1 = _mm256_add_ps(_mm256_unpacklo_ps(a2, a3), _mm256_unpackhi_ps(a2, a3));
    return _mm256_add_ps(_mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(3, 2, 3, 2)));
}

/* Lane i of the result is the sum of the 8 lanes of a[i] (8 vectors in). */
INLINE __m256 sum8(const __m256 *a)
{
    __m256 y0 = sum4_halves(a[0], a[1], a[2], a[3]), y1 = sum4_halves(a[4], a[5], a[6], a[7]);
    return _mm256_add_ps(_mm256_permute2f128_ps(y0, y1, 0x20), _mm256_permute2f128_ps(y0, y1, 0x31));
}

/* Lane i of the result is the sum of the 8 lanes of a[i]. */
INLINE __m128 sum4(const __m256 *a)
{
    __m256 y = sum4_halves(a[0], a[1], a[2], a[3]);
    return _mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
}

/* Half `half` of the sixteen cache values [k, k + 16) of a row. F32: in order. BF16: the
 * even-indexed values, then the odd ones (a shift or a mask of the same 8 words, no shuffle: the
 * queries are stored in that order and the weighted sums are put back in order at the end of the
 * item). */
INLINE __m256 load_half(int BF16, const void *row, int k, int half)
{
    if (!BF16) return _mm256_loadu_ps((const float *)row + k + 8 * half);
    __m256i w = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + k));
    return _mm256_castsi256_ps(half ? _mm256_and_si256(w, _mm256_set1_epi32((int)0xFFFF0000u)) : _mm256_slli_epi32(w, 16));
}

/* v, in a register of its own. Where a tile holds 16 live vectors, the compiler otherwise folds
 * loads of reused operands into the FMAs as memory operands, one load per FMA: the loads (two of
 * 32 bytes per cycle) then bind instead of the FMAs, or the hoisted BF16 mask spills an accumulator. */
INLINE __m256 in_register(__m256 v)
{
    __asm__("" : "+x"(v));
    return v;
}

static const int32_t odd_mask[8] __attribute__((aligned(32))) = {
    (int32_t)0xFFFF0000u, (int32_t)0xFFFF0000u, (int32_t)0xFFFF0000u, (int32_t)0xFFFF0000u,
    (int32_t)0xFFFF0000u, (int32_t)0xFFFF0000u, (int32_t)0xFFFF0000u, (int32_t)0xFFFF0000u};

/* load_half for tiles of 16 live vectors: every operand in a register of its own, and the BF16 mask
 * read from memory by the AND (kept in a register it would be a 17th). */
INLINE __m256 load_half_pinned(int BF16, const void *row, int k, int half)
{
    if (!BF16 || !half) return in_register(load_half(BF16, row, k, half));
    __m256i w = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + k));
    __asm__("vpand %1, %0, %0" : "+x"(w) : "m"(odd_mask));
    return _mm256_castsi256_ps(w);
}

INLINE void load16(int BF16, const void *row, int k, __m256 *lo, __m256 *hi)
{
    *lo = load_half(BF16, row, k, 0);
    *hi = load_half(BF16, row, k, 1);
}

/* 16 BF16 values to floats in load16's order. */
INLINE void widen16(const uint16_t *src, float *dst)
{
    __m256 lo, hi;
    load16(1, src, 0, &lo, &hi);
    _mm256_storeu_ps(dst, lo);
    _mm256_storeu_ps(dst + 8, hi);
}

/* The last n < 16 values [k, k + n) of a row in order, zeros after: F32 by masked loads, BF16
 * through a zeroed copy (a wider load could run past the end of the cache). */
INLINE void load_tail(int BF16, const void *row, int k, int n, __m256 *lo, __m256 *hi)
{
    if (!BF16) {
        *lo = _mm256_maskload_ps((const float *)row + k, lanes(n));
        *hi = _mm256_maskload_ps((const float *)row + k + 8, lanes(n - 8));
        return;
    }
    uint16_t pad[16] = {0};
    memcpy(pad, (const uint16_t *)row + k, (size_t)n * sizeof(uint16_t));
    *lo = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)pad)), 16));
    *hi = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)pad + 1)), 16));
}

INLINE const void *row_at(int BF16, const void *base, size_t row, int stride)
{
    return BF16 ? (const void *)((const uint16_t *)base + row * stride) : (const void *)((const float *)base + row * stride);
}

/* Cache lines of rows of the next block, numbered: the latent rows' lines [0, nl), then the rope
 * keys' [nl, total) (line_run stops at the last one). */
typedef struct {
    const char *lat, *kr;
    int nl, total;
    int next; /* the first line not yet prefetched */
} line_cursor;

/* Up to `want` lines from the cursor's next, all in one region (latent rows or rope keys), so that
 * a weighted tile walks them by a plain pointer (a line number's region test and address in the
 * FMA loop cost as much as the row's loads); the cursor moves past them. */
static int line_run(line_cursor *c, int want, const char **run)
{
    int i = c->next, end = i < c->nl ? c->nl : c->total, n = end - i < want ? end - i : want;
    if (n <= 0) return 0;
    *run = i < c->nl ? c->lat + (size_t)i * 64 : c->kr + (size_t)(i - c->nl) * 64;
    c->next += n;
    return n;
}

/* Lines of the next block that the score pass prefetches as it runs: the latent rows' lines during
 * the latent segment, the rope keys' during the rope segment, a fixed number per step of 16 values
 * (2 F32 lines or 1 BF16 line: two thirds of what the step reads, so that both regions advance a
 * row for every 1.5 rows scored and the rest is left to the weighted pass). Spread, not in bursts:
 * on a Zen 4 a stream with 8 or more prefetches issued back to back read 13-17 GB/s where the same
 * lines one at a time read 21-22 (a throwaway loop of 14 FMAs per line); the score pass used to
 * prefetch whole rows, 10 lines at once. */
typedef struct {
    const char *lat, *lat_end, *kr, *kr_end;
} score_prefetch;

/* acc[h * NT + t] += q[h] . x[t] over len values: 16 at a time, then the tail (queries masked); WHOLE
 * promises len is a multiple of 16 (no tail code, whose masks otherwise crowd the registers around
 * the loop and spill accumulators between segments). */
INLINE void dot_segment(int NH, int NT, int BF16, int PIN, int WHOLE, const float *q, int qstride, const void *x,
                        int xstride, int len, __m256 *acc, const char **pf, const char *pf_end)
{
    int k = 0;
    __m256 lo[4], hi[4];
    const char *p = *pf;
    for (; k + 16 <= len; k += 16) {
        if (p < pf_end) {
            __builtin_prefetch(p, 0, 1);
            if (!BF16) __builtin_prefetch(p + 64, 0, 1);
            p += BF16 ? 64 : 128;
        }
#pragma GCC unroll 2
        for (int half = 0; half < 2; half++) {
            __m256 xv[4];
            if (PIN) __asm__ volatile("" ::: "memory");
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++)
                xv[t] = PIN ? load_half_pinned(BF16, row_at(BF16, x, t, xstride), k, half)
                            : load_half(BF16, row_at(BF16, x, t, xstride), k, half);
#pragma GCC unroll 4
            for (int h = 0; h < NH; h++) {
                __m256 qv = _mm256_loadu_ps(q + (size_t)h * qstride + k + 8 * half);
                /* at three positions (12 accumulators, 3 rows) a pinned query spilled two accumulators;
                 * left to the compiler it takes the 16th register */
                if (PIN && NT < 3) qv = in_register(qv);
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) acc[h * NT + t] = _mm256_fmadd_ps(qv, xv[t], acc[h * NT + t]);
            }
        }
    }
    *pf = p;
    if (WHOLE || k == len) return;
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) load_tail(BF16, row_at(BF16, x, t, xstride), k, len - k, &lo[t], &hi[t]);
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++) {
        __m256 qlo = _mm256_maskload_ps(q + (size_t)h * qstride + k, lanes(len - k));
        __m256 qhi = _mm256_maskload_ps(q + (size_t)h * qstride + k + 8, lanes(len - k - 8));
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            acc[h * NT + t] = _mm256_fmadd_ps(qlo, lo[t], acc[h * NT + t]);
            acc[h * NT + t] = _mm256_fmadd_ps(qhi, hi[t], acc[h * NT + t]);
        }
    }
}

/* exp(x) for x <= 0 (or up to the lazy maximum's +8): Cephes' expf polynomial times 2^n built in
 * the exponent bits; clamped at -87.3 so that n >= -126 stays a normal power of two (e^-87.3 ~ 1e-38
 * weighs nothing beside the block's maximum, which is e^0). n comes from one FMA: x log2(e) plus
 * 1.5 * 2^23 + 127 rounds to an integer whose low bits are n + 127, the exponent field once shifted
 * (a round, a convert and an add fewer; few_phases: the softmax 6.5% -> 6.0% of the block's FMA
 * time). */
INLINE __m256 exp_ps(__m256 x)
{
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
    const __m256 magic = _mm256_set1_ps(12582912.0f + 127.0f);
    __m256 tn = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), magic);
    __m256 n = _mm256_sub_ps(tn, magic);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_castps_si256(tn), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* acc[h][c0 .. c0 + 16) = acc * alpha[h] + sum_t s[h][t] lat[t][c0 .. c0 + 16), the columns in
 * load16's order; with TAIL the last R - c0 < 16 columns in order (masked loads and stores, which
 * are slow on some cores, only there). */
INLINE void weighted_tile(int NH, int BF16, int TAIL, int HS, int TS, float *acc, int R, const float *alpha,
                          const float *s, const void *lat, int nt, int c0)
{
    __m256 a[6][2];
    __m256i m0 = lanes(R - c0), m1 = lanes(R - c0 - 8);
#pragma GCC unroll 6
    for (int h = 0; h < NH; h++) {
        const float *p = acc + (size_t)h * R + c0;
        __m256 al = _mm256_set1_ps(alpha[h]);
        a[h][0] = _mm256_mul_ps(TAIL ? _mm256_maskload_ps(p, m0) : _mm256_loadu_ps(p), al);
        a[h][1] = _mm256_mul_ps(TAIL ? _mm256_maskload_ps(p + 8, m1) : _mm256_loadu_ps(p + 8), al);
    }
    for (int t = 0; t < nt; t++) {
        __m256 lo, hi;
        if (TAIL)
            load_tail(BF16, row_at(BF16, lat, t, R), c0, R - c0, &lo, &hi);
        else
            load16(BF16, row_at(BF16, lat, t, R), c0, &lo, &hi);
#pragma GCC unroll 6
        for (int h = 0; h < NH; h++) {
            __m256 p = _mm256_broadcast_ss(s + h * HS + t * TS);
            a[h][0] = _mm256_fmadd_ps(p, lo, a[h][0]);
            a[h][1] = _mm256_fmadd_ps(p, hi, a[h][1]);
        }
    }
#pragma GCC unroll 6
    for (int h = 0; h < NH; h++) {
        float *p = acc + (size_t)h * R + c0;
        if (TAIL) {
            _mm256_maskstore_ps(p, m0, a[h][0]);
            _mm256_maskstore_ps(p + 8, m1, a[h][1]);
        } else {
            _mm256_storeu_ps(p, a[h][0]);
            _mm256_storeu_ps(p + 8, a[h][1]);
        }
    }
}

typedef void (*weighted_fn)(float *acc, int R, const float *alpha, const float *s, const void *lat, int nt, int c0);

/* Columns [c0 + 8 j, c0 + 8 j + 8) of a row in load16's order, for whole groups of 16: with BF16, P is
 * the parity of c0 / 8 (odd: the odd values of the group that began 8 columns earlier). */
INLINE __m256 load_unit(int BF16, int P, const void *row, int c0, int j)
{
    if (!BF16) return in_register(_mm256_loadu_ps((const float *)row + c0 + 8 * j));
    int odd = (P + j) & 1;
    return load_half_pinned(1, row, c0 + 8 * j - 8 * odd, odd);
}

/* weighted_tile for items of four heads or fewer: NH heads x NU (2 or 3) units of 8 columns in whole
 * groups of 16, so that 4 heads x 3 units keep 12 accumulator chains in flight (the FMA latency
 * times the two FMA pipes is 8 chains: 4 x 16 columns would have no slack); with a line of the next
 * block prefetched every 2^lg rows (npf of them, from pf on). Four heads run few_weighted_4 below. */
INLINE void few_weighted_tile(int NH, int NU, int P, int BF16, float *acc, int R, const float *alpha, const float *s,
                              const void *lat, int nt, int c0, const char *pf, int npf, int lg)
{
    __m256 a[4][3];
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++) {
        __m256 al = _mm256_set1_ps(alpha[h]);
#pragma GCC unroll 3
        for (int j = 0; j < NU; j++) a[h][j] = _mm256_mul_ps(_mm256_loadu_ps(acc + (size_t)h * R + c0 + 8 * j), al);
    }
    for (int t = 0; t < nt; t++) {
        __m256 x[3];
        if (npf > 0 && !(t & ((1 << lg) - 1))) {
            __builtin_prefetch(pf, 0, 1);
            pf += 64;
            npf--;
        }
#pragma GCC unroll 3
        for (int j = 0; j < NU; j++) x[j] = load_unit(BF16, P, row_at(BF16, lat, t, R), c0, j);
#pragma GCC unroll 4
        for (int h = 0; h < NH; h++) {
            __m256 p = _mm256_broadcast_ss(s + t * 4 + h);
#pragma GCC unroll 3
            for (int j = 0; j < NU; j++) a[h][j] = _mm256_fmadd_ps(p, x[j], a[h][j]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 3
        for (int j = 0; j < NU; j++) _mm256_storeu_ps(acc + (size_t)h * R + c0 + 8 * j, a[h][j]);
}

#define FEW_WEIGHTED_VARIANT(nh, nu, par, bf)                                                                     \
    static void few_weighted_##nh##_##nu##_##par##_##bf(float *acc, int R, const float *alpha, const float *s,     \
                                                        const void *lat, int nt, int c0, const char *pf, int npf, \
                                                        int lg)                                                    \
    {                                                                                                              \
        few_weighted_tile(nh, nu, par, bf, acc, R, alpha, s, lat, nt, c0, pf, npf, lg);                           \
    }
#define FEW_WEIGHTED_SHAPES(nh, bf)                                                                               \
    FEW_WEIGHTED_VARIANT(nh, 2, 0, bf) FEW_WEIGHTED_VARIANT(nh, 2, 1, bf) FEW_WEIGHTED_VARIANT(nh, 3, 0, bf)      \
    FEW_WEIGHTED_VARIANT(nh, 3, 1, bf)
FEW_WEIGHTED_SHAPES(1, 0) FEW_WEIGHTED_SHAPES(2, 0) FEW_WEIGHTED_SHAPES(3, 0)
FEW_WEIGHTED_SHAPES(1, 1) FEW_WEIGHTED_SHAPES(2, 1) FEW_WEIGHTED_SHAPES(3, 1)

/* ---------- the four-head weighted tile, in assembly ---------- */

/* Why assembly: at four heads a row's work is 12 FMAs beside 4 broadcasts and 3 loads, and the C
 * loop spent ~11 more scalar ops per row on its prefetch test and pointers; unrolled to amortise
 * them, GCC hoists the next row's broadcasts above this row's FMAs and spills accumulators. On a
 * core whose front end is shared (an SMT sibling) those ops, not the FMAs, set the pace. Here rows
 * go in pairs, head h's units j live in ymm(NU h + j), a row's units in ymm12-14, the broadcast
 * score in ymm15, and a line of the next block is prefetched at the start of each row while any of
 * the chunk's npf lines are left: the pairs that prefetch run a loop of their own, so no row tests
 * a count (attention_ab.sh: 1.004-1.025). The same FMAs in the same order as few_weighted_tile. */

/* head h's accumulator row: acc + c0, R floats apart (%[t] = 3 rows) */
#define W4_HEAD0 "(%[acc])"
#define W4_HEAD1 "(%[acc],%[ra])"
#define W4_HEAD2 "(%[acc],%[ra],2)"
#define W4_HEAD3 "(%[acc],%[t])"
#define W4_INIT_3(h, r0, r1, r2)                                                                                   \
    "vbroadcastss " #h "*4(%[al]), %%ymm15\n\t" "vmulps " W4_HEAD##h ", %%ymm15, %%ymm" #r0 "\n\t"                \
    "vmulps 32" W4_HEAD##h ", %%ymm15, %%ymm" #r1 "\n\t" "vmulps 64" W4_HEAD##h ", %%ymm15, %%ymm" #r2 "\n\t"
#define W4_INIT_2(h, r0, r1)                                                                                       \
    "vbroadcastss " #h "*4(%[al]), %%ymm15\n\t" "vmulps " W4_HEAD##h ", %%ymm15, %%ymm" #r0 "\n\t"                \
    "vmulps 32" W4_HEAD##h ", %%ymm15, %%ymm" #r1 "\n\t"
#define W4_STORE_3(h, r0, r1, r2)                                                                                  \
    "vmovups %%ymm" #r0 ", " W4_HEAD##h "\n\t" "vmovups %%ymm" #r1 ", 32" W4_HEAD##h "\n\t"                       \
    "vmovups %%ymm" #r2 ", 64" W4_HEAD##h "\n\t"
#define W4_STORE_2(h, r0, r1) "vmovups %%ymm" #r0 ", " W4_HEAD##h "\n\t" "vmovups %%ymm" #r1 ", 32" W4_HEAD##h "\n\t"
#define W4_INIT3 W4_INIT_3(0, 0, 1, 2) W4_INIT_3(1, 3, 4, 5) W4_INIT_3(2, 6, 7, 8) W4_INIT_3(3, 9, 10, 11)
#define W4_INIT2 W4_INIT_2(0, 0, 1) W4_INIT_2(1, 2, 3) W4_INIT_2(2, 4, 5) W4_INIT_2(3, 6, 7)
#define W4_STORE3 W4_STORE_3(0, 0, 1, 2) W4_STORE_3(1, 3, 4, 5) W4_STORE_3(2, 6, 7, 8) W4_STORE_3(3, 9, 10, 11)
#define W4_STORE2 W4_STORE_2(0, 0, 1) W4_STORE_2(1, 2, 3) W4_STORE_2(2, 4, 5) W4_STORE_2(3, 6, 7)

/* A row's units into ymm12-14 from the row at B (an address expression). BF16 in load16's order: a
 * group of 16's evens by a shift, its odds by the mask; parity 1: the chunk starts on a group's odd
 * half, 16 bytes into the group before. */
#define W4_LD_F32_3(B) "vmovups " B ", %%ymm12\n\t" "vmovups 32" B ", %%ymm13\n\t" "vmovups 64" B ", %%ymm14\n\t"
#define W4_LD_F32_2(B) "vmovups " B ", %%ymm12\n\t" "vmovups 32" B ", %%ymm13\n\t"
#define W4_LD_BF16_3_0(B)                                                                                          \
    "vmovdqu " B ", %%ymm13\n\t" "vpslld $16, %%ymm13, %%ymm12\n\t" "vpand %[mask], %%ymm13, %%ymm13\n\t"          \
    "vmovdqu 32" B ", %%ymm14\n\t" "vpslld $16, %%ymm14, %%ymm14\n\t"
#define W4_LD_BF16_3_1(B)                                                                                          \
    "vmovdqu -16" B ", %%ymm12\n\t" "vpand %[mask], %%ymm12, %%ymm12\n\t" "vmovdqu 16" B ", %%ymm14\n\t"           \
    "vpslld $16, %%ymm14, %%ymm13\n\t" "vpand %[mask], %%ymm14, %%ymm14\n\t"
#define W4_LD_BF16_2_0(B) "vmovdqu " B ", %%ymm13\n\t" "vpslld $16, %%ymm13, %%ymm12\n\t" "vpand %[mask], %%ymm13, %%ymm13\n\t"

/* Head h's score (byte S of the pair's scores) times the row's units. */
#define W4_FMA_3(S, r0, r1, r2)                                                                                    \
    "vbroadcastss " S "(%[s]), %%ymm15\n\t" "vfmadd231ps %%ymm12, %%ymm15, %%ymm" #r0 "\n\t"                      \
    "vfmadd231ps %%ymm13, %%ymm15, %%ymm" #r1 "\n\t" "vfmadd231ps %%ymm14, %%ymm15, %%ymm" #r2 "\n\t"
#define W4_FMA_2(S, r0, r1)                                                                                        \
    "vbroadcastss " S "(%[s]), %%ymm15\n\t" "vfmadd231ps %%ymm12, %%ymm15, %%ymm" #r0 "\n\t"                      \
    "vfmadd231ps %%ymm13, %%ymm15, %%ymm" #r1 "\n\t"
#define W4_FMAS3(S0, S1, S2, S3) W4_FMA_3(S0, 0, 1, 2) W4_FMA_3(S1, 3, 4, 5) W4_FMA_3(S2, 6, 7, 8) W4_FMA_3(S3, 9, 10, 11)
#define W4_FMAS2(S0, S1, S2, S3) W4_FMA_2(S0, 0, 1) W4_FMA_2(S1, 2, 3) W4_FMA_2(S2, 4, 5) W4_FMA_2(S3, 6, 7)
#define W4_PREFETCH "sub $1, %[npf]\n\t" "jl 2f\n\t" "prefetcht2 (%[pf])\n\t" "add $64, %[pf]\n" "2:\n\t"
#define W4_PAIR_END "lea (%[x],%[rb],2), %[x]\n\t" "add $32, %[s]\n\t"
/* the rows of a pair: at (%[x]) with scores 0..12, a row further with scores 16..28; first the pairs
 * that prefetch a line per row (no test per row), then the rest, then an odd last row */
#define W4_LOOP(LD, FMAS)                                                                                          \
    "test %[pfp], %[pfp]\n\t" "jle 5f\n"                                                                           \
    "6:\n\t" "prefetcht2 (%[pf])\n\t" LD("(%[x])") FMAS("0", "4", "8", "12")                                        \
    "prefetcht2 64(%[pf])\n\t" LD("(%[x],%[rb])") FMAS("16", "20", "24", "28")                                     \
    W4_PAIR_END "add $128, %[pf]\n\t" "sub $1, %[pfp]\n\t" "jnz 6b\n"                                              \
    "5:\n\t" "test %[pairs], %[pairs]\n\t" "jle 3f\n"                                                              \
    "1:\n\t" LD("(%[x])") FMAS("0", "4", "8", "12") LD("(%[x],%[rb])") FMAS("16", "20", "24", "28")                 \
    W4_PAIR_END "sub $1, %[pairs]\n\t" "jnz 1b\n"                                                                  \
    "3:\n\t" "test %[odd], %[odd]\n\t" "jz 4f\n\t" W4_PREFETCH LD("(%[x])") FMAS("0", "4", "8", "12") "4:\n\t"

#define FEW_WEIGHTED4_ASM(nu, par, bf, LD)                                                                        \
    static void few_weighted_4_##nu##_##par##_##bf(float *acc, int R, const float *alpha, const float *s,          \
                                                   const void *lat, int nt, int c0, const char *pf, int npf, int lg) \
    {                                                                                                              \
        const char *x = (const char *)lat + (size_t)c0 * (bf ? 2 : 4);                                             \
        long ra = (long)R * 4, rb = (long)R * (bf ? 2 : 4), odd = nt & 1, t;                                        \
        long pfp = (npf + 1) / 2 < nt / 2 ? (npf + 1) / 2 : nt / 2, pairs = nt / 2 - pfp, n = npf - 2 * pfp;       \
        float *a = acc + c0;                                                                                       \
        (void)lg;                                                                                                  \
        __asm__ volatile("lea (%[ra],%[ra],2), %[t]\n\t" W4_INIT##nu W4_LOOP(LD, W4_FMAS##nu) W4_STORE##nu         \
                         : [x] "+r"(x), [s] "+r"(s), [pairs] "+r"(pairs), [pfp] "+r"(pfp), [pf] "+r"(pf), [npf] "+r"(n), \
                           [t] "=&r"(t)                                                                            \
                         : [acc] "r"(a), [al] "r"(alpha), [ra] "r"(ra), [rb] "r"(rb), [odd] "r"(odd),              \
                           [mask] "m"(odd_mask)                                                                    \
                         : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",    \
                           "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");                          \
    }
FEW_WEIGHTED4_ASM(3, 0, 0, W4_LD_F32_3) FEW_WEIGHTED4_ASM(3, 1, 0, W4_LD_F32_3) FEW_WEIGHTED4_ASM(2, 0, 0, W4_LD_F32_2)
FEW_WEIGHTED4_ASM(3, 0, 1, W4_LD_BF16_3_0) FEW_WEIGHTED4_ASM(3, 1, 1, W4_LD_BF16_3_1) FEW_WEIGHTED4_ASM(2, 0, 1, W4_LD_BF16_2_0)
/* A chunk of two units never starts on an odd unit (few_chunk_units takes 3s in pairs from an even
 * count), so that slot of the table keeps the C tile rather than untested assembly. */
FEW_WEIGHTED_VARIANT(4, 2, 1, 0) FEW_WEIGHTED_VARIANT(4, 2, 1, 1)

#define FEW_WEIGHTED_HEADS(nh, bf)                                                                                \
    {{few_weighted_##nh##_2_0_##bf, few_weighted_##nh##_2_1_##bf}, {few_weighted_##nh##_3_0_##bf, few_weighted_##nh##_3_1_##bf}}
#define FEW_WEIGHTED_DTYPE(bf) \
    {FEW_WEIGHTED_HEADS(1, bf), FEW_WEIGHTED_HEADS(2, bf), FEW_WEIGHTED_HEADS(3, bf), FEW_WEIGHTED_HEADS(4, bf)}
typedef void (*few_weighted_fn)(float *acc, int R, const float *alpha, const float *s, const void *lat, int nt, int c0,
                                const char *pf, int npf, int lg);
/* [bf16][heads - 1][units - 2][parity of c0 / 8] */
static const few_weighted_fn few_weighted_table[2][4][2][2] = {FEW_WEIGHTED_DTYPE(0), FEW_WEIGHTED_DTYPE(1)};

/* Units of 8 columns of the next few-heads chunk when `left` units (an even count to start with)
 * remain: 3 while that leaves at least 2, so no unit is left alone. */
static int few_chunk_units(int left) { return left >= 5 || left == 3 ? 3 : 2; }

/* Items of four heads or fewer keep a block's scores position-major, s[t * 4 + h] (lanes past the
 * item's heads hold zeros): a pair of positions' scores is one vector, so the score pass stores
 * them with one store, and the softmax's maxima and sums run down the positions with the heads as
 * lanes (vertical operations, every exp lane a score, no transpose tree). */

/* Scores of NT (1 to 3) positions for all NH heads into s[t * 4 + h]: the accumulators enter the
 * reduction in that order, zeros standing in for absent heads. Three positions make 12 accumulator
 * chains at four heads: the FMA latency times the two FMA pipes is 8 chains, and 8 (two positions)
 * left the score pass waiting on them (measured in cache by bench_attention: the score pass at about
 * 64% of the FMA peak against the weighted pass's 12 chains near it). */
INLINE void few_score_positions(int NH, int NT, int BF16, int WHOLE, const float *ql, const float *qr, const void *lat,
                                const void *kr, int R, int rope, float scale, float *s, score_prefetch *pf)
{
    __m256 acc[12], r[12];
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) acc[i] = _mm256_setzero_ps();
    dot_segment(NH, NT, BF16, 1, WHOLE, ql, R, lat, R, R, acc, &pf->lat, pf->lat_end);
    dot_segment(NH, NT, BF16, 1, WHOLE, qr, rope, kr, rope, rope, acc, &pf->kr, pf->kr_end);
#pragma GCC unroll 3
    for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
        for (int h = 0; h < 4; h++) r[t * 4 + h] = h < NH ? acc[h * NT + t] : _mm256_setzero_ps();
    /* the scale read here, not held: through the FMA loop it would be a 17th live vector */
    __asm__("" : "+m"(scale));
    __m256 sc = _mm256_broadcast_ss(&scale);
    if (NT >= 2)
        _mm256_storeu_ps(s, _mm256_mul_ps(sum8(r), sc));
    if (NT != 2)
        _mm_storeu_ps(s + 4 * (NT - 1), _mm_mul_ps(sum4(r + 4 * (NT - 1)), _mm256_castps256_ps128(sc)));
}

/* The score pass of a block: triples of positions in one loop (one call per block, the accumulators
 * live across the latent and rope segments), prefetching the next block's lines as it goes. */
INLINE void few_scores(int NH, int BF16, int WHOLE, const float *ql, const float *qr, const void *lat, const void *kr, int R,
                       int rope, float scale, int nt, score_prefetch *pf, float *s)
{
    size_t es = BF16 ? 2 : 4;
    int u = 0;
    for (; u + 3 <= nt; u += 3)
        few_score_positions(NH, 3, BF16, WHOLE, ql, qr, (const char *)lat + (size_t)u * R * es,
                            (const char *)kr + (size_t)u * rope * es, R, rope, scale, s + u * 4, pf);
    if (nt - u == 2)
        few_score_positions(NH, 2, BF16, WHOLE, ql, qr, (const char *)lat + (size_t)u * R * es,
                            (const char *)kr + (size_t)u * rope * es, R, rope, scale, s + u * 4, pf);
    else if (nt - u == 1)
        few_score_positions(NH, 1, BF16, WHOLE, ql, qr, (const char *)lat + (size_t)u * R * es,
                            (const char *)kr + (size_t)u * rope * es, R, rope, scale, s + u * 4, pf);
}

typedef void (*few_scores_fn)(const float *ql, const float *qr, const void *lat, const void *kr, int R, int rope,
                              float scale, int nt, score_prefetch *pf, float *s);
#define FEW_SCORES_VARIANT(nh, bf, whole)                                                                         \
    static void few_scores_##nh##_##bf##_##whole(const float *ql, const float *qr, const void *lat, const void *kr, \
                                                 int R, int rope, float scale, int nt, score_prefetch *pf,         \
                                                 float *s)                                                         \
    {                                                                                                              \
        few_scores(nh, bf, whole, ql, qr, lat, kr, R, rope, scale, nt, pf, s);                                     \
    }
#define FEW_SCORES_HEADS(bf, whole)                                                                               \
    FEW_SCORES_VARIANT(1, bf, whole) FEW_SCORES_VARIANT(2, bf, whole) FEW_SCORES_VARIANT(3, bf, whole)            \
    FEW_SCORES_VARIANT(4, bf, whole)
FEW_SCORES_HEADS(0, 0) FEW_SCORES_HEADS(0, 1) FEW_SCORES_HEADS(1, 0) FEW_SCORES_HEADS(1, 1)
#define FEW_SCORES_ROW(bf, whole) \
    {few_scores_1_##bf##_##whole, few_scores_2_##bf##_##whole, few_scores_3_##bf##_##whole, few_scores_4_##bf##_##whole}
/* [bf16][R and rope multiples of 16][heads - 1] */
static const few_scores_fn few_scores_table[2][2][4] = {{FEW_SCORES_ROW(0, 0), FEW_SCORES_ROW(0, 1)},
                                                        {FEW_SCORES_ROW(1, 0), FEW_SCORES_ROW(1, 1)}};

/* How far above its reference maximum m a head's score may go before the block is redone against a
 * new maximum (the AVX-512 path's rule): the weights are exp(score - m) <= e^8, far inside F32's
 * range. So a block's weights are taken against the m it started with, in one pass over its scores
 * whose exps depend on nothing but their own score (the exact two-pass softmax waited on the block's
 * maximum first: 6-7% of a 1k-position row at the embedded width, measured by leaving it out), and
 * only an item's first block, or one whose maximum rose by more than this, takes a second pass. */
#define FEW_LAZY_MAX 8.0f

/* An item's running softmax, position-major like the scores: lanes h and h + 4 for head h. m is the
 * reference maximum (0 in the lanes of absent heads, whose zero scores never pass it), l the sum of
 * the weights (even positions in lanes 0-3, odd ones in 4-7: each lane's sum runs down its own
 * positions, added at the item's end). */
typedef struct {
    __m256 m, l;
    int started; /* m holds a maximum (not the item's first block) */
} few_state;

/* Lanes 0-3 set: the lone last position of a block fills the lower half of a pair's vector. */
INLINE __m256 lower_half(void) { return _mm256_castsi256_ps(lanes(4)); }

/* The scores of a lone last position t as a pair's vector, -inf in the upper half (no maximum). */
INLINE __m256 lone_scores(const float *raw, int t)
{
    return _mm256_set_m128(_mm_set1_ps(-INFINITY), _mm_loadu_ps(raw + 4 * t));
}

/* Weights exp(raw - m) of a block's scores into w, their sum into *sum; returns the block's maximum
 * (lane-wise, like the scores). */
static __m256 few_weights(const float *raw, float *w, int nt, __m256 m, __m256 *sum)
{
    __m256 mx = _mm256_set1_ps(-INFINITY), acc = _mm256_setzero_ps();
    int t = 0;
    for (; t + 2 <= nt; t += 2) {
        __m256 x = _mm256_loadu_ps(raw + 4 * t), e = exp_ps(_mm256_sub_ps(x, m));
        mx = _mm256_max_ps(mx, x);
        _mm256_storeu_ps(w + 4 * t, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (t < nt) {
        __m256 x = lone_scores(raw, t), e = _mm256_and_ps(exp_ps(_mm256_sub_ps(x, m)), lower_half());
        mx = _mm256_max_ps(mx, x);
        _mm_storeu_ps(w + 4 * t, _mm256_castps256_ps128(e));
        acc = _mm256_add_ps(acc, e);
    }
    *sum = acc;
    return mx;
}

/* The block's maximum of raw scores, lane-wise (for an item's first block, whose weights are not
 * taken against a maximum it does not have yet). */
static __m256 few_block_max(const float *raw, int nt)
{
    __m256 mx = _mm256_set1_ps(-INFINITY);
    int t = 0;
    for (; t + 2 <= nt; t += 2) mx = _mm256_max_ps(mx, _mm256_loadu_ps(raw + 4 * t));
    if (t < nt) mx = _mm256_max_ps(mx, lone_scores(raw, t));
    return mx;
}

/* A block whose maximum mx rose past m + FEW_LAZY_MAX, or an item's first: m to the new maximum, l
 * rescaled, the weights taken again; alpha (per head) rescales the accumulators in the weighted
 * pass. */
static void few_rebase(few_state *st, __m256 mx, const float *raw, float *w, int nt, float *alpha)
{
    __m256 top = _mm256_max_ps(mx, _mm256_permute2f128_ps(mx, mx, 0x01)); /* each head's, both halves */
    __m256 mnew = _mm256_max_ps(st->m, top);
    __m256 a = st->started ? exp_ps(_mm256_sub_ps(st->m, mnew)) : _mm256_setzero_ps();
    _mm_storeu_ps(alpha, _mm256_castps256_ps128(a));
    __m256 sum;
    few_weights(raw, w, nt, mnew, &sum);
    st->l = _mm256_fmadd_ps(st->l, a, sum);
    st->m = mnew;
    st->started = 1;
}

/* The last R % 16 columns of few heads, with position-major scores. [bf16][heads - 1] */
#define FEW_TAIL_VARIANT(nh, bf)                                                                                  \
    static void few_weighted_tail_##nh##_##bf(float *acc, int R, const float *alpha, const float *s,               \
                                              const void *lat, int nt, int c0)                                      \
    {                                                                                                              \
        weighted_tile(nh, bf, 1, 1, 4, acc, R, alpha, s, lat, nt, c0);                                             \
    }
FEW_TAIL_VARIANT(1, 0) FEW_TAIL_VARIANT(2, 0) FEW_TAIL_VARIANT(3, 0) FEW_TAIL_VARIANT(4, 0)
FEW_TAIL_VARIANT(1, 1) FEW_TAIL_VARIANT(2, 1) FEW_TAIL_VARIANT(3, 1) FEW_TAIL_VARIANT(4, 1)
static const weighted_fn few_weighted_tail[2][4] = {
    {few_weighted_tail_1_0, few_weighted_tail_2_0, few_weighted_tail_3_0, few_weighted_tail_4_0},
    {few_weighted_tail_1_1, few_weighted_tail_2_1, few_weighted_tail_3_1, few_weighted_tail_4_1}};

/* ---------- the item ---------- */

/* A row of n values in load16's BF16 order: whole groups of 16 as evens then odds, the tail as is.
 * In vectors: every item runs it at its start (a scalar loop took ~600 cycles there). */
static void bf16_order(const float *src, int n, float *dst)
{
    int k = 0;
    for (; k + 16 <= n; k += 16) {
        __m256 a = _mm256_loadu_ps(src + k), b = _mm256_loadu_ps(src + k + 8);
        /* per 128-bit half: a0 a2 b0 b2 | a4 a6 b4 b6, then the middle quarters swapped */
        __m256 ev = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)), od = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
        _mm256_storeu_ps(dst + k, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), _MM_SHUFFLE(3, 1, 2, 0))));
        _mm256_storeu_ps(dst + k + 8, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), _MM_SHUFFLE(3, 1, 2, 0))));
    }
    memcpy(dst + k, src + k, (size_t)(n - k) * sizeof(float));
}

/* bf16_order undone in place: evens and odds interleaved again. */
static void natural_order(float *row, int n)
{
    for (int k = 0; k + 16 <= n; k += 16) {
        __m256 e = _mm256_loadu_ps(row + k), o = _mm256_loadu_ps(row + k + 8);
        __m256 lo = _mm256_unpacklo_ps(e, o), hi = _mm256_unpackhi_ps(e, o);
        _mm256_storeu_ps(row + k, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(row + k + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
}

/* The lines of [lat, lat_end) then of [kr, kr_end) (none of a range that is empty). */
static line_cursor lines_between(const char *lat, const char *lat_end, const char *kr, const char *kr_end)
{
    line_cursor c = {.lat = lat, .kr = kr};
    c.nl = lat < lat_end ? (int)((lat_end - lat + 63) / 64) : 0;
    c.total = c.nl + (kr < kr_end ? (int)((kr_end - kr + 63) / 64) : 0);
    return c;
}

/* One block of an item with four heads or fewer (one score tile and one weighted tile hold them
 * all): scores, softmax, weighted latents. With few heads memory binds an F32 cache and must stay
 * busy through both passes, so the next block's lines are prefetched evenly over the block's time:
 * about two thirds of its rows during the scores (score_prefetch: latent and rope lines, each
 * region during its own segment), the rest during the weighted latents (by line number, npf lines
 * per chunk; a line per 2^lg rows, or with four heads a line per row from the chunk's start).
 * Prefetching in the score pass alone leaves memory idle through the weighted pass; a third of the
 * rows there (one F32 line a step) measured 14% slower. */
static void few_heads_block(const attention_item *it, const float *ql, const float *qr, int t, int blk, int next,
                            few_state *st, float *raw, float *w)
{
    const attention_kv *kv = it->kv;
    int R = kv->R, rope = kv->rope, nh = it->nh, bf16 = kv->dtype == DTYPE_BF16;
    int nt = it->t1 - t < blk ? it->t1 - t : blk;
    size_t es = dtype_size(kv->dtype);
    const char *lat = (const char *)kv->latent + (size_t)t * R * es, *kr = (const char *)kv->krope + (size_t)t * rope * es;
    int at = t + blk, rows = it->n - at < next ? it->n - at : next;
    score_prefetch sp = {lat, lat, kr, kr}; /* empty ranges when no block follows (no compare of NULLs) */
    if (rows > 0) {
        sp.lat = (const char *)kv->latent + (size_t)at * R * es;
        sp.kr = (const char *)kv->krope + (size_t)at * rope * es;
        sp.lat_end = sp.lat + (size_t)rows * R * es;
        sp.kr_end = sp.kr + (size_t)rows * rope * es;
    }
    few_scores_table[bf16][R % 16 == 0 && rope % 16 == 0][nh - 1](ql, qr, lat, kr, R, rope, kv->scale, nt, &sp, raw);
    float alpha[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    __m256 sum, mx = st->started ? few_weights(raw, w, nt, st->m, &sum) : few_block_max(raw, nt);
    __m256 over = _mm256_cmp_ps(mx, _mm256_add_ps(st->m, _mm256_set1_ps(FEW_LAZY_MAX)), _CMP_GT_OQ);
    if (!st->started || _mm256_movemask_ps(over))
        few_rebase(st, mx, raw, w, nt, alpha);
    else
        st->l = _mm256_add_ps(st->l, sum);
    line_cursor pf = lines_between(sp.lat, sp.lat_end, sp.kr, sp.kr_end);
    int Rw = R / 16 * 16, chunks = 0, rest = pf.total - pf.next;
    for (int c0 = 0; c0 < Rw; c0 += 8 * few_chunk_units((Rw - c0) / 8)) chunks++;
    int lg = 0; /* a line per 2^lg rows of each chunk: chunks * ceil(nt / 2^lg) >= rest lines */
    while (rest > 0 && (2 << lg) * rest <= chunks * nt) lg++;
    for (int c0 = 0; c0 < Rw;) {
        const char *run = NULL;
        int nu = few_chunk_units((Rw - c0) / 8), npf = line_run(&pf, (nt + (1 << lg) - 1) >> lg, &run);
        few_weighted_table[bf16][nh - 1][nu - 2][(c0 / 8) & 1](it->acc, R, alpha, w, lat, nt, c0, run, npf, lg);
        c0 += 8 * nu;
    }
    if (Rw < R) few_weighted_tail[bf16][nh - 1](it->acc, R, alpha, w, lat, nt, Rw);
}

_Static_assert(ATTN_GROUP_HEADS <= ATTN_BLOCK, "the conversion buffer holds the group's reordered queries");

/* An item's start: running maxima and sums, accumulators zeroed; with a BF16 cache the queries in
 * load16's order (into the conversion buffer), else the item's own. */
static void item_start(const attention_item *it, const float **ql, const float **qr)
{
    const attention_kv *kv = it->kv;
    int R = kv->R, rope = kv->rope, nh = it->nh;
    for (int h = 0; h < nh; h++) {
        it->m[h] = -INFINITY;
        it->l[h] = 0.0f;
    }
    memset(it->acc, 0, (size_t)nh * R * sizeof(float));
    *ql = it->q_lat;
    *qr = it->q_rope;
    if (kv->dtype != DTYPE_BF16) return;
    for (int h = 0; h < nh; h++) {
        bf16_order(it->q_lat + (size_t)h * R, R, it->conv + (size_t)h * R);
        bf16_order(it->q_rope + (size_t)h * rope, rope, it->conv + (size_t)nh * R + (size_t)h * rope);
    }
    *ql = it->conv;
    *qr = it->conv + (size_t)nh * R;
}

/* BF16 rows of a few-heads block: ATTN_BLOCK, or fewer where two such blocks outgrow L1d: the
 * largest multiple of 16 whose two blocks fit, at least 32 (what a row as wide as R1's would get;
 * no model has one with four heads or fewer). At the embedded width that is 48 on a 32 KiB L1d
 * (Zen 4), where 48 against 64 ran 1k on 2 threads 1.019-1.030x per call (seven pairings: two items
 * of 512 positions, both cold), 1 thread 1.002-1.004x, 4k-32k 0.993-1.008x, so the gain is the cold
 * items' alone; 40 rows ran 0.983-0.985x, 56 1.010-1.015x. A 48 KiB L1d keeps 64. */
static int few_block_rows_bf16(const attention_item *it)
{
    size_t two = 2 * 2 * ((size_t)it->kv->R + (size_t)it->kv->rope);
    int rows = (int)((size_t)it->l1d_bytes / two) / 16 * 16;
    return rows > ATTN_BLOCK ? ATTN_BLOCK : rows < 32 ? 32 : rows;
}

/* Items of four heads or fewer: blocks of 32 F32 rows or up to 64 BF16 rows (few_block_rows_bf16),
 * 20 KB at the embedded width (64 BF16 rows), what L1 keeps while the weighted pass reads the block a second time
 * (64 F32 rows outgrow it); shorter blocks cost more per position (the softmax, the accumulators'
 * loads and stores).
 * BF16 items start on rows nobody prefetched with blocks of ATTN_RAMP_FIRST positions that double
 * (the AVX-512 path's item says why: here 1k positions cold 29.7 -> 29.3 us); F32 ones measured
 * slower so (their first blocks' prefetch bursts). The running maxima and sums stay in few_state
 * until the item ends: in the scratch, 4 heads' are 16 bytes, so the next chunk's share their cache
 * line, and written every block that line went back and forth between the cores. */
static void attention_item_few_heads(const attention_item *it)
{
    float raw[4 * ATTN_BLOCK] __attribute__((aligned(64))), w[4 * ATTN_BLOCK] __attribute__((aligned(64)));
    int bf16 = it->kv->dtype == DTYPE_BF16, full = bf16 ? few_block_rows_bf16(it) : ATTN_BLOCK / 2;
    int blk = bf16 ? ATTN_RAMP_FIRST : full;
    /* the first block's rows at once: no block before it in the item prefetched them, and the
     * score pass's own misses, three rows at a time, read them at a third of the bandwidth. BF16
     * asks before item_start, so that their latency runs beside the queries' reordering (1k on 2
     * threads, with the reordering in vectors: 1.017x, the reordering alone 1.006x); F32, which
     * reorders nothing, measured 0.99x so and asks after. */
    attention_ahead first = attention_block_after(it->kv, it->t0, it->t1, 0);
    if (bf16) attention_prefetch(&first, 0, blk);
    const float *ql, *qr;
    item_start(it, &ql, &qr);
    if (!bf16) attention_prefetch(&first, 0, blk);
    __m128i heads = _mm256_castsi256_si128(lanes(it->nh));
    __m256 present = _mm256_castsi256_ps(_mm256_set_m128i(heads, heads));
    few_state st = {.m = _mm256_and_ps(present, _mm256_set1_ps(-INFINITY)), .l = _mm256_setzero_ps()};
    for (int t = it->t0; t < it->t1;) {
        int next = 2 * blk < full ? 2 * blk : full;
        few_heads_block(it, ql, qr, t, blk, next, &st, raw, w);
        t += blk;
        blk = next;
    }
    float m[8], l[8];
    _mm256_storeu_ps(m, st.m);
    _mm256_storeu_ps(l, st.l);
    for (int h = 0; h < it->nh; h++) {
        it->m[h] = m[h];
        it->l[h] = l[h] + l[h + 4];
    }
}

/* ---------- Items of more than four heads (R1's groups of 32) ---------- */

/* Scores as vectors over 16 heads: a tile's FMAs take a vector of 8 heads' queries and one broadcast
 * element of a cache row, so no tile ends in a transpose-add tree and the softmax is vertical, lane
 * h for head h. A tile of WIDE_NT positions x 16 heads keeps 12 accumulators, 2 query vectors and a
 * broadcast in registers: 8 loads per 12 FMAs. The dot-product tiles (3 heads x 4 positions, the
 * queries as memory operands) took 16 loads per 12 FMAs, and a core with two 32-byte loads per
 * cycle (Zen 4) ran them at the loads' pace (bench_attention at R1's width: 62-73% of the FMA roof). */
#define WIDE_NT 6

/* r[i] = column i of the 8 x 8 block whose rows were r[0..8). */
INLINE void transpose8(__m256 r[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* qt[k][j] = q[h0 + j][k] for j < 16 (heads past nh zero), k < n: q's rows qs floats apart. */
static void wide_queries(const float *q, size_t qs, int h0, int nh, int n, float *qt)
{
    for (int j0 = 0; j0 < 16; j0 += 8) {
        int hh = nh - h0 - j0 < 8 ? nh - h0 - j0 : 8, k = 0;
        const float *src = q + (size_t)(h0 + j0) * qs;
        for (; hh == 8 && k + 8 <= n; k += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + (size_t)i * qs + k);
            transpose8(r);
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(qt + (size_t)(k + i) * 16 + j0, r[i]);
        }
        for (; k < n; k++)
            for (int j = 0; j < 8; j++) qt[(size_t)k * 16 + j0 + j] = j < hh ? src[(size_t)j * qs + k] : 0.0f;
    }
}

/* Lines to prefetch as a step's tiles run, one per k: the next block's rows into L2 (the first
 * `far` ranges), then the next step's rows into L1 (the rest), so that its first broadcasts, or with
 * BF16 its widening, do not wait on L2. Spread out: a burst of a tile's lines waits on the miss
 * buffers. The range being read is copied into registers by wide_dot (cur, end, l1). Tiles of the
 * full WIDE_NT positions run wide_score6 instead, which prefetches the next block's rows alone: on
 * an AVX2-only Zen 4 the next step's L1 lines changed nothing measurable (+0.4-1.1% without them). */
typedef struct {
    const char *p[4], *end[4];
    int n, far, i;
    const char *cur, *cur_end;
    int l1;
} wide_pf;

static void wide_pf_add(wide_pf *c, const char *p, const char *end)
{
    if (p < end) {
        c->p[c->n] = p;
        c->end[c->n++] = end;
    }
}

/* The first range (i = 0) or the one after i. */
INLINE void wide_pf_range(wide_pf *c, int i)
{
    c->i = i;
    c->cur = i < c->n ? c->p[i] : NULL;
    c->cur_end = i < c->n ? c->end[i] : NULL;
    c->l1 = i >= c->far;
}

/* A BF16 cache's next step of rows, widened by the step before it as its FMAs run (a burst of
 * widening before each step waited on its lines): n_lat and n_kr groups of 16 values from lat and kr
 * into lat_dst and kr_dst, in load16's order. */
typedef struct {
    const uint16_t *lat; /* wide_score6_bf16 reads these six at fixed offsets */
    float *lat_dst;
    long n_lat;
    const uint16_t *kr;
    float *kr_dst;
    long n_kr;
} step_widen;

/* a[t][..] += qt[k][..] * x[t][k] over k < len (x rows xs apart); wn groups of 16 BF16 values from
 * ws widened into wd, one per k. */
INLINE void wide_dot(int NT, const float *qt, const float *x, int xs, int len, wide_pf *pf, const uint16_t *ws,
                     float *wd, long wn, __m256 a[WIDE_NT][2])
{
    const char *p = pf->cur, *e = pf->cur_end;
    int l1 = pf->l1;
#pragma GCC unroll 2
    for (int k = 0; k < len; k++) {
        if (wn > 0) {
            widen16(ws, wd);
            ws += 16, wd += 16, wn--;
        }
        if (p < e) {
            if (l1)
                __builtin_prefetch(p, 0, 3);
            else
                __builtin_prefetch(p, 0, 1);
            p += 64;
            if (p >= e) {
                wide_pf_range(pf, pf->i + 1);
                p = pf->cur;
                e = pf->cur_end;
                l1 = pf->l1;
            }
        }
        __m256 q0 = _mm256_loadu_ps(qt + (size_t)k * 16), q1 = _mm256_loadu_ps(qt + (size_t)k * 16 + 8);
#pragma GCC unroll 6
        for (int t = 0; t < NT; t++) {
            __m256 b = _mm256_broadcast_ss(x + (size_t)t * xs + k);
            a[t][0] = _mm256_fmadd_ps(q0, b, a[t][0]);
            a[t][1] = _mm256_fmadd_ps(q1, b, a[t][1]);
        }
    }
    pf->cur = p;
}

/* s[t * 32 + ..16) = scale * (qt . row t) for NT positions. */
INLINE void wide_score_tile(int NT, const float *qt, const float *lat, const float *kr, int R, int rope, float scale,
                            float *s, wide_pf *pf, const step_widen *w)
{
    __m256 a[WIDE_NT][2];
#pragma GCC unroll 6
    for (int t = 0; t < NT; t++) a[t][0] = a[t][1] = _mm256_setzero_ps();
    wide_dot(NT, qt, lat, R, R, pf, w->lat, w->lat_dst, w->n_lat, a);
    wide_dot(NT, qt + (size_t)R * 16, kr, rope, rope, pf, w->kr, w->kr_dst, w->n_kr, a);
    __m256 sc = _mm256_set1_ps(scale);
#pragma GCC unroll 6
    for (int t = 0; t < NT; t++) {
        _mm256_storeu_ps(s + t * 32, _mm256_mul_ps(a[t][0], sc));
        _mm256_storeu_ps(s + t * 32 + 8, _mm256_mul_ps(a[t][1], sc));
    }
}

typedef void (*wide_score_fn)(const float *qt, const float *lat, const float *kr, int R, int rope, float scale, float *s,
                              wide_pf *pf, const step_widen *w);
#define WIDE_SCORE_VARIANT(n)                                                                                     \
    static void wide_score_##n(const float *qt, const float *lat, const float *kr, int R, int rope, float scale,   \
                               float *s, wide_pf *pf, const step_widen *w)                                        \
    {                                                                                                             \
        wide_score_tile(n, qt, lat, kr, R, rope, scale, s, pf, w);                                                \
    }
WIDE_SCORE_VARIANT(1) WIDE_SCORE_VARIANT(2) WIDE_SCORE_VARIANT(3) WIDE_SCORE_VARIANT(4) WIDE_SCORE_VARIANT(5)
WIDE_SCORE_VARIANT(6)
/* [positions - 1] */
static const wide_score_fn wide_scores[WIDE_NT] = {wide_score_1, wide_score_2, wide_score_3,
                                                   wide_score_4, wide_score_5, wide_score_6};

/* Weighted tiles over position-major scores s[t * 32 + h], F32 rows. [heads - 1][tail] */
#define WIDE_WEIGHTED_VARIANT(nh, bf, tail)                                                                       \
    static void wide_weighted_##nh##_##bf##_##tail(float *acc, int R, const float *alpha, const float *s,          \
                                                   const void *lat, int nt, int c0)                                \
    {                                                                                                              \
        weighted_tile(nh, bf, tail, 1, 32, acc, R, alpha, s, lat, nt, c0);                                         \
    }
#define WIDE_WEIGHTED_HEADS(nh)                                                                                   \
    WIDE_WEIGHTED_VARIANT(nh, 0, 0) WIDE_WEIGHTED_VARIANT(nh, 0, 1) WIDE_WEIGHTED_VARIANT(nh, 1, 0)               \
    WIDE_WEIGHTED_VARIANT(nh, 1, 1)
WIDE_WEIGHTED_HEADS(1) WIDE_WEIGHTED_HEADS(2) WIDE_WEIGHTED_HEADS(3) WIDE_WEIGHTED_HEADS(4) WIDE_WEIGHTED_HEADS(5)
WIDE_WEIGHTED_HEADS(6)
#define WIDE_WEIGHTED_ROW(nh, bf) {wide_weighted_##nh##_##bf##_0, wide_weighted_##nh##_##bf##_1}
#define WIDE_WEIGHTED_DTYPE(bf)                                                                                   \
    {WIDE_WEIGHTED_ROW(1, bf), WIDE_WEIGHTED_ROW(2, bf), WIDE_WEIGHTED_ROW(3, bf),                                \
     WIDE_WEIGHTED_ROW(4, bf), WIDE_WEIGHTED_ROW(5, bf), WIDE_WEIGHTED_ROW(6, bf)}
/* [bf16][heads - 1][tail] */
static const weighted_fn wide_weighted_table[2][6][2] = {WIDE_WEIGHTED_DTYPE(0), WIDE_WEIGHTED_DTYPE(1)};

/* The block's softmax, vertical (lane j: head h0 + j), 8 heads at a time: m to the block's maximum,
 * alpha = exp(m_old - m) (0 at an item's first block: exp_ps of -inf is its clamp, e^-87.3, times
 * l = 0 and acc = 0), s = exp(s - m), l = l alpha + sum_t s. */
static void wide_softmax(float *s, int nh, int nt, float *m, float *l, float *alpha)
{
    for (int h0 = 0; h0 < nh; h0 += 8) {
        int hh = nh - h0 < 8 ? nh - h0 : 8;
        float mo[8] = {0}, lo[8] = {0}, ao[8];
        memcpy(mo, m + h0, (size_t)hh * sizeof(float));
        memcpy(lo, l + h0, (size_t)hh * sizeof(float));
        __m256 mold = _mm256_loadu_ps(mo), mx = mold, sum = _mm256_setzero_ps();
        for (int t = 0; t < nt; t++) mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + t * 32 + h0));
        __m256 al = exp_ps(_mm256_sub_ps(mold, mx));
        for (int t = 0; t < nt; t++) {
            float *p = s + t * 32 + h0;
            __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(p), mx));
            _mm256_storeu_ps(p, e);
            sum = _mm256_add_ps(sum, e);
        }
        _mm256_storeu_ps(lo, _mm256_fmadd_ps(_mm256_loadu_ps(lo), al, sum));
        _mm256_storeu_ps(mo, mx);
        _mm256_storeu_ps(ao, al);
        memcpy(m + h0, mo, (size_t)hh * sizeof(float));
        memcpy(l + h0, lo, (size_t)hh * sizeof(float));
        memcpy(alpha + h0, ao, (size_t)hh * sizeof(float));
    }
}

/* n BF16 rows of len values (src rows len apart) to floats in load16's order, row after row. */
static void widen_rows(const uint16_t *src, int n, int len, float *dst)
{
    for (int t = 0; t < n; t++, src += len, dst += len) {
        int k = 0;
        for (; k + 16 <= len; k += 16) widen16(src + k, dst + k);
        for (; k < len; k++) { /* not kernels.c's bf16_to_float: the layout test keeps core's files acyclic */
            uint32_t u = (uint32_t)src[k] << 16;
            memcpy(dst + k, &u, sizeof u);
        }
    }
}

/* The scores of six positions for 16 heads in assembly, for the reason few_weighted_4 is: GCC's
 * loop spent 13-17 ops per k beside 12 FMAs on pointers and the prefetch cursor's range test.
 * Head-halves' accumulators in ymm0-11 (position t: ymm2t, ymm2t+1), the queries in ymm12-13,
 * broadcasts alternating in ymm14-15; two k per iteration; one line of the next block prefetched
 * into L2 per iteration while the segment's lines last; with a BF16 cache (wide_score6_bf16) also
 * 16 values of the next step's rows widened per iteration, through ymm14-15 before the broadcasts.
 * The same FMAs in the same order as wide_score_tile. */
typedef struct {
    const float *qt;              /* [R + rope][16] */
    const float *lat, *kr;        /* the six rows (F32), lat_row and kr_row bytes apart */
    long lat_row, kr_row;
    long lat_pairs, kr_pairs;     /* R / 2, rope / 2 */
    const char *pf_lat, *pf_kr;   /* lines to prefetch during each segment, n_lat and n_kr of them */
    long n_lat, n_kr;
    step_widen w;                 /* BF16: the next step's rows, widened during each segment */
    float *s;                     /* s[t * 32 + 0..16) */
    float scale;
} wide_tile6;

#define WS_K(xo, qo)                                                                                               \
    "vmovups " qo "(%[q]), %%ymm12\n\t" "vmovups " qo "+32(%[q]), %%ymm13\n\t"                                     \
    "vbroadcastss " xo "(%[x]), %%ymm14\n\t" "vfmadd231ps %%ymm14, %%ymm12, %%ymm0\n\t"                            \
    "vfmadd231ps %%ymm14, %%ymm13, %%ymm1\n\t" "vbroadcastss " xo "(%[x],%[xs]), %%ymm15\n\t"                      \
    "vfmadd231ps %%ymm15, %%ymm12, %%ymm2\n\t" "vfmadd231ps %%ymm15, %%ymm13, %%ymm3\n\t"                          \
    "vbroadcastss " xo "(%[x],%[xs],2), %%ymm14\n\t" "vfmadd231ps %%ymm14, %%ymm12, %%ymm4\n\t"                    \
    "vfmadd231ps %%ymm14, %%ymm13, %%ymm5\n\t" "vbroadcastss " xo "(%[x],%[t3]), %%ymm15\n\t"                      \
    "vfmadd231ps %%ymm15, %%ymm12, %%ymm6\n\t" "vfmadd231ps %%ymm15, %%ymm13, %%ymm7\n\t"                          \
    "vbroadcastss " xo "(%[x],%[xs],4), %%ymm14\n\t" "vfmadd231ps %%ymm14, %%ymm12, %%ymm8\n\t"                    \
    "vfmadd231ps %%ymm14, %%ymm13, %%ymm9\n\t" "vbroadcastss " xo "(%[x],%[t5]), %%ymm15\n\t"                      \
    "vfmadd231ps %%ymm15, %%ymm12, %%ymm10\n\t" "vfmadd231ps %%ymm15, %%ymm13, %%ymm11\n\t"
/* BF16: a segment's widening cursor (the fields at offset W of the tile: source, destination,
 * groups), and one group of 16 values widened per iteration while any are left */
#define WS_WIDEN_LOAD(W) "mov " W "(%[c]), %[ws]\n\t" "mov " W "+8(%[c]), %[wd]\n\t" "mov " W "+16(%[c]), %[nw]\n\t"
#define WS_WIDEN_STEP                                                                                              \
    "sub $1, %[nw]\n\t" "jl 4f\n\t" "vmovdqu (%[ws]), %%ymm14\n\t" "vpslld $16, %%ymm14, %%ymm15\n\t"                \
    "vpand %[mask], %%ymm14, %%ymm14\n\t" "vmovups %%ymm15, (%[wd])\n\t" "vmovups %%ymm14, 32(%[wd])\n\t"             \
    "add $32, %[ws]\n\t" "add $64, %[wd]\n" "4:\n\t"
/* one segment (the latents or the rope keys) of the dot products; WLOAD and WSTEP: the widening's
 * (BF16) or nothing (F32) */
#define WS_SEGMENT(ROWS, ROWB, PAIRS, PF, NPF, WLOAD, WSTEP)                                                       \
    "mov %c[" ROWS "](%[c]), %[x]\n\t" "mov %c[" ROWB "](%[c]), %[xs]\n\t" "lea (%[xs],%[xs],2), %[t3]\n\t"        \
    "lea (%[xs],%[xs],4), %[t5]\n\t" "mov %c[" PF "](%[c]), %[pf]\n\t" "mov %c[" NPF "](%[c]), %[npf]\n\t" WLOAD    \
    "mov %c[" PAIRS "](%[c]), %[k]\n\t" "test %[k], %[k]\n\t" "jle 3f\n"                                           \
    "1:\n\t" "sub $1, %[npf]\n\t" "jl 2f\n\t" "prefetcht2 (%[pf])\n\t" "add $64, %[pf]\n" "2:\n\t" WSTEP            \
    WS_K("0", "0") WS_K("4", "64") "add $8, %[x]\n\t" "add $128, %[q]\n\t" "sub $1, %[k]\n\t" "jnz 1b\n" "3:\n\t"
#define WS_STORE(t, r0, r1)                                                                                        \
    "vmulps %%ymm12, %%ymm" #r0 ", %%ymm" #r0 "\n\t" "vmovups %%ymm" #r0 ", " #t "*128(%[x])\n\t"                  \
    "vmulps %%ymm12, %%ymm" #r1 ", %%ymm" #r1 "\n\t" "vmovups %%ymm" #r1 ", " #t "*128+32(%[x])\n\t"

_Static_assert(offsetof(step_widen, lat_dst) == 8 && offsetof(step_widen, n_lat) == 16 &&
                   offsetof(step_widen, kr) == 24 && offsetof(step_widen, kr_dst) == 32 &&
                   offsetof(step_widen, n_kr) == 40,
               "wide_score6_bf16 finds the widening's fields by their offsets in step_widen");

#define WIDE_SCORE6(name, WLOAD_LAT, WLOAD_KR, WSTEP)                                                             \
static void name(const wide_tile6 *c)                                                                             \
{                                                                                                                 \
    long x, xs, t3, t5, q, k, pf, npf, ws, wd, nw;                                                                \
    __asm__ volatile(                                                                                             \
        "vxorps %%xmm0, %%xmm0, %%xmm0\n\t" "vxorps %%xmm1, %%xmm1, %%xmm1\n\t" "vxorps %%xmm2, %%xmm2, %%xmm2\n\t"\
        "vxorps %%xmm3, %%xmm3, %%xmm3\n\t" "vxorps %%xmm4, %%xmm4, %%xmm4\n\t" "vxorps %%xmm5, %%xmm5, %%xmm5\n\t"\
        "vxorps %%xmm6, %%xmm6, %%xmm6\n\t" "vxorps %%xmm7, %%xmm7, %%xmm7\n\t" "vxorps %%xmm8, %%xmm8, %%xmm8\n\t"\
        "vxorps %%xmm9, %%xmm9, %%xmm9\n\t" "vxorps %%xmm10, %%xmm10, %%xmm10\n\t" "vxorps %%xmm11, %%xmm11, %%xmm11\n\t"\
        "mov %c[qt](%[c]), %[q]\n\t"                                                                              \
        WS_SEGMENT("lat", "lat_row", "lat_pairs", "pf_lat", "n_lat", WLOAD_LAT, WSTEP)                            \
        WS_SEGMENT("kr", "kr_row", "kr_pairs", "pf_kr", "n_kr", WLOAD_KR, WSTEP)                                  \
        "mov %c[s](%[c]), %[x]\n\t" "vbroadcastss %c[scale](%[c]), %%ymm12\n\t"                                   \
        WS_STORE(0, 0, 1) WS_STORE(1, 2, 3) WS_STORE(2, 4, 5) WS_STORE(3, 6, 7) WS_STORE(4, 8, 9) WS_STORE(5, 10, 11)\
        : [x] "=&r"(x), [xs] "=&r"(xs), [t3] "=&r"(t3), [t5] "=&r"(t5), [q] "=&r"(q), [k] "=&r"(k), [pf] "=&r"(pf),\
          [npf] "=&r"(npf), [ws] "=&r"(ws), [wd] "=&r"(wd), [nw] "=&r"(nw)                                        \
        : [c] "r"(c), [mask] "m"(odd_mask), [qt] "i"(offsetof(wide_tile6, qt)), [lat] "i"(offsetof(wide_tile6, lat)),\
          [kr] "i"(offsetof(wide_tile6, kr)), [lat_row] "i"(offsetof(wide_tile6, lat_row)),                       \
          [kr_row] "i"(offsetof(wide_tile6, kr_row)), [lat_pairs] "i"(offsetof(wide_tile6, lat_pairs)),           \
          [kr_pairs] "i"(offsetof(wide_tile6, kr_pairs)), [pf_lat] "i"(offsetof(wide_tile6, pf_lat)),             \
          [pf_kr] "i"(offsetof(wide_tile6, pf_kr)), [n_lat] "i"(offsetof(wide_tile6, n_lat)),                     \
          [n_kr] "i"(offsetof(wide_tile6, n_kr)),                                                                 \
          [w] "i"(offsetof(wide_tile6, w)), [s] "i"(offsetof(wide_tile6, s)), [scale] "i"(offsetof(wide_tile6, scale))\
        : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",\
          "xmm12", "xmm13", "xmm14", "xmm15");                                                                    \
}
WIDE_SCORE6(wide_score6, "", "", "")
WIDE_SCORE6(wide_score6_bf16, WS_WIDEN_LOAD("%c[w]"), WS_WIDEN_LOAD("%c[w]+24"), WS_WIDEN_STEP)

/* Lines of [from, to) to prefetch in a segment of `slots` iterations (at most one each). */
static long wide_lines(const char *from, const char *to, long slots)
{
    long n = from < to ? (long)((to - from + 63) / 64) : 0;
    return n < slots ? n : slots;
}

/* The scores of a step's n positions (F32 rows at ul, ur; the next step's first position na) for
 * every head of the group, 16 at a time, with the next block's rows [pa, pb) prefetched as they
 * run: a full step in wide_score6; a shorter one (a block's last) or odd widths by the C tiles,
 * which also bring the next step's rows into L1. */
static void wide_step_scores(const attention_item *it, const float *qt, const attention_ahead *ahead, int pa, int pb,
                             int na, int n, const float *ul, const float *ur, float *s, const step_widen *w)
{
    static const step_widen none = {0};
    const attention_kv *kv = it->kv;
    int R = kv->R, rope = kv->rope, nh = it->nh;
    if (n == WIDE_NT && R % 2 == 0 && rope % 2 == 0) {
        for (int v = 0; 16 * v < nh; v++) {
            wide_tile6 c = {.qt = qt + (size_t)v * 16 * (R + rope), .lat = ul, .kr = ur, .lat_row = (long)R * 4,
                            .kr_row = (long)rope * 4, .lat_pairs = R / 2, .kr_pairs = rope / 2, .s = s + 16 * v,
                            .scale = kv->scale};
            if (v == 0 && pa < pb) {
                c.pf_lat = ahead->lat + pa * ahead->lat_row;
                c.pf_kr = ahead->kr + pa * ahead->kr_row;
                c.n_lat = wide_lines(c.pf_lat, ahead->lat + pb * ahead->lat_row, c.lat_pairs);
                c.n_kr = wide_lines(c.pf_kr, ahead->kr + pb * ahead->kr_row, c.kr_pairs);
            }
            if (v == 0) c.w = *w;
            if (c.w.n_lat || c.w.n_kr) wide_score6_bf16(&c);
            else wide_score6(&c);
        }
        return;
    }
    size_t es = dtype_size(kv->dtype);
    wide_pf pf = {.n = 0};
    if (pa < pb) {
        wide_pf_add(&pf, ahead->lat + pa * ahead->lat_row, ahead->lat + pb * ahead->lat_row);
        wide_pf_add(&pf, ahead->kr + pa * ahead->kr_row, ahead->kr + pb * ahead->kr_row);
    }
    pf.far = pf.n;
    int nb = na + WIDE_NT < it->t1 ? na + WIDE_NT : it->t1;
    if (na < nb) {
        const char *l0 = (const char *)kv->latent, *k0 = (const char *)kv->krope;
        wide_pf_add(&pf, l0 + (size_t)na * R * es, l0 + (size_t)nb * R * es);
        wide_pf_add(&pf, k0 + (size_t)na * rope * es, k0 + (size_t)nb * rope * es);
    }
    wide_pf_range(&pf, 0);
    for (int v = 0; 16 * v < nh; v++)
        wide_scores[n - 1](qt + (size_t)v * 16 * (R + rope), ul, ur, R, rope, kv->scale, s + 16 * v, &pf, v ? &none : w);
}

/* A BF16 cache's widened steps: two buffers of WIDE_NT rows in conv, the one a step reads (cur)
 * and the one the step widens the next step's rows into; ready: the position whose rows cur holds
 * (-1: none). */
typedef struct {
    float *buf[2];
    int cur, ready;
} step_rows;

/* The next step's rows (at np, n rows) widened by the step before it, where the widths allow: in
 * groups of 16 from each row's start, so R and rope multiples of 16. */
static step_widen next_step_widen(const attention_kv *kv, int np, int n, float *dst)
{
    step_widen w = {0};
    if (n <= 0 || kv->R % 16 || kv->rope % 16) return w;
    w.lat = (const uint16_t *)kv->latent + (size_t)np * kv->R, w.kr = (const uint16_t *)kv->krope + (size_t)np * kv->rope;
    w.lat_dst = dst, w.kr_dst = dst + (size_t)n * kv->R;
    w.n_lat = (long)n * kv->R / 16, w.n_kr = (long)n * kv->rope / 16;
    return w;
}

/* One block: the scores of the group for each WIDE_NT positions (the rows stay in L1 between its
 * two halves; a BF16 cache's rows widened into conv, since the broadcasts read single floats: each
 * step's by the step before it, the item's first at once), the softmax, the weighted latents (BF16
 * read in place, in load16's order). */
static void wide_block(const attention_item *it, const float *qt, int t, int nt, float *s, float *alpha, step_rows *sr)
{
    const attention_kv *kv = it->kv;
    int R = kv->R, rope = kv->rope, nh = it->nh, bf16 = kv->dtype == DTYPE_BF16;
    size_t es = dtype_size(kv->dtype);
    const char *lat = (const char *)kv->latent + (size_t)t * R * es, *kr = (const char *)kv->krope + (size_t)t * rope * es;
    attention_ahead ahead = attention_block_after(kv, t, it->n, ATTN_BLOCK);
    for (int u = 0; u < nt; u += WIDE_NT) {
        int n = nt - u < WIDE_NT ? nt - u : WIDE_NT, pa = u < ahead.rows ? u : ahead.rows;
        int pb = u + n < ahead.rows ? u + n : ahead.rows;
        const float *ul = (const float *)(lat + (size_t)u * R * es), *ur = (const float *)(kr + (size_t)u * rope * es);
        step_widen w = {0};
        if (bf16) {
            float *rows = sr->buf[sr->cur];
            if (sr->ready != t + u) {
                widen_rows((const uint16_t *)lat + (size_t)u * R, n, R, rows);
                widen_rows((const uint16_t *)kr + (size_t)u * rope, n, rope, rows + (size_t)n * R);
            }
            ul = rows;
            ur = rows + (size_t)n * R;
            /* the next step: the rest of this block's, or the next block's first */
            int np = t + u + n, left = np < t + nt ? t + nt - np : it->t1 - np;
            w = next_step_widen(kv, np, left < WIDE_NT ? left : WIDE_NT, sr->buf[sr->cur ^ 1]);
            sr->cur ^= 1;
            sr->ready = w.n_lat ? np : -1;
        }
        wide_step_scores(it, qt, &ahead, pa, pb, t + u + n, n, ul, ur, s + u * 32, &w);
    }
    wide_softmax(s, nh, nt, it->m, it->l, alpha);
    for (int h = 0; h < nh; h += 6) {
        const weighted_fn *tile = wide_weighted_table[bf16][(nh - h < 6 ? nh - h : 6) - 1];
        for (int c0 = 0; c0 < R; c0 += 16) tile[R - c0 < 16](it->acc + (size_t)h * R, R, alpha + h, s + h, lat, nt, c0);
    }
}

/* conv: two steps of WIDE_NT widened rows (before the first block, item_start's queries in load16's
 * order, read once by the transposes), then the transposed queries, [2][R + rope][16]. */
static void wide_item(const attention_item *it)
{
    const attention_kv *kv = it->kv;
    int nh = it->nh, R = kv->R, rope = kv->rope;
    size_t w = (size_t)R + rope;
    float s[ATTN_BLOCK * 32] __attribute__((aligned(64)));
    float alpha[ATTN_GROUP_HEADS];
    float *qt = it->conv + (size_t)ATTN_BLOCK * w;
    const float *ql, *qr;
    item_start(it, &ql, &qr);
    for (int v = 0; 16 * v < nh; v++) {
        wide_queries(ql, (size_t)R, 16 * v, nh, R, qt + (size_t)v * 16 * w);
        wide_queries(qr, (size_t)rope, 16 * v, nh, rope, qt + (size_t)v * 16 * w + (size_t)R * 16);
    }
    step_rows sr = {{it->conv, it->conv + (size_t)WIDE_NT * w}, 0, -1};
    for (int t = it->t0; t < it->t1; t += ATTN_BLOCK)
        wide_block(it, qt, t, it->t1 - t < ATTN_BLOCK ? it->t1 - t : ATTN_BLOCK, s, alpha, &sr);
}
_Static_assert(ATTN_GROUP_HEADS == 32, "wide_item's scores hold a group in two halves of 16");

/* Rows of four heads or fewer, and the rest (R1's groups of 32 or 16) — chosen by the row's heads,
 * not the item's: a row's last group may be short, and which heads share it depends on the group
 * size, which follows the thread count. With a BF16 cache both keep the weighted latents in load16's
 * order (the cache is read in place, widened in registers, with the queries reordered to match), put
 * back in order here. */
void attention_item_avx2(const attention_item *it)
{
    if (it->kv->heads <= 4)
        attention_item_few_heads(it);
    else
        wide_item(it);
    if (it->kv->dtype == DTYPE_BF16)
        for (int h = 0; h < it->nh; h++) natural_order(it->acc + (size_t)h * it->kv->R, it->kv->R);
}
