/* One generation run with all of its plumbing (prompt -> ids, memory plan, expert cache and io,
 * telemetry, trace, report), shared by `dsspec run` and `dsspec ab`. Private to the CLI. */
#ifndef DSSPEC_CLI_RUNNER_H
#define DSSPEC_CLI_RUNNER_H

#include <stdint.h>
#include <stdio.h>
#include "cache/expert_cache.h"
#include "io/expert_io.h"
#include "speculate/speculate.h"

typedef struct {
    const char *model_dir;
    const char *prompt_text, *prompt_file, *ids, *messages_file;
    int chat_wrap;            /* --chat: wrap -p/-f text as one user turn */
    int no_bos;
    int max_new;
    double temperature, top_p;
    int temperature_set, top_p_set;
    uint64_t seed;
    int mtp, prefetch;
    int64_t mem_budget;       /* bytes; 0: not given */
    double cache_gib;         /* 0: not given */
    cache_policy_kind policy;
    io_backend io;
    int queue_depth, threads, ctx, prefill_chunk;
    const char *cpu;
    int print_ids, quiet, ignore_eos;
    int kv_bf16;
    const char *telemetry_path, *report_path, *trace_out;
    int telemetry_every;
} run_options;

void run_options_defaults(run_options *o);
/* Parses one flag shared by run and ab at argv[*i] (advancing *i past its value). Returns 1 when
 * consumed, 0 when not a run flag, -1 on a bad value (err says which flag and what was expected). */
int run_options_parse_flag(run_options *o, int argc, char **argv, int *i, char *err, size_t errlen);
void run_options_print_help(FILE *out);

typedef struct {
    gen_stats gen;
    expert_cache_stats cache;
    int have_cache_stats;
    int *tokens;              /* generated ids */
    int n_tokens;
    int n_slots, total_experts;
    uint64_t slot_bytes, resident_bytes, kv_bytes, peak_rss;
    const char *io_backend;
    int interrupted;
} run_result;

/* quiet_output: do not print generated text/ids (ab). Returns 0, 1 (runtime error) or 2 (usage). */
int run_once(const run_options *o, int quiet_output, run_result *res);
void run_result_free(run_result *r);
double run_tokens_per_second(const run_result *r);

#endif
