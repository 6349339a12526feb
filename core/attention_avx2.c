/* AVX2 attention path: 8 floats per vector, 16 vector registers. Scores in tiles of SCORE_NH heads x
 * SCORE_NT positions; weighted latents in tiles of W_NH heads x W_NV vectors of columns. The item
 * loop is attention_driver.h, included last. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "core/attention_internal.h"

#define INLINE static inline __attribute__((always_inline))

#ifndef SCORE_NH
#define SCORE_NH 3
#endif
#ifndef SCORE_NT
#define SCORE_NT 4
#endif
#ifndef W_NH
#define W_NH 6
#endif
#ifndef W_NV
#define W_NV 2
#endif

/* Lanes [0, n) set (n clipped to 8), for maskload/maskstore: a window into -1 x 8, 0 x 8. */
static const int32_t lane_window[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
INLINE __m256i lanes(int n) { return _mm256_loadu_si256((const __m256i *)(lane_window + 8 - (n < 8 ? n : 8))); }

/* Within each 128-bit half, lane i of the result is the half-sum of a[i] (4 vectors in, 4 sums per
 * half out): unpack pairs, then quads, each level one add (no hadd: 3 uops each). */
INLINE __m256 sum4_halves(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
    __m256 x0 = _mm256_add_ps(_mm256_unpacklo_ps(a0, a1), _mm256_unpackhi_ps(a0, a1));
    __m256 x1 = _mm256_add_ps(_mm256_unpacklo_ps(a2, a3), _mm256_unpackhi_ps(a2, a3));
    return _mm256_add_ps(_mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(3, 2, 3, 2)));
}

/* Lane i of the result is the sum of the 8 lanes of a[i]. */
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

/* acc[h * NT + t] += q[h] . x[t] over floats [k, k + 8), masked by m when MASKED. */
INLINE void dot_step(int NH, int NT, int MASKED, const float *q, int qstride, const float *x, int xstride, int k,
                     __m256i m, __m256 *acc)
{
    __m256 xv[4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++)
        xv[t] = MASKED ? _mm256_maskload_ps(x + (size_t)t * xstride + k, m) : _mm256_loadu_ps(x + (size_t)t * xstride + k);
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++) {
        __m256 qv = MASKED ? _mm256_maskload_ps(q + (size_t)h * qstride + k, m) : _mm256_loadu_ps(q + (size_t)h * qstride + k);
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) acc[h * NT + t] = _mm256_fmadd_ps(qv, xv[t], acc[h * NT + t]);
    }
}

/* Whole vectors unmasked, the tail masked (zeros past len). */
INLINE void dot_segment(int NH, int NT, const float *q, int qstride, const float *x, int xstride, int len, __m256 *acc)
{
    int k = 0;
    for (; k + 8 <= len; k += 8) dot_step(NH, NT, 0, q, qstride, x, xstride, k, _mm256_setzero_si256(), acc);
    if (k < len) dot_step(NH, NT, 1, q, qstride, x, xstride, k, lanes(len - k), acc);
}

INLINE void score_tile(int NH, int NT, const float *ql, const float *qr, const float *lat, const float *kr, int R,
                       int rope, float scale, float *s)
{
    __m256 acc[16];
    float out[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm256_setzero_ps();
    dot_segment(NH, NT, ql, R, lat, R, R, acc);
    dot_segment(NH, NT, qr, rope, kr, rope, rope, acc);
    __m256 sc = _mm256_set1_ps(scale);
    _mm256_storeu_ps(out, _mm256_mul_ps(sum8(acc), sc));
    if (NH * NT > 8) _mm_storeu_ps(out + 8, _mm_mul_ps(sum4(acc + 8), _mm256_castps256_ps128(sc)));
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < NT; t++) s[h * ATTN_BLOCK + t] = out[h * NT + t];
}

typedef void (*score_fn)(const float *ql, const float *qr, const float *lat, const float *kr, int R, int rope,
                         float scale, float *s);
#define SCORE_VARIANT(nh, nt)                                                                                    \
    static void score_##nh##_##nt(const float *ql, const float *qr, const float *lat, const float *kr, int R,     \
                                  int rope, float scale, float *s)                                                \
    {                                                                                                             \
        score_tile(nh, nt, ql, qr, lat, kr, R, rope, scale, s);                                                   \
    }
#define SCORE_VARIANT_(nh, nt) SCORE_VARIANT(nh, nt)
#define SCORE_PAIR(nh) SCORE_VARIANT(nh, 1) SCORE_VARIANT_(nh, SCORE_NT)
SCORE_PAIR(1) SCORE_PAIR(2) SCORE_PAIR(3)
#if SCORE_NH > 3
SCORE_PAIR(4)
#define SCORE_ROW(nt) {score_1_##nt, score_2_##nt, score_3_##nt, score_4_##nt}
#else
#define SCORE_ROW(nt) {score_1_##nt, score_2_##nt, score_3_##nt}
#endif
#define SCORE_ROW_(nt) SCORE_ROW(nt)
static const score_fn score_table[2][SCORE_NH] = {SCORE_ROW_(1), SCORE_ROW_(SCORE_NT)};

static void attn_scores(const float *ql, const float *qr, int nh, const float *lat, const float *kr, int nt, int R,
                        int rope, float scale, float *s, const attention_ahead *ahead)
{
    for (int t = 0; t < nt;) {
        int whole = nt - t >= SCORE_NT, step = whole ? SCORE_NT : 1;
        attention_prefetch(ahead, t, t + step);
        for (int h = 0; h < nh; h += SCORE_NH) {
            int hh = nh - h < SCORE_NH ? nh - h : SCORE_NH;
            score_table[whole][hh - 1](ql + (size_t)h * R, qr + (size_t)h * rope, lat + (size_t)t * R,
                                       kr + (size_t)t * rope, R, rope, scale, s + h * ATTN_BLOCK + t);
        }
        t += step;
    }
}

/* exp(x) for x <= 0: Cephes' expf polynomial times 2^n built in the exponent bits; clamped at
 * -87.3 so that n >= -126 stays a normal power of two (e^-87.3 ~ 1e-38 weighs nothing beside the
 * block's maximum, which is e^0). */
INLINE __m256 exp_ps(__m256 x)
{
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* Lane i of the result is the max of the 8 lanes of a[i]: the transpose tree of sum8 with max. */
INLINE __m256 max4_halves(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
    __m256 x0 = _mm256_max_ps(_mm256_unpacklo_ps(a0, a1), _mm256_unpackhi_ps(a0, a1));
    __m256 x1 = _mm256_max_ps(_mm256_unpacklo_ps(a2, a3), _mm256_unpackhi_ps(a2, a3));
    return _mm256_max_ps(_mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(3, 2, 3, 2)));
}

INLINE __m256 max8(const __m256 *a)
{
    __m256 y0 = max4_halves(a[0], a[1], a[2], a[3]), y1 = max4_halves(a[4], a[5], a[6], a[7]);
    return _mm256_max_ps(_mm256_permute2f128_ps(y0, y1, 0x20), _mm256_permute2f128_ps(y0, y1, 0x31));
}

/* Eight heads at once (rows of s past the group's nh are read but their results never stored): the
 * per-head maxima, sums and rescales are lanes of one vector, so no head waits on another's
 * horizontal reduction or on a scalar expf. Positions past nt are -inf for the max and 0 after exp
 * (the weighted pass never reads them). */
static void softmax_heads8(float *s, int nh, int nt, float *m, float *l, float *alpha)
{
    __m256 part[8], ninf = _mm256_set1_ps(-INFINITY);
    float mo[8] = {0}, lo[8] = {0}, ao[8];
    int nv = (nt + 7) / 8;
    memcpy(mo, m, (size_t)nh * sizeof(float));
    memcpy(lo, l, (size_t)nh * sizeof(float));
    for (int h = 0; h < 8; h++) {
        const float *sh = s + h * ATTN_BLOCK;
        part[h] = ninf;
        for (int v = 0; v < (h < nh ? nv : 0); v++)
            part[h] = _mm256_max_ps(part[h], _mm256_blendv_ps(ninf, _mm256_loadu_ps(sh + 8 * v),
                                                              _mm256_castsi256_ps(lanes(nt - 8 * v))));
    }
    __m256 mold = _mm256_loadu_ps(mo), mnew = _mm256_max_ps(mold, max8(part));
    _mm256_storeu_ps(mo, mnew);
    for (int h = 0; h < 8; h++) {
        float *sh = s + h * ATTN_BLOCK;
        __m256 mv = _mm256_set1_ps(mo[h]);
        part[h] = _mm256_setzero_ps();
        for (int v = 0; v < (h < nh ? nv : 0); v++) {
            __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_loadu_ps(sh + 8 * v), mv)),
                                     _mm256_castsi256_ps(lanes(nt - 8 * v)));
            _mm256_storeu_ps(sh + 8 * v, e);
            part[h] = _mm256_add_ps(part[h], e);
        }
    }
    __m256 a = exp_ps(_mm256_sub_ps(mold, mnew));
    _mm256_storeu_ps(ao, a);
    _mm256_storeu_ps(lo, _mm256_fmadd_ps(_mm256_loadu_ps(lo), a, sum8(part)));
    memcpy(m, mo, (size_t)nh * sizeof(float));
    memcpy(l, lo, (size_t)nh * sizeof(float));
    memcpy(alpha, ao, (size_t)nh * sizeof(float));
}

static void attn_softmax_block(float *s, int nh, int nt, float *m, float *l, float *alpha)
{
    for (int h = 0; h < nh; h += 8) {
        int hh = nh - h < 8 ? nh - h : 8;
        softmax_heads8(s + h * ATTN_BLOCK, hh, nt, m + h, l + h, alpha + h);
    }
}

/* acc[h][c0 .. c0 + 8 NV) = acc * alpha[h] + sum_t s[h][t] lat[t][...]; with MASKED one vector
 * whose lanes past R are masked (the only masked stores, which are slow on some cores). */
INLINE void weighted_tile(int NH, int NV, int MASKED, float *acc, int R, const float *alpha, const float *s,
                          const float *lat, int nt, int c0)
{
    __m256 a[6][4];
    __m256i m = MASKED ? lanes(R - c0) : _mm256_setzero_si256();
#pragma GCC unroll 6
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            const float *p = acc + (size_t)h * R + c0 + 8 * v;
            a[h][v] = _mm256_mul_ps(MASKED ? _mm256_maskload_ps(p, m) : _mm256_loadu_ps(p), _mm256_set1_ps(alpha[h]));
        }
    for (int t = 0; t < nt; t++) {
        __m256 x[4];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            const float *p = lat + (size_t)t * R + c0 + 8 * v;
            x[v] = MASKED ? _mm256_maskload_ps(p, m) : _mm256_loadu_ps(p);
        }
#pragma GCC unroll 6
        for (int h = 0; h < NH; h++) {
            __m256 p = _mm256_broadcast_ss(s + h * ATTN_BLOCK + t);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) a[h][v] = _mm256_fmadd_ps(p, x[v], a[h][v]);
        }
    }
#pragma GCC unroll 6
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            float *p = acc + (size_t)h * R + c0 + 8 * v;
            if (MASKED)
                _mm256_maskstore_ps(p, m, a[h][v]);
            else
                _mm256_storeu_ps(p, a[h][v]);
        }
}

typedef void (*weighted_fn)(float *acc, int R, const float *alpha, const float *s, const float *lat, int nt, int c0);
#define WEIGHTED_VARIANT(nh, nv, masked)                                                                          \
    static void weighted_##nh##_##nv##_##masked(float *acc, int R, const float *alpha, const float *s,             \
                                                const float *lat, int nt, int c0)                                   \
    {                                                                                                              \
        weighted_tile(nh, nv, masked, acc, R, alpha, s, lat, nt, c0);                                              \
    }
#define WEIGHTED_HEADS(nh)                                                                                         \
    WEIGHTED_VARIANT(nh, 1, 0) WEIGHTED_VARIANT(nh, 2, 0) WEIGHTED_VARIANT(nh, 3, 0) WEIGHTED_VARIANT(nh, 4, 0)    \
    WEIGHTED_VARIANT(nh, 1, 1)
WEIGHTED_HEADS(1) WEIGHTED_HEADS(2) WEIGHTED_HEADS(3) WEIGHTED_HEADS(4) WEIGHTED_HEADS(5) WEIGHTED_HEADS(6)
#define WEIGHTED_ROW(nh) {weighted_##nh##_1_1, weighted_##nh##_1_0, weighted_##nh##_2_0, weighted_##nh##_3_0, weighted_##nh##_4_0}
/* [heads - 1][whole vectors, 0 for the masked tail] */
static const weighted_fn weighted_table[6][5] = {WEIGHTED_ROW(1), WEIGHTED_ROW(2), WEIGHTED_ROW(3),
                                                 WEIGHTED_ROW(4), WEIGHTED_ROW(5), WEIGHTED_ROW(6)};

static void attn_weighted(float *acc, int nh, int R, const float *alpha, const float *s, const float *lat, int nt)
{
    for (int h = 0; h < nh; h += W_NH) {
        int hh = nh - h < W_NH ? nh - h : W_NH;
        const weighted_fn *row = weighted_table[hh - 1];
        int c0 = 0, nv;
        for (; R - c0 >= 8 * W_NV; c0 += 8 * W_NV) row[W_NV](acc + (size_t)h * R, R, alpha + h, s + h * ATTN_BLOCK, lat, nt, c0);
        if ((nv = (R - c0) / 8) > 0) row[nv](acc + (size_t)h * R, R, alpha + h, s + h * ATTN_BLOCK, lat, nt, c0);
        c0 += 8 * nv;
        if (c0 < R) row[0](acc + (size_t)h * R, R, alpha + h, s + h * ATTN_BLOCK, lat, nt, c0);
    }
}

static void attn_widen_bf16(const uint16_t *src, int n, float *dst)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++) {
        uint32_t bits = (uint32_t)src[i] << 16;
        memcpy(dst + i, &bits, sizeof bits);
    }
}

#define ATTN_ISA avx2
#include "core/attention_driver.h"
