#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include "tests/engine/engine_test.h"

static int *int_array(const cJSON *a, int *n)
{
    *n = cJSON_GetArraySize(a);
    int *v = malloc((*n ? *n : 1) * sizeof *v), i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) v[i++] = x->valueint;
    return v;
}

static float *load_logits(const ref_fixture *f, const char *name, int rows)
{
    char path[2048];
    size_t len;
    snprintf(path, sizeof path, "%s/ref/%s", f->dir, name);
    float *v = (float *)test_read_file(path, &len);
    if (!v || len != (size_t)rows * f->vocab * sizeof(float)) {
        fprintf(stderr, "%s: expected %d x %d float32 logits\n", path, rows, f->vocab);
        free(v);
        return NULL;
    }
    return v;
}

static int load_prompt(ref_fixture *f, const cJSON *p, ref_prompt *rp)
{
    rp->ids = int_array(cJSON_GetObjectItem(p, "ids"), &rp->n_ids);
    rp->greedy = int_array(cJSON_GetObjectItem(p, "greedy"), &rp->n_greedy);
    rp->logits = load_logits(f, cJSON_GetObjectItem(p, "logits")->valuestring, rp->n_ids);
    rp->mtp_logits = load_logits(f, cJSON_GetObjectItem(p, "mtp_logits")->valuestring, rp->n_ids);
    const cJSON *routes = cJSON_GetObjectItem(p, "routes"), *layer;
    rp->n_moe = cJSON_GetArraySize(routes);
    rp->moe_layer = malloc((rp->n_moe ? rp->n_moe : 1) * sizeof(int));
    rp->routes = malloc(((size_t)rp->n_moe * rp->n_ids * f->top_k + 1) * sizeof(int));
    int li = 0;
    cJSON_ArrayForEach(layer, routes) {
        rp->moe_layer[li] = atoi(layer->string);
        for (int t = 0; t < rp->n_ids; t++) {
            const cJSON *row = cJSON_GetArrayItem(layer, t);
            if (cJSON_GetArraySize(row) != f->top_k) { fprintf(stderr, "%s: routes row of the wrong size\n", f->dir); return -1; }
            for (int k = 0; k < f->top_k; k++) rp->routes[((size_t)li * rp->n_ids + t) * f->top_k + k] = cJSON_GetArrayItem(row, k)->valueint;
        }
        li++;
    }
    return rp->logits && rp->mtp_logits ? 0 : -1;
}

int ref_fixture_load(const char *dir, int vocab, int top_k, ref_fixture *f)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "%s", dir);
    f->vocab = vocab;
    f->top_k = top_k;
    char path[2048];
    snprintf(path, sizeof path, "%s/ref/ref.json", dir);
    char *text = test_read_file(path, NULL);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *prompts = root ? cJSON_GetObjectItem(root, "prompts") : NULL;
    if (!prompts) { fprintf(stderr, "%s: missing or malformed (run make_fixtures.py --reference)\n", path); cJSON_Delete(root); return -1; }
    f->n_prompts = cJSON_GetArraySize(prompts);
    f->prompts = calloc(f->n_prompts, sizeof *f->prompts);
    int rc = 0;
    for (int i = 0; i < f->n_prompts && rc == 0; i++) rc = load_prompt(f, cJSON_GetArrayItem(prompts, i), &f->prompts[i]);
    cJSON_Delete(root);
    if (rc) ref_fixture_free(f);
    return rc;
}

void ref_fixture_free(ref_fixture *f)
{
    for (int i = 0; i < f->n_prompts; i++) {
        ref_prompt *p = &f->prompts[i];
        free(p->ids); free(p->logits); free(p->mtp_logits); free(p->greedy); free(p->moe_layer); free(p->routes);
    }
    free(f->prompts);
    memset(f, 0, sizeof *f);
}
