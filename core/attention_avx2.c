/* AVX2 attention path: 8 floats per vector, 16 vector registers. Scores in tiles of 4 heads x 2
 * positions (8 accumulators, 6 loads per 8 FMAs, one hadd tree per tile); weighted latents in tiles
 * of 4 heads x 16 columns (8 accumulators). The item loop is attention_driver.h, included last. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "core/attention_internal.h"

#define INLINE static inline __attribute__((always_inline))

/* Lanes [0, n) set (n clipped to 8), for maskload/maskstore: a window into -1 x 8, 0 x 8. */
static const int32_t lane_window[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
INLINE __m256i lanes(int n) { return _mm256_loadu_si256((const __m256i *)(lane_window + 8 - (n < 8 ? n : 8))); }

/* Lane i of the result is the sum of the 8 lanes of a[i]. */
INLINE __m256 sum8(const __m256 a[8])
{
    __m256 b0 = _mm256_hadd_ps(a[0], a[1]), b1 = _mm256_hadd_ps(a[2], a[3]);
    __m256 b2 = _mm256_hadd_ps(a[4], a[5]), b3 = _mm256_hadd_ps(a[6], a[7]);
    __m256 c0 = _mm256_hadd_ps(b0, b1), c1 = _mm256_hadd_ps(b2, b3);
    return _mm256_add_ps(_mm256_permute2f128_ps(c0, c1, 0x20), _mm256_permute2f128_ps(c0, c1, 0x31));
}

INLINE float hmax8(__m256 v)
{
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}

INLINE float hadd8(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}

/* acc[h * 2 + t] += q[h] . x[t] over len floats; the tail through masked loads (zeros). */
INLINE void dot_segment(int NH, int NT, const float *q, int qstride, const float *x, int xstride, int len, __m256 acc[8])
{
    int k = 0;
    for (; k + 8 <= len; k += 8) {
        __m256 xv[2];
#pragma GCC unroll 2
        for (int t = 0; t < NT; t++) xv[t] = _mm256_loadu_ps(x + (size_t)t * xstride + k);
#pragma GCC unroll 4
        for (int h = 0; h < NH; h++) {
            __m256 qv = _mm256_loadu_ps(q + (size_t)h * qstride + k);
#pragma GCC unroll 2
            for (int t = 0; t < NT; t++) acc[h * 2 + t] = _mm256_fmadd_ps(qv, xv[t], acc[h * 2 + t]);
        }
    }
    if (k < len) {
        __m256i m = lanes(len - k);
        __m256 xv[2];
#pragma GCC unroll 2
        for (int t = 0; t < NT; t++) xv[t] = _mm256_maskload_ps(x + (size_t)t * xstride + k, m);
#pragma GCC unroll 4
        for (int h = 0; h < NH; h++) {
            __m256 qv = _mm256_maskload_ps(q + (size_t)h * qstride + k, m);
#pragma GCC unroll 2
            for (int t = 0; t < NT; t++) acc[h * 2 + t] = _mm256_fmadd_ps(qv, xv[t], acc[h * 2 + t]);
        }
    }
}

INLINE void score_tile(int NH, int NT, const float *ql, const float *qr, const float *lat, const float *kr, int R,
                       int rope, float scale, float *s)
{
    __m256 acc[8];
    float out[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
    dot_segment(NH, NT, ql, R, lat, R, R, acc);
    dot_segment(NH, NT, qr, rope, kr, rope, rope, acc);
    _mm256_storeu_ps(out, _mm256_mul_ps(sum8(acc), _mm256_set1_ps(scale)));
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < NT; t++) s[h * ATTN_BLOCK + t] = out[h * 2 + t];
}

typedef void (*score_fn)(const float *ql, const float *qr, const float *lat, const float *kr, int R, int rope,
                         float scale, float *s);
#define SCORE_VARIANT(nh, nt)                                                                                    \
    static void score_##nh##_##nt(const float *ql, const float *qr, const float *lat, const float *kr, int R,     \
                                  int rope, float scale, float *s)                                                \
    {                                                                                                             \
        score_tile(nh, nt, ql, qr, lat, kr, R, rope, scale, s);                                                   \
    }
SCORE_VARIANT(1, 1) SCORE_VARIANT(2, 1) SCORE_VARIANT(3, 1) SCORE_VARIANT(4, 1)
SCORE_VARIANT(1, 2) SCORE_VARIANT(2, 2) SCORE_VARIANT(3, 2) SCORE_VARIANT(4, 2)
static const score_fn score_table[2][4] = {{score_1_1, score_2_1, score_3_1, score_4_1},
                                           {score_1_2, score_2_2, score_3_2, score_4_2}};

static void attn_scores(const float *ql, const float *qr, int nh, const float *lat, const float *kr, int nt, int R,
                        int rope, float scale, float *s, const attention_ahead *ahead)
{
    for (int t = 0; t < nt;) {
        int pair = nt - t >= 2;
        attention_prefetch(ahead, t, t + (pair ? 2 : 1));
        for (int h = 0; h < nh; h += 4) {
            int hh = nh - h < 4 ? nh - h : 4;
            score_table[pair][hh - 1](ql + (size_t)h * R, qr + (size_t)h * rope, lat + (size_t)t * R,
                                      kr + (size_t)t * rope, R, rope, scale, s + h * ATTN_BLOCK + t);
        }
        t += pair ? 2 : 1;
    }
}

/* exp(x) for x <= 0: Cephes' expf polynomial times 2^n built in the exponent bits; clamped at
 * -87.3 so that n >= -126 stays a normal power of two. */
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

static void attn_softmax_block(float *s, int nh, int nt, float *m, float *l, float *alpha)
{
    for (int h = 0; h < nh; h++) {
        float *sh = s + h * ATTN_BLOCK;
        __m256 mx = _mm256_set1_ps(m[h]), sum = _mm256_setzero_ps(), ninf = _mm256_set1_ps(-INFINITY);
        for (int t = 0; t < nt; t += 8) {
            __m256i k = lanes(nt - t);
            mx = _mm256_max_ps(mx, _mm256_blendv_ps(ninf, _mm256_maskload_ps(sh + t, k), _mm256_castsi256_ps(k)));
        }
        float mnew = hmax8(mx);
        __m256 mv = _mm256_set1_ps(mnew);
        for (int t = 0; t < nt; t += 8) {
            __m256i k = lanes(nt - t);
            __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_maskload_ps(sh + t, k), mv)), _mm256_castsi256_ps(k));
            _mm256_maskstore_ps(sh + t, k, e);
            sum = _mm256_add_ps(sum, e);
        }
        alpha[h] = expf(m[h] - mnew);
        l[h] = l[h] * alpha[h] + hadd8(sum);
        m[h] = mnew;
    }
}

/* acc[h][c0 .. c0 + 8 NV) = acc * alpha[h] + sum_t s[h][t] lat[t][...]; columns past R masked. */
INLINE void weighted_tile(int NH, int NV, float *acc, int R, const float *alpha, const float *s, const float *lat,
                          int nt, int c0)
{
    __m256 a[4][2];
    __m256i m[2];
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) m[v] = lanes(R - c0 - 8 * v);
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++)
            a[h][v] = _mm256_mul_ps(_mm256_maskload_ps(acc + (size_t)h * R + c0 + 8 * v, m[v]), _mm256_set1_ps(alpha[h]));
    for (int t = 0; t < nt; t++) {
        __m256 x[2];
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) x[v] = _mm256_maskload_ps(lat + (size_t)t * R + c0 + 8 * v, m[v]);
#pragma GCC unroll 4
        for (int h = 0; h < NH; h++) {
            __m256 p = _mm256_broadcast_ss(s + h * ATTN_BLOCK + t);
#pragma GCC unroll 2
            for (int v = 0; v < NV; v++) a[h][v] = _mm256_fmadd_ps(p, x[v], a[h][v]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) _mm256_maskstore_ps(acc + (size_t)h * R + c0 + 8 * v, m[v], a[h][v]);
}

typedef void (*weighted_fn)(float *acc, int R, const float *alpha, const float *s, const float *lat, int nt, int c0);
#define WEIGHTED_VARIANT(nh, nv)                                                                                  \
    static void weighted_##nh##_##nv(float *acc, int R, const float *alpha, const float *s, const float *lat, int nt, \
                                     int c0)                                                                       \
    {                                                                                                              \
        weighted_tile(nh, nv, acc, R, alpha, s, lat, nt, c0);                                                      \
    }
WEIGHTED_VARIANT(1, 1) WEIGHTED_VARIANT(2, 1) WEIGHTED_VARIANT(3, 1) WEIGHTED_VARIANT(4, 1)
WEIGHTED_VARIANT(1, 2) WEIGHTED_VARIANT(2, 2) WEIGHTED_VARIANT(3, 2) WEIGHTED_VARIANT(4, 2)
static const weighted_fn weighted_table[4][2] = {{weighted_1_1, weighted_1_2}, {weighted_2_1, weighted_2_2},
                                                 {weighted_3_1, weighted_3_2}, {weighted_4_1, weighted_4_2}};

static void attn_weighted(float *acc, int nh, int R, const float *alpha, const float *s, const float *lat, int nt)
{
    for (int h = 0; h < nh; h += 4) {
        int hh = nh - h < 4 ? nh - h : 4;
        for (int c0 = 0; c0 < R; c0 += 16)
            weighted_table[hh - 1][R - c0 > 8 ? 1 : 0](acc + (size_t)h * R, R, alpha + h, s + h * ATTN_BLOCK, lat, nt, c0);
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
