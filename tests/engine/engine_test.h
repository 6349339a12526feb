/* Helpers shared by the engine tests (CHECK and test_read_file are tests/test_check.h): loading
 * the reference fixtures produced by tests/fixtures/make_fixtures.py (transformers, float64). */
#ifndef DSSPEC_ENGINE_TEST_H
#define DSSPEC_ENGINE_TEST_H

#include <stddef.h>
#include <stdio.h>

#include "tests/test_check.h"

typedef struct {
    int n_ids;
    int *ids;
    float *logits, *mtp_logits;   /* [n_ids][vocab] */
    int n_greedy;
    int *greedy;
    int n_moe;                    /* layers in routes */
    int *moe_layer;               /* [n_moe] */
    int *routes;                  /* [n_moe][n_ids][top_k], ascending ids */
} ref_prompt;

typedef struct {
    char dir[1024];
    int vocab, top_k, n_prompts;
    ref_prompt *prompts;
} ref_fixture;

/* Loads <dir>/ref/ref.json and its logits files; 0 ok, -1 with a message on stderr. */
int ref_fixture_load(const char *dir, int vocab, int top_k, ref_fixture *f);
void ref_fixture_free(ref_fixture *f);

#endif
