/* The offline tools behind `dsspec inspect` and `dsspec cache-sim`: no model is loaded. */
#include <stdlib.h>
#include <string.h>
#include "engine/engine_internal.h"

int dsspec_inspect(const char *model_dir, FILE *out, char *err, size_t errlen)
{
    checkpoint *ck = NULL;
    if (dsspec_resolve_model_dir(model_dir, &model_dir, err, errlen) || !(ck = checkpoint_open(model_dir, err, errlen)))
        return -1;
    checkpoint_print_census(ck, out);
    checkpoint_close(ck);
    return 0;
}

char *dsspec_read_file(const char *path, size_t *len, char *err, size_t errlen)
{
    return text_file_read(path, len, err, errlen);
}

struct dsspec_trace {
    cache_trace *t;
};

dsspec_trace *dsspec_trace_load(const char *path, int layer_lo, int layer_hi, char *err, size_t errlen)
{
    dsspec_trace *d = calloc(1, sizeof *d);
    if (!d) { error_set(err, errlen, "out of memory"); return NULL; }
    if (!(d->t = cache_trace_load(path, layer_lo, layer_hi, err, errlen))) { free(d); return NULL; }
    return d;
}

void dsspec_trace_free(dsspec_trace *d)
{
    if (!d) return;
    cache_trace_free(d->t);
    free(d);
}

void dsspec_trace_shape(const dsspec_trace *d, int *rows, uint64_t *requests, int *n_layers, int *experts_per_layer)
{
    *rows = d->t->n_tokens;
    *requests = d->t->n;
    *n_layers = d->t->n_layers;
    *experts_per_layer = d->t->n_experts;
}

int dsspec_trace_simulate(const dsspec_trace *d, const char *policy, int slots, int lfu_halve_every,
                          uint64_t *hits, uint64_t *misses)
{
    cache_policy_kind k;
    if (cache_policy_parse(policy, 1, &k)) return -1;
    cache_sim_result r;
    int n_keys = d->t->n_layers * d->t->n_experts;
    int rc = k == CACHE_POLICY_OPT ? belady_run(d->t->key, d->t->n, n_keys, slots, &r, NULL, NULL)
                                   : cache_sim_run(d->t->key, d->t->n, n_keys, slots, k, lfu_halve_every, &r, NULL, NULL);
    if (rc) return -1;
    *hits = r.hits;
    *misses = r.misses;
    return 0;
}
