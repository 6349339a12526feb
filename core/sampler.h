/* Token choice: greedy argmax, or sampling from the temperature / top-p target distribution with a
 * seeded generator (splitmix64), so a run is reproducible from its --seed. */
#ifndef DSSPEC_SAMPLER_H
#define DSSPEC_SAMPLER_H

#include <stdint.h>

typedef struct {
    double temperature;  /* <= 0: greedy */
    double top_p;        /* (0, 1] */
    uint64_t state;
    int n;               /* vocabulary size */
    float *probs;        /* [n] scratch: the last target distribution */
    int *order;          /* [n] scratch for top-p */
} sampler;

sampler *sampler_create(int n_vocab, double temperature, double top_p, uint64_t seed);
void sampler_free(sampler *s);

int sampler_argmax(const float *logits, int n);   /* lowest index on ties */
double sampler_uniform(sampler *s);               /* [0, 1) */

/* The target distribution after temperature and top-p, into s->probs (zeros outside the nucleus).
 * Greedy samplers get a one-hot distribution on the argmax. Returns s->probs itself: the sampler's
 * own scratch, the caller's to edit (speculative verification removes the draft from it) until the
 * next call. */
float *sampler_distribution(sampler *s, const float *logits);
/* Draw from an explicit distribution over n tokens (need not be normalized). */
int sampler_draw(sampler *s, const float *probs, int n);
/* Pick the next token from logits: argmax when greedy, else a draw from the target distribution. */
int sampler_pick(sampler *s, const float *logits);

#endif
