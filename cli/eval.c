/* dsspec eval: the reference hook outside checkers drive. Fixed contract:
 *   OUT/logits.f32      float32 LE [T][vocab], logits of every input position
 *   OUT/routes.json     {"<moe layer>": [T arrays of chosen expert ids]}
 *   OUT/mtp_logits.f32  (with --mtp) row i = MTP pass pairing h_i with x_{i+1}, x_T = argmax of row T-1
 *   OUT/guesses.json    (with --guesses N) {"<layer l>": {"<layer l+d>": [T arrays of N ids]}}: the router
 *                       lookahead's guesses from layer l for MoE layer l+d, d = 1..--guess-depth, most
 *                       confident first, as the forward pass hands them to the cache
 * Experts are read straight from the checkpoint (no cache), rows in chunks of --chunk. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli/cli.h"
#include "cli/flags.h"
#include "engine/dsspec.h"

typedef struct {
    const char *dir, *ids, *ids_file, *out, *cpu;
    int threads, chunk, mtp, ppl, guesses, guess_depth;
} eval_args;

static int write_file(const char *dir, const char *name, const void *data, size_t n, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(data, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    return ok ? 0 : -1;
}

static int write_routes(const char *dir, const int *routes, const dsspec_model_info *mi, int T, const int *is_moe,
                        char *err, size_t errlen)
{
    int k = mi->experts_per_token;
    cJSON *root = cJSON_CreateObject();
    for (int l = 0; l < mi->n_layers; l++) {
        if (!is_moe[l]) continue;
        char key[16];
        snprintf(key, sizeof key, "%d", l);
        cJSON *rows = cJSON_AddArrayToObject(root, key);
        for (int t = 0; t < T; t++) cJSON_AddItemToArray(rows, cJSON_CreateIntArray(routes + ((size_t)l * T + t) * k, k));
    }
    char *text = cJSON_PrintUnformatted(root);
    int rc = text ? write_file(dir, "routes.json", text, strlen(text), err, errlen) : -1;
    if (!text) snprintf(err, errlen, "out of memory writing routes.json");
    free(text);
    cJSON_Delete(root);
    return rc;
}

static int write_guesses(dsspec *e, const eval_args *a, const int *ids, int T, char *err, size_t errlen)
{
    const dsspec_model_info *mi = dsspec_get_model_info(e);
    int D = a->guess_depth, n = a->guesses, rc = -1;
    int *g = malloc((size_t)mi->n_layers * D * T * n * sizeof(int));
    cJSON *root = cJSON_CreateObject();
    char *text = NULL;
    if (!g || !root) { snprintf(err, errlen, "out of memory for %d positions of guesses", T); goto done; }
    if (dsspec_eval_guesses(e, ids, T, a->chunk, D, n, g, err, errlen)) goto done;
    for (int l = 0; l < mi->n_layers; l++) {
        cJSON *src = NULL;
        for (int d = 1; d <= D; d++) {
            const int *rows = g + ((size_t)l * D + d - 1) * T * n;
            if (rows[0] < 0) continue;
            char key[16];
            if (!src) { snprintf(key, sizeof key, "%d", l); src = cJSON_AddObjectToObject(root, key); }
            snprintf(key, sizeof key, "%d", l + d);
            cJSON *arr = cJSON_AddArrayToObject(src, key);
            for (int t = 0; t < T; t++) cJSON_AddItemToArray(arr, cJSON_CreateIntArray(rows + (size_t)t * n, n));
        }
    }
    text = cJSON_PrintUnformatted(root);
    if (!text) snprintf(err, errlen, "out of memory writing guesses.json");
    else rc = write_file(a->out, "guesses.json", text, strlen(text), err, errlen);
done:
    free(text);
    cJSON_Delete(root);
    free(g);
    return rc;
}

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

static int eval_outputs(dsspec *e, const eval_args *a, const int *ids, int T, char *err, size_t errlen)
{
    const dsspec_model_info *mi = dsspec_get_model_info(e);
    size_t V = (size_t)mi->vocab_size;
    float *logits = malloc((size_t)T * V * sizeof(float)), *mtp = a->mtp ? malloc((size_t)T * V * sizeof(float)) : NULL;
    int *routes = malloc((size_t)mi->n_layers * T * mi->experts_per_token * sizeof(int));
    int *is_moe = calloc((size_t)mi->n_layers, sizeof(int)), rc = -1;
    if (!logits || (a->mtp && !mtp) || !routes || !is_moe) { snprintf(err, errlen, "out of memory for %d positions", T); goto done; }
    for (size_t i = 0; i < (size_t)mi->n_layers * T * mi->experts_per_token; i++) routes[i] = -1;
    if (dsspec_eval(e, ids, T, a->chunk, logits, routes, mtp, err, errlen)) goto done;
    for (int l = 0; l < mi->n_layers; l++) is_moe[l] = routes[(size_t)l * T * mi->experts_per_token] >= 0;
    if (a->ppl) print_perplexity(logits, ids, T, (int)V);
    rc = 0;
    if (a->out && (write_file(a->out, "logits.f32", logits, (size_t)T * V * sizeof(float), err, errlen) ||
                   write_routes(a->out, routes, mi, T, is_moe, err, errlen) ||
                   (mtp && write_file(a->out, "mtp_logits.f32", mtp, (size_t)T * V * sizeof(float), err, errlen)) ||
                   (a->guesses && write_guesses(e, a, ids, T, err, errlen))))
        rc = -1;
done:
    free(logits); free(mtp); free(routes); free(is_moe);
    return rc;
}

static int read_ids(const eval_args *a, int **ids, char *err, size_t errlen)
{
    if (a->ids) return parse_id_list("--ids", a->ids, ids, err, errlen);
    char *text = dsspec_read_file(a->ids_file, NULL, err, errlen);
    if (!text) return -1;
    char flag[1024];
    snprintf(flag, sizeof flag, "--ids-file %s", a->ids_file);
    int n = parse_id_list(flag, text, ids, err, errlen);
    free(text);
    return n;
}

static int eval_with_engine(const eval_args *a, const int *ids, int T)
{
    dsspec_options o;
    dsspec_options_default(&o);
    o.model_dir = a->dir;
    o.threads = a->threads;
    o.cpu_features = a->cpu;
    o.mtp = a->mtp;
    o.load_tokenizer = 0;
    o.experts = DSSPEC_EXPERTS_DIRECT;
    char err[1024];
    dsspec *e = dsspec_open(&o, NULL, err, sizeof err);
    int rc = !e || eval_outputs(e, a, ids, T, err, sizeof err) ? 1 : 0;
    if (rc) fprintf(stderr, "dsspec eval: %s\n", err);
    dsspec_close(e);
    return rc;
}

int cli_eval(int argc, char **argv)
{
    eval_args a = {.threads = dsspec_physical_cores(), .chunk = 64, .guess_depth = 2};
    const flag flags[] = {
        {FLAG_STRING, "-m|--model", "DIR", &a.dir, .help = "checkpoint directory (default: the embedded model)"},
        {FLAG_STRING, "--ids", "LIST", &a.ids, .help = "comma-separated token ids, e.g. 3,17,42"},
        {FLAG_STRING, "--ids-file", "FILE", &a.ids_file, .help = "token ids from a file (white space or comma separated) instead of --ids"},
        {FLAG_STRING, "--dump", "OUT", &a.out, .help = "directory to write logits.f32 and routes.json into (created)"},
        {FLAG_SWITCH, "--mtp", NULL, &a.mtp, .help = "also write mtp_logits.f32 (the MTP layer's logits per position)"},
        {FLAG_SWITCH, "--ppl", NULL, &a.ppl, .help = "print the perplexity of ids[1..] under the model on stdout (--dump is then optional)"},
        {FLAG_INT, "-t|--threads", "N", &a.threads, 1, 1024, .help = "worker threads (default: the physical cores)"},
        {FLAG_STRING, "--cpu-features", "P", &a.cpu, .help = "highest kernel path: scalar | avx2 | avx512 (default: best available)"},
        {FLAG_INT, "--chunk", "N", &a.chunk, 1, 1 << 20, .help = "rows per forward pass (default 64; results do not depend on it)"},
        {FLAG_INT, "--guesses", "N", &a.guesses, 1, 1 << 16, .help = "also write guesses.json: the router lookahead's N most confident guesses per row and layer"},
        {FLAG_INT, "--guess-depth", "D", &a.guess_depth, 1, 64, .help = "with --guesses: guess layers l+1..l+D from layer l (default 2)"},
    };
    int rc = flags_parse("eval", "usage: dsspec eval [-m DIR] (--ids LIST | --ids-file FILE) [--dump OUT] [--mtp] [--guesses N [--guess-depth D]] [--ppl] [-t N] [--cpu-features P] [--chunk N]",
                         flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : rc;
    char err[1024];
    if (!a.ids == !a.ids_file) return flags_usage_error("eval", "give one of --ids or --ids-file");
    if (!a.out && !a.ppl) return flags_usage_error("eval", "--dump is required (or --ppl)");
    if (a.mtp && !a.out) return flags_usage_error("eval", "--mtp writes mtp_logits.f32 into --dump OUT; give --dump");
    if (a.guesses && !a.out) return flags_usage_error("eval", "--guesses writes guesses.json into --dump OUT; give --dump");
    if (a.cpu && dsspec_check_cpu_features(a.cpu, err, sizeof err)) return flags_usage_error("eval", "%s", err);
    int *ids = NULL, T = read_ids(&a, &ids, err, sizeof err);
    if (T < 0) {
        if (a.ids) return flags_usage_error("eval", "%s", err);
        fprintf(stderr, "dsspec eval: %s\n", err);
        return 1;
    }
    if (a.out && mkdir(a.out, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "dsspec eval: --dump %s: cannot create directory: %s\n", a.out, strerror(errno));
        free(ids);
        return 1;
    }
    rc = eval_with_engine(&a, ids, T);
    free(ids);
    return rc;
}
