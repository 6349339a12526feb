/* The soak's load: one engine handle kept open for a long time, generating chunk after chunk (each
 * a fresh sequence of up to --ctx positions, sampled, MTP on, a small expert cache), with a
 * telemetry line every N tokens. bench/soak/soak.sh runs it and samples the process from outside.
 * One process and one handle on purpose: what a leak would grow is the handle's lifetime.
 *
 * usage: bench_soak MODEL_DIR TOKENS MEM_BUDGET_BYTES CTX TELEMETRY_FILE EVERY */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "engine/dsspec.h"

typedef struct {
    dsspec *e;
    FILE *telemetry;
    long total, every, next_line;
    struct timespec t0;
} soak;

static double elapsed(const soak *s)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - s->t0.tv_sec) + (t.tv_nsec - s->t0.tv_nsec) * 1e-9;
}

static void telemetry_line(soak *s, long generated)
{
    cJSON *line = cJSON_CreateObject();
    cJSON_AddNumberToObject(line, "elapsed_s", elapsed(s));
    cJSON_AddNumberToObject(line, "generated", (double)generated);
    cJSON_AddNumberToObject(line, "peak_rss_bytes", (double)dsspec_peak_rss());
    cJSON *cache = dsspec_cache_stats_json(s->e);
    if (cache) cJSON_AddItemToObject(line, "cache", cache);
    char *text = cJSON_PrintUnformatted(line);
    if (text) { fprintf(s->telemetry, "%s\n", text); fflush(s->telemetry); }
    free(text);
    cJSON_Delete(line);
}

static int on_step(void *ctx, int generated)
{
    soak *s = ctx;
    while (s->total + generated >= s->next_line) {
        telemetry_line(s, s->total + generated);
        s->next_line += s->every;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 7) { fprintf(stderr, "usage: bench_soak MODEL_DIR TOKENS MEM_BUDGET_BYTES CTX TELEMETRY_FILE EVERY\n"); return 2; }
    long tokens = atol(argv[2]);
    dsspec_options o;
    dsspec_options_default(&o);
    o.model_dir = argv[1];
    o.mem_budget = atoll(argv[3]);
    o.ctx = atoi(argv[4]);
    o.kv_bf16 = 1;
    o.mtp = 1;
    char err[1024];
    soak s = {.every = atol(argv[6]), .next_line = atol(argv[6])};
    if (!(s.e = dsspec_open(&o, NULL, err, sizeof err))) { fprintf(stderr, "bench_soak: %s\n", err); return 1; }
    if (!(s.telemetry = fopen(argv[5], "w"))) { perror(argv[5]); return 1; }
    dsspec_plan_print(dsspec_get_plan(s.e), stdout);
    clock_gettime(CLOCK_MONOTONIC, &s.t0);
    int vocab = dsspec_get_model_info(s.e)->vocab_size;
    for (int i = 0; s.total < tokens; i++) {
        int prompt[3] = {0, (i * 7919 + 11) % vocab, (i * 104729 + 5) % vocab};
        dsspec_generate_params p;
        dsspec_generate_params_default(&p);
        p.max_new = o.ctx - 8;
        if (p.max_new > tokens - s.total) p.max_new = (int)(tokens - s.total);
        p.temperature = 0.8;
        p.seed = (uint64_t)i + 1;
        p.ignore_eos = 1;
        p.on_step = on_step;
        p.ctx = &s;
        dsspec_gen_stats st;
        if (dsspec_generate(s.e, prompt, 3, &p, &st, err, sizeof err)) { fprintf(stderr, "bench_soak: %s\n", err); return 1; }
        s.total += st.generated;
        printf("chunk %d: %ld tokens so far, %.1f tok/s, MTP acceptance %.1f%%\n", i, s.total, dsspec_decode_tokens_per_second(&st),
               st.drafts ? 100.0 * st.accepted / st.drafts : 0);
        fflush(stdout);
    }
    telemetry_line(&s, s.total);
    fclose(s.telemetry);
    dsspec_close(s.e);
    return 0;
}
