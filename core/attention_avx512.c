/* AVX-512 attention path: 16 floats per vector. Scores in tiles of 4 heads x 4 positions (16
 * accumulators, 8 loads per 16 FMAs, one transpose-add tree per tile); weighted latents in tiles of
 * 4 heads x 64 columns (16 accumulators, 4 loads and 4 broadcasts per 16 FMAs). The item loop is
 * attention_driver.h, included last. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "core/attention_internal.h"

#define INLINE static inline __attribute__((always_inline))

INLINE __mmask16 lanes(int n) { return (__mmask16)((1u << (n < 16 ? n : 16)) - 1); }

/* Lane i of the result is the sum of the 16 lanes of a[i]: pairs, then quads inside 128-bit lanes,
 * then across them (15 adds, 30 shuffles for 16 sums). */
INLINE __m512 sum16(const __m512 a[16])
{
    __m512 x[8], y[4], z[2];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        x[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        y[i] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
        z[i] = _mm512_add_ps(_mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* acc[h * 4 + t] += q[h] . x[t] over floats [k, k + 16) masked by m. */
INLINE void dot_step(int NH, int NT, const float *q, int qstride, const float *x, int xstride, int k, __mmask16 m,
                     __m512 acc[16])
{
    __m512 xv[4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) xv[t] = _mm512_maskz_loadu_ps(m, x + (size_t)t * xstride + k);
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++) {
        __m512 qv = _mm512_maskz_loadu_ps(m, q + (size_t)h * qstride + k);
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) acc[h * 4 + t] = _mm512_fmadd_ps(qv, xv[t], acc[h * 4 + t]);
    }
}

/* acc[h * 4 + t] += q[h] . x[t] over len floats (rows qstride, xstride apart): whole vectors with
 * a constant mask (no per-step mask arithmetic in the loop that does all the FMAs), the tail masked. */
INLINE void dot_segment(int NH, int NT, const float *q, int qstride, const float *x, int xstride, int len, __m512 acc[16])
{
    int k = 0;
    for (; k + 16 <= len; k += 16) dot_step(NH, NT, q, qstride, x, xstride, k, (__mmask16)0xFFFF, acc);
    if (k < len) dot_step(NH, NT, q, qstride, x, xstride, k, lanes(len - k), acc);
}

INLINE void score_tile(int NH, int NT, const float *ql, const float *qr, const float *lat, const float *kr, int R,
                       int rope, float scale, float *s)
{
    __m512 acc[16];
    float out[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
    dot_segment(NH, NT, ql, R, lat, R, R, acc);
    dot_segment(NH, NT, qr, rope, kr, rope, rope, acc);
    __m512 sc = _mm512_mul_ps(sum16(acc), _mm512_set1_ps(scale));
    if (NT == 4) { /* head h's 4 scores are the h-th 128-bit lane */
        _mm_storeu_ps(s, _mm512_castps512_ps128(sc));
        if (NH > 1) _mm_storeu_ps(s + ATTN_BLOCK, _mm512_extractf32x4_ps(sc, 1));
        if (NH > 2) _mm_storeu_ps(s + 2 * ATTN_BLOCK, _mm512_extractf32x4_ps(sc, 2));
        if (NH > 3) _mm_storeu_ps(s + 3 * ATTN_BLOCK, _mm512_extractf32x4_ps(sc, 3));
        return;
    }
    _mm512_storeu_ps(out, sc);
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < NT; t++) s[h * ATTN_BLOCK + t] = out[h * 4 + t];
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
SCORE_VARIANT(1, 4) SCORE_VARIANT(2, 4) SCORE_VARIANT(3, 4) SCORE_VARIANT(4, 4)
static const score_fn score_table[2][4] = {{score_1_1, score_2_1, score_3_1, score_4_1},
                                           {score_1_4, score_2_4, score_3_4, score_4_4}};

/* Positions in quads, outermost, so that their rows stay in L1 while every head group reads them. */
static void attn_scores(const float *ql, const float *qr, int nh, const float *lat, const float *kr, int nt, int R,
                        int rope, float scale, float *s, const attention_ahead *ahead)
{
    for (int t = 0; t < nt;) {
        int quad = nt - t >= 4;
        attention_prefetch(ahead, t, t + (quad ? 4 : 1));
        for (int h = 0; h < nh; h += 4) {
            int hh = nh - h < 4 ? nh - h : 4;
            score_table[quad][hh - 1](ql + (size_t)h * R, qr + (size_t)h * rope, lat + (size_t)t * R,
                                      kr + (size_t)t * rope, R, rope, scale, s + h * ATTN_BLOCK + t);
        }
        t += quad ? 4 : 1;
    }
}

/* exp(x) for x <= 0: Cephes' expf polynomial (about 1 ulp) times 2^n by scalef; below -87.3 it
 * clamps (e^-87.3 ~ 1e-38 weighs nothing beside the block's maximum, which is e^0). */
INLINE __m512 exp_ps(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

static void attn_softmax_block(float *s, int nh, int nt, float *m, float *l, float *alpha)
{
    for (int h = 0; h < nh; h++) {
        float *sh = s + h * ATTN_BLOCK;
        __m512 mx = _mm512_set1_ps(m[h]), sum = _mm512_setzero_ps();
        for (int t = 0; t < nt; t += 16)
            mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), lanes(nt - t), sh + t));
        float mnew = _mm512_reduce_max_ps(mx);
        __m512 mv = _mm512_set1_ps(mnew);
        for (int t = 0; t < nt; t += 16) {
            __mmask16 k = lanes(nt - t);
            __m512 e = _mm512_maskz_mov_ps(k, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, sh + t), mv)));
            _mm512_mask_storeu_ps(sh + t, k, e);
            sum = _mm512_add_ps(sum, e);
        }
        alpha[h] = expf(m[h] - mnew);
        l[h] = l[h] * alpha[h] + _mm512_reduce_add_ps(sum);
        m[h] = mnew;
    }
}

/* acc[h][c0 .. c0 + 16 NV) = acc * alpha[h] + sum_t s[h][t] lat[t][...]; columns past R masked. */
INLINE void weighted_tile(int NH, int NV, float *acc, int R, const float *alpha, const float *s, const float *lat,
                          int nt, int c0)
{
    __m512 a[4][4];
    __mmask16 m[4];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) m[v] = lanes(R - c0 - 16 * v);
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            a[h][v] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m[v], acc + (size_t)h * R + c0 + 16 * v), _mm512_set1_ps(alpha[h]));
    for (int t = 0; t < nt; t++) {
        __m512 x[4];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) x[v] = _mm512_maskz_loadu_ps(m[v], lat + (size_t)t * R + c0 + 16 * v);
#pragma GCC unroll 4
        for (int h = 0; h < NH; h++) {
            __m512 p = _mm512_set1_ps(s[h * ATTN_BLOCK + t]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) a[h][v] = _mm512_fmadd_ps(p, x[v], a[h][v]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) _mm512_mask_storeu_ps(acc + (size_t)h * R + c0 + 16 * v, m[v], a[h][v]);
}

typedef void (*weighted_fn)(float *acc, int R, const float *alpha, const float *s, const float *lat, int nt, int c0);
#define WEIGHTED_VARIANT(nh, nv)                                                                                  \
    static void weighted_##nh##_##nv(float *acc, int R, const float *alpha, const float *s, const float *lat, int nt, \
                                     int c0)                                                                       \
    {                                                                                                              \
        weighted_tile(nh, nv, acc, R, alpha, s, lat, nt, c0);                                                      \
    }
#define WEIGHTED_HEADS(nh) WEIGHTED_VARIANT(nh, 1) WEIGHTED_VARIANT(nh, 2) WEIGHTED_VARIANT(nh, 3) WEIGHTED_VARIANT(nh, 4)
WEIGHTED_HEADS(1) WEIGHTED_HEADS(2) WEIGHTED_HEADS(3) WEIGHTED_HEADS(4)
static const weighted_fn weighted_table[4][4] = {
    {weighted_1_1, weighted_1_2, weighted_1_3, weighted_1_4}, {weighted_2_1, weighted_2_2, weighted_2_3, weighted_2_4},
    {weighted_3_1, weighted_3_2, weighted_3_3, weighted_3_4}, {weighted_4_1, weighted_4_2, weighted_4_3, weighted_4_4}};

static void attn_weighted(float *acc, int nh, int R, const float *alpha, const float *s, const float *lat, int nt)
{
    for (int h = 0; h < nh; h += 4) {
        int hh = nh - h < 4 ? nh - h : 4;
        for (int c0 = 0; c0 < R; c0 += 64) {
            int nv = (R - c0 + 15) / 16;
            weighted_table[hh - 1][(nv < 4 ? nv : 4) - 1](acc + (size_t)h * R, R, alpha + h, s + h * ATTN_BLOCK, lat, nt, c0);
        }
    }
}

/* Whole vectors unmasked, the tail masked: the mask arithmetic per vector would cost as much as the
 * widening itself. */
static void attn_widen_bf16(const uint16_t *src, int n, float *dst)
{
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
    if (i < n) {
        __mmask16 k = lanes(n - i);
        __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, src + i));
        _mm512_mask_storeu_ps(dst + i, k, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
}

#define ATTN_ISA avx512
#include "core/attention_driver.h"
