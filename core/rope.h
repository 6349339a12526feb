/* YaRN rotary embedding as DeepSeek-V3 applies it: rope dims are stored as interleaved pairs
 * (2i, 2i+1), each rotated by pos * inv_freq[i]; cos/sin are scaled by attention_factor. */
#ifndef DSSPEC_ROPE_H
#define DSSPEC_ROPE_H

#include <stddef.h>
#include "core/checkpoint.h"

typedef struct {
    int dim;              /* qk_rope_head_dim */
    double inv_freq[MODEL_MAX_ROPE_DIM / 2]; /* dim/2 entries */
    double attention_factor;
} rope_table;

/* c as config_load checked it: qk_rope_head_dim even and at most MODEL_MAX_ROPE_DIM. */
void rope_init(rope_table *r, const model_config *c);
/* Rotate vec[0..dim) in place for position pos. */
void rope_apply(const rope_table *r, float *vec, int pos);
/* The same for n vectors stride floats apart (every head of a query row). */
void rope_apply_heads(const rope_table *r, float *vec, size_t stride, int n, int pos);
/* mscale(scale, m) = 0.1 * m * ln(scale) + 1 for scale > 1, else 1 (DeepSeek's yarn_get_mscale). */
double yarn_mscale(double scale, double m);
/* The softmax scale of MLA: (nope + rope)^-0.5 * mscale(factor, mscale_all_dim)^2 under YaRN. */
double mla_softmax_scale(const model_config *c);

#endif
