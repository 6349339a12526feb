/* A MoE layer runs the experts it finds ready together, whole experts on the pool's threads
 * (core/model.c's run_taken_experts), or one by one with each matrix shared out by rows. Which
 * way, and how many at once, depends on the cache's state and the thread count; a row's numbers
 * must not. The reference is the engine opened with DSSPEC_EXPERTS_DIRECT on one thread: that
 * provider hands out one expert at a time, so every expert runs alone there. Every other
 * configuration's logits of a held-out segment must equal it bit for bit: cached experts with 1 to
 * 3 threads (3 leaves a remainder of experts shared out by rows), a cache too small for a layer's
 * experts (groups of whatever is ready), batches of 64 rows (pieces of 32 rows, one expert on
 * one thread) and of one row. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include "engine/dsspec.h"
#include "tests/engine/engine_test.h"

typedef struct {
    const char *what;
    dsspec_expert_source experts;
    int threads;
    double cache_gib; /* 0: everything cached */
    int chunk;
} config;

static dsspec *open_engine(const char *dir, const config *c)
{
    dsspec_options o;
    dsspec_options_default(&o);
    o.model_dir = dir;
    o.threads = c->threads;
    o.load_tokenizer = 0;
    o.experts = c->experts;
    o.cache_gib = c->cache_gib;
    o.mtp = DSSPEC_MTP_OFF;
    char err[512];
    dsspec *e = dsspec_open(&o, NULL, err, sizeof err);
    CHECK(e, "%s: %s: %s", dir, c->what, err);
    return e;
}

static int eval_config(const char *dir, const config *c, const int *ids, int T, float *logits)
{
    dsspec *e = open_engine(dir, c);
    if (!e) return -1;
    char err[512];
    int rc = dsspec_eval(e, ids, T, c->chunk, logits, NULL, NULL, err, sizeof err);
    CHECK(rc == 0, "%s: %s", c->what, err);
    dsspec_close(e);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3) { fprintf(stderr, "usage: test_expert_groups MODEL_DIR HELDOUT_IDS.json\n"); return 2; }
    const char *dir = argv[1];
    char *text = test_read_file(argv[2], NULL);
    cJSON *json = text ? cJSON_Parse(text) : NULL;
    const cJSON *seg = cJSON_GetArrayItem(cJSON_GetObjectItem(json, "segments"), 0);
    CHECK(seg && cJSON_GetArraySize(seg) >= 160, "%s: no held-out segment of >= 160 ids", argv[2]);
    if (test_failures) return 1;
    enum { T = 160 };
    int ids[T];
    for (int t = 0; t < T; t++) ids[t] = cJSON_GetArrayItem(seg, t)->valueint;

    const config ref = {"direct experts, 1 thread, 64-row batches", DSSPEC_EXPERTS_DIRECT, 1, 0, 64};
    const config cases[] = {
        {"cached, 1 thread, 64-row batches", DSSPEC_EXPERTS_CACHED, 1, 0, 64},
        {"cached, 2 threads, 64-row batches", DSSPEC_EXPERTS_CACHED, 2, 0, 64},
        {"cached, 3 threads, 64-row batches", DSSPEC_EXPERTS_CACHED, 3, 0, 64},
        {"cached, 2 threads, 1-row batches", DSSPEC_EXPERTS_CACHED, 2, 0, 1},
        {"a 1.2 MiB cache (15 slots), 3 threads, 64-row batches", DSSPEC_EXPERTS_CACHED, 3, 1.2 / 1024, 64},
        {"a 1.2 MiB cache (15 slots), 2 threads, 1-row batches", DSSPEC_EXPERTS_CACHED, 2, 1.2 / 1024, 1},
    };
    dsspec *probe = open_engine(dir, &ref);
    if (!probe) return 1;
    size_t V = (size_t)dsspec_get_model_info(probe)->vocab_size;
    dsspec_close(probe);
    float *want = malloc(T * V * sizeof(float)), *got = malloc(T * V * sizeof(float));
    CHECK(want && got, "out of memory");
    if (!test_failures && eval_config(dir, &ref, ids, T, want) == 0) {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            memset(got, 0, T * V * sizeof(float));
            if (eval_config(dir, &cases[i], ids, T, got)) continue;
            size_t bad = 0;
            for (size_t j = 0; j < T * V; j++) bad += memcmp(&got[j], &want[j], sizeof(float)) != 0;
            CHECK(bad == 0, "%s: %zu of %zu logits differ from one expert at a time", cases[i].what, bad, T * V);
            if (bad == 0) printf("%s: %d positions' logits identical to one expert at a time\n", cases[i].what, T);
        }
    }
    free(want);
    free(got);
    cJSON_Delete(json);
    free(text);
    return test_failures ? 1 : 0;
}
