/* Tokenizer tests. Modes (one ctest each, see tests/tokenizer.cmake):
 *   unit DATA_DIR               hand-worked cases on tiny tokenizer.json files (no reference needed)
 *   bad BAD_DIR                 each BAD_DIR/NAME/tokenizer.json must fail to load with the error
 *                               substring in BAD_DIR/NAME/expect.txt
 *   corpus MODEL CORPUS IDS     every CORPUS/NAME.txt encodes to IDS/NAME.u32 (reference ids) and
 *                               decodes back to itself, in one call and streamed
 *   cases MODEL FILE.bin        encode/decode records written by ref.js (reference outputs)
 *   mutate DATA_DIR OUT_DIR N   N random corruptions of tiny/tokenizer.json: one-line error or a
 *                               working tokenizer, never a crash (run under ASan in CI)
 *   chat MODEL CHAT_DIR         NAME.json renders to NAME.gen.txt / NAME.nogen.txt (@huggingface/jinja
 *                               on R1's template) and the rendering encodes to NAME.ids */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test_check.h"
#include "tokenizer/tokenizer.h"



static tokenizer *load_or_die(const char *path)
{
    char err[512];
    tokenizer *tok = tokenizer_load(path, err, sizeof err);
    if (!tok) { fprintf(stderr, "FAIL: cannot load %s: %s\n", path, err); exit(1); }
    return tok;
}

static void print_ids(const char *label, const int32_t *ids, size_t n)
{
    fprintf(stderr, "  %s (%zu):", label, n);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

/* Compares ids, printing the first difference. */
static int same_ids(const char *what, const int32_t *got, size_t n_got, const int32_t *want, size_t n_want)
{
    size_t i = 0;
    while (i < n_got && i < n_want && got[i] == want[i]) i++;
    if (i == n_got && i == n_want) return 1;
    test_failures++;
    fprintf(stderr, "FAIL %s: ids differ at %zu\n", what, i);
    size_t from = i > 5 ? i - 5 : 0;
    print_ids("got ", got + from, n_got - from < 20 ? n_got - from : 20);
    print_ids("want", want + from, n_want - from < 20 ? n_want - from : 20);
    return 0;
}

/* Decode in one call and id by id through the stream; both must equal want[0..want_len). */
static void check_decode(tokenizer *tok, const char *what, const int32_t *ids, size_t n, int skip,
                         const char *want, size_t want_len)
{
    size_t len = 0;
    char *text = tokenizer_decode(tok, ids, n, skip, &len);
    CHECK(text && len == want_len && !memcmp(text, want, len), "%s: decode differs (%zu vs %zu bytes)", what, len, want_len);
    free(text);
    tokenizer_stream *st = tokenizer_stream_create(tok, skip);
    char *acc = malloc(want_len + 64 * n + 16);
    size_t acc_len = 0, piece;
    for (size_t i = 0; i < n; i++) {
        const char *p = tokenizer_stream_push(st, ids[i], &piece);
        memcpy(acc + acc_len, p, piece);
        acc_len += piece;
    }
    const char *p = tokenizer_stream_flush(st, &piece);
    memcpy(acc + acc_len, p, piece);
    acc_len += piece;
    CHECK(acc_len == want_len && !memcmp(acc, want, acc_len), "%s: streamed decode differs (%zu vs %zu bytes)", what, acc_len, want_len);
    free(acc);
    tokenizer_stream_free(st);
}

/* ------------------------------------------------------------------ corpus */

static int mode_corpus(const char *model, const char *corpus_dir, const char *ids_dir)
{
    tokenizer *tok = load_or_die(model);
    DIR *d = opendir(corpus_dir);
    if (!d) { fprintf(stderr, "FAIL: cannot open %s\n", corpus_dir); return 1; }
    size_t files = 0, tokens = 0, bytes = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl < 5 || strcmp(e->d_name + nl - 4, ".txt")) continue;
        char path[4096], ids_path[4096];
        snprintf(path, sizeof path, "%s/%s", corpus_dir, e->d_name);
        snprintf(ids_path, sizeof ids_path, "%s/%.*s.u32", ids_dir, (int)(nl - 4), e->d_name);
        size_t len = 0, ids_len = 0;
        char *text = test_read_file(path, &len), *want = test_read_file(ids_path, &ids_len);
        CHECK(text && want, "%s: cannot read corpus file or its ids %s", path, ids_path);
        if (text && want) {
            int32_t *ids; size_t n;
            CHECK(tokenizer_encode(tok, text, len, 0, &ids, &n) == 0, "%s: encode failed", path);
            same_ids(e->d_name, ids, n, (const int32_t *)want, ids_len / 4);
            check_decode(tok, e->d_name, ids, n, 0, text, len);
            files++; tokens += n; bytes += len;
            free(ids);
        }
        free(text); free(want);
    }
    closedir(d);
    tokenizer_free(tok);
    CHECK(files > 0 && tokens >= 300000, "corpus too small: %zu files, %zu tokens", files, tokens);
    printf("corpus: %zu files, %zu bytes, %zu tokens, %d test_failures\n", files, bytes, tokens, test_failures);
    return test_failures != 0;
}

/* ------------------------------------------------------------------ cases */

static int mode_cases(const char *model, const char *file)
{
    tokenizer *tok = load_or_die(model);
    size_t len;
    char *buf = test_read_file(file, &len);
    if (!buf || len < 4 || memcmp(buf, "TKC1", 4)) { fprintf(stderr, "FAIL: %s: not a case file\n", file); return 1; }
    size_t at = 4, n_cases = 0, n_enc = 0;
    while (at < len) {
        uint8_t kind = (uint8_t)buf[at];
        uint32_t blen, n;
        memcpy(&blen, buf + at + 1, 4);
        const char *bytes = buf + at + 5;
        memcpy(&n, bytes + blen, 4);
        int32_t *want = malloc(n * sizeof *want + 4);
        memcpy(want, bytes + blen + 4, n * 4u);
        at += 5 + blen + 4 + (size_t)n * 4;
        char what[64];
        snprintf(what, sizeof what, "%s case %zu", kind ? "decode" : "encode", n_cases);
        if (kind == 0) {
            int32_t *ids; size_t n_ids;
            CHECK(tokenizer_encode(tok, bytes, blen, 0, &ids, &n_ids) == 0, "%s: encode failed", what);
            if (!same_ids(what, ids, n_ids, want, n)) fprintf(stderr, "  text: \"%.*s\"\n", (int)(blen > 300 ? 300 : blen), bytes);
            free(ids);
            n_enc++;
        } else {
            check_decode(tok, what, want, n, kind == 2, bytes, blen);
        }
        free(want);
        n_cases++;
    }
    free(buf);
    tokenizer_free(tok);
    CHECK(n_cases > 0, "%s: no cases", file);
    printf("cases: %zu (%zu encode, %zu decode), %d test_failures\n", n_cases, n_enc, n_cases - n_enc, test_failures);
    return test_failures != 0;
}

/* ------------------------------------------------------------------ chat */

static int mode_chat(const char *model, const char *dir)
{
    tokenizer *tok = load_or_die(model);
    DIR *d = opendir(dir);
    if (!d) { fprintf(stderr, "FAIL: cannot open %s\n", dir); return 1; }
    size_t n_conv = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl < 6 || strcmp(e->d_name + nl - 5, ".json")) continue;
        char path[4096], gen_path[4096], nogen_path[4096], ids_path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(gen_path, sizeof gen_path, "%s/%.*s.gen.txt", dir, (int)(nl - 5), e->d_name);
        snprintf(nogen_path, sizeof nogen_path, "%s/%.*s.nogen.txt", dir, (int)(nl - 5), e->d_name);
        snprintf(ids_path, sizeof ids_path, "%s/%.*s.ids", dir, (int)(nl - 5), e->d_name);
        size_t ids_len = 0;
        char *json = test_read_file(path, NULL), *gen = test_read_file(gen_path, NULL), *nogen = test_read_file(nogen_path, NULL);
        char *want_ids = test_read_file(ids_path, &ids_len);
        CHECK(json && gen && nogen && want_ids, "%s: missing golden files", path);
        if (json && gen && nogen && want_ids) {
            char err[256];
            char *got = tokenizer_render_chat(tok, json, 1, err, sizeof err);
            CHECK(got && !strcmp(got, gen), "%s: render (generation prompt) differs: %s\n  got:  %s\n  want: %s",
                  e->d_name, got ? "" : err, got ? got : "", gen);
            char *got2 = tokenizer_render_chat(tok, json, 0, err, sizeof err);
            CHECK(got2 && !strcmp(got2, nogen), "%s: render (no generation prompt) differs: %s\n  got:  %s\n  want: %s",
                  e->d_name, got2 ? "" : err, got2 ? got2 : "", nogen);
            if (got) {
                int32_t *ids; size_t n;
                CHECK(tokenizer_encode(tok, got, strlen(got), 0, &ids, &n) == 0, "encode failed");
                same_ids(e->d_name, ids, n, (const int32_t *)want_ids, ids_len / 4);
                free(ids);
            }
            free(got); free(got2);
            n_conv++;
        }
        free(json); free(gen); free(nogen); free(want_ids);
    }
    closedir(d);
    tokenizer_free(tok);
    CHECK(n_conv >= 5, "only %zu conversations", n_conv);
    printf("chat: %zu conversations, %d test_failures\n", n_conv, test_failures);
    return test_failures != 0;
}

/* ------------------------------------------------------------------ bad input */

static int mode_bad(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) { fprintf(stderr, "FAIL: cannot open %s\n", dir); return 1; }
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096], expect_path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(expect_path, sizeof expect_path, "%s/%s/expect.txt", dir, e->d_name);
        char *expect = test_read_file(expect_path, NULL);
        CHECK(expect, "%s: missing expect.txt", path);
        if (!expect) continue;
        expect[strcspn(expect, "\n")] = 0;
        char err[512] = "";
        tokenizer *tok = tokenizer_load(path, err, sizeof err);
        CHECK(!tok, "%s: loaded but should have failed", e->d_name);
        CHECK(strstr(err, expect) && !strchr(err, '\n'), "%s: error \"%s\" lacks \"%s\"", e->d_name, err, expect);
        printf("  %-28s -> %s\n", e->d_name, err);
        tokenizer_free(tok);
        free(expect);
        n++;
    }
    closedir(d);
    CHECK(n >= 8, "only %zu bad inputs", n);
    printf("bad input: %zu files, %d test_failures\n", n, test_failures);
    return test_failures != 0;
}

/* ------------------------------------------------------------------ mutated files */

/* Random corruptions of a valid tokenizer.json (byte changes, deletions, truncation): loading must
 * either succeed or fail with one error line; whatever loads must encode and decode. Under ASan
 * this is the no-crash, no-leak check for malformed input. */
static int mode_mutate(const char *data, const char *out_dir, int rounds)
{
    char path[4096], out[4096];
    snprintf(path, sizeof path, "%s/tiny/tokenizer.json", data);
    snprintf(out, sizeof out, "%s/tokenizer_mutated.json", out_dir);
    size_t len;
    char *orig = test_read_file(path, &len);
    if (!orig) { fprintf(stderr, "FAIL: cannot read %s\n", path); return 1; }
    static const char alphabet[] = "{}[]\":,0123456789-truenulfasBPEp\\ \xC3\xBF";
    uint32_t x = 2463534242u;
    int loaded = 0;
    for (int r = 0; r < rounds; r++) {
        char *buf = malloc(len + 1);
        memcpy(buf, orig, len + 1);
        size_t n = len;
        int edits = 1 + r % 4;
        for (int e = 0; e < edits && n > 1; e++) {
            x ^= x << 13; x ^= x >> 17; x ^= x << 5;
            size_t at = x % n;
            switch ((x >> 24) % 3) {
            case 0: buf[at] = alphabet[(x >> 8) % (sizeof alphabet - 1)]; break;
            case 1: memmove(buf + at, buf + at + 1, n - at - 1); n--; break;
            default: n = at + 1; break;
            }
        }
        FILE *f = fopen(out, "wb");
        fwrite(buf, 1, n, f);
        fclose(f);
        free(buf);
        char err[512] = "";
        tokenizer *tok = tokenizer_load(out, err, sizeof err);
        if (!tok) {
            CHECK(err[0] && !strchr(err, '\n'), "round %d: failure without one error line: \"%s\"", r, err);
            continue;
        }
        loaded++;
        int32_t *ids; size_t n_ids;
        const char *text = "abc <X> [Y] a\xC3\xA9 \xFF!";
        CHECK(tokenizer_encode(tok, text, strlen(text), 1, &ids, &n_ids) == 0, "round %d: encode failed", r);
        char *back = tokenizer_decode(tok, ids, n_ids, 0, NULL);
        CHECK(back != NULL, "round %d: decode failed", r);
        free(back); free(ids);
        tokenizer_free(tok);
    }
    remove(out);
    free(orig);
    printf("mutate: %d rounds, %d loaded, %d test_failures\n", rounds, loaded, test_failures);
    return test_failures != 0;
}

/* ------------------------------------------------------------------ unit (hand-worked) */

static void expect_encode(tokenizer *tok, const char *text, size_t len, const int32_t *want, size_t n_want)
{
    int32_t *ids; size_t n;
    CHECK(tokenizer_encode(tok, text, len, 0, &ids, &n) == 0, "encode failed");
    char what[128];
    snprintf(what, sizeof what, "encode \"%.60s\"", text);
    same_ids(what, ids, n, want, n_want);
    free(ids);
}

#define ENCODE(tok, text, ...)                                                                     \
    do {                                                                                           \
        const int32_t want_[] = {__VA_ARGS__};                                                     \
        expect_encode(tok, text, strlen(text), want_, sizeof want_ / sizeof want_[0]);             \
    } while (0)

/* tiny.json (see data/tiny/README): vocab a b c d ab bc abc cd Ġ Ġa ..., merges by rank:
 *   0: "a b" -> ab, 1: "b c" -> bc, 2: "ab c" -> abc, 3: "c d" -> cd, 4: "Ġ a" -> Ġa */
static void unit_bpe(const char *data)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tiny/tokenizer.json", data);
    tokenizer *tok = load_or_die(path);
    int32_t a = tokenizer_token_id(tok, "a"), b = tokenizer_token_id(tok, "b"), c = tokenizer_token_id(tok, "c");
    int32_t d = tokenizer_token_id(tok, "d"), ab = tokenizer_token_id(tok, "ab"), abc = tokenizer_token_id(tok, "abc");
    int32_t cd = tokenizer_token_id(tok, "cd"), sp_a = tokenizer_token_id(tok, "Ġa"), bc = tokenizer_token_id(tok, "bc");
    CHECK(a >= 0 && ab >= 0 && abc >= 0 && sp_a >= 0 && bc >= 0, "tiny vocab lookups");
    /* "abc": rank 0 (a,b) beats rank 1 (b,c): ab c, then rank 2 -> abc */
    ENCODE(tok, "abc", abc);
    /* "bcd": (b,c) rank 1 before (c,d) rank 3 -> bc d; (bc,d) has no merge */
    ENCODE(tok, "bcd", bc, d);
    /* "abcd": ab c d -> (ab,c) rank 2 vs (c,d) rank 3 -> abc d */
    ENCODE(tok, "abcd", abc, d);
    /* "aab": (a,a) none; (a,b) at pos 1 -> a ab */
    ENCODE(tok, "aab", a, ab);
    /* "abab": both (a,b) have rank 0: leftmost first, both merge -> ab ab */
    ENCODE(tok, "abab", ab, ab);
    /* whitespace split (Split \s+ Removed is not used: tiny uses the GPT-2 ByteLevel regex) */
    ENCODE(tok, "ab a", ab, sp_a);
    ENCODE(tok, "cd", cd);
    /* bytes without a symbol are dropped (no unk_token), as the reference does: ö = C3 B6, and
     * tiny has Ã (C3) but not ¶ (B6) */
    ENCODE(tok, "a\xC3\xB6", a, tokenizer_token_id(tok, "Ã"));
    /* added tokens: <X> is special (lstrip), [Y] is single_word */
    int32_t x = tokenizer_token_id(tok, "<X>"), y = tokenizer_token_id(tok, "[Y]");
    CHECK(x >= 0 && y >= 0 && tokenizer_is_special(tok, x) && !tokenizer_is_special(tok, y), "added token flags");
    ENCODE(tok, "ab <X>c", ab, x, c);   /* lstrip eats the space before <X> */
    ENCODE(tok, "<X>", x);
    /* single word: matched; "a " then splits as GPT-2's regex does: "a", " " */
    ENCODE(tok, "a [Y] b", a, tokenizer_token_id(tok, "Ġ"), y, tokenizer_token_id(tok, "Ġb"));
    ENCODE(tok, "a[Y]b", a, tokenizer_token_id(tok, "["), tokenizer_token_id(tok, "Y"), tokenizer_token_id(tok, "]"), b);
    /* decode: special skipped on request; ByteLevel maps Ġ back to a space */
    const int32_t ids[] = {ab, x, sp_a};
    check_decode(tok, "tiny decode", ids, 3, 0, "ab<X> a", 7);
    check_decode(tok, "tiny decode skip", ids, 3, 1, "ab a", 4);
    CHECK(tokenizer_bos_id(tok) == x && tokenizer_eos_id(tok) == y && tokenizer_adds_bos(tok), "config bos/eos");
    int32_t *got; size_t n;
    CHECK(tokenizer_encode(tok, "a", 1, 1, &got, &n) == 0 && n == 2 && got[0] == x && got[1] == a, "BOS prepended");
    free(got);
    tokenizer_free(tok);
}

/* Split behaviors on hand-made files: the literal "-" with each behavior on "a-b--c". The merges
 * "a -", "- b", "- -", "- c", "b -" join whatever a piece holds, so the ids show the pieces
 * (worked out by hand from the reference's SplitDelimiterBehavior definitions). */
static void unit_split_behaviors(const char *data)
{
    static const char *const names[] = {"isolated", "removed", "merged_prev", "merged_next", "contiguous"};
    static const char *const want[][6] = {
        {"a", "-", "b", "-", "-", "c"}, {"a", "b", "c"}, {"a-", "b-", "-", "c"}, {"a", "-b", "-", "-c"},
        {"a", "-", "b", "--", "c"},
    };
    static const size_t want_n[] = {6, 3, 4, 4, 5};
    for (size_t k = 0; k < 5; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/split_%s/tokenizer.json", data, names[k]);
        tokenizer *tok = load_or_die(path);
        int32_t want_ids[6];
        for (size_t p = 0; p < want_n[k]; p++) want_ids[p] = tokenizer_token_id(tok, want[k][p]);
        expect_encode(tok, "a-b--c", 6, want_ids, want_n[k]);
        tokenizer_free(tok);
    }
}

static void unit_utf8(const char *data)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tiny/tokenizer.json", data);
    tokenizer *tok = load_or_die(path);
    /* invalid bytes become U+FFFD before encoding: tiny has no symbol for its bytes, so compare
     * against encoding the hand-repaired text */
    struct { const char *bad, *repaired; } cases[] = {
        {"a\xFF" "b", "a\xEF\xBF\xBD" "b"},
        {"a\xE2\x82" "b", "a\xEF\xBF\xBD" "b"},                    /* truncated 3-byte: one U+FFFD */
        {"a\xED\xA0\x80" "b", "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" "b"}, /* surrogate: ED then 2 bytes */
        {"a\xF0\x9F\x98", "a\xEF\xBF\xBD"},                       /* truncated at the end */
        {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},                  /* overlong: each byte */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t *x, *y; size_t nx, ny;
        tokenizer_encode(tok, cases[i].bad, strlen(cases[i].bad), 0, &x, &nx);
        tokenizer_encode(tok, cases[i].repaired, strlen(cases[i].repaired), 0, &y, &ny);
        same_ids("lossy utf8", x, nx, y, ny);
        free(x); free(y);
    }
    /* streaming holds a split character: "é" = C3 A9 spread over two byte tokens */
    int32_t c3 = tokenizer_token_id(tok, "Ã"), a9 = tokenizer_token_id(tok, "©"), a = tokenizer_token_id(tok, "a");
    CHECK(c3 >= 0 && a9 >= 0, "tiny has the byte symbols of C3 and A9");
    tokenizer_stream *st = tokenizer_stream_create(tok, 0);
    size_t n;
    const char *p = tokenizer_stream_push(st, a, &n);
    CHECK(n == 1 && p[0] == 'a', "stream: ascii passes through");
    p = tokenizer_stream_push(st, c3, &n);
    CHECK(n == 0, "stream: half a character is held");
    p = tokenizer_stream_push(st, a9, &n);
    CHECK(n == 2 && !memcmp(p, "\xC3\xA9", 2), "stream: completed character is released");
    p = tokenizer_stream_push(st, c3, &n);
    CHECK(n == 0, "stream: held again");
    p = tokenizer_stream_push(st, a, &n);
    CHECK(n == 4 && !memcmp(p, "\xEF\xBF\xBD" "a", 4), "stream: broken sequence becomes U+FFFD");
    p = tokenizer_stream_push(st, c3, &n);
    p = tokenizer_stream_flush(st, &n);
    CHECK(n == 3 && !memcmp(p, "\xEF\xBF\xBD", 3), "stream: flush releases a dangling byte as U+FFFD");
    tokenizer_stream_free(st);
    tokenizer_free(tok);
}

static void expect_chat(const tokenizer *tok, const char *json, int gen, const char *want)
{
    char err[256];
    char *got = tokenizer_render_chat(tok, json, gen, err, sizeof err);
    CHECK(got && !strcmp(got, want), "chat %s\n  got:  %s\n  want: %s", json, got ? got : err, want);
    free(got);
}

static void unit_chat(const char *data)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tiny/tokenizer.json", data);
    tokenizer *tok = load_or_die(path); /* its config names bos_token "<X>" */
    expect_chat(tok, "[{\"role\":\"user\",\"content\":\"hi\"}]", 1, "<X><｜User｜>hi<｜Assistant｜><think>\n");
    expect_chat(tok, "[{\"role\":\"system\",\"content\":\"S1\"},{\"role\":\"user\",\"content\":\"q\"},"
                     "{\"role\":\"system\",\"content\":\"S2\"}]", 0, "<X>S1\n\nS2<｜User｜>q");
    expect_chat(tok, "[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":"
                     "\"<think>a</think>b</think>c\"}]", 0, "<X><｜User｜>q<｜Assistant｜>c<｜end▁of▁sentence｜>");
    char err[256];
    char *bad = tokenizer_render_chat(tok, "[{\"role\":\"user\",\"content\":null}]", 1, err, sizeof err);
    CHECK(!bad && strstr(err, "messages[0]"), "null user content is an error: %s", err);
    bad = tokenizer_render_chat(tok, "{\"role\":\"user\"}", 1, err, sizeof err);
    CHECK(!bad && strstr(err, "array"), "non-array messages is an error: %s", err);
    bad = tokenizer_render_chat(tok, "[{\"role\":", 1, err, sizeof err);
    CHECK(!bad && strstr(err, "malformed"), "malformed JSON is an error: %s", err);
    /* The Jinja template renders other roles as nothing; dsspec refuses them rather than drop a turn. */
    bad = tokenizer_render_chat(tok, "[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"developer\",\"content\":\"x\"}]", 1, err, sizeof err);
    CHECK(!bad && strstr(err, "messages[1]") && strstr(err, "developer"), "an unknown role is an error naming the message: %s", err);
    bad = tokenizer_render_chat(tok, "[{\"content\":\"q\"}]", 1, err, sizeof err);
    CHECK(!bad && strstr(err, "messages[0]") && strstr(err, "role"), "a message without a role is an error: %s", err);
    bad = tokenizer_render_chat(tok, "[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]", 1, err, sizeof err);
    CHECK(!bad && strstr(err, "messages[0]") && strstr(err, "content"), "non-string content is an error: %s", err);
    tokenizer_free(tok);
}

static int mode_unit(const char *data)
{
    unit_bpe(data);
    unit_split_behaviors(data);
    unit_utf8(data);
    unit_chat(data);
    printf("unit: %d test_failures\n", test_failures);
    return test_failures != 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "unit")) return mode_unit(argv[2]);
    if (argc >= 3 && !strcmp(argv[1], "bad")) return mode_bad(argv[2]);
    if (argc >= 5 && !strcmp(argv[1], "corpus")) return mode_corpus(argv[2], argv[3], argv[4]);
    if (argc >= 4 && !strcmp(argv[1], "cases")) return mode_cases(argv[2], argv[3]);
    if (argc >= 4 && !strcmp(argv[1], "chat")) return mode_chat(argv[2], argv[3]);
    if (argc >= 5 && !strcmp(argv[1], "mutate")) return mode_mutate(argv[2], argv[3], atoi(argv[4]));
    fprintf(stderr, "usage: test_tokenizer unit DATA | bad DIR | mutate DATA OUT N | corpus MODEL CORPUS IDS | cases MODEL FILE | chat MODEL DIR\n");
    return 2;
}
