/* Matrix-vector kernels over FP8 E4M3 (128x128 block-scaled), BF16 and F32 weights with fp32
 * activations. Weights stay in their checkpoint dtype and are converted inside the kernels.
 *
 * Determinism contract (speculation depends on it): each output element is one dot product whose
 * reduction order depends only on the kernel path and the weight row, never on how many x rows
 * are in the batch, which thread computes it, or the requested row range. */
#ifndef DSSPEC_KERNELS_H
#define DSSPEC_KERNELS_H

#include <stdint.h>
#include "core/checkpoint.h"
#include "core/threadpool.h"

typedef enum { CPU_PATH_SCALAR = 0, CPU_PATH_AVX2 = 1, CPU_PATH_AVX512 = 2 } cpu_path;

/* Select the best path this CPU supports that is <= max. Returns the chosen path. */
cpu_path kernels_init(cpu_path max);
cpu_path kernels_path(void);
int cpu_path_available(cpu_path p);
const char *cpu_path_name(cpu_path p);          /* "scalar", "avx2", "avx512" */
int cpu_path_parse(const char *s, cpu_path *out); /* 0 ok, -1 unknown name */

typedef struct {
    dtype_t dtype;       /* DTYPE_F8_E4M3 (scale required), DTYPE_BF16 or DTYPE_F32 */
    int rows, cols;      /* W is [rows][cols], y = W x */
    const void *data;
    const float *scale;  /* F8 only: [ceil(rows/128)][ceil(cols/128)] block grid, multiplied in */
} matrix;

float fp8_e4m3_to_float(uint8_t b);  /* exact, NaN for 0x7F/0xFF */
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);     /* round to nearest even */

/* y[b*ldy + (r - r0)] = sum_c W[r][c] * x[b*ldx + c]   for r in [r0, r1), b in [0, nb). Single thread. */
void matvec_range(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy);

/* At most the bytes each thread that runs products over matrices up to max_cols wide keeps for
 * its prepared x rows (allocated by kernels_scratch_reserve or on its first product, freed when
 * it exits): the memory plan counts it. */
size_t kernels_scratch_bytes_per_thread(int max_cols);

/* Allocates that scratch for the calling thread now (0), or says it cannot (-1, nothing changed):
 * a thread that reserved never allocates inside a product. */
int kernels_scratch_reserve(int max_cols);

/* Transposed product over a row slice: y[b*ldy + c] = sum_{r in [r0,r1)} W[r][c] * x[b*ldx + (r - r0)]
 * for every column c (overwrites y). Used by absorbed MLA to fold kv_b into the query. Single thread. */
void matvec_t_range(const matrix *w, int r0, int r1, const float *x, int ldx, int nb, float *y, int ldy);

/* y[b*rows + r] = W x_b for all rows, split across the pool by row blocks. */
void matvec(thread_pool *pool, const matrix *w, const float *x, int nb, float *y);

/* Dequantize one row of W into out[cols] (fp32). */
void matrix_row_to_float(const matrix *w, int r, float *out);

#endif
