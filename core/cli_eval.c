/* dsspec eval: the reference hook outside checkers drive. Fixed contract:
 *   OUT/logits.f32      float32 LE [T][vocab], logits of every input position
 *   OUT/routes.json     {"<moe layer>": [T arrays of chosen expert ids]}
 *   OUT/mtp_logits.f32  (with --mtp) row i = MTP pass pairing h_i with x_{i+1}, x_T = argmax of row T-1
 * Experts are read straight from the checkpoint (no cache), rows in chunks of --chunk. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/cli.h"
#include "core/cli_common.h"
#include "core/expert_direct.h"
#include "core/sampler.h"
#include "speculate/speculate.h"

static void eval_usage(FILE *out)
{
    fprintf(out,
            "usage: dsspec eval [-m DIR] (--ids LIST | --ids-file FILE) [--dump OUT] [--mtp] [--ppl] [-t N] [--cpu-features P] [--chunk N]\n"
            "  -m DIR             checkpoint directory (default: the embedded model)\n"
            "  --ids LIST         comma-separated token ids, e.g. 3,17,42\n"
            "  --dump OUT         directory to write logits.f32 and routes.json into (created)\n"
            "  --mtp              also write mtp_logits.f32 (the MTP layer's logits per position)\n"
            "  -t, --threads N    worker threads (default 1)\n"
            "  --cpu-features P   highest kernel path: scalar | avx2 | avx512 (default: best available)\n"
            "  --chunk N          rows per forward pass (default 64; results do not depend on it)\n"
            "  --ids-file FILE    token ids from a file (whitespace or comma separated) instead of --ids\n"
            "  --ppl              print the perplexity of ids[1..] under the model on stdout\n"
            "                     (--dump is then optional)\n");
}

typedef struct {
    int T, L, k, base;
    int *routes; /* [L][T][k], -1 = not a MoE layer */
} route_table;

static void record_route(void *ctx, int layer, int row, const int *experts, int k)
{
    route_table *r = ctx;
    memcpy(r->routes + ((size_t)layer * r->T + r->base + row) * r->k, experts, k * sizeof(int));
}

static int write_file(const char *dir, const char *name, const void *data, size_t n, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int write_routes(const char *dir, const route_table *r, const model_config *c, char *err, size_t errlen)
{
    cJSON *root = cJSON_CreateObject();
    for (int l = 0; l < r->L; l++) {
        if (!config_layer_is_moe(c, l)) continue;
        char key[16];
        snprintf(key, sizeof key, "%d", l);
        cJSON *rows = cJSON_AddArrayToObject(root, key);
        for (int t = 0; t < r->T; t++)
            cJSON_AddItemToArray(rows, cJSON_CreateIntArray(r->routes + ((size_t)l * r->T + t) * r->k, r->k));
    }
    char *text = cJSON_PrintUnformatted(root);
    int rc = text ? write_file(dir, "routes.json", text, strlen(text), err, errlen) : -1;
    if (!text) snprintf(err, errlen, "out of memory writing routes.json");
    free(text);
    cJSON_Delete(root);
    return rc;
}

/* Main model over all rows (chunked), then optionally the MTP pass. */
/* Mean negative log-likelihood of ids[t+1] under the logits of row t, in double. */
static void print_perplexity(const float *logits, const int *ids, int T, int V)
{
    double nll = 0;
    for (int t = 0; t + 1 < T; t++) {
        const float *l = logits + (size_t)t * V;
        double mx = l[0], sum = 0;
        for (int v = 1; v < V; v++) if (l[v] > mx) mx = l[v];
        for (int v = 0; v < V; v++) sum += exp(l[v] - mx);
        nll += mx + log(sum) - l[ids[t + 1]];
    }
    int n = T - 1;
    printf("tokens %d mean_nll %.6f perplexity %.4f\n", n, n > 0 ? nll / n : 0, n > 0 ? exp(nll / n) : 0);
}

static int eval_run(engine *e, const int *ids, int T, int chunk, int mtp, int ppl, const char *out, char *err, size_t errlen)
{
    const model_config *c = model_get_config(e->m);
    int V = c->vocab_size, H = c->hidden_size, rc = -1;
    expert_direct *direct = expert_direct_create(e->ck);
    expert_provider ep = expert_direct_provider(direct);
    kv_cache *kv = kv_cache_create(c, 0, c->num_hidden_layers, T + 1, DTYPE_F32);
    kv_cache *mkv = mtp ? kv_cache_create(c, c->num_hidden_layers, 1, T + 1, DTYPE_F32) : NULL;
    float *logits = malloc((size_t)T * V * sizeof(float)), *hidden = malloc((size_t)T * H * sizeof(float));
    int *pos = malloc((size_t)T * sizeof(int)), *next = malloc((size_t)T * sizeof(int));
    route_table rt = {T, c->num_hidden_layers, c->num_experts_per_tok, 0, NULL};
    rt.routes = malloc((size_t)rt.L * T * rt.k * sizeof(int));
    if (!direct || !kv || (mtp && !mkv) || !logits || !hidden || !pos || !next || !rt.routes) {
        snprintf(err, errlen, "out of memory for %d positions", T);
        goto done;
    }
    if (model_reserve_scratch(e->m, chunk, T + 1, err, errlen)) goto done;
    for (int t = 0; t < T; t++) pos[t] = t;
    for (int s = 0; s < T; s += chunk) {
        int nb = T - s < chunk ? T - s : chunk;
        rt.base = s;
        forward_request req = {.hidden = hidden + (size_t)s * H, .logits = logits + (size_t)s * V, .logits_from = 0,
                               .on_route = record_route, .route_ctx = &rt};
        if (model_forward(e->m, kv, &ep, ids + s, pos + s, nb, &req, err, errlen)) goto done;
    }
    if (ppl) print_perplexity(logits, ids, T, V);
    if (!out) { rc = 0; goto done; }
    if (write_file(out, "logits.f32", logits, (size_t)T * V * sizeof(float), err, errlen)) goto done;
    if (write_routes(out, &rt, c, err, errlen)) goto done;
    if (mtp) {
        for (int t = 0; t + 1 < T; t++) next[t] = ids[t + 1];
        next[T - 1] = sampler_argmax(logits + (size_t)(T - 1) * V, V);
        for (int s = 0; s < T; s += chunk) {
            int nb = T - s < chunk ? T - s : chunk;
            if (mtp_forward(e->m, mkv, &ep, hidden + (size_t)s * H, next + s, pos + s, nb, logits + (size_t)s * V, 0, err, errlen))
                goto done;
        }
        if (write_file(out, "mtp_logits.f32", logits, (size_t)T * V * sizeof(float), err, errlen)) goto done;
    }
    rc = 0;
done:
    expert_direct_free(direct);
    kv_cache_free(kv);
    kv_cache_free(mkv);
    free(logits); free(hidden); free(pos); free(next); free(rt.routes);
    return rc;
}

/* Ids separated by commas and/or white space, e.g. a held-out split saved by the training script. */
static int read_ids_file(const char *path, int **ids, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) { snprintf(err, errlen, "--ids-file %s: cannot open: %s", path, strerror(errno)); return -1; }
    int n = 0, cap = 1024, c;
    int *v = malloc(cap * sizeof *v);
    long x;
    while (v) {
        while ((c = fgetc(f)) == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r') {}
        if (c == EOF) break;
        ungetc(c, f);
        if (fscanf(f, "%ld", &x) != 1 || x < 0 || x > 0x7fffffff) {
            snprintf(err, errlen, "--ids-file %s: expected token ids separated by commas or spaces (after %d ids)", path, n);
            free(v);
            fclose(f);
            return -1;
        }
        if (n == cap) {
            int *nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) { free(v); v = NULL; break; }
            v = nv;
        }
        v[n++] = (int)x;
    }
    fclose(f);
    if (!v) { snprintf(err, errlen, "out of memory reading %s", path); return -1; }
    if (n == 0) { snprintf(err, errlen, "--ids-file %s: no token ids", path); free(v); return -1; }
    *ids = v;
    return n;
}

int cli_eval(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"ids", required_argument, 0, 'i'}, {"dump", required_argument, 0, 'd'},
        {"mtp", no_argument, 0, 'M'}, {"threads", required_argument, 0, 't'}, {"cpu-features", required_argument, 0, 'c'},
        {"chunk", required_argument, 0, 'k'}, {"ids-file", required_argument, 0, 'F'}, {"ppl", no_argument, 0, 'P'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *dir = cli_default_model_dir(), *ids_arg = NULL, *ids_file = NULL, *out = NULL, *cpu = NULL;
    long threads = 1, chunk = 64;
    int mtp = 0, ppl = 0, opt;
    char err[1024];
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "m:t:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'm': dir = optarg; break;
        case 'i': ids_arg = optarg; break;
        case 'd': out = optarg; break;
        case 'M': mtp = 1; break;
        case 'P': ppl = 1; break;
        case 'F': ids_file = optarg; break;
        case 'c': cpu = optarg; break;
        case 't': if (parse_int_flag("--threads", optarg, 1, 1024, &threads, err, sizeof err)) goto usage_error; break;
        case 'k': if (parse_int_flag("--chunk", optarg, 1, 1 << 20, &chunk, err, sizeof err)) goto usage_error; break;
        case 'h': eval_usage(stdout); return 0;
        default:
            snprintf(err, sizeof err, "unknown or incomplete flag '%s'", argv[optind - 1]);
            goto usage_error;
        }
    }
    if (optind < argc) { snprintf(err, sizeof err, "unexpected argument '%s'", argv[optind]); goto usage_error; }
    if ((!ids_arg && !ids_file) || (ids_arg && ids_file)) { snprintf(err, sizeof err, "give one of --ids or --ids-file"); goto usage_error; }
    if (!out && !ppl) { snprintf(err, sizeof err, "--dump is required (or --ppl)"); goto usage_error; }
    int *ids = NULL, T;
    if (ids_file) {
        T = read_ids_file(ids_file, &ids, err, sizeof err);
        if (T < 0) { fprintf(stderr, "dsspec eval: %s\n", err); return 1; }
    } else if ((T = parse_id_list("--ids", ids_arg, &ids, err, sizeof err)) < 0) {
        goto usage_error;
    }
    if (out && mkdir(out, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "dsspec eval: --dump %s: cannot create directory: %s\n", out, strerror(errno));
        free(ids);
        return 1;
    }
    engine e;
    int rc = 1;
    if (engine_open(&e, dir, (int)threads, cpu, err, sizeof err) == 0) {
        if (mtp && !model_has_mtp(e.m)) snprintf(err, sizeof err, "--mtp: %s has no MTP layer (num_nextn_predict_layers 0)", dir);
        else rc = eval_run(&e, ids, T, (int)chunk, mtp, ppl, out, err, sizeof err) ? 1 : 0;
        engine_close(&e);
    }
    if (rc) fprintf(stderr, "dsspec eval: %s\n", err);
    free(ids);
    return rc;
usage_error:
    fprintf(stderr, "dsspec eval: %s (see dsspec eval --help)\n", err);
    return 2;
}
