/* The trace loader on plain and gzip-compressed files: the same lines give the same keys (worked
 * out by hand below), a truncated gzip stream is one error line naming the file, and a line longer
 * than any fixed buffer is read whole. */
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "cache/expert_cache.h"
#include "tests/test_cache_check.h"

/* Layers 3 and 5 are the MoE layers seen (numbered 0, 1); experts up to 9, so n_experts = 10 and
 * key = layer number * 10 + expert: token 1 -> 2, 7, 19; token 2 -> 9, 11, 13. */
static const char TEXT[] = "{\"3\": [2, 7], \"5\": [9]}\n\n{\"5\": [1, 3], \"3\": [9]}\n";
static const int KEYS[] = {2, 7, 19, 9, 11, 13};

static void write_plain(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
}

static void write_gz(const char *path, const char *text, size_t len)
{
    gzFile g = gzopen(path, "wb");
    CHECK(g && gzwrite(g, text, (unsigned)len) == (int)len && gzclose(g) == Z_OK, "write %s", path);
}

static void expect_keys(const char *path)
{
    char err[512];
    cache_trace *t = cache_trace_load(path, -1, -1, err, sizeof err);
    CHECK(t != NULL, "%s: %s", path, err);
    if (!t) return;
    CHECK(t->n_tokens == 2 && t->n == 6 && t->n_layers == 2 && t->n_experts == 10, "%s: shape %d tokens %zu requests %d x %d",
          path, t->n_tokens, t->n, t->n_layers, t->n_experts);
    for (size_t i = 0; i < t->n && i < 6; i++) CHECK(t->key[i] == KEYS[i], "%s: key %zu = %d, expected %d", path, i, t->key[i], KEYS[i]);
    cache_trace_free(t);
}

/* One line of 20,000 experts of layer 1 (ids 0..19999): longer than any stdio-sized buffer. */
static void test_long_line(const char *path)
{
    size_t cap = 200000, n = 0;
    char *text = malloc(cap);
    n += (size_t)snprintf(text + n, cap - n, "{\"1\": [");
    for (int e = 0; e < 20000; e++) n += (size_t)snprintf(text + n, cap - n, e ? ", %d" : "%d", e);
    n += (size_t)snprintf(text + n, cap - n, "]}\n");
    write_gz(path, text, n);
    char err[512];
    cache_trace *t = cache_trace_load(path, -1, -1, err, sizeof err);
    CHECK(t && t->n == 20000 && t->key[19999] == 19999, "long line: %s", t ? "wrong keys" : err);
    cache_trace_free(t);
    free(text);
}

static void test_truncated(const char *path)
{
    char full[] = "/tmp/test_cache_trace_full_XXXXXX";
    int fd = mkstemp(full);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    write_gz(full, TEXT, strlen(TEXT));
    FILE *f = fopen(full, "rb");
    unsigned char buf[256];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    unlink(full);
    FILE *o = fopen(path, "wb");
    CHECK(o && fwrite(buf, 1, len - 12, o) == len - 12 && fclose(o) == 0, "write truncated"); /* cut the trailer */
    char err[512] = "";
    cache_trace *t = cache_trace_load(path, -1, -1, err, sizeof err);
    CHECK(t == NULL && strstr(err, path) && strchr(err, '\n') == NULL, "truncated gzip: expected one error line naming the file, got \"%s\"", err);
    cache_trace_free(t);
}

int main(void)
{
    char plain[] = "/tmp/test_cache_trace_XXXXXX", gz[] = "/tmp/test_cache_trace_gz_XXXXXX";
    int a = mkstemp(plain), b = mkstemp(gz);
    CHECK(a >= 0 && b >= 0, "mkstemp");
    close(a);
    close(b);
    write_plain(plain, TEXT);
    expect_keys(plain);
    write_gz(gz, TEXT, strlen(TEXT));
    expect_keys(gz);
    test_long_line(gz);
    test_truncated(gz);
    unlink(plain);
    unlink(gz);
    return check_report("test_cache_trace");
}
