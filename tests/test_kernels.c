/* Kernels against references computed here from the format definitions, in double precision,
 * on every instruction-set path this CPU has. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test_check.h"
#include "core/kernels.h"
#include "core/kernels_internal.h"


static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rng_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static int rng_int(int lo, int hi) { return lo + (int)(rng_u32() % (uint32_t)(hi - lo + 1)); } /* [lo, hi] */
static float rng_float(void) { return (float)((rng_u32() & 0xFFFFFF) / 8388608.0 - 1.0); }    /* [-1, 1) */

/* FP8 E4M3 "fn" from its definition: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits;
 * exponent 0 is subnormal; S.1111.111 is NaN; there are no infinities. */
static double fp8_reference(uint8_t b)
{
    int sign = b >> 7, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return NAN;
    double v = e == 0 ? ldexp(m / 8.0, -6) : ldexp(1.0 + m / 8.0, e - 7);
    return sign ? -v : v;
}

static void test_fp8_decode(void)
{
    for (int b = 0; b < 256; b++) {
        float got = fp8_e4m3_to_float((uint8_t)b);
        double want = fp8_reference((uint8_t)b);
        if (isnan(want)) {
            CHECK(isnan(got), "fp8 0x%02X should be NaN, got %g", b, got);
        } else {
            CHECK((double)got == want && !signbit(got) == !signbit(want), "fp8 0x%02X: got %a want %a", b, got, want);
        }
    }
    CHECK(fp8_e4m3_to_float(0x7E) == 448.0f, "0x7E is the max, 448");
    CHECK(fp8_e4m3_to_float(0xFE) == -448.0f, "0xFE is -448");
    CHECK(fp8_e4m3_to_float(0x01) == 0x1p-9f, "0x01 is the smallest subnormal 2^-9");
    CHECK(fp8_e4m3_to_float(0x08) == 0x1p-6f, "0x08 is the smallest normal 2^-6");
    CHECK(fp8_e4m3_to_float(0x38) == 1.0f, "0x38 is 1.0");
    CHECK(fp8_e4m3_to_float(0x00) == 0.0f && !signbit(fp8_e4m3_to_float(0x00)), "0x00 is +0");
    CHECK(fp8_e4m3_to_float(0x80) == 0.0f && signbit(fp8_e4m3_to_float(0x80)), "0x80 is -0");
    CHECK(isnan(fp8_e4m3_to_float(0x7F)) && isnan(fp8_e4m3_to_float(0xFF)), "0x7F/0xFF are NaN");
}

static float float_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_bf16(void)
{
    CHECK(bf16_to_float(0x3F80) == 1.0f, "bf16 0x3F80 is 1");
    CHECK(bf16_to_float(0xC020) == -2.5f, "bf16 0xC020 is -2.5");
    CHECK(float_to_bf16(1.0f) == 0x3F80, "1.0");
    CHECK(float_to_bf16(-2.5f) == 0xC020, "-2.5");
    /* 1 + 2^-8 lies halfway between 0x3F80 and 0x3F81: ties go to the even one. */
    CHECK(float_to_bf16(1.0f + 0x1p-8f) == 0x3F80, "tie rounds to even (down), got %04X", float_to_bf16(1.0f + 0x1p-8f));
    /* 1 + 3*2^-8 lies halfway between 0x3F81 and 0x3F82. */
    CHECK(float_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3F82, "tie rounds to even (up)");
    CHECK(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81, "above the tie rounds up");
    CHECK(float_to_bf16(1.0f + 0x1p-8f - 0x1p-20f) == 0x3F80, "below the tie rounds down");
    CHECK(float_to_bf16(float_of_bits(0x7F7FFFFF)) == 0x7F80, "FLT_MAX rounds to +inf");
    CHECK(float_to_bf16(INFINITY) == 0x7F80 && float_to_bf16(-INFINITY) == 0xFF80, "inf");
    uint16_t n = float_to_bf16(NAN);
    CHECK((n & 0x7F80) == 0x7F80 && (n & 0x7F) != 0, "NaN stays NaN (got %04X)", n);
    CHECK(float_to_bf16(float_of_bits(0x7F800001)) != 0x7F80, "a NaN with low payload must not become inf");
    for (uint32_t h = 0; h < 65536; h++) {
        float f = bf16_to_float((uint16_t)h);
        CHECK(float_of_bits(h << 16) == f || isnan(f), "bf16 %04X decode", h);
        if (!isnan(f)) CHECK(float_to_bf16(f) == h, "bf16 %04X round trip", h);
    }
}

/* ---- random matrices ---- */

typedef struct {
    matrix m;
    void *data;
    float *scale;
} test_matrix;

static test_matrix make_matrix(dtype_t dt, int rows, int cols)
{
    test_matrix t = { { dt, rows, cols, NULL, NULL }, NULL, NULL };
    size_t n = (size_t)rows * cols;
    if (dt == DTYPE_F8_E4M3) {
        uint8_t *q = malloc(n ? n : 1);
        for (size_t i = 0; i < n; i++) {
            uint8_t b;
            do b = (uint8_t)rng_u32(); while ((b & 0x7F) == 0x7F);  /* real checkpoints have no NaN */
            q[i] = b;
        }
        int gr = (rows + 127) / 128, gc = (cols + 127) / 128;
        t.scale = malloc(sizeof(float) * (size_t)gr * gc);
        for (int i = 0; i < gr * gc; i++) t.scale[i] = ldexpf(1.0f + 0.5f * rng_float(), -rng_int(4, 12));
        t.data = q;
    } else if (dt == DTYPE_BF16) {
        uint16_t *h = malloc(sizeof(uint16_t) * (n ? n : 1));
        for (size_t i = 0; i < n; i++) h[i] = float_to_bf16(rng_float());
        t.data = h;
    } else {
        float *f = malloc(sizeof(float) * (n ? n : 1));
        for (size_t i = 0; i < n; i++) f[i] = rng_float();
        t.data = f;
    }
    t.m.data = t.data;
    t.m.scale = t.scale;
    return t;
}

static void free_matrix(test_matrix *t)
{
    free(t->data);
    free(t->scale);
}

/* W[r][c] by the format's formula, in double. */
static double ref_weight(const test_matrix *t, int r, int c)
{
    size_t i = (size_t)r * t->m.cols + c;
    if (t->m.dtype == DTYPE_F8_E4M3) {
        int gc = (t->m.cols + 127) / 128;
        return fp8_reference(((const uint8_t *)t->data)[i]) * (double)t->scale[(r / 128) * gc + c / 128];
    }
    if (t->m.dtype == DTYPE_BF16) {
        uint32_t u = (uint32_t)((const uint16_t *)t->data)[i] << 16;
        return (double)float_of_bits(u);
    }
    return (double)((const float *)t->data)[i];
}

static float *random_vector(size_t n)
{
    float *v = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) v[i] = rng_float();
    return v;
}

#define SENTINEL 12345.0f

static void check_matvec_range(const test_matrix *t, int r0, int r1, int nb, const char *tag)
{
    int cols = t->m.cols, nr = r1 - r0;
    int ldx = cols + rng_int(0, 5), ldy = nr + rng_int(0, 5);
    float *x = random_vector((size_t)ldx * nb);
    float *y = malloc(sizeof(float) * (size_t)ldy * nb);
    for (int i = 0; i < ldy * nb; i++) y[i] = SENTINEL;
    matvec_range(&t->m, r0, r1, x, ldx, nb, y, ldy);
    for (int b = 0; b < nb; b++) {
        for (int r = r0; r < r1; r++) {
            double want = 0, mag = 0;
            for (int c = 0; c < cols; c++) {
                double p = ref_weight(t, r, c) * x[(size_t)b * ldx + c];
                want += p;
                mag += fabs(p);
            }
            float got = y[(size_t)b * ldy + r - r0];
            CHECK(fabs(got - want) <= 2e-5 * mag + 1e-30, "%s matvec_range %s %dx%d rows [%d,%d) nb %d: b %d r %d got %.9g want %.9g (sum|wx| %g)",
                  cpu_path_name(kernels_path()), tag, t->m.rows, cols, r0, r1, nb, b, r, got, want, mag);
        }
        for (int i = nr; i < ldy; i++) CHECK(y[(size_t)b * ldy + i] == SENTINEL, "matvec_range wrote past its rows");
    }
    free(x);
    free(y);
}

static void check_matvec_t_range(const test_matrix *t, int r0, int r1, int nb, const char *tag)
{
    int cols = t->m.cols, nr = r1 - r0;
    int ldx = nr + rng_int(0, 5), ldy = cols + rng_int(0, 5);
    float *x = random_vector((size_t)ldx * nb);
    float *y = malloc(sizeof(float) * (size_t)ldy * nb);
    for (int i = 0; i < ldy * nb; i++) y[i] = SENTINEL;
    matvec_t_range(&t->m, r0, r1, x, ldx, nb, y, ldy);
    for (int b = 0; b < nb; b++) {
        for (int c = 0; c < cols; c++) {
            double want = 0, mag = 0;
            for (int r = r0; r < r1; r++) {
                double p = ref_weight(t, r, c) * x[(size_t)b * ldx + r - r0];
                want += p;
                mag += fabs(p);
            }
            float got = y[(size_t)b * ldy + c];
            CHECK(fabs(got - want) <= 2e-5 * mag + 1e-30, "%s matvec_t_range %s %dx%d rows [%d,%d) nb %d: b %d c %d got %.9g want %.9g",
                  cpu_path_name(kernels_path()), tag, t->m.rows, cols, r0, r1, nb, b, c, got, want);
        }
        for (int i = cols; i < ldy; i++) CHECK(y[(size_t)b * ldy + i] == SENTINEL, "matvec_t_range wrote past cols");
    }
    free(x);
    free(y);
}

static void check_row_to_float(const test_matrix *t)
{
    float *out = malloc(sizeof(float) * (size_t)t->m.cols);
    for (int k = 0; k < 4; k++) {
        int r = rng_int(0, t->m.rows - 1);
        matrix_row_to_float(&t->m, r, out);
        /* fp8 (4 significant bits) times a float scale is exact in double: one rounding to float. */
        for (int c = 0; c < t->m.cols; c++)
            CHECK(out[c] == (float)ref_weight(t, r, c), "row_to_float r %d c %d: %g vs %g", r, c, out[c], (float)ref_weight(t, r, c));
    }
    free(out);
}

static const int shapes[][2] = {
    { 1, 1 }, { 3, 7 }, { 16, 128 }, { 17, 129 }, { 40, 24 }, { 130, 200 }, { 257, 385 },
    { 64, 1000 }, { 200, 16 }, { 33, 31 }, { 129, 256 }, { 5, 300 },
};
static const dtype_t dtypes[] = { DTYPE_F8_E4M3, DTYPE_BF16, DTYPE_F32 };
static const char *const dtype_tags[] = { "F8", "BF16", "F32" };

static void test_matvec_accuracy(void)
{
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int d = 0; d < 3; d++) {
            test_matrix t = make_matrix(dtypes[d], shapes[s][0], shapes[s][1]);
            int rows = t.m.rows;
            for (int nb = 1; nb <= 6; nb++) {
                int r0 = rng_int(0, rows - 1), r1 = rng_int(r0 + 1, rows);
                check_matvec_range(&t, r0, r1, nb, dtype_tags[d]);
                if (nb == 6) check_matvec_range(&t, r0, r1, 13, dtype_tags[d]);  /* the GEMM path */
                check_matvec_t_range(&t, r0, r1, nb, dtype_tags[d]);
            }
            check_matvec_range(&t, 0, rows, 2, dtype_tags[d]);
            check_matvec_t_range(&t, 0, rows, 1, dtype_tags[d]);
            check_row_to_float(&t);
            free_matrix(&t);
        }
    }
    /* R1's padded grid (kv_a_proj_with_mqa, 576 = 4.5 blocks of rows), cut down in columns. */
    test_matrix t = make_matrix(DTYPE_F8_E4M3, 576, 7 * 128 + 64);
    check_matvec_range(&t, 500, 576, 2, "F8 padded grid");
    check_matvec_t_range(&t, 440, 600 - 24, 2, "F8 padded grid");
    check_row_to_float(&t);
    free_matrix(&t);
}

/* Every non-NaN FP8 byte through the matvec kernels of the current path: row i holds byte i alone
 * in column i % 19 of a 19-column row (a partial SIMD chunk), block scale 1 (rows < 128) or 2^-3,
 * x all ones, so y[i] must be the exact decoded value times the scale. */
static void test_fp8_bytes_in_kernels(void)
{
    int rows = 256, cols = 19;
    uint8_t *q = calloc((size_t)rows * cols, 1);
    float scale[2] = { 1.0f, 0.125f };
    float x[19], y[256], row[19];
    for (int c = 0; c < cols; c++) x[c] = 1.0f;
    for (int b = 0; b < rows; b++) q[b * cols + b % cols] = (uint8_t)b;
    q[0x7F * cols + 0x7F % cols] = 0;  /* NaN bytes: the SIMD paths decode them as +-480 (documented) */
    q[0xFF * cols + 0xFF % cols] = 0;
    matrix m = { DTYPE_F8_E4M3, rows, cols, q, scale };
    matvec_range(&m, 0, rows, x, cols, 1, y, rows);
    for (int b = 0; b < rows; b++) {
        double want = (b & 0x7F) == 0x7F ? 0.0 : fp8_reference((uint8_t)b) * scale[b / 128];
        CHECK((double)y[b] == want, "%s: fp8 byte 0x%02X through matvec gives %a, want %a", cpu_path_name(kernels_path()), b, y[b], want);
        matrix_row_to_float(&m, b, row);
        CHECK((double)row[b % cols] == want, "fp8 byte 0x%02X through matrix_row_to_float", b);
    }
    /* The transposed product with a one-hot x picks single rows too. */
    float xt[256] = { 0 }, yt[19];
    for (int b = 0; b < rows; b += 37) {
        xt[b] = 1.0f;
        matvec_t_range(&m, 0, rows, xt, rows, 1, yt, cols);
        double want = (b & 0x7F) == 0x7F ? 0.0 : fp8_reference((uint8_t)b) * scale[b / 128];
        CHECK((double)yt[b % cols] == want, "fp8 byte 0x%02X through matvec_t_range", b);
        xt[b] = 0.0f;
    }
    free(q);
    /* And every byte through the transposed product's whole tiles (64 columns: the fp32-bit-pattern
     * decode, whose x factors are rescaled by a power of two per tile). */
    int wide = 64;
    uint8_t *qw = calloc((size_t)rows * wide, 1);
    float yw[64];
    for (int b = 0; b < rows; b++) qw[b * wide + b % wide] = (uint8_t)b;
    qw[0x7F * wide + 0x7F % wide] = 0;
    qw[0xFF * wide + 0xFF % wide] = 0;
    matrix mw = { DTYPE_F8_E4M3, rows, wide, qw, scale };
    for (int b = 0; b < rows; b++) {
        xt[b] = 1.0f;
        matvec_t_range(&mw, 0, rows, xt, rows, 1, yw, wide);
        double want = (b & 0x7F) == 0x7F ? 0.0 : fp8_reference((uint8_t)b) * scale[b / 128];
        CHECK((double)yw[b % wide] == want, "%s: fp8 byte 0x%02X through matvec_t_range's whole tiles gives %a, want %a",
              cpu_path_name(kernels_path()), b, yw[b % wide], want);
        xt[b] = 0.0f;
    }
    free(qw);
}

/* Every finite BF16 pattern through the kernels: a one-column matrix times 1. */
static void test_bf16_patterns_in_kernels(void)
{
    int rows = 65536;
    uint16_t *h = malloc(sizeof(uint16_t) * rows);
    float *y = malloc(sizeof(float) * rows), one = 1.0f;
    for (int i = 0; i < rows; i++) h[i] = ((i >> 7) & 0xFF) == 0xFF ? 0 : (uint16_t)i;  /* inf/NaN out */
    matrix m = { DTYPE_BF16, rows, 1, h, NULL };
    matvec_range(&m, 0, rows, &one, 1, 1, y, rows);
    for (int i = 0; i < rows; i++)
        CHECK(y[i] == float_of_bits((uint32_t)h[i] << 16), "%s: bf16 %04X through matvec", cpu_path_name(kernels_path()), h[i]);
    free(h);
    free(y);
}

/* Batch, row-range and thread-count invariance: bit-identical outputs. */
static void test_invariance(void)
{
    thread_pool *pools[3] = { thread_pool_create(1), thread_pool_create(2), thread_pool_create(3) };
    for (int d = 0; d < 3; d++) {
        for (int s = 0; s < 3; s++) {
            int rows = (int[]){ 300, 77, 1000 }[s], cols = (int[]){ 777, 64, 129 }[s];
            test_matrix t = make_matrix(dtypes[d], rows, cols);
            int nb = 6;
            float *x = random_vector((size_t)nb * cols);
            float *full = malloc(sizeof(float) * (size_t)nb * rows);
            float *one = malloc(sizeof(float) * (size_t)rows);
            float *part = malloc(sizeof(float) * (size_t)rows);
            matvec_range(&t.m, 0, rows, x, cols, nb, full, rows);
            for (int b = 0; b < nb; b++) {
                matvec_range(&t.m, 0, rows, x + (size_t)b * cols, cols, 1, one, rows);
                CHECK(memcmp(one, full + (size_t)b * rows, sizeof(float) * rows) == 0,
                      "%s %s: row %d of a batch of %d differs from running it alone", cpu_path_name(kernels_path()), dtype_tags[d], b, nb);
            }
            for (int k = 0; k < 5; k++) {
                int r0 = rng_int(0, rows - 1), r1 = rng_int(r0 + 1, rows), b = rng_int(0, nb - 1);
                matvec_range(&t.m, r0, r1, x + (size_t)b * cols, cols, 1, part, rows);
                CHECK(memcmp(part, full + (size_t)b * rows + r0, sizeof(float) * (r1 - r0)) == 0,
                      "%s %s: rows [%d,%d) differ from the full range", cpu_path_name(kernels_path()), dtype_tags[d], r0, r1);
            }
            for (int bn = 1; bn <= nb; bn++) {
                for (int p = 0; p < 3; p++) {
                    float *y = malloc(sizeof(float) * (size_t)bn * rows);
                    matvec(pools[p], &t.m, x, bn, y);
                    for (int b = 0; b < bn; b++)
                        CHECK(memcmp(y + (size_t)b * rows, full + (size_t)b * rows, sizeof(float) * rows) == 0,
                              "%s %s: matvec with %d threads, nb %d differs", cpu_path_name(kernels_path()), dtype_tags[d], p + 1, bn);
                    free(y);
                }
            }
            /* The transposed product: batch invariance too. */
            float *yt = malloc(sizeof(float) * (size_t)nb * cols), *yt1 = malloc(sizeof(float) * (size_t)cols);
            int r0 = rng_int(0, rows / 2), r1 = rng_int(r0 + 1, rows);
            float *xt = random_vector((size_t)nb * (r1 - r0));
            matvec_t_range(&t.m, r0, r1, xt, r1 - r0, nb, yt, cols);
            for (int b = 0; b < nb; b++) {
                matvec_t_range(&t.m, r0, r1, xt + (size_t)b * (r1 - r0), r1 - r0, 1, yt1, cols);
                CHECK(memcmp(yt1, yt + (size_t)b * cols, sizeof(float) * cols) == 0, "matvec_t_range batch row %d differs", b);
            }
            free(xt);
            free(yt);
            free(yt1);
            free(x);
            free(full);
            free(one);
            free(part);
            free_matrix(&t);
        }
    }
    for (int p = 0; p < 3; p++) thread_pool_free(pools[p]);
}

/* The GEMM (prefill) and streaming (decode, verify) paths against the one-row path, bit for bit:
 * every batch size 1..70 over odd shapes (partial chunks, partial 128-column blocks, panels cut
 * mid-matrix, row slices cut mid-tile) and odd row ranges, through matvec_range and the threaded
 * matvec, with x rows that are not contiguous (ldx > cols) and y rows with their own stride. */
static void test_batch_invariance_gemm(void)
{
    static const int gshapes[][2] = { { 37, 300 }, { 70, 1000 }, { 130, 129 }, { 16, 7 }, { 5, 256 }, { 21, 520 } };
    thread_pool *pool = thread_pool_create(3);
    for (int d = 0; d < 3; d++) {
        for (size_t s = 0; s < sizeof gshapes / sizeof gshapes[0]; s++) {
            int rows = gshapes[s][0], cols = gshapes[s][1];
            test_matrix t = make_matrix(dtypes[d], rows, cols);
            int maxb = 70, ldx = cols + 3;
            float *x = random_vector((size_t)maxb * ldx);
            /* a few exact zeros and large values: the sign of zero and padding lanes must agree too */
            for (int i = 0; i < maxb * ldx; i += 97) x[i] = (i / 97) % 2 ? 0.0f : -0.0f;
            float *one = malloc(sizeof(float) * (size_t)maxb * rows);
            for (int b = 0; b < maxb; b++) matvec_range(&t.m, 0, rows, x + (size_t)b * ldx, ldx, 1, one + (size_t)b * rows, rows);
            float *y = malloc(sizeof(float) * (size_t)maxb * (rows + 5));
            for (int nb = 1; nb <= maxb; nb++) {
                int r0 = nb % 3 == 0 ? 0 : rng_int(0, rows - 1), r1 = nb % 3 == 0 ? rows : rng_int(r0 + 1, rows);
                int ldy = r1 - r0 + (nb % 5);
                matvec_range(&t.m, r0, r1, x, ldx, nb, y, ldy);
                int bad = 0;
                for (int b = 0; b < nb && !bad; b++)
                    bad = memcmp(y + (size_t)b * ldy, one + (size_t)b * rows + r0, sizeof(float) * (size_t)(r1 - r0)) != 0;
                CHECK(!bad, "%s %s %dx%d: matvec_range rows [%d,%d) nb %d differs from nb 1", cpu_path_name(kernels_path()),
                      dtype_tags[d], rows, cols, r0, r1, nb);
                if (nb % 7 == 1 || nb >= 64) {
                    /* matvec takes contiguous x rows */
                    float *xc = malloc(sizeof(float) * (size_t)nb * cols);
                    for (int b = 0; b < nb; b++) memcpy(xc + (size_t)b * cols, x + (size_t)b * ldx, sizeof(float) * cols);
                    matvec(pool, &t.m, xc, nb, y);
                    CHECK(memcmp(y, one, sizeof(float) * (size_t)nb * rows) == 0, "%s %s %dx%d: threaded matvec nb %d differs from nb 1",
                          cpu_path_name(kernels_path()), dtype_tags[d], rows, cols, nb);
                    free(xc);
                }
            }
            free(x);
            free(one);
            free(y);
            free_matrix(&t);
        }
    }
    /* an R1-sized panel walk: 7168 columns (28 panels), 40 rows (slices of 16 cut), 65 x rows */
    test_matrix t = make_matrix(DTYPE_F8_E4M3, 40, 7168);
    int nb = 65;
    float *x = random_vector((size_t)nb * 7168), *y = malloc(sizeof(float) * (size_t)nb * 40), *one = malloc(sizeof(float) * 40);
    matvec(pool, &t.m, x, nb, y);
    for (int b = 0; b < nb; b++) {
        matvec_range(&t.m, 0, 40, x + (size_t)b * 7168, 7168, 1, one, 40);
        CHECK(memcmp(one, y + (size_t)b * 40, sizeof(float) * 40) == 0, "%s F8 40x7168 nb 65: row %d differs from nb 1",
              cpu_path_name(kernels_path()), b);
    }
    check_matvec_range(&t, 3, 37, 9, "F8 40x7168 gemm");
    free(x);
    free(y);
    free(one);
    free_matrix(&t);
    thread_pool_free(pool);
}

/* The verify batch (2 x rows) on rows of >= 4 KiB runs 8-row tiles where zmm FMAs are wide and
 * 4-row ones otherwise: both against the float64 reference and bit for bit against one x row at a
 * time, whichever this CPU would pick (rows cut mid-tile, a partial last group and block). */
static void test_long_row_verify_tiles(void)
{
    static const int lshapes[][2] = { { 37, 4100 }, { 21, 7168 }, { 9, 16384 } };
    for (int wide = 0; wide <= 1; wide++) {
        kernels_set_fma512_wide(wide);
        for (size_t s = 0; s < sizeof lshapes / sizeof lshapes[0]; s++) {
            test_matrix t = make_matrix(DTYPE_F8_E4M3, lshapes[s][0], lshapes[s][1]);
            int rows = t.m.rows, cols = t.m.cols;
            check_matvec_range(&t, 0, rows, 2, wide ? "F8 long rows, 8-row tiles" : "F8 long rows, 4-row tiles");
            float *x = random_vector((size_t)2 * cols), *y = malloc(sizeof(float) * 2 * (size_t)rows),
                  *one = malloc(sizeof(float) * (size_t)rows);
            int r0 = 3, r1 = rows - 1;
            matvec_range(&t.m, r0, r1, x, cols, 2, y, rows);
            for (int b = 0; b < 2; b++) {
                matvec_range(&t.m, r0, r1, x + (size_t)b * cols, cols, 1, one, rows);
                CHECK(memcmp(one, y + (size_t)b * rows, sizeof(float) * (size_t)(r1 - r0)) == 0,
                      "%s F8 %dx%d nb 2 (%s tiles): row %d differs from nb 1", cpu_path_name(kernels_path()), rows, cols,
                      wide ? "8-row" : "4-row", b);
            }
            free(x);
            free(y);
            free(one);
            free_matrix(&t);
        }
    }
    kernels_set_fma512_wide(-1); /* measured again, as kernels_init would */
}

static void test_path_names(void)
{
    cpu_path p;
    for (int i = CPU_PATH_SCALAR; i <= CPU_PATH_AVX512; i++)
        CHECK(cpu_path_parse(cpu_path_name((cpu_path)i), &p) == 0 && p == (cpu_path)i, "path name round trip %d", i);
    CHECK(cpu_path_parse("sse9", &p) == -1, "unknown path name must be refused");
    CHECK(kernels_init(CPU_PATH_SCALAR) == CPU_PATH_SCALAR, "scalar is always available");
}

int main(void)
{
    test_fp8_decode();
    test_bf16();
    test_path_names();
    int tested = 0;
    for (int p = CPU_PATH_SCALAR; p <= CPU_PATH_AVX512; p++) {
        if (!cpu_path_available((cpu_path)p)) {
            printf("path %s: not available on this CPU, not tested here\n", cpu_path_name((cpu_path)p));
            continue;
        }
        CHECK(kernels_init((cpu_path)p) == (cpu_path)p, "kernels_init(%s) chose another path", cpu_path_name((cpu_path)p));
        int before = test_failures;
        test_fp8_bytes_in_kernels();
        test_bf16_patterns_in_kernels();
        test_matvec_accuracy();
        test_invariance();
        test_batch_invariance_gemm();
        test_long_row_verify_tiles();
        printf("path %s: %s\n", cpu_path_name((cpu_path)p), test_failures == before ? "ok" : "FAILED");
        tested++;
    }
    CHECK(tested >= 1, "no path tested");
    if (cpu_path_available(CPU_PATH_AVX512))
        printf("this CPU's zmm FMAs are %s (verify tiles on long rows: %d rows)\n",
               kernels_fma512_wide() ? "wide" : "not wide", kernels_fma512_wide() ? 8 : 4);
    if (test_failures) {
        fprintf(stderr, "%d failure(s)\n", test_failures);
        return 1;
    }
    printf("all kernel tests passed\n");
    return 0;
}
