/* The tensors of a DeepSeek-V3 checkpoint that the forward pass reads, as one table: each kind's
 * name, its shape as a function of config.json, the dtypes allowed and the layers it belongs to.
 * checkpoint_open validates every row of it; the model loader and the routed-expert extents find
 * their tensors through the same rows, so what is checked and what is read cannot drift apart. */
#ifndef DSSPEC_TENSOR_TABLE_H
#define DSSPEC_TENSOR_TABLE_H

#include <stddef.h>
#include "core/checkpoint.h"

typedef enum {
    /* the whole model */
    TT_EMBED, TT_FINAL_NORM, TT_LM_HEAD,
    /* every decoder layer: attention and its norms */
    TT_INPUT_NORM, TT_POST_NORM, TT_Q_A, TT_Q_A_NORM, TT_Q_B, TT_KV_A, TT_KV_A_NORM, TT_KV_B, TT_O,
    /* dense layers */
    TT_MLP_GATE, TT_MLP_UP, TT_MLP_DOWN,
    /* MoE layers (the MTP layer included) */
    TT_ROUTER, TT_ROUTER_BIAS, TT_SHARED_GATE, TT_SHARED_UP, TT_SHARED_DOWN,
    TT_EXPERT_GATE, TT_EXPERT_UP, TT_EXPERT_DOWN, /* one per routed expert */
    /* MTP layers */
    TT_MTP_EMBED, TT_MTP_ENORM, TT_MTP_HNORM, TT_MTP_EH_PROJ, TT_MTP_HEAD_NORM, TT_MTP_HEAD,
    TT_COUNT
} tensor_kind;

/* The tensor of `kind` at decoder layer `layer` (and routed expert `expert`, for the TT_EXPERT_*
 * kinds; both ignored where they do not apply), checked against config.json: it exists, has an
 * allowed dtype and the shape the config implies. An FP8 weight comes with its F32 block-scale
 * grid in *scale (NULL for the other dtypes; scale may be NULL when not wanted). NULL with one
 * line in err naming the file, the tensor and what was expected. */
const tensor_info *tensor_table_find(const checkpoint *ck, tensor_kind kind, int layer, int expert,
                                     const tensor_info **scale, char *err, size_t errlen);

/* Every row of the table for every layer it applies to (routed experts: every expert), as
 * checkpoint_open runs it. 0, or -1 with err as tensor_table_find writes it. */
int tensor_table_validate(const checkpoint *ck, char *err, size_t errlen);

#endif
