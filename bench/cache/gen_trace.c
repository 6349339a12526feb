/* cache_gen_trace: write a synthetic R1-scale routing trace (or convert a dsspec eval routes.json)
 * in the cache-sim JSONL format. */
#include <stdlib.h>
#include <string.h>
#include "bench/cache/synth_trace.h"

static void usage(FILE *out)
{
    synth_params d = synth_r1_defaults();
    fprintf(out,
        "usage: cache_gen_trace [flags] > trace.jsonl\n"
        "  --tokens N        tokens (default %d)\n"
        "  --layers N        MoE layers (default %d, numbered from --first-layer %d)\n"
        "  --experts N       routed experts per layer (default %d)\n"
        "  --top-k N         experts per token per layer (default %d)\n"
        "  --zipf S          per-layer popularity skew, weight of rank r = 1/(r+1)^S (default %.2f)\n"
        "  --reuse P         probability a pick repeats one of the previous token's (default %.2f)\n"
        "  --drift-every N   every N tokens swap --drift-swaps ranks per layer (default %d, %d; 0 = off)\n"
        "  --seed N          (default %llu)\n"
        "  --from-routes F   instead: convert `dsspec eval --dump` routes.json F to a trace\n",
        d.tokens, d.n_layers, d.first_layer, d.n_experts, d.top_k, d.zipf_s, d.reuse_p, d.drift_every,
        d.drift_swaps, d.seed);
}

int main(int argc, char **argv)
{
    synth_params p = synth_r1_defaults();
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) { usage(stdout); return 0; }
        if (!v) { fprintf(stderr, "cache_gen_trace: %s needs a value (see --help)\n", f); return 2; }
        i++;
        char *end;
        double x = strtod(v, &end);
        if (!strcmp(f, "--from-routes")) return routes_to_trace(v, stdout) < 0 ? 1 : 0;
        if (*end || end == v) { fprintf(stderr, "cache_gen_trace: %s '%s': expected a number\n", f, v); return 2; }
        if (!strcmp(f, "--tokens")) p.tokens = (int)x;
        else if (!strcmp(f, "--layers")) p.n_layers = (int)x;
        else if (!strcmp(f, "--first-layer")) p.first_layer = (int)x;
        else if (!strcmp(f, "--experts")) p.n_experts = (int)x;
        else if (!strcmp(f, "--top-k")) p.top_k = (int)x;
        else if (!strcmp(f, "--zipf")) p.zipf_s = x;
        else if (!strcmp(f, "--reuse")) p.reuse_p = x;
        else if (!strcmp(f, "--drift-every")) p.drift_every = (int)x;
        else if (!strcmp(f, "--drift-swaps")) p.drift_swaps = (int)x;
        else if (!strcmp(f, "--seed")) p.seed = (unsigned long long)x;
        else { fprintf(stderr, "cache_gen_trace: unknown flag '%s' (see --help)\n", f); return 2; }
    }
    return synth_write(&p, stdout) < 0 ? 1 : 0;
}
