#include "speculate/speculate.h"

int verify_draft(sampler *s, const float *logits, int draft, int *token)
{
    /* The row's token is drawn exactly as without speculation and the draft is accepted iff it
     * matches: P(accept) = p_target(draft), and a rejected step's token is p_target with the draft
     * removed, renormalized. Drawing first makes the emitted token the same whether or not a draft
     * was made, so the decision to draft cannot bias it. */
    *token = sampler_pick(s, logits);
    return *token == draft;
}
