/* The router lookahead (core/model.c prefetch_ahead through dsspec_eval_guesses) against the
 * independent float64 numpy model (tests/fixtures/make_lookahead_ref.py writes ref/lookahead.json):
 * for every fixture, prompt, source layer and depth, the ranked guesses of every row agree up to
 * the ranks the reference orders by a clear gap; rows in chunks of 1, 5 and the whole prompt give
 * the same guesses. */
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "engine/dsspec.h"
#include "tests/test_check.h"

static dsspec *open_engine(const char *dir)
{
    dsspec_options o;
    dsspec_options_default(&o);
    o.model_dir = dir;
    o.threads = 2;
    o.load_tokenizer = 0;
    o.experts = DSSPEC_EXPERTS_DIRECT;
    char err[512];
    dsspec *e = dsspec_open(&o, NULL, err, sizeof err);
    CHECK(e != NULL, "%s: %s", dir, err);
    return e;
}

/* Rows of one reference list against the engine's guesses[source][d - 1][T][n]; mismatches. */
static int compare_list(const cJSON *list, const int *g, int T, int D, int n, int *compared)
{
    int s = cJSON_GetObjectItem(list, "source")->valueint, t = cJSON_GetObjectItem(list, "target")->valueint, bad = 0;
    const cJSON *rows = cJSON_GetObjectItem(list, "rows"), *exact = cJSON_GetObjectItem(list, "exact");
    CHECK(cJSON_GetArraySize(rows) == T, "source %d target %d: %d rows, expected %d", s, t, cJSON_GetArraySize(rows), T);
    for (int r = 0; r < T && r < cJSON_GetArraySize(rows); r++) {
        const int *got = g + (((size_t)s * D + (t - s - 1)) * T + r) * n;
        int ex = cJSON_GetArrayItem(exact, r)->valueint;
        for (int q = 0; q < ex && q < n; q++) {
            int want = cJSON_GetArrayItem(cJSON_GetArrayItem(rows, r), q)->valueint;
            (*compared)++;
            if (got[q] != want) {
                if (!bad) fprintf(stderr, "source %d target %d row %d rank %d: %d, expected %d\n", s, t, r, q, got[q], want);
                bad++;
            }
        }
    }
    return bad;
}

static void check_fixture(const char *dir)
{
    char path[1200], err[512];
    snprintf(path, sizeof path, "%s/ref/lookahead.json", dir);
    char *text = test_read_file(path, NULL);
    cJSON *ref = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECK(ref != NULL, "%s: missing or not JSON", path);
    dsspec *e = ref ? open_engine(dir) : NULL;
    if (!e) { cJSON_Delete(ref); return; }
    int D = cJSON_GetObjectItem(ref, "depth")->valueint, n = cJSON_GetObjectItem(ref, "guesses")->valueint;
    int L = dsspec_get_model_info(e)->n_layers;
    const cJSON *prompt;
    cJSON_ArrayForEach(prompt, cJSON_GetObjectItem(ref, "prompts")) {
        const cJSON *ids_j = cJSON_GetObjectItem(prompt, "ids");
        int T = cJSON_GetArraySize(ids_j), *ids = malloc((size_t)T * sizeof(int)), chunks[] = {1, 5, T};
        for (int i = 0; i < T; i++) ids[i] = cJSON_GetArrayItem(ids_j, i)->valueint;
        size_t cells = (size_t)L * D * T * n;
        int *g = malloc(cells * sizeof(int)), *first = malloc(cells * sizeof(int));
        for (int c = 0; c < 3; c++) {
            CHECK(dsspec_eval_guesses(e, ids, T, chunks[c], D, n, g, err, sizeof err) == 0, "%s: %s", dir, err);
            if (c == 0) memcpy(first, g, cells * sizeof(int));
            else CHECK(!memcmp(first, g, cells * sizeof(int)), "%s, %d positions: chunks of %d guess otherwise than rows one by one", dir, T, chunks[c]);
        }
        int bad = 0, compared = 0;
        const cJSON *list;
        cJSON_ArrayForEach(list, cJSON_GetObjectItem(prompt, "lists")) bad += compare_list(list, first, T, D, n, &compared);
        CHECK(bad == 0 && compared > 0, "%s, %d positions: %d of %d ranked guesses differ from the numpy model", dir, T, bad, compared);
        printf("%s, %d positions: %d ranked guesses equal the numpy model's\n", dir, T, compared - bad);
        free(ids); free(g); free(first);
    }
    dsspec_close(e);
    cJSON_Delete(ref);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) check_fixture(argv[i]);
    CHECK(argc > 1, "usage: test_lookahead FIXTURE_DIR...");
    return test_failures ? 1 : 0;
}
