#include <math.h>
#include "core/checkpoint.h"
#include "core/router.h"

/* Index of the largest value among v[0..n) not yet taken, lower index on ties; -1 if none. */
static int argmax_untaken(const float *v, const unsigned char *taken, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!taken[i] && (best < 0 || v[i] > v[best])) best = i;
    return best;
}

void router_select(const router_params *p, const float *logits, const float *bias, int *ids, float *weights,
                   float *scratch)
{
    int n = p->n_experts, per_group = n / p->n_group;
    float *score = scratch, *choice = scratch + n;
    for (int e = 0; e < n; e++) {
        score[e] = 1.0f / (1.0f + expf(-logits[e]));
        choice[e] = score[e] + bias[e];
    }

    /* Group score = sum of the two best choices in the group. */
    float group_score[MODEL_MAX_GROUPS];
    unsigned char group_taken[MODEL_MAX_GROUPS] = {0}, group_kept[MODEL_MAX_GROUPS] = {0};
    for (int g = 0; g < p->n_group; g++) {
        const float *c = choice + g * per_group;
        int a = 0;
        for (int i = 1; i < per_group; i++) if (c[i] > c[a]) a = i;
        int b = -1;
        for (int i = 0; i < per_group; i++) if (i != a && (b < 0 || c[i] > c[b])) b = i;
        group_score[g] = c[a] + (b >= 0 ? c[b] : 0.0f);
    }
    for (int k = 0; k < p->topk_group; k++) {
        int g = argmax_untaken(group_score, group_taken, p->n_group);
        group_taken[g] = 1;
        group_kept[g] = 1;
    }

    /* Experts outside the kept groups cannot be chosen (DeepSeek masks them to -inf). */
    unsigned char taken[MODEL_MAX_ROUTED_EXPERTS];
    for (int e = 0; e < n; e++) taken[e] = !group_kept[e / per_group];
    double sum = 0;
    for (int k = 0; k < p->top_k; k++) {
        int e = argmax_untaken(choice, taken, n);
        taken[e] = 1;
        ids[k] = e;
        weights[k] = score[e];
        sum += score[e];
    }
    for (int k = 0; k < p->top_k; k++) {
        double w = p->norm_topk_prob ? weights[k] / (sum + 1e-20) : weights[k];
        weights[k] = (float)(w * p->routed_scaling_factor);
    }
    /* Ascending id order: the summation order of the expert outputs is then fixed per row. */
    for (int i = 1; i < p->top_k; i++)
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            int ti = ids[j]; ids[j] = ids[j - 1]; ids[j - 1] = ti;
            float tw = weights[j]; weights[j] = weights[j - 1]; weights[j - 1] = tw;
        }
}

/* The router's selection order continued past top_k: experts of the groups it would keep by
 * choice (score + bias) descending, then the others the same way. The first top_k are the set
 * router_select picks; a prefetcher takes as many as it can afford, most confident first. */
void router_rank(const router_params *p, const float *logits, const float *bias, int *ids, int n_out, float *scratch)
{
    int n = p->n_experts, per_group = n / p->n_group;
    float *choice = scratch;
    float group_score[MODEL_MAX_GROUPS];
    unsigned char group_taken[MODEL_MAX_GROUPS] = {0}, taken[MODEL_MAX_ROUTED_EXPERTS] = {0};
    for (int e = 0; e < n; e++) choice[e] = 1.0f / (1.0f + expf(-logits[e])) + bias[e];
    for (int g = 0; g < p->n_group; g++) {
        const float *c = choice + g * per_group;
        int a = 0, b = -1;
        for (int i = 1; i < per_group; i++) if (c[i] > c[a]) a = i;
        for (int i = 0; i < per_group; i++) if (i != a && (b < 0 || c[i] > c[b])) b = i;
        group_score[g] = c[a] + (b >= 0 ? c[b] : 0.0f);
    }
    for (int k = 0; k < p->topk_group; k++) group_taken[argmax_untaken(group_score, group_taken, p->n_group)] = 1;
    for (int e = 0; e < n; e++) taken[e] = !group_taken[e / per_group];
    int out = 0;
    for (; out < n_out; out++) { /* the kept groups */
        int e = argmax_untaken(choice, taken, n);
        if (e < 0) break;
        taken[e] = 1;
        ids[out] = e;
    }
    for (int e = 0; e < n; e++) taken[e] = group_taken[e / per_group];
    for (int i = 0; i < out; i++) taken[ids[i]] = 1;
    for (; out < n_out; out++) {
        int e = argmax_untaken(choice, taken, n);
        if (e < 0) break;
        taken[e] = 1;
        ids[out] = e;
    }
}
