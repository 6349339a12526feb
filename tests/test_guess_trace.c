/* The recorded-guess reader (cache/guess_trace.c) on a file worked out by hand: two rows, MoE
 * layers 1 and 2 over 6 experts, top-2; depth 1 keeps 3 guesses, depth 2 keeps 2 (layer 2 only).
 * A byte is the guess's index in the row's permutation: real experts ascending, then (depth 2) the
 * depth-1 guesses not among them, then the rest ascending. Worked out:
 *   row 0 layer 1: route 1 4 -> perm 1 4 0 2 3 5; guesses 4 2 1 -> codes 1 3 0
 *   row 1 layer 1: route 2 3 -> perm 2 3 0 1 4 5; guesses 5 2 0 -> codes 5 0 2
 *   row 0 layer 2: route 0 5 -> perm 0 5 1 2 3 4; guesses 3 0 1 -> codes 4 0 2
 *   row 1 layer 2: route 1 4 -> perm 1 4 0 2 3 5; guesses 4 5 0 -> codes 1 5 2
 *   depth 2, row 0: 0 5 + 3 1 + 2 4 -> guesses 1 2 -> codes 3 4
 *   depth 2, row 1: 1 4 + 5 0 + 2 3 -> guesses 3 1 -> codes 5 0
 * Broken files (a code beyond the experts, a row count the trace does not have, a cut payload,
 * bytes left over) are one error line naming the file. */
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "cache/expert_cache.h"
#include "tests/test_cache_check.h"

static const char TRACE[] = "{\"1\": [1, 4], \"2\": [0, 5]}\n{\"1\": [2, 3], \"2\": [1, 4]}\n";
static const unsigned char HEAD[] = {'D', 'S', 'G', 'U', 'E', 'S', 'S', '1', 2, 0, 0, 0, 6, 0, 2, 3, 2, 2, 1, 2, 1, 2};
static const unsigned char BODY[] = {1, 3, 0, 5, 0, 2, 4, 0, 2, 1, 5, 2, 3, 4, 5, 0};

static void write_file(const char *path, const unsigned char *head, size_t nh, const unsigned char *body, size_t nb)
{
    gzFile g = gzopen(path, "wb");
    CHECK(g && gzwrite(g, head, (unsigned)nh) == (int)nh && (nb == 0 || gzwrite(g, body, (unsigned)nb) == (int)nb) &&
          gzclose(g) == Z_OK, "write %s", path);
}

static void expect(const cache_guesses *g, int d, int row, int i, const int *want, int n)
{
    const int *got = cache_guesses_at(g, d, row, i);
    CHECK(got != NULL, "depth %d row %d layer index %d: none", d, row, i);
    for (int j = 0; got && j < n; j++) CHECK(got[j] == want[j], "depth %d row %d layer index %d rank %d: %d, expected %d", d, row, i, j, got[j], want[j]);
}

static void test_good(const char *path, const cache_trace *t)
{
    write_file(path, HEAD, sizeof HEAD, BODY, sizeof BODY);
    char err[512];
    cache_guesses *g = cache_guesses_load(path, t, err, sizeof err);
    CHECK(g != NULL, "%s", err);
    if (!g) return;
    CHECK(g->rows == 2 && g->depth == 2 && g->ranks[0] == 3 && g->ranks[1] == 2, "shape");
    expect(g, 1, 0, 0, (const int[]){4, 2, 1}, 3);
    expect(g, 1, 1, 0, (const int[]){5, 2, 0}, 3);
    expect(g, 1, 0, 1, (const int[]){3, 0, 1}, 3);
    expect(g, 1, 1, 1, (const int[]){4, 5, 0}, 3);
    expect(g, 2, 0, 1, (const int[]){1, 2}, 2);
    expect(g, 2, 1, 1, (const int[]){3, 1}, 2);
    CHECK(cache_guesses_at(g, 2, 0, 0) == NULL && cache_guesses_at(g, 3, 0, 1) == NULL, "layer 1 has no depth-2 guesses (no layer -1)");
    cache_guesses_free(g);
}

static void expect_error(const char *path, const cache_trace *t, const char *what, const unsigned char *head, size_t nh,
                         const unsigned char *body, size_t nb)
{
    write_file(path, head, nh, body, nb);
    char err[512] = "";
    cache_guesses *g = cache_guesses_load(path, t, err, sizeof err);
    CHECK(g == NULL && strstr(err, path) && !strchr(err, '\n'), "%s: expected one error line naming the file, got \"%s\"", what, err);
    cache_guesses_free(g);
}

int main(void)
{
    char tp[] = "/tmp/test_guess_trace_t_XXXXXX", gp[] = "/tmp/test_guess_trace_g_XXXXXX";
    int a = mkstemp(tp), b = mkstemp(gp);
    CHECK(a >= 0 && b >= 0, "mkstemp");
    close(a);
    close(b);
    FILE *f = fopen(tp, "w");
    CHECK(f && fputs(TRACE, f) >= 0 && fclose(f) == 0, "write trace");
    char err[512];
    cache_trace *t = cache_trace_load(tp, -1, -1, err, sizeof err);
    CHECK(t != NULL, "%s", err);
    if (t) {
        test_good(gp, t);
        unsigned char body[sizeof BODY], head[sizeof HEAD];
        memcpy(body, BODY, sizeof body);
        body[4] = 6;
        expect_error(gp, t, "code 6 of 6 experts", HEAD, sizeof HEAD, body, sizeof body);
        memcpy(head, HEAD, sizeof head);
        head[8] = 3;
        expect_error(gp, t, "3 rows", head, sizeof head, BODY, sizeof BODY);
        expect_error(gp, t, "cut payload", HEAD, sizeof HEAD, BODY, sizeof BODY - 1);
        expect_error(gp, t, "bytes left over", HEAD, sizeof HEAD, (const unsigned char[]){1, 3, 0, 5, 0, 2, 4, 0, 2, 1, 5, 2, 3, 4, 5, 0, 0}, sizeof BODY + 1);
        expect_error(gp, t, "not a guess file", (const unsigned char *)"{\"1\": [1]}\n", 11, NULL, 0);
    }
    cache_trace_free(t);
    unlink(tp);
    unlink(gp);
    return check_report("test_guess_trace");
}
