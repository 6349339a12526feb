/* Kernel dispatch, the portable scalar path, dtype conversions and the parallel matvec driver. */
#include <cpuid.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/kernels_internal.h"

static cpu_path current_path = CPU_PATH_SCALAR;
static int fma512_wide = -1; /* -1: not measured yet */

/* CPUID.1:ECX.F16C, read directly: clang's __builtin_cpu_supports has no "f16c" (the fuzz build). */
static int cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

int cpu_path_available(cpu_path p)
{
    __builtin_cpu_init();
    switch (p) {
    case CPU_PATH_SCALAR: return 1;
    case CPU_PATH_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    case CPU_PATH_AVX512:
        /* libgcc also checks (xgetbv) that the OS saves the zmm/opmask state. */
        return cpu_path_available(CPU_PATH_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq");
    }
    return 0;
}

cpu_path kernels_init(cpu_path max)
{
    cpu_path p = max;
    if (p > CPU_PATH_AVX512) p = CPU_PATH_AVX512;
    if (p < CPU_PATH_SCALAR) p = CPU_PATH_SCALAR;
    while (p > CPU_PATH_SCALAR && !cpu_path_available(p)) p = (cpu_path)(p - 1);
    current_path = p;
    if (p == CPU_PATH_AVX512 && fma512_wide < 0) fma512_wide = fma512_measure_wide();
    return p;
}

int kernels_fma512_wide(void) { return fma512_wide > 0; }

void kernels_set_fma512_wide(int wide)
{
    fma512_wide = wide >= 0 ? wide : cpu_path_available(CPU_PATH_AVX512) ? fma512_measure_wide() : 0;
}

cpu_path kernels_path(void) { return current_path; }

const char *cpu_path_name(cpu_path p)
{
    switch (p) {
    case CPU_PATH_SCALAR: return "scalar";
    case CPU_PATH_AVX2: return "avx2";
    case CPU_PATH_AVX512: return "avx512";
    }
    return "unknown";
}

int cpu_path_parse(const char *s, cpu_path *out)
{
    for (int p = CPU_PATH_SCALAR; p <= CPU_PATH_AVX512; p++) {
        if (strcmp(s, cpu_path_name((cpu_path)p)) == 0) {
            *out = (cpu_path)p;
            return 0;
        }
    }
    return -1;
}

void kernels_unsupported_dtype(dtype_t t, const char *where)
{
    /* The dtype's number, not dtype_name(): the kernels link without the checkpoint reader. */
    fprintf(stderr, "%s: weight dtype %d has no kernel (expected F8_E4M3, BF16 or F32)\n", where, (int)t);
    abort();
}

/* ---- conversions ---- */

float fp8_e4m3_to_float(uint8_t b)
{
    uint32_t sign = b >> 7, exp = (b >> 3) & 0xF, man = b & 7;
    float v;
    if (exp == 15 && man == 7) return sign ? -NAN : NAN;  /* "fn": no infinities, one NaN pattern */
    if (exp == 0) {
        v = (float)man * 0x1p-9f;                          /* subnormal: man/8 * 2^-6 */
    } else {
        uint32_t bits = (exp + 127 - 7) << 23 | man << 20;
        memcpy(&v, &bits, sizeof v);
    }
    return sign ? -v : v;
}

float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t float_to_bf16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((bits >> 16) | 0x40); /* quiet NaN */
    bits += 0x7FFFu + ((bits >> 16) & 1);  /* ties to even; overflow carries into inf as it should */
    return (uint16_t)(bits >> 16);
}

/* ---- scalar path ---- */

static float fp8_table[256];
static pthread_once_t fp8_table_once = PTHREAD_ONCE_INIT;

static void fp8_table_fill(void)
{
    for (int i = 0; i < 256; i++) fp8_table[i] = fp8_e4m3_to_float((uint8_t)i);
}

static const float *fp8_lut(void)
{
    pthread_once(&fp8_table_once, fp8_table_fill);
    return fp8_table;
}

/* Column block [c0, c0+n) of row r as floats, without the FP8 scale. */
static void scalar_block_to_float(const matrix *w, const float *lut, int r, int c0, int n, float *out)
{
    const void *row = kernel_weight_row(w, r);
    if (w->dtype == DTYPE_F8_E4M3) {
        const uint8_t *q = (const uint8_t *)row + c0;
        for (int k = 0; k < n; k++) out[k] = lut[q[k]];
    } else if (w->dtype == DTYPE_BF16) {
        const uint16_t *h = (const uint16_t *)row + c0;
        for (int k = 0; k < n; k++) out[k] = bf16_to_float(h[k]);
    } else {
        memcpy(out, (const float *)row + c0, (size_t)n * sizeof(float));
    }
}

static void check_dtype(const matrix *w, const char *where)
{
    if (w->dtype != DTYPE_F8_E4M3 && w->dtype != DTYPE_BF16 && w->dtype != DTYPE_F32)
        kernels_unsupported_dtype(w->dtype, where);
}

void matvec_range_scalar(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy)
{
    check_dtype(w, "matvec_range");
    const float *lut = fp8_lut();
    int nblk = kernel_scale_cols(w->cols);
    float wf[KERNEL_BLOCK];
    for (int r = r0; r < r1; r++) {
        const float *srow = w->dtype == DTYPE_F8_E4M3 ? kernel_scale_row(w, r) : NULL;
        for (int b = 0; b < nb; b++) y[(size_t)b * ldy + (r - r0)] = 0.0f;
        for (int j = 0; j < nblk; j++) {
            int c0 = j * KERNEL_BLOCK;
            int n = w->cols - c0 < KERNEL_BLOCK ? w->cols - c0 : KERNEL_BLOCK;
            scalar_block_to_float(w, lut, r, c0, n, wf);  /* one decode serves the whole batch */
            for (int b = 0; b < nb; b++) {
                const float *xb = x + (size_t)b * ldx + c0;
                float s = 0.0f;
                for (int k = 0; k < n; k++) s += wf[k] * xb[k];
                if (srow) s *= srow[j];
                y[(size_t)b * ldy + (r - r0)] += s;
            }
        }
    }
}

void matvec_t_range_scalar(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy)
{
    check_dtype(w, "matvec_t_range");
    const float *lut = fp8_lut();
    int nblk = kernel_scale_cols(w->cols);
    float wf[KERNEL_BLOCK];
    for (int b = 0; b < nb; b++) memset(y + (size_t)b * ldy, 0, (size_t)w->cols * sizeof(float));
    for (int r = r0; r < r1; r++) {
        const float *srow = w->dtype == DTYPE_F8_E4M3 ? kernel_scale_row(w, r) : NULL;
        for (int j = 0; j < nblk; j++) {
            int c0 = j * KERNEL_BLOCK;
            int n = w->cols - c0 < KERNEL_BLOCK ? w->cols - c0 : KERNEL_BLOCK;
            scalar_block_to_float(w, lut, r, c0, n, wf);
            for (int b = 0; b < nb; b++) {
                float a = x[(size_t)b * ldx + (r - r0)] * (srow ? srow[j] : 1.0f);
                float *yb = y + (size_t)b * ldy + c0;
                for (int k = 0; k < n; k++) yb[k] += wf[k] * a;
            }
        }
    }
}

/* ---- per-thread scratch ---- */

/* One buffer per thread, grown on demand and freed when the thread exits: the FP8 paths prepare
 * x there on every call, and a fresh allocation of that size (up to a few MiB for a prefill batch)
 * would be an mmap, page faults and an munmap per call. */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static __thread float *scratch_buf;
static __thread size_t scratch_floats;

static void scratch_key_make(void) { pthread_key_create(&scratch_key, free); }

/* The floats kernel_scratch is asked for by a product over a matrix `cols` wide are at most the
 * padded columns (64-aligned) times the widest batch of prepared x rows (KERNEL_STREAM_MAX for
 * streaming, 8 x F8_GEMM_COLS <= 32 for the GEMM); it grows by half again when asked for more. */
enum { SCRATCH_MAX_X_ROWS = 32, SCRATCH_MIN_FLOATS = 16384 };

static size_t scratch_floats_for(int max_cols) { return (size_t)(max_cols + 63) / 64 * 64 * SCRATCH_MAX_X_ROWS; }

size_t kernels_scratch_bytes_per_thread(int max_cols)
{
    size_t floats = scratch_floats_for(max_cols);
    size_t want = floats < SCRATCH_MIN_FLOATS ? SCRATCH_MIN_FLOATS : floats + floats / 2;
    return (want * sizeof(float) + 63) / 64 * 64;
}

/* This thread's buffer grown to hold floats (by half again past it); -1 when that memory is not
 * there, the old buffer kept. */
static int scratch_grow(size_t floats)
{
    if (floats <= scratch_floats) return 0;
    pthread_once(&scratch_once, scratch_key_make);
    size_t want = floats < SCRATCH_MIN_FLOATS ? SCRATCH_MIN_FLOATS : floats + floats / 2;
    float *p = aligned_alloc(64, (want * sizeof(float) + 63) / 64 * 64);
    if (!p) return -1;
    free(scratch_buf);
    scratch_buf = p;
    scratch_floats = want;
    pthread_setspecific(scratch_key, p);
    return 0;
}

int kernels_scratch_reserve(int max_cols)
{
    return scratch_grow(scratch_floats_for(max_cols));
}

/* A thread the engine reserved for (kernels_scratch_reserve) never grows here: the model's entry
 * points reserve for their caller and model_reserve_scratch for every pool thread, each failing
 * with an error. Only a caller that skipped that (a test, a bench) can reach the abort. */
float *kernel_scratch(size_t floats)
{
    if (floats <= scratch_floats) return scratch_buf;
    if (scratch_grow(floats)) {
        fprintf(stderr, "kernels: cannot allocate %zu KiB of per-thread scratch for the prepared x rows\n",
                floats * sizeof(float) >> 10);
        abort();
    }
    return scratch_buf;
}

/* ---- dispatch ---- */

void matvec_range(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy)
{
    if (r1 <= r0 || nb <= 0) return;
    switch (current_path) {
    case CPU_PATH_AVX512: matvec_range_avx512(w, r0, r1, x, ldx, nb, y, ldy); return;
    case CPU_PATH_AVX2: matvec_range_avx2(w, r0, r1, x, ldx, nb, y, ldy); return;
    case CPU_PATH_SCALAR: break;
    }
    matvec_range_scalar(w, r0, r1, x, ldx, nb, y, ldy);
}

void matvec_t_range(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy)
{
    if (nb <= 0) return;
    switch (current_path) {
    case CPU_PATH_AVX512: matvec_t_range_avx512(w, r0, r1, x, ldx, nb, y, ldy); return;
    case CPU_PATH_AVX2: matvec_t_range_avx2(w, r0, r1, x, ldx, nb, y, ldy); return;
    case CPU_PATH_SCALAR: break;
    }
    matvec_t_range_scalar(w, r0, r1, x, ldx, nb, y, ldy);
}

void matrix_row_to_float(const matrix *w, int r, float *out)
{
    check_dtype(w, "matrix_row_to_float");
    const float *lut = fp8_lut();
    if (w->dtype != DTYPE_F8_E4M3) {
        scalar_block_to_float(w, lut, r, 0, w->cols, out);
        return;
    }
    const uint8_t *q = kernel_weight_row(w, r);
    const float *srow = kernel_scale_row(w, r);
    for (int c = 0; c < w->cols; c++) out[c] = lut[q[c]] * srow[c / KERNEL_BLOCK];
}

/* ---- parallel driver ---- */

typedef struct {
    const matrix *w;
    const float *x;
    int nb, chunk_rows;
    float *y;
} matvec_job;

static void matvec_chunk(void *arg, int i)
{
    const matvec_job *job = arg;
    int r0 = i * job->chunk_rows;
    int r1 = r0 + job->chunk_rows < job->w->rows ? r0 + job->chunk_rows : job->w->rows;
    matvec_range(job->w, r0, r1, job->x, job->w->cols, job->nb, job->y + r0, job->w->rows);
}

/* Chunks are whole multiples of 16 rows (two-row kernels, cache lines of y) and a few per thread,
 * so that a thread slowed by the OS does not hold up the others for a whole share. */
static int matvec_chunk_rows(int rows, int threads)
{
    const int chunks_per_thread = 4;
    int want = (rows + threads * chunks_per_thread - 1) / (threads * chunks_per_thread);
    int chunk = (want + 15) / 16 * 16;
    return chunk < 16 ? 16 : chunk;
}

void matvec(thread_pool *pool, const matrix *w, const float *x, int nb, float *y)
{
    int threads = pool ? thread_pool_size(pool) : 1;
    if (threads <= 1 || w->rows <= 16) {
        matvec_range(w, 0, w->rows, x, w->cols, nb, y, w->rows);
        return;
    }
    matvec_job job = { w, x, nb, matvec_chunk_rows(w->rows, threads), y };
    int nchunks = (w->rows + job.chunk_rows - 1) / job.chunk_rows;
    thread_pool_for(pool, nchunks, matvec_chunk, &job);
}
