/* Routing traces: one JSON object per token, {"<moe layer>": [expert ids in order], ...}. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include <zlib.h>
#include "cache/expert_cache.h"
#include "core/text_file.h"

/* The simulator keeps per-key arrays (several ints per key and policy), so the key space (MoE
 * layers seen x experts per layer) is bounded: R1 needs 59 x 256 = 15,104 keys. */
enum { TRACE_MAX_LAYER = 1 << 16, TRACE_MAX_EXPERT = 1 << 16, TRACE_MAX_KEYS = 1 << 22 };

typedef struct { int layer, expert; } routed;
typedef struct { routed *v; size_t n, cap; } routed_vec;

static int routed_push(routed_vec *r, int layer, int expert)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 4096;
        routed *v = realloc(r->v, cap * sizeof *v);
        if (!v) return -1;
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = (routed){layer, expert};
    return 0;
}

static int parse_index(const char *s, int max, int *out)
{
    if (!*s) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < 0 || v >= max || s[0] == '+' || s[0] == '-' || s[0] == ' ') return -1;
    *out = (int)v;
    return 0;
}

static int is_index_number(const cJSON *x, int max, int *out)
{
    if (!cJSON_IsNumber(x)) return 0;
    double d = x->valuedouble;
    if (d < 0 || d >= max || d != (double)(int)d) return 0;
    *out = (int)d;
    return 1;
}

typedef struct { int layer; const cJSON *experts; } line_layer;

static int by_layer(const void *a, const void *b)
{
    return ((const line_layer *)a)->layer - ((const line_layer *)b)->layer;
}

/* One token's line into (layer, expert) pairs in visit order. -1 with err set. */
static int parse_line(const char *path, long lineno, const char *text, int lo, int hi,
                      routed_vec *out, char *err, size_t errlen)
{
    cJSON *obj = cJSON_Parse(text);
    if (!obj || !cJSON_IsObject(obj)) {
        error_set(err, errlen, "%s:%ld: expected a JSON object mapping layer -> [expert ids]", path, lineno);
        cJSON_Delete(obj);
        return -1;
    }
    int n = cJSON_GetArraySize(obj), i = 0, rc = -1;
    line_layer *layers = calloc((size_t)(n ? n : 1), sizeof *layers);
    if (!layers) { error_set(err, errlen, "%s: out of memory", path); cJSON_Delete(obj); return -1; }
    for (const cJSON *it = obj->child; it; it = it->next, i++) {
        if (parse_index(it->string, TRACE_MAX_LAYER, &layers[i].layer) < 0) {
            error_set(err, errlen, "%s:%ld: key \"%s\" is not a layer index (0..%d)", path, lineno, it->string, TRACE_MAX_LAYER - 1);
            goto done;
        }
        if (!cJSON_IsArray(it)) {
            error_set(err, errlen, "%s:%ld: layer %s: expected an array of expert ids", path, lineno, it->string);
            goto done;
        }
        layers[i].experts = it;
    }
    qsort(layers, (size_t)n, sizeof *layers, by_layer);
    for (i = 0; i < n; i++) {
        if (i > 0 && layers[i].layer == layers[i - 1].layer) {
            error_set(err, errlen, "%s:%ld: layer %d appears twice", path, lineno, layers[i].layer);
            goto done;
        }
        if ((lo >= 0 && layers[i].layer < lo) || (hi >= 0 && layers[i].layer > hi)) continue;
        for (const cJSON *e = layers[i].experts->child; e; e = e->next) {
            int id;
            if (!is_index_number(e, TRACE_MAX_EXPERT, &id)) {
                error_set(err, errlen, "%s:%ld: layer %d: expert ids must be integers 0..%d", path, lineno, layers[i].layer, TRACE_MAX_EXPERT - 1);
                goto done;
            }
            if (routed_push(out, layers[i].layer, id) < 0) { error_set(err, errlen, "%s: out of memory", path); goto done; }
        }
    }
    rc = 0;
done:
    free(layers);
    cJSON_Delete(obj);
    return rc;
}

/* Dense keys: layers seen, sorted, numbered 0..; key = layer number * n_experts + expert. */
static int build_keys(cache_trace *t, const routed_vec *r)
{
    int max_layer = -1, max_expert = -1;
    for (size_t i = 0; i < r->n; i++) {
        if (r->v[i].layer > max_layer) max_layer = r->v[i].layer;
        if (r->v[i].expert > max_expert) max_expert = r->v[i].expert;
    }
    int *layer_no = malloc(sizeof(int) * (size_t)(max_layer + 1));
    t->moe_layers = malloc(sizeof(int) * (size_t)(max_layer + 1));
    t->key = malloc(sizeof(int) * r->n);
    if (!layer_no || !t->moe_layers || !t->key) { free(layer_no); return -1; }
    for (int l = 0; l <= max_layer; l++) layer_no[l] = -1;
    for (size_t i = 0; i < r->n; i++) layer_no[r->v[i].layer] = 0;
    for (int l = 0; l <= max_layer; l++)
        if (layer_no[l] == 0) { layer_no[l] = t->n_moe_layers; t->moe_layers[t->n_moe_layers++] = l; }
    t->n_layers = t->n_moe_layers;
    t->n_experts = max_expert + 1;
    if ((int64_t)t->n_layers * t->n_experts > TRACE_MAX_KEYS) { free(layer_no); return -2; }
    for (size_t i = 0; i < r->n; i++) t->key[i] = layer_no[r->v[i].layer] * t->n_experts + r->v[i].expert;
    t->n = r->n;
    free(layer_no);
    return 0;
}

/* One line of a (possibly gzip-compressed) file into *buf, grown as needed, without the limit
 * gzgets' fixed buffer would impose. Length, 0 at the end, -1 on a read error or no memory. */
static long gz_getline(gzFile f, char **buf, size_t *cap)
{
    size_t len = 0;
    for (;;) {
        if (*cap - len < 2) {
            size_t ncap = *cap ? *cap * 2 : 4096;
            char *nb = realloc(*buf, ncap);
            if (!nb) return -1;
            *buf = nb;
            *cap = ncap;
        }
        if (!gzgets(f, *buf + len, (int)(*cap - len > (1u << 30) ? (1u << 30) : *cap - len))) {
            int zerr;
            gzerror(f, &zerr);
            if (zerr != Z_OK && zerr != Z_STREAM_END) return -1;
            return (long)len;
        }
        len += strlen(*buf + len);
        if (len > 0 && (*buf)[len - 1] == '\n') return (long)len;
    }
}

static int read_lines(gzFile f, const char *path, int lo, int hi, cache_trace *t, routed_vec *r,
                      char *err, size_t errlen)
{
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0, len;
    int ok = 1;
    while (ok && (len = gz_getline(f, &line, &cap)) > 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == (size_t)len) continue; /* blank line */
        if (parse_line(path, lineno, line, lo, hi, r, err, errlen) < 0) ok = 0;
        else t->n_tokens++;
    }
    if (ok && len < 0) {
        int zerr;
        const char *why = gzerror(f, &zerr);
        snprintf(err, errlen, "%s: read error: %s", path, zerr == Z_ERRNO ? strerror(errno) : why);
        ok = 0;
    }
    free(line);
    return ok ? 0 : -1;
}

/* Plain and gzip-compressed traces alike: zlib reads an uncompressed file through unchanged. */
cache_trace *cache_trace_load(const char *path, int layer_lo, int layer_hi, char *err, size_t errlen)
{
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f) { snprintf(err, errlen, "%s: cannot open trace: %s", path, errno ? strerror(errno) : "out of memory"); return NULL; }
    cache_trace *t = calloc(1, sizeof *t);
    routed_vec r = {0};
    int ok = t != NULL;
    if (!t) snprintf(err, errlen, "%s: out of memory", path);
    if (ok && read_lines(f, path, layer_lo, layer_hi, t, &r, err, errlen) < 0) ok = 0;
    if (ok && r.n == 0) {
        error_set(err, errlen, "%s: no routed experts in the trace%s", path, layer_lo >= 0 || layer_hi >= 0 ? " (within --layers)" : "");
        ok = 0;
    }
    if (ok) {
        int rc = build_keys(t, &r);
        if (rc == -2) { error_set(err, errlen, "%s: %d MoE layers x %d experts (the highest expert id + 1) = %lld keys, the limit is %d",
                                 path, t->n_layers, t->n_experts, (long long)t->n_layers * t->n_experts, TRACE_MAX_KEYS); ok = 0; }
        else if (rc < 0) { error_set(err, errlen, "%s: out of memory", path); ok = 0; }
    }
    free(r.v);
    gzclose(f);
    if (!ok) { cache_trace_free(t); return NULL; }
    return t;
}

void cache_trace_free(cache_trace *t)
{
    if (!t) return;
    free(t->key);
    free(t->moe_layers);
    free(t);
}
