/* Sessions survive kill -9: runs of the real binary are SIGKILLed at random points (many during
 * the chunked prefill, the rest during decoding, some inside a record's write) and resumed, and the
 * final output must equal, id for id, an uninterrupted run without a session — greedy and seeded
 * sampling, MTP on and off, and auto with a window of 2 MTP rows (holes in its MTP KV; that its
 * rows restore as written is test_session_mtp's). Also: a torn tail (the file cut at random
 * offsets) and a flipped bit mid-file resume to the same output (the damaged part is dropped and recomputed), a damaged
 * header and every mismatch (another checkpoint, prompt or output-changing flag) are refused with
 * one line, and a finished session can be extended with a larger -n. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/engine/cli_proc.h"
#include "tests/test_check.h"

static const char *bin, *model, *other_model;
static char prompt_ids[4096];
static char dir[] = "/tmp/dsspec_session_XXXXXX";

enum { N_PREDICT = 120, KILLS_PER_CONFIG = 6 };

typedef struct {
    const char *mtp, *temp, *window; /* window: --mtp-window (auto: a small one leaves holes in the MTP KV) */
} config;

/* dsspec run with the test's prompt and c's settings, -n n, then extra (NULL-terminated). */
static void run_args(const char **a, const config *c, const char *n, const char *const *extra)
{
    const char *base[] = {bin, "run", "-m", model, "--ids", prompt_ids, "-n", n, "--temp", c->temp, "--seed", "7",
                          "--mtp", c->mtp, "--mtp-window", c->window, "--ignore-eos", "--print-ids", "--quiet", "--ctx", "400",
                          "--prefill-chunk", "8", NULL};
    proc_args(a, base, extra);
}

static void path_in_dir(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
}

static int run_session(proc_result *r, const config *c, const char *n, const char *session, const char *more)
{
    const char *extra[] = {"--session", session, "--resume", more, NULL};
    const char *a[PROC_MAX_ARGS];
    run_args(a, c, n, extra);
    return proc_run(r, (char *const *)a);
}

/* Kills a resumable run at random session sizes, resumes after each, and checks the result. */
static void check_kills(const config *c, const char *ref, long prefill_size, long full_size)
{
    char session[1100];
    path_in_dir(session, sizeof session, "killed");
    unlink(session);
    const char *extra[] = {"--session", session, "--resume", "--session-sync", "0", NULL};
    const char *a[PROC_MAX_ARGS];
    run_args(a, c, "120", extra);
    int in_prefill = 0, kills = 0;
    long last = 0;
    for (int k = 0; k < KILLS_PER_CONFIG; k++) {
        /* The first two kills aim inside the prefill's records, the rest after. Each aims within an
         * even share of what is left, not anywhere up to the end: a target among the last records
         * can be passed between two polls on a busy machine, and the run ends before the kill. */
        int decode = k >= 2, left = decode ? KILLS_PER_CONFIG - k : 2 - k;
        long lo = decode && last < prefill_size ? prefill_size : last + 1, hi = decode ? full_size : prefill_size;
        if (lo >= hi) lo = hi - 1;
        long share = (hi - lo) / (left + decode);
        long target = lo + rand() % (share > 0 ? share : 1);
        long at = proc_kill_at_size((char *const *)a, session, target);
        if (at < 0) break; /* the run finished before the kill */
        kills++;
        in_prefill += at < prefill_size;
        last = proc_file_size(session);
    }
    proc_result r;
    run_session(&r, c, "120", session, NULL);
    CHECK(r.status == 0, "mtp %s temp %s: resume after %d kills failed: %s", c->mtp, c->temp, kills, r.err);
    CHECK(!strcmp(r.out, ref), "mtp %s temp %s: resumed output after %d kills differs:\n got %s want %s", c->mtp, c->temp, kills, r.out, ref);
    CHECK(kills >= KILLS_PER_CONFIG - 1 && in_prefill >= 1, "mtp %s temp %s: %d kills, %d during prefill", c->mtp, c->temp, kills, in_prefill);
    printf("mtp %-3s temp %-3s: %d SIGKILLs (%d during prefill), resumed output identical\n", c->mtp, c->temp, kills, in_prefill);
}

/* The first bytes of one file copied into another. */
static void copy_prefix(const char *from, const char *to, long bytes)
{
    size_t len;
    char *data = test_read_file(from, &len);
    FILE *f = fopen(to, "wb");
    CHECK(data && f && fwrite(data, 1, (size_t)bytes, f) == (size_t)bytes, "copy %s", from);
    if (f) fclose(f);
    free(data);
}

static void flip_bit(const char *path, long offset)
{
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL, "open %s", path);
    if (!f) return;
    fseek(f, offset, SEEK_SET);
    int c = fgetc(f);
    fseek(f, offset, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

/* A torn tail at random offsets, and a flipped bit in the middle: resumed output is unchanged. */
static void check_damage(const config *c, const char *complete, const char *ref)
{
    char damaged[1100];
    path_in_dir(damaged, sizeof damaged, "damaged");
    long size = proc_file_size(complete);
    proc_result r;
    for (int i = 0; i < 5; i++) {
        long cut = size / 10 + rand() % (size - size / 10);
        copy_prefix(complete, damaged, cut);
        run_session(&r, c, "120", damaged, NULL);
        CHECK(r.status == 0 && !strcmp(r.out, ref), "session cut at %ld of %ld bytes: status %d, output %s, err %s", cut, size, r.status, r.out, r.err);
    }
    for (long cut = 10; cut <= 40; cut += 30) { /* killed while writing the header: starts afresh */
        copy_prefix(complete, damaged, cut);
        run_session(&r, c, "120", damaged, NULL);
        CHECK(r.status == 0 && !strcmp(r.out, ref) && strstr(r.err, "header was torn"), "header cut at %ld bytes: %d %s", cut, r.status, r.err);
    }
    copy_prefix(complete, damaged, size);
    flip_bit(damaged, size / 2);
    run_session(&r, c, "120", damaged, NULL);
    CHECK(r.status == 0 && !strcmp(r.out, ref) && strstr(r.err, "dropped"), "bit flipped mid-file: status %d, err %s", r.status, r.err);
    copy_prefix(complete, damaged, size);
    flip_bit(damaged, 24);
    run_session(&r, c, "120", damaged, NULL);
    CHECK(r.status == 1 && strstr(r.err, "header is damaged") && !strchr(strchr(r.err, '\n') + 1, '\n') && !r.out[0],
          "bit flipped in the header: status %d, err %s", r.status, r.err);
    printf("torn tails at 5 offsets, a torn header and a mid-file bit flip resume exactly; a damaged header is refused\n");
}

/* Resuming with anything that changes the output is refused, in one line, before generating. */
static void check_refusals(const config *c, const char *complete)
{
    struct { const char *flag, *value, *needle; } cases[] = {
        {"--temp", "0.3", "--temp"}, {"--seed", "8", "--seed"}, {"--mtp", NULL, "--mtp"},
        {"--top-k", "5", "--top-k"}, {"--min-p", "0.1", "--min-p"},
        {"--ctx", "512", "--ctx"}, {"--kv-dtype", "bf16", "--kv-dtype"}, {"--ids", "0,5,9", "prompt"},
        {"-m", NULL, "different checkpoint"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *value = cases[i].value;
        if (!strcmp(cases[i].flag, "--mtp")) value = strcmp(c->mtp, "on") ? "on" : "off";
        if (!strcmp(cases[i].flag, "-m")) value = other_model;
        const char *extra[] = {"--session", complete, "--resume", cases[i].flag, value, NULL};
        const char *a[PROC_MAX_ARGS];
        run_args(a, c, "120", extra);
        proc_result r;
        proc_run(&r, (char *const *)a);
        CHECK(r.status == 1 && strstr(r.err, cases[i].needle) && strchr(r.err, '\n') == r.err + strlen(r.err) - 1 && !r.out[0],
              "resume with %s %s: status %d, want 1 and one line naming '%s'; got: %s%s", cases[i].flag, value, r.status,
              cases[i].needle, r.err, r.out);
    }
    const char *extra[] = {"--session", complete, NULL};
    const char *a[PROC_MAX_ARGS];
    run_args(a, c, "120", extra);
    proc_result r;
    proc_run(&r, (char *const *)a);
    CHECK(r.status == 1 && strstr(r.err, "already exists"), "an existing session without --resume: %d %s", r.status, r.err);
    printf("resuming with another checkpoint, prompt or output-changing flag is refused in one line\n");
}

/* CRC-32 (IEEE, reflected), bit by bit: the session format's checksum, written out independently. */
static uint32_t crc32_ieee(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return ~c;
}

/* A whole, checksummed header of format version 1 (the format before --top-k and --min-p were
 * recorded): refused in one line naming both versions, not as a damaged file. */
static void check_other_format(const config *c, const char *complete)
{
    FILE *f = fopen(complete, "rb");
    unsigned char head[16];
    CHECK(f && fread(head, 1, 16, f) == 16, "cannot read %s", complete);
    uint64_t len;
    memcpy(&len, head + 8, 8);
    unsigned char *rec = malloc(12 + len);
    memcpy(rec, head + 4, 12);
    CHECK(len > 4 && len < (1u << 20) && fread(rec + 12, 1, len, f) == len, "header record of %s", complete);
    fclose(f);
    uint32_t version = 1, crc;
    memcpy(rec + 12, &version, 4);
    crc = crc32_ieee(rec, 12 + len);
    char old[1100];
    path_in_dir(old, sizeof old, "format1");
    FILE *o = fopen(old, "wb");
    CHECK(o && fwrite(head, 1, 4, o) == 4 && fwrite(rec, 1, 12 + len, o) == 12 + len && fwrite(&crc, 1, 4, o) == 4,
          "cannot write %s", old);
    fclose(o);
    free(rec);
    proc_result r;
    run_session(&r, c, "120", old, NULL);
    CHECK(r.status == 1 && strstr(r.err, "session format 1") && strstr(r.err, "format 3") &&
              strchr(r.err, '\n') == r.err + strlen(r.err) - 1 && !r.out[0],
          "a format-1 session: status %d, err %s", r.status, r.err);
    printf("a session of another format version is refused naming both versions\n");
}

static void check_config(const config *c, int damage)
{
    char full[1100], prefill[1100], shorter[1100];
    path_in_dir(full, sizeof full, "full");
    path_in_dir(prefill, sizeof prefill, "prefill");
    path_in_dir(shorter, sizeof shorter, "shorter");
    unlink(full); unlink(prefill); unlink(shorter);
    const char *a[PROC_MAX_ARGS];
    run_args(a, c, "120", NULL);
    proc_result ref, r;
    CHECK(proc_run(&ref, (char *const *)a) == 0 && ref.out[0], "reference run failed: %s", ref.err);
    CHECK(run_session(&r, c, "120", full, NULL) == 0 && !strcmp(r.out, ref.out), "a session run differs from a plain one: %s", r.err);
    CHECK(run_session(&r, c, "0", prefill, NULL) == 0, "-n 0 with a session: %s", r.err);
    /* A finished run extended with a larger -n continues from its last step. */
    CHECK(run_session(&r, c, "50", shorter, NULL) == 0, "-n 50: %s", r.err);
    CHECK(run_session(&r, c, "120", shorter, NULL) == 0 && !strcmp(r.out, ref.out), "-n 50 extended to 120 differs: %s", r.out);
    CHECK(run_session(&r, c, "120", full, NULL) == 0 && !strcmp(r.out, ref.out), "re-running a finished session differs: %s", r.out);
    check_kills(c, ref.out, proc_file_size(prefill), proc_file_size(full));
    if (damage) {
        check_damage(c, full, ref.out);
        check_refusals(c, full);
        check_other_format(c, full);
    }
}

/* The report refreshed while a run goes is what a kill -9 leaves: it must say the run was still
 * going and how far it got, not read as an ending with nothing generated. The first refresh comes
 * 10 s into the run, so the run is long enough to reach it. */
static void check_report_left_by_kill(void)
{
    char report[1100];
    path_in_dir(report, sizeof report, "killed_report.json");
    unlink(report);
    const char *a[] = {bin, "run", "-m", model, "--ids", "0,5,9", "-n", "1000000", "--ignore-eos", "--ctx", "160000",
                       "--print-ids", "--quiet", "-t", "1", "--report", report, NULL};
    long at = proc_kill_at_size((char *const *)a, report, 1);
    CHECK(at > 0, "the run ended before its first report refresh");
    FILE *f = fopen(report, "r");
    char text[16384] = {0};
    size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    const char *why = strstr(text, "\"stopped_by\"");
    const char *gen = strstr(text, "\"generated\"");
    long generated = gen ? strtol(gen + strlen("\"generated\":"), NULL, 10) : 0;
    CHECK(got > 0 && why && strstr(why, "\"running\"") && strstr(why, "\"running\"") < strchr(why, ',') && generated > 0,
          "the report a kill -9 left: want stopped_by running and generated > 0; got:\n%s", text);
    printf("the report a kill -9 leaves says running, %ld tokens generated\n", generated);
}

int main(int argc, char **argv)
{
    if (argc < 4) { fprintf(stderr, "usage: test_session DSSPEC MODEL OTHER_MODEL\n"); return 2; }
    bin = argv[1];
    model = argv[2];
    other_model = argv[3];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    srand(20250101);
    /* 150 prompt rows in chunks of 8: 18 prefill records, so kills land inside the prefill. */
    for (int i = 0; i < 150; i++)
        snprintf(prompt_ids + strlen(prompt_ids), sizeof prompt_ids - strlen(prompt_ids), i ? ",%d" : "%d", (i * 37) % 500 + 3);
    const config configs[] = {{"on", "0", "64"}, {"off", "0", "64"}, {"on", "0.8", "64"}, {"off", "0.8", "64"},
                              {"auto", "0.8", "2"}};
    for (int i = 0; i < 5; i++) check_config(&configs[i], i == 2);
    check_report_left_by_kill();
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    printf("%s\n", test_failures ? "FAILED" : "session: all checks passed");
    return test_failures ? 1 : 0;
}
