/* Session files (engine/session.c) as `dsspec run --resume` reads them: the input is the session
 * file, opened with resume on, checked against the run that wrote the seeds (the embedded model,
 * the prompt, flags and context below; tests/fuzz/seeds/session/README.md) and, when accepted,
 * continued by dsspec_generate to max_new tokens.
 *
 * Contract: dsspec_session_open and dsspec_session_check refuse with one line naming the file, or
 * the session is usable: the generation ends without error or with one line, and every token it
 * delivers is inside the vocabulary. When the input is a prefix of a whole session written by the
 * engine (a run killed at any byte), nothing may be refused and the tokens must equal those of an
 * uninterrupted run computed here without a session.
 *
 * Records carry a CRC, which random mutations almost never keep valid, so every input also runs a
 * second time with each whole record's CRC recomputed: that reaches the checks behind the CRC (a
 * crafted file, not a damaged one). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/dsspec.h"
#include "tests/fuzz/fuzz_util.h"

enum { PROMPT_N = 3, MAX_NEW = 8, CTX = 16, SEED = 5 };
static const int prompt[PROMPT_N] = {0, 1000, 2024};
static const double temperature = 0.8;

static dsspec *engine;
static int vocab;
static int reference[MAX_NEW];
static const char *const whole_names[] = {"whole_run.dssession", "whole_run_prefill_chunk_1.dssession",
                                          "whole_run_resumed_at_4.dssession"};
enum { N_WHOLE = sizeof whole_names / sizeof *whole_names };
static uint8_t *whole[N_WHOLE];                /* the seeds that hold a whole run */
static size_t whole_len[N_WHOLE];

typedef struct {
    int ids[MAX_NEW];
    int n, bad, bad_token;
} collected;

static void on_token(void *ctx, int token)
{
    collected *c = ctx;
    if (token < 0 || token >= vocab) { c->bad = 1; c->bad_token = token; }
    if (c->n < MAX_NEW) c->ids[c->n] = token;
    c->n++;
}

static void params_for(dsspec_generate_params *p, collected *c, dsspec_session *s)
{
    dsspec_generate_params_default(p);
    p->max_new = MAX_NEW;
    p->temperature = temperature;
    p->seed = SEED;
    p->ignore_eos = 1;
    p->on_token = on_token;
    p->ctx = c;
    p->session = s;
}

static uint8_t *read_seed(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fuzz/seeds/session/%s", DSSPEC_SOURCE_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f) fuzz_fail("cannot read the seed %s", path);
    uint8_t *buf = malloc(1 << 20);
    if (!buf) fuzz_fail("out of memory");
    *len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    dsspec_options o;
    dsspec_options_default(&o);
    o.threads = 1;
    o.cpu_features = "avx2";   /* the seeds' kernel path: a session refuses another one */
    o.mtp = DSSPEC_MTP_ON;
    o.ctx = CTX;
    o.kv_bf16 = 1;
    o.mem_budget = 256ll << 20;
    char err[1024];
    if (!(engine = dsspec_open(&o, NULL, err, sizeof err))) fuzz_fail("cannot open the embedded model: %s", err);
    vocab = dsspec_get_model_info(engine)->vocab_size;
    collected c = {0};
    dsspec_generate_params p;
    params_for(&p, &c, NULL);
    dsspec_gen_stats st;
    if (dsspec_generate(engine, prompt, PROMPT_N, &p, &st, err, sizeof err) || c.n != MAX_NEW || c.bad)
        fuzz_fail("the uninterrupted reference run failed: %s", err);
    memcpy(reference, c.ids, sizeof reference);
    for (int i = 0; i < N_WHOLE; i++) whole[i] = read_seed(whole_names[i], &whole_len[i]);
    return 0;
}

static int is_prefix_of_whole(const uint8_t *data, size_t size)
{
    for (int i = 0; i < N_WHOLE; i++)
        if (size <= whole_len[i] && !memcmp(data, whole[i], size)) return 1;
    return 0;
}

static void check_refusal(const char *what, const char *err, const char *path, int must_accept)
{
    fuzz_check_error_line(what, err);
    if (!strstr(err, path)) fuzz_fail("%s: the error does not name the file %s: %s", what, path, err);
    if (must_accept) fuzz_fail("%s refused a prefix of a whole session: %s", what, err);
}

static void resume(const uint8_t *data, size_t size)
{
    int exact = is_prefix_of_whole(data, size);
    const char *path = fuzz_memfile(data, size);
    char err[1024] = "", note[1024] = "";
    dsspec_session *s = dsspec_session_open(path, NULL, 1, 0, note, sizeof note, err, sizeof err);
    if (!s) { check_refusal("dsspec_session_open", err, path, exact); return; }
    if (strpbrk(note, "\n\r")) fuzz_fail("the note is more than one line: %s", note);
    const int *held;
    int n_held = dsspec_session_tokens(s, &held);
    if (n_held < 0 || (n_held > 0 && !held)) fuzz_fail("dsspec_session_tokens: %d tokens at %p", n_held, (const void *)held);
    collected c = {0};
    dsspec_generate_params p;
    params_for(&p, &c, s);
    if (dsspec_session_check(s, engine, prompt, PROMPT_N, &p, err, sizeof err)) {
        check_refusal("dsspec_session_check", err, path, exact);
    } else {
        dsspec_gen_stats st;
        if (dsspec_generate(engine, prompt, PROMPT_N, &p, &st, err, sizeof err)) {
            fuzz_check_error_line("dsspec_generate", err);
            if (exact) fuzz_fail("resuming a prefix of a whole session failed: %s", err);
        }
        if (c.bad) fuzz_fail("a token outside the vocabulary [0, %d) was delivered: %d", vocab, c.bad_token);
        if (c.n > MAX_NEW) fuzz_fail("%d tokens delivered, at most %d asked", c.n, MAX_NEW);
        if (exact && (c.n != MAX_NEW || memcmp(c.ids, reference, sizeof reference)))
            fuzz_fail("resuming a prefix of %zu bytes of a whole session gave other tokens than an uninterrupted run", size);
    }
    dsspec_session_close(s);
}

/* Every whole record (magic, type, u64 length, payload, CRC) gets the CRC its bytes have. */
static void fix_crcs(uint8_t *d, size_t size)
{
    size_t off = 0;
    while (size - off >= 20) {
        uint32_t magic;
        uint64_t len;
        memcpy(&magic, d + off, 4);
        memcpy(&len, d + off + 8, 8);
        if (magic != 0x52535344u || len > size - off - 20) return;
        uint32_t crc = ~0u;
        for (size_t i = off + 4; i < off + 16 + len; i++) {
            crc ^= d[i];
            for (int k = 0; k < 8; k++) crc = crc & 1 ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
        }
        crc = ~crc;
        memcpy(d + off + 16 + len, &crc, 4);
        off += 20 + len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    resume(data, size);
    uint8_t *fixed = malloc(size + 1);
    if (!fixed) fuzz_fail("out of memory");
    memcpy(fixed, data, size);
    fix_crcs(fixed, size);
    if (memcmp(fixed, data, size)) resume(fixed, size);
    free(fixed);
    return 0;
}
