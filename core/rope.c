#include <math.h>
#include "core/rope.h"

double yarn_mscale(double scale, double m)
{
    return scale <= 1.0 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

double mla_softmax_scale(const model_config *c)
{
    double s = 1.0 / sqrt((double)(c->qk_nope_head_dim + c->qk_rope_head_dim));
    if (c->yarn.enabled && c->yarn.mscale_all_dim != 0.0) {
        double m = yarn_mscale(c->yarn.factor, c->yarn.mscale_all_dim);
        s *= m * m;
    }
    return s;
}

/* The dimension index whose wavelength makes n_rot full turns over the original context. */
static double yarn_correction_dim(double n_rot, int dim, double base, int orig_ctx)
{
    return dim * log(orig_ctx / (n_rot * 2.0 * M_PI)) / (2.0 * log(base));
}

void rope_init(rope_table *r, const model_config *c)
{
    int dim = c->qk_rope_head_dim;
    r->dim = dim;
    r->attention_factor = 1.0;
    double base = c->rope_theta;
    for (int i = 0; i < dim / 2; i++) r->inv_freq[i] = 1.0 / pow(base, (2.0 * i) / dim);
    if (!c->yarn.enabled) return;

    const yarn_config *y = &c->yarn;
    /* High-frequency dims (index below `low`) keep their frequency, low-frequency dims (above
     * `high`) are divided by factor, with a linear ramp between: floor/ceil as DeepSeek and HF do. */
    double low = floor(yarn_correction_dim(y->beta_fast, dim, base, y->original_max_position_embeddings));
    double high = ceil(yarn_correction_dim(y->beta_slow, dim, base, y->original_max_position_embeddings));
    if (low < 0) low = 0;
    if (high > dim - 1) high = dim - 1;
    if (low == high) high += 0.001;
    for (int i = 0; i < dim / 2; i++) {
        double ramp = (i - low) / (high - low);
        if (ramp < 0) ramp = 0;
        if (ramp > 1) ramp = 1;
        double extrapolation_weight = 1.0 - ramp;
        double f = r->inv_freq[i];
        r->inv_freq[i] = (f / y->factor) * ramp + f * extrapolation_weight;
    }
    r->attention_factor = yarn_mscale(y->factor, y->mscale) / yarn_mscale(y->factor, y->mscale_all_dim);
}

void rope_apply_heads(const rope_table *r, float *vec, size_t stride, int n, int pos)
{
    /* the angles once for all n vectors (R1's 128 heads would take 4,096 sin/cos a row) */
    double cs[MODEL_MAX_ROPE_DIM / 2], sn[MODEL_MAX_ROPE_DIM / 2];
    for (int i = 0; i < r->dim / 2; i++) {
        double angle = (double)pos * r->inv_freq[i];
        cs[i] = cos(angle) * r->attention_factor;
        sn[i] = sin(angle) * r->attention_factor;
    }
    for (int h = 0; h < n; h++) {
        float *v = vec + (size_t)h * stride;
        for (int i = 0; i < r->dim / 2; i++) {
            double a = v[2 * i], b = v[2 * i + 1];
            v[2 * i] = (float)(a * cs[i] - b * sn[i]);
            v[2 * i + 1] = (float)(a * sn[i] + b * cs[i]);
        }
    }
}

void rope_apply(const rope_table *r, float *vec, int pos) { rope_apply_heads(r, vec, 0, 1, pos); }
