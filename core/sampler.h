/* Token choice: greedy argmax, or sampling from the temperature / top-k / top-p / min-p target
 * distribution with a seeded generator (splitmix64), so a run is reproducible from its --seed.
 * The filters apply in transformers' order: temperature, then top-k, then top-p, then min-p. */
#ifndef DSSPEC_SAMPLER_H
#define DSSPEC_SAMPLER_H

#include <stdint.h>

typedef struct {
    double temperature;  /* <= 0: greedy */
    double top_p;        /* (0, 1] */
    int top_k;           /* keep the k most probable tokens; <= 0: all */
    double min_p;        /* drop tokens below min_p times the most probable one's probability; 0: none */
    uint64_t state;
    int n;               /* vocabulary size */
    float *probs;        /* [n] scratch: the last target distribution */
    int *order;          /* [n] scratch for top-k and top-p */
} sampler;

sampler *sampler_create(int n_vocab, double temperature, double top_p, uint64_t seed);
void sampler_free(sampler *s);
/* top_k <= 0 keeps every token; min_p in [0, 1], 0 keeps every token. Defaults: both off. */
void sampler_set_top_k_min_p(sampler *s, int top_k, double min_p);

int sampler_argmax(const float *logits, int n);   /* lowest index on ties */
double sampler_uniform(sampler *s);               /* [0, 1) */

/* The target distribution after temperature, top-k, top-p and min-p, into s->probs (zeros for
 * every token a filter removed, the rest renormalized).
 * Greedy samplers get a one-hot distribution on the argmax. Returns s->probs itself: the sampler's
 * own scratch, the caller's to edit (speculative verification removes the draft from it) until the
 * next call. */
float *sampler_distribution(sampler *s, const float *logits);
/* Draw from an explicit distribution over n tokens (need not be normalized). */
int sampler_draw(sampler *s, const float *probs, int n);
/* Pick the next token from logits: argmax when greedy, else a draw from the target distribution. */
int sampler_pick(sampler *s, const float *logits);

#endif
