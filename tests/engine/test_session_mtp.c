/* A session keeps the MTP rows --mtp auto leaves with holes: through session_on_checkpoint, a
 * hand-made sequence of boundaries as speculate/generate.c reports them (gen_checkpoint), where
 * KV-only MTP rows wait past the boundary that made their position final, some are never written
 * (a hole) and the window starts again after it; then the file is reopened and restored into
 * NaN-filled caches. Every row the last boundary calls valid must hold what was written for its
 * position (rows that were still unwritten when their main row was stored included), every main
 * row too; and a file cut after any record restores that record's window the same way.
 *
 * usage: test_session_mtp MODEL_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "engine/engine_internal.h"
#include "tests/test_check.h"

enum { N_PROMPT = 4, CTX = 64, STEPS = 20, GARBAGE = -7 };

/* The value row pos of a layer holds once written for its position (main: layer 0..L-1; MTP: -1). */
static float written(int layer, int pos, int i) { return 1000.0f * (layer + 2) + pos + i * 1e-3f; }

static void put_row(kv_cache *kv, int layer, int pos, float (*v)(int, int, int), int tag)
{
    float *lat = (float *)kv->latent + ((size_t)layer * kv->ctx + pos) * kv->latent_dim;
    float *rope = (float *)kv->krope + ((size_t)layer * kv->ctx + pos) * kv->rope_dim;
    for (int i = 0; i < kv->latent_dim; i++) lat[i] = v ? v(tag, pos, i) : GARBAGE;
    for (int i = 0; i < kv->rope_dim; i++) rope[i] = v ? v(tag, pos, i + kv->latent_dim) : GARBAGE;
}

static int row_is(const kv_cache *kv, int layer, int pos, int tag)
{
    const float *lat = (const float *)kv->latent + ((size_t)layer * kv->ctx + pos) * kv->latent_dim;
    const float *rope = (const float *)kv->krope + ((size_t)layer * kv->ctx + pos) * kv->rope_dim;
    for (int i = 0; i < kv->latent_dim; i++) if (lat[i] != written(tag, pos, i)) return 0;
    for (int i = 0; i < kv->rope_dim; i++) if (rope[i] != written(tag, pos, i + kv->latent_dim)) return 0;
    return 1;
}

static void fill_nan(kv_cache *kv)
{
    size_t rows = (size_t)kv->n_layers * kv->ctx;
    for (size_t i = 0; i < rows * kv->latent_dim; i++) ((float *)kv->latent)[i] = NAN;
    for (size_t i = 0; i < rows * kv->rope_dim; i++) ((float *)kv->krope)[i] = NAN;
}

/* The MTP rows of the hand-made run, step by step (one row per step; the boundary after step s
 * has KV length s + 3): in prefill (one boundary at 2 rows) rows [0, 2), then the last prompt row
 * and each decode step's row wait in a ring of 2 and are written only when a draft comes (steps 4,
 * 9, 10, 13, 19: the ring's rows, then the draft's own), the oldest forgotten when a third arrives.
 * Worked out: writes[s] = the rows written before boundary s, window[s] = the valid rows at it.
 * Step 13 writes rows 13 and 14, whose main rows went into the records of steps 11 and 12; steps 4
 * and 19 come after holes. */
typedef struct { int from, to; } span;
static const span writes[STEPS] = {{0, 2}, {2, 3}, {0, 0}, {0, 0}, {4, 7}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {9, 12},
                                   {12, 13}, {0, 0}, {0, 0}, {13, 16}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {19, 22}};
static const span window[STEPS] = {{0, 2}, {0, 3}, {0, 3}, {0, 3}, {4, 7}, {4, 7}, {4, 7}, {4, 7}, {4, 7}, {9, 12},
                                   {9, 13}, {9, 13}, {9, 13}, {9, 16}, {9, 16}, {9, 16}, {9, 16}, {9, 16}, {9, 16}, {19, 22}};

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) ? -1 : (long)st.st_size;
}

typedef struct {
    dsspec *e;
    const char *model, *path;
    kv_cache *kv, *mkv;
    gen_options g;
    session_sampling smp;
    int prompt[N_PROMPT];
} fixture;

static int open_bound(fixture *f, dsspec_session **s)
{
    char err[1024], note[512];
    *s = dsspec_session_open(f->path, f->model, 1, 0, note, sizeof note, err, sizeof err);
    CHECK(*s != NULL, "open %s: %s", f->path, err);
    if (!*s) return -1;
    int rc = session_bind(*s, f->e, f->prompt, N_PROMPT, &f->g, &f->smp, err, sizeof err);
    CHECK(rc == 0, "bind: %s", err);
    return rc;
}

/* Step s's boundary: its new main rows and MTP writes into the caches, then the record. */
static int boundary(fixture *f, dsspec_session *s, int step, int *fresh_from)
{
    char err[1024];
    int L = model_get_config(f->e->m)->num_hidden_layers;
    int prefill = step == 0, len = prefill ? 2 : N_PROMPT + step - 1, prev = step == 0 ? 0 : step == 1 ? 2 : len - 1;
    for (int p = prev; p < len; p++)
        for (int l = 0; l < L; l++) put_row(f->kv, l, p, written, l);
    for (int p = writes[step].from; p < writes[step].to; p++) put_row(f->mkv, 0, p, written, -1);
    if (!prefill) session_note_token(s, 100 + step);
    int fresh = writes[step].to > writes[step].from ? writes[step].from : window[step].to;
    *fresh_from = fresh;
    gen_checkpoint cp = {len, prefill ? 2 : N_PROMPT, prefill ? -1 : 100 + step, -1, 42, prefill ? 0 : step, prefill ? 0 : step - 1,
                         0, 0, window[step].from, window[step].to, fresh};
    int rc = session_on_checkpoint(s, &cp, f->kv, f->mkv, err, sizeof err);
    CHECK(rc == 0, "step %d: %s", step, err);
    return rc;
}

/* Reopens the file as it is and restores it into NaN-filled caches: the last record's window and
 * main rows must hold what was written. */
static void check_restore(fixture *f, int expect_step)
{
    dsspec_session *s;
    char err[1024];
    const model_config *c = model_get_config(f->e->m);
    if (open_bound(f, &s)) return;
    const gen_checkpoint *r = session_resume_point(s);
    CHECK(r && r->mtp_from == window[expect_step].from && r->mtp_to == window[expect_step].to,
          "after step %d: resume point's MTP rows [%d, %d), want [%d, %d)", expect_step, r ? r->mtp_from : -1, r ? r->mtp_to : -1,
          window[expect_step].from, window[expect_step].to);
    kv_cache *kv = kv_cache_create(c, 0, c->num_hidden_layers, CTX, DTYPE_F32), *mkv = kv_cache_create(c, c->num_hidden_layers, 1, CTX, DTYPE_F32);
    fill_nan(kv);
    fill_nan(mkv);
    int rc = r ? session_restore_kv(s, kv, mkv, err, sizeof err) : -1;
    CHECK(rc == 0, "restore after step %d: %s", expect_step, err);
    int bad_main = 0, bad_mtp = -1;
    for (int p = 0; rc == 0 && p < r->len; p++)
        for (int l = 0; l < c->num_hidden_layers; l++) bad_main += !row_is(kv, l, p, l);
    for (int p = rc == 0 ? r->mtp_from : 0; rc == 0 && p < r->mtp_to && bad_mtp < 0; p++)
        if (!row_is(mkv, 0, p, -1)) bad_mtp = p;
    CHECK(rc == 0 && bad_main == 0 && bad_mtp < 0, "after step %d: %d main rows wrong; MTP row %d of the valid [%d, %d) not as written",
          expect_step, bad_main, bad_mtp, r ? r->mtp_from : -1, r ? r->mtp_to : -1);
    kv_cache_free(kv);
    kv_cache_free(mkv);
    dsspec_session_close(s);
}

static void cut_file(const char *path, long bytes)
{
    CHECK(truncate(path, bytes) == 0, "truncate %s", path);
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: test_session_mtp MODEL_DIR\n"); return 2; }
    fixture f = {.model = argv[1], .prompt = {0, 5, 9, 17}};
    char err[1024], path[] = "/tmp/dsspec_session_mtp_XXXXXX";
    dsspec_options o;
    dsspec_options_default(&o);
    o.model_dir = f.model;
    o.ctx = CTX;
    o.threads = 1;
    CHECK((f.e = dsspec_open(&o, NULL, err, sizeof err)) != NULL, "open %s: %s", f.model, err);
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (!f.e || fd < 0) return 1;
    close(fd);
    unlink(path);
    f.path = path;
    const model_config *c = model_get_config(f.e->m);
    f.kv = kv_cache_create(c, 0, c->num_hidden_layers, CTX, DTYPE_F32);
    f.mkv = kv_cache_create(c, c->num_hidden_layers, 1, CTX, DTYPE_F32);
    for (int p = 0; p < CTX; p++) put_row(f.mkv, 0, p, NULL, 0); /* unwritten MTP rows: garbage */
    f.g = (gen_options){.mtp = GEN_MTP_AUTO, .eos_id = -1, .ctx = CTX};
    f.smp = (session_sampling){0.6, 0.95, 0, 0, 42};
    dsspec_session *s;
    long size_after[STEPS];
    if (open_bound(&f, &s)) return 1;
    for (int step = 0; step < STEPS; step++) {
        int fresh;
        if (boundary(&f, s, step, &fresh)) break;
        size_after[step] = file_size(path);
    }
    dsspec_session_close(s);
    for (int step = STEPS - 1; step >= 1 && !test_failures; step--) {
        cut_file(path, size_after[step]);
        check_restore(&f, step);
    }
    unlink(path);
    kv_cache_free(f.kv);
    kv_cache_free(f.mkv);
    dsspec_close(f.e);
    printf("%s\n", test_failures ? "FAILED" : "session: --mtp auto's MTP rows (with holes, and rows written after their boundary) restore as written, cut after any record");
    return test_failures ? 1 : 0;
}
