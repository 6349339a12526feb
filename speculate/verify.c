#include "speculate/speculate.h"

int verify_draft(sampler *s, const float *logits, int draft, int *token)
{
    if (s->temperature <= 0) {
        *token = sampler_argmax(logits, s->n);
        return *token == draft;
    }
    float *p = sampler_distribution(s, logits);
    if (sampler_uniform(s) < p[draft]) {
        *token = draft;
        return 1;
    }
    /* Rejected: the residual distribution max(p - q, 0) for a point-mass draft q is p without the
     * draft, renormalized (sampler_draw normalizes). */
    p[draft] = 0;
    *token = sampler_draw(s, p, s->n);
    return 0;
}
