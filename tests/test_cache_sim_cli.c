/* dsspec cache-sim end to end: bad flags exit 2, unreadable or malformed traces exit 1, each with
 * exactly one error line; and results on small traces worked out by hand. argv[1] = the binary. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "tests/test_cache_check.h"

static const char *binary;
static char dir[] = "/tmp/test_cache_sim_XXXXXX";
static char out_text[1 << 16], err_text[1 << 16];

static void slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
}

/* Runs binary cache-sim ARGS... (NULL-terminated); stdout/stderr captured. Returns exit code. */
static int run(const char *first, ...)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)binary;
    argv[argc++] = "cache-sim";
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 31; a = va_arg(ap, const char *)) argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    char out_path[128], err_path[128];
    snprintf(out_path, sizeof out_path, "%s/stdout", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600), e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(o, 1);
        dup2(e, 2);
        execv(binary, argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    slurp(out_path, out_text, sizeof out_text);
    slurp(err_path, err_text, sizeof err_text);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static const char *write_file(const char *name, const char *text)
{
    static char path[8][256];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, 256, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) { fputs(text, f); fclose(f); }
    return p;
}

static void expect_error(int want_rc, const char *what, int rc, const char *mention)
{
    CHECK(rc == want_rc, "%s: exit %d, expected %d (stderr: %s)", what, rc, want_rc, err_text);
    CHECK(lines(err_text) == 1, "%s: expected one error line, got: %s", what, err_text);
    CHECK(!mention || strstr(err_text, mention), "%s: error should mention '%s': %s", what, mention, err_text);
    CHECK(out_text[0] == 0, "%s: nothing on stdout expected", what);
}

static void test_usage_errors(void)
{
    const char *ok = write_file("ok.jsonl", "{\"3\": [1, 2]}\n");
    expect_error(2, "no flags", run(NULL), "--trace");
    expect_error(2, "unknown flag", run("--trace", ok, "--slots", "4", "--bogus", NULL), "--bogus");
    expect_error(2, "missing slots", run("--trace", ok, NULL), "--slots");
    expect_error(2, "zero slots", run("--trace", ok, "--slots", "0", NULL), "--slots");
    expect_error(2, "bad slot list", run("--trace", ok, "--slots", "4,x", NULL), "--slots");
    expect_error(2, "bad policy", run("--trace", ok, "--slots", "4", "--policy", "mru", NULL), "--policy");
    expect_error(2, "bad layers", run("--trace", ok, "--slots", "4", "--layers", "9-3", NULL), "--layers");
    expect_error(2, "flag without value", run("--trace", ok, "--slots", NULL), "--slots");
    CHECK(run("--help", NULL) == 0 && strstr(out_text, "--policy"), "--help");
}

static void test_trace_errors(void)
{
    char missing[256];
    snprintf(missing, sizeof missing, "%s/no_such.jsonl", dir);
    expect_error(1, "missing trace", run("--trace", missing, "--slots", "4", NULL), "no_such.jsonl");
    expect_error(1, "malformed json", run("--trace", write_file("bad1.jsonl", "{\"3\": [1]}\n{\"3\": [1,\n"), "--slots", "4", NULL), ":2:");
    expect_error(1, "not an object", run("--trace", write_file("bad2.jsonl", "[1, 2]\n"), "--slots", "4", NULL), "object");
    expect_error(1, "bad layer key", run("--trace", write_file("bad3.jsonl", "{\"x\": [1]}\n"), "--slots", "4", NULL), "layer");
    expect_error(1, "negative expert", run("--trace", write_file("bad4.jsonl", "{\"3\": [1, -2]}\n"), "--slots", "4", NULL), "expert");
    expect_error(1, "fractional expert", run("--trace", write_file("bad5.jsonl", "{\"3\": [1.5]}\n"), "--slots", "4", NULL), "expert");
    expect_error(1, "not an array", run("--trace", write_file("bad6.jsonl", "{\"3\": 4}\n"), "--slots", "4", NULL), "array");
    expect_error(1, "empty trace", run("--trace", write_file("empty.jsonl", ""), "--slots", "4", NULL), "no routed");
    expect_error(1, "no layer in range", run("--trace", write_file("ok2.jsonl", "{\"3\": [1, 2]}\n"), "--slots", "4", "--layers", "40-50", NULL), "--layers");
}

static uint64_t json_hits(const char *policy, int slots)
{
    cJSON *o = cJSON_Parse(out_text);
    uint64_t hits = (uint64_t)-1;
    cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(o, "results"))
        if (!strcmp(cJSON_GetObjectItem(r, "policy")->valuestring, policy) && cJSON_GetObjectItem(r, "slots")->valueint == slots)
            hits = (uint64_t)cJSON_GetObjectItem(r, "hits")->valuedouble;
    cJSON_Delete(o);
    return hits;
}

/* A B C A D B E A on one layer, 3 slots (tests/test_cache_policy.c has the working for LRU, LFU):
 *  LRU 1 hit, LFU 2 hits.
 *  ARC: A B C into T1; A H -> T2; D: |T1|=2 > p=0, B to B1; B: ghost, p=1, |T1|=2 > 1, C to B1,
 *       B to T2; E: |T1|=1 not > p, T2's LRU A to B2; A: ghost -> miss. 1 hit.
 *  OPT: D evicts C (never again); B H; E evicts B or D (never again); A H. 3 hits. */
static void test_hand_worked(void)
{
    const char *t = write_file("seq.jsonl", "{\"7\": [0, 1, 2, 0, 3, 1, 4, 0]}\n");
    CHECK(run("--trace", t, "--slots", "3", "--policy", "all", "--json", NULL) == 0, "run: %s", err_text);
    CHECK(json_hits("lru", 3) == 1, "lru hits %llu", (unsigned long long)json_hits("lru", 3));
    CHECK(json_hits("lfu", 3) == 2, "lfu hits %llu", (unsigned long long)json_hits("lfu", 3));
    CHECK(json_hits("arc", 3) == 1, "arc hits %llu", (unsigned long long)json_hits("arc", 3));
    CHECK(json_hits("opt", 3) == 3, "opt hits %llu", (unsigned long long)json_hits("opt", 3));

    /* Keys of a line are visited in increasing layer order: 2:0, 5:0, then 2:0 again. With one slot
     * that is miss, miss, miss (listed order would be 5:0, 2:0, 2:0: one hit). Only layer 2: 1 hit. */
    const char *order = write_file("order.jsonl", "{\"5\": [0], \"2\": [0]}\n\n{\"2\": [0]}\n");
    CHECK(run("--trace", order, "--slots", "1", "--policy", "lru", "--json", NULL) == 0, "run: %s", err_text);
    CHECK(json_hits("lru", 1) == 0, "layer order: %llu hits", (unsigned long long)json_hits("lru", 1));
    CHECK(run("--trace", order, "--slots", "1", "--policy", "lru", "--layers", "2-2", "--json", NULL) == 0, "run");
    CHECK(json_hits("lru", 1) == 1, "--layers 2-2: %llu hits", (unsigned long long)json_hits("lru", 1));

    CHECK(run("--trace", t, "--slots", "1,3,8", NULL) == 0 && strstr(out_text, "hit rate"), "table output");
    CHECK(lines(out_text) == 2 + 3 * 4, "table rows: %s", out_text);
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: test_cache_sim_cli PATH/TO/dsspec\n"); return 2; }
    binary = argv[1];
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    test_usage_errors();
    test_trace_errors();
    test_hand_worked();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_report("test_cache_sim_cli");
}
