/* Recorded lookahead guesses (format: tools/trace_model/guess_trace.py). Each byte is a guess's
 * index in a permutation rebuilt from the route trace, so decoding needs the trace's rows. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "cache/expert_cache.h"

enum { GUESS_MAX_EXPERTS = 256, GUESS_HEAD = 15 };

typedef struct { unsigned char *p; size_t n; } bytes;

/* The whole (gzip-compressed or plain) file. */
static int read_all(const char *path, bytes *b, char *err, size_t errlen)
{
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f) { snprintf(err, errlen, "%s: cannot open guesses: %s", path, errno ? strerror(errno) : "out of memory"); return -1; }
    size_t cap = 1 << 20;
    b->p = malloc(cap);
    b->n = 0;
    int got = 1;
    while (b->p && got > 0) {
        if (b->n == cap) {
            unsigned char *q = realloc(b->p, cap *= 2);
            if (!q) { free(b->p); b->p = NULL; break; }
            b->p = q;
        }
        got = gzread(f, b->p + b->n, (unsigned)(cap - b->n > (1u << 30) ? (1u << 30) : cap - b->n));
        if (got > 0) b->n += (size_t)got;
    }
    int zerr = Z_OK;
    const char *why = got < 0 ? gzerror(f, &zerr) : NULL;
    gzclose(f);
    if (!b->p) { snprintf(err, errlen, "%s: out of memory", path); return -1; }
    if (why) { snprintf(err, errlen, "%s: read error: %s", path, why); free(b->p); b->p = NULL; return -1; }
    return 0;
}

/* The route trace's layer index of model layer `layer`; -1 if it has none. */
static int layer_index(const cache_trace *t, int layer)
{
    for (int i = 0; i < t->n_moe_layers; i++)
        if (t->moe_layers[i] == layer) return i;
    return -1;
}

/* Row r's permutation for trace layer i at depth d: its real experts ascending, at depth >= 2
 * then its depth-1 guesses not among them in rank order, then every other expert ascending. */
static void permutation(const cache_guesses *g, const cache_trace *t, int k, int E, int d, int r, int i, int *perm)
{
    unsigned char used[GUESS_MAX_EXPERTS] = {0};
    int n = 0;
    const int *key = t->key + ((size_t)r * t->n_layers + i) * k;
    for (int j = 0; j < k; j++) {
        int e = key[j] % t->n_experts, at = n++;
        while (at > 0 && perm[at - 1] > e) { perm[at] = perm[at - 1]; at--; }
        perm[at] = e;
        used[e] = 1;
    }
    const int *d1 = d >= 2 ? cache_guesses_at(g, 1, r, i) : NULL;
    for (int j = 0; d1 && j < g->ranks[0]; j++)
        if (!used[d1[j]]) { used[d1[j]] = 1; perm[n++] = d1[j]; }
    for (int e = 0; e < E; e++)
        if (!used[e]) perm[n++] = e;
}

/* Depth d's target list and codes from *pos on into g->ids[d-1]. */
static int decode_depth(cache_guesses *g, const cache_trace *t, const bytes *b, int d, const unsigned char *targets,
                        int n_targets, int E, size_t *pos, char *why, size_t whylen)
{
    int k = (int)(t->n / ((size_t)t->n_tokens * t->n_layers)), n = g->ranks[d - 1], perm[GUESS_MAX_EXPERTS];
    for (int j = 0; j < n_targets; j++) {
        int i = layer_index(t, targets[j]);
        if (i < 0) { snprintf(why, whylen, "depth %d names layer %d, which the trace does not route", d, targets[j]); return -1; }
        if (d >= 2 && !cache_guesses_at(g, 1, 0, i)) { snprintf(why, whylen, "layer %d has depth-%d guesses but none at depth 1", targets[j], d); return -1; }
        if (*pos + (size_t)g->rows * n > b->n) { snprintf(why, whylen, "truncated at depth %d, layer %d", d, targets[j]); return -1; }
        for (int r = 0; r < g->rows; r++) {
            permutation(g, t, k, E, d, r, i, perm);
            int *out = g->ids[d - 1] + ((size_t)r * g->n_layers + i) * n;
            for (int q = 0; q < n; q++) {
                int c = b->p[(*pos)++];
                if (c >= E) { snprintf(why, whylen, "code %d at depth %d, layer %d, row %d is not an expert", c, d, targets[j], r); return -1; }
                out[q] = perm[c];
                /* the trace's key space ends at its highest routed expert */
                if (out[q] >= t->n_experts) {
                    snprintf(why, whylen, "row %d guesses expert %d of layer %d, beyond the trace's %d experts", r, out[q],
                             targets[j], t->n_experts);
                    return -1;
                }
            }
        }
    }
    return 0;
}

static int decode(cache_guesses *g, const cache_trace *t, const bytes *b, char *why, size_t whylen)
{
    if (b->n < GUESS_HEAD || memcmp(b->p, "DSGUESS1", 8)) { snprintf(why, whylen, "not a DSGUESS1 file"); return -1; }
    const unsigned char *h = b->p + 8;
    g->rows = (int)((uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24);
    int E = h[4] | h[5] << 8;
    g->depth = h[6];
    g->n_layers = t->n_layers;
    size_t pos = GUESS_HEAD;
    if (g->rows != t->n_tokens || t->n != (size_t)t->n_tokens * t->n_layers * (t->n / ((size_t)t->n_tokens * t->n_layers)) ||
        t->n % ((size_t)t->n_tokens * t->n_layers)) {
        snprintf(why, whylen, "%d rows, the trace %d rows (every row routing every layer is needed)", g->rows, t->n_tokens);
        return -1;
    }
    if (E < t->n_experts || E > GUESS_MAX_EXPERTS || g->depth < 1 || g->depth > CACHE_GUESS_MAX_DEPTH || b->n < pos + g->depth) {
        snprintf(why, whylen, "%d experts, depth %d: expected the trace's %d..%d experts and depth 1..%d", E, g->depth,
                 t->n_experts, GUESS_MAX_EXPERTS, CACHE_GUESS_MAX_DEPTH);
        return -1;
    }
    const unsigned char *targets[CACHE_GUESS_MAX_DEPTH];
    int n_targets[CACHE_GUESS_MAX_DEPTH];
    for (int d = 0; d < g->depth; d++) g->ranks[d] = b->p[pos++];
    for (int d = 0; d < g->depth; d++) {
        if (pos >= b->n || pos + 1 + b->p[pos] > b->n) { snprintf(why, whylen, "truncated header"); return -1; }
        n_targets[d] = b->p[pos];
        targets[d] = b->p + pos + 1;
        pos += 1 + (size_t)n_targets[d];
        size_t cells = (size_t)g->rows * g->n_layers * g->ranks[d];
        if (g->ranks[d] < 1 || !(g->ids[d] = malloc(cells * sizeof(int)))) { snprintf(why, whylen, "depth %d: %d ranks (out of memory?)", d + 1, g->ranks[d]); return -1; }
        for (size_t c = 0; c < cells; c++) g->ids[d][c] = -1;
    }
    for (int d = 1; d <= g->depth; d++)
        if (decode_depth(g, t, b, d, targets[d - 1], n_targets[d - 1], E, &pos, why, whylen) < 0) return -1;
    if (pos != b->n) { snprintf(why, whylen, "%zu bytes after the last guess", b->n - pos); return -1; }
    return 0;
}

cache_guesses *cache_guesses_load(const char *path, const cache_trace *t, char *err, size_t errlen)
{
    bytes b;
    if (read_all(path, &b, err, errlen) < 0) return NULL;
    cache_guesses *g = calloc(1, sizeof *g);
    char why[256] = "out of memory";
    if (!g || decode(g, t, &b, why, sizeof why) < 0) {
        snprintf(err, errlen, "%s: %s", path, why);
        cache_guesses_free(g);
        g = NULL;
    }
    free(b.p);
    return g;
}

const int *cache_guesses_at(const cache_guesses *g, int d, int row, int i)
{
    if (d < 1 || d > g->depth || row < 0 || row >= g->rows || i < 0 || i >= g->n_layers) return NULL;
    const int *v = g->ids[d - 1] + ((size_t)row * g->n_layers + i) * g->ranks[d - 1];
    return v[0] < 0 ? NULL : v;
}

void cache_guesses_free(cache_guesses *g)
{
    if (!g) return;
    for (int d = 0; d < CACHE_GUESS_MAX_DEPTH; d++) free(g->ids[d]);
    free(g);
}
