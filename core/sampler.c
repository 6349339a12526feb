#include <math.h>
#include <stdlib.h>
#include "core/sampler.h"

sampler *sampler_create(int n_vocab, double temperature, double top_p, uint64_t seed)
{
    sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->temperature = temperature;
    s->top_p = top_p > 0 && top_p <= 1 ? top_p : 1.0;
    s->state = seed;
    s->n = n_vocab;
    s->probs = malloc((size_t)n_vocab * sizeof *s->probs);
    s->order = malloc((size_t)n_vocab * sizeof *s->order);
    if (!s->probs || !s->order) { sampler_free(s); return NULL; }
    return s;
}

void sampler_set_top_k_min_p(sampler *s, int top_k, double min_p)
{
    s->top_k = top_k > 0 ? top_k : 0;
    s->min_p = min_p > 0 && min_p <= 1 ? min_p : 0;
}

void sampler_free(sampler *s)
{
    if (!s) return;
    free(s->probs);
    free(s->order);
    free(s);
}

int sampler_argmax(const float *logits, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++) if (logits[i] > logits[best]) best = i;
    return best;
}

double sampler_uniform(sampler *s)
{
    uint64_t z = (s->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (z >> 11) * (1.0 / 9007199254740992.0);
}

/* Descending probability, then ascending id: a total order, so the nucleus does not depend on the
 * sort algorithm. The probabilities come as qsort_r's argument (no shared static). */
static int by_prob_desc(const void *a, const void *b, void *probs)
{
    const float *p = probs;
    int i = *(const int *)a, j = *(const int *)b;
    if (p[i] != p[j]) return p[i] > p[j] ? -1 : 1;
    return i - j;
}

/* How many of the most probable tokens (s->order, sorted) survive top-k, then top-p over what
 * top-k left (its mass renormalized, as transformers' warpers see it), then min-p. */
static int kept_count(sampler *s)
{
    const float *p = s->probs;
    int n = s->n;
    for (int i = 0; i < n; i++) s->order[i] = i;
    qsort_r(s->order, n, sizeof *s->order, by_prob_desc, s->probs);
    int keep = s->top_k > 0 && s->top_k < n ? s->top_k : n;
    if (s->top_p < 1.0) {
        /* The most probable tokens until their mass reaches top_p (the one crossing it kept). */
        double mass = keep < n ? 0 : 1.0;
        for (int i = 0; keep < n && i < keep; i++) mass += p[s->order[i]];
        double cum = 0;
        int k = 0;
        while (k < keep && cum < s->top_p * mass) cum += p[s->order[k++]];
        keep = k;
    }
    if (s->min_p > 0) {
        double floor = s->min_p * p[s->order[0]];
        while (keep > 1 && p[s->order[keep - 1]] < floor) keep--;
    }
    return keep;
}

float *sampler_distribution(sampler *s, const float *logits)
{
    int n = s->n;
    if (s->temperature <= 0) {
        for (int i = 0; i < n; i++) s->probs[i] = 0;
        s->probs[sampler_argmax(logits, n)] = 1;
        return s->probs;
    }
    float mx = logits[sampler_argmax(logits, n)];
    double sum = 0;
    for (int i = 0; i < n; i++) { s->probs[i] = expf((float)((logits[i] - mx) / s->temperature)); sum += s->probs[i]; }
    for (int i = 0; i < n; i++) s->probs[i] = (float)(s->probs[i] / sum);
    int filtered = s->top_p < 1.0 || (s->top_k > 0 && s->top_k < n) || s->min_p > 0;
    if (!filtered) return s->probs;
    int keep = kept_count(s);
    double kept = 0;
    for (int i = 0; i < keep; i++) kept += s->probs[s->order[i]];
    for (int i = keep; i < n; i++) s->probs[s->order[i]] = 0;
    for (int i = 0; i < keep; i++) s->probs[s->order[i]] = (float)(s->probs[s->order[i]] / kept);
    return s->probs;
}

int sampler_draw(sampler *s, const float *probs, int n)
{
    double total = 0;
    for (int i = 0; i < n; i++) total += probs[i];
    double r = sampler_uniform(s) * total, cum = 0;
    int last = 0;
    for (int i = 0; i < n; i++) {
        if (probs[i] <= 0) continue;
        cum += probs[i];
        last = i;
        if (r < cum) return i;
    }
    return last;
}

int sampler_pick(sampler *s, const float *logits)
{
    if (s->temperature <= 0) return sampler_argmax(logits, s->n);
    return sampler_draw(s, sampler_distribution(s, logits), s->n);
}
