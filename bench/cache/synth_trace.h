/* Synthetic R1-scale routing traces for the cache bench (documented skew and reuse). */
#ifndef DSSPEC_BENCH_SYNTH_TRACE_H
#define DSSPEC_BENCH_SYNTH_TRACE_H

#include <stdio.h>

typedef struct {
    int first_layer, n_layers;   /* MoE layers first_layer .. first_layer + n_layers - 1 (R1: 3, 58) */
    int n_experts, top_k;        /* R1: 256, 8 */
    int tokens;
    double zipf_s;               /* per-layer popularity: weight of rank r is 1 / (r + 1)^s */
    double reuse_p;              /* each pick repeats one of the previous token's experts with this probability */
    int drift_every, drift_swaps;/* every drift_every tokens, swap drift_swaps random ranks per layer (topic drift) */
    unsigned long long seed;
} synth_params;

synth_params synth_r1_defaults(void);
/* Writes params.tokens JSON lines. 0, or -1 (message on stderr). */
int synth_write(const synth_params *p, FILE *out);
/* routes.json of `dsspec eval` ({"<layer>": [[ids of token 0], [ids of token 1], ...]}) as a trace. */
int routes_to_trace(const char *routes_json_path, FILE *out);

#endif
