/* DeepSeek-V3's noaux_tc MoE router for one token, in fp32, as DeepSeek's model.py computes it:
 * sigmoid scores; choice = score + e_score_correction_bias; each group scored by the sum of its two
 * best choices; the topk_group best groups kept; top-k experts by choice among them; weights are the
 * chosen experts' scores WITHOUT the bias, normalized (+1e-20) and times routed_scaling_factor.
 * Ties go to the lower index, so the result is a pure function of the logits. */
#ifndef DSSPEC_ROUTER_H
#define DSSPEC_ROUTER_H

/* Within config_load's bounds: n_experts <= MODEL_MAX_ROUTED_EXPERTS, n_group <= MODEL_MAX_GROUPS. */
typedef struct {
    int n_experts, n_group, topk_group, top_k;
    int norm_topk_prob;
    double routed_scaling_factor;
} router_params;

/* logits[n_experts] -> ids[top_k] (ascending expert id) and their weights. scratch: 2*n_experts floats. */
void router_select(const router_params *p, const float *logits, const float *bias, int *ids, float *weights,
                   float *scratch);

/* logits[n_experts] -> ids[n_out] (n_out <= n_experts): every expert in the router's order of
 * preference, most confident first; the first top_k are router_select's set. scratch: n_experts floats. */
void router_rank(const router_params *p, const float *logits, const float *bias, int *ids, int n_out, float *scratch);

#endif
