/* The sampler's filters against hand-computed distributions. Logits are ln(p) for
 * p = {0.40, 0.25, 0.15, 0.10, 0.06, 0.04}, so every expected value below is worked by hand from
 * those six numbers (transformers' order: temperature, top-k, top-p over what top-k left, min-p
 * against the most probable token). Then:
 *  - sampler_distribution equals each hand distribution (to float rounding);
 *  - 200,000 draws of sampler_pick fit it (chi-square, p = 1e-4) and never leave its support;
 *  - MTP's point-mass acceptance rule (verify_draft), for drafts inside and outside the support,
 *    emits tokens with the same distribution: speculation stays exact under top-k and min-p. */
#include <math.h>
#include <string.h>
#include "core/sampler.h"
#include "speculate/speculate.h"
#include "tests/test_check.h"

enum { V = 6, DRAWS = 200000 };
static const double base_p[V] = {0.40, 0.25, 0.15, 0.10, 0.06, 0.04};

typedef struct {
    const char *name;
    double temp, top_p, min_p;
    int top_k;
    double want[V];
} filter_case;

static const filter_case cases[] = {
    {"top-k 3", 1, 1, 0, 3, {0.40 / 0.80, 0.25 / 0.80, 0.15 / 0.80, 0, 0, 0}},
    {"top-k 1 (greedy)", 1, 1, 0, 1, {1, 0, 0, 0, 0, 0}},
    {"top-k 6 (all)", 1, 1, 0, 6, {0.40, 0.25, 0.15, 0.10, 0.06, 0.04}},
    {"top-p 0.6", 1, 0.6, 0, 0, {0.40 / 0.65, 0.25 / 0.65, 0, 0, 0, 0}},
    /* top-k leaves mass 0.8, so top-p 0.8 asks for 0.64 of it: 0.40 + 0.25 crosses it. */
    {"top-k 3 + top-p 0.8", 1, 0.8, 0, 3, {0.40 / 0.65, 0.25 / 0.65, 0, 0, 0, 0}},
    /* min-p 0.3: the floor is 0.3 * 0.40 = 0.12; 0.10 and below go. */
    {"min-p 0.3", 1, 1, 0.3, 0, {0.40 / 0.80, 0.25 / 0.80, 0.15 / 0.80, 0, 0, 0}},
    {"min-p 0.5", 1, 1, 0.5, 0, {0.40 / 0.65, 0.25 / 0.65, 0, 0, 0, 0}},
    {"min-p 0.05 (keeps all)", 1, 1, 0.05, 0, {0.40, 0.25, 0.15, 0.10, 0.06, 0.04}},
    /* temperature 2: p^(1/2) renormalised; top-k 2 keeps sqrt(.4) and sqrt(.25). */
    {"temp 2 + top-k 2", 2, 1, 0, 2, {0.632455532 / 1.132455532, 0.5 / 1.132455532, 0, 0, 0, 0}},
    /* temperature 0.5: p^2 = .16 .0625 .0225 .01 .0036 .0016; min-p 0.1 floor .016 keeps three. */
    {"temp 0.5 + min-p 0.1", 0.5, 1, 0.1, 0, {0.16 / 0.245, 0.0625 / 0.245, 0.0225 / 0.245, 0, 0, 0}},
    /* top-k 5 (mass .96), top-p 0.9 (0.864 of it: .40+.25+.15+.10 = .90 crosses), min-p 0.2 (.08). */
    {"top-k 5 + top-p 0.9 + min-p 0.2", 1, 0.9, 0.2, 5, {0.40 / 0.90, 0.25 / 0.90, 0.15 / 0.90, 0.10 / 0.90, 0, 0}},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

/* Upper tail critical value of chi-square with df degrees of freedom at p = 1e-4 (Wilson-Hilferty). */
static double chi2_critical(int df)
{
    double z = 3.719, h = 2.0 / (9.0 * df);
    return df * pow(1 - h + z * sqrt(h), 3);
}

static sampler *make_sampler(const filter_case *c, uint64_t seed)
{
    sampler *s = sampler_create(V, c->temp, c->top_p, seed);
    if (s) sampler_set_top_k_min_p(s, c->top_k, c->min_p);
    return s;
}

/* Chi-square of counts against the hand distribution; counts outside its support are failures. */
static void check_counts(const filter_case *c, const long *count, const char *what)
{
    double chi = 0;
    int df = -1;
    for (int t = 0; t < V; t++) {
        if (c->want[t] == 0) { CHECK(count[t] == 0, "%s, %s: token %d (filtered out) drawn %ld times", c->name, what, t, count[t]); continue; }
        double e = c->want[t] * DRAWS;
        chi += (count[t] - e) * (count[t] - e) / e;
        df++;
    }
    if (df >= 1) CHECK(chi < chi2_critical(df), "%s, %s: chi-square %.1f with df %d", c->name, what, chi, df);
}

static void check_case(const filter_case *c, const float *logits)
{
    sampler *s = make_sampler(c, 7);
    if (!s) { CHECK(0, "out of memory"); return; }
    const float *p = sampler_distribution(s, logits);
    for (int t = 0; t < V; t++)
        CHECK(fabs(p[t] - c->want[t]) < 2e-6, "%s: p[%d] = %.7f, hand-computed %.7f", c->name, t, p[t], c->want[t]);
    long count[V] = {0};
    for (int i = 0; i < DRAWS; i++) count[sampler_pick(s, logits)]++;
    check_counts(c, count, "sampler_pick");
    sampler_free(s);
    /* Each draft once inside the support, once outside where there is an outside. */
    for (int draft = 0; draft < V; draft += 2) {
        sampler *sv = make_sampler(c, 100 + draft);
        long vc[V] = {0};
        for (int i = 0; sv && i < DRAWS; i++) {
            int tok;
            verify_draft(sv, logits, draft, &tok);
            vc[tok]++;
        }
        char what[64];
        snprintf(what, sizeof what, "MTP acceptance rule, draft %d", draft);
        check_counts(c, vc, what);
        sampler_free(sv);
    }
}

int main(void)
{
    float logits[V];
    for (int t = 0; t < V; t++) logits[t] = (float)log(base_p[t]);
    for (int i = 0; i < N_CASES; i++) check_case(&cases[i], logits);
    printf("%s\n", test_failures ? "FAILED" : "sampler: top-k, top-p, min-p exact against hand-computed distributions, MTP rule included");
    return test_failures ? 1 : 0;
}
