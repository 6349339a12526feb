/* One generation run with its plumbing (flags -> engine options, prompt, progress outputs,
 * telemetry, trace, report), shared by `dsspec run` and `dsspec ab`. */
#ifndef DSSPEC_CLI_RUNNER_H
#define DSSPEC_CLI_RUNNER_H

#include <signal.h>
#include <stdio.h>
#include "cli/flags.h"
#include "engine/dsspec.h"

/* Exit status of a run stopped by SIGINT, SIGTERM or SIGHUP (after the report is written); 0 is a
 * finished run, 1 a runtime error, 2 a usage error. */
enum { DSSPEC_EXIT_SIGNAL = 3 };

typedef struct {
    dsspec_options engine;
    dsspec_generate_params gen;
    const char *prompt_text, *prompt_file, *ids, *messages_file;
    int chat_wrap, no_bos;
    const char *cpu, *kv_dtype, *policy, *io;
    int print_ids, quiet, verbose;
    flag_strings stop;
    const char *telemetry_path, *report_path, *trace_out;
    int telemetry_every;
    const char *session_path;     /* --session: resumable run */
    int resume, session_sync;
    int progress_on, progress_off;
    double progress_every;        /* seconds; 0: 0.5 on a terminal, 30 otherwise */
    const char *progress_label;   /* ab: which run this is */
    int argc;                     /* the command line, for the report */
    char **argv;
} run_options;

/* The flags of run (and ab) as a table for flags_parse; *n gets its length. The table points into o. */
const flag *run_flags(run_options *o, int *n);
/* The engine's flags (speculation, memory, compute), also part of serve's; writes them to f (room
 * for RUN_ENGINE_FLAGS), returns how many. */
enum { RUN_ENGINE_FLAGS = 17 };
int run_engine_flags(run_options *o, flag *f);
void run_options_defaults(run_options *o);
/* Turns the string-valued flags (policy, io, kv dtype, cpu) into engine options; 0, or 2 after
 * printing a usage error for cmd. */
int run_options_finish(run_options *o, const char *cmd);

typedef struct {
    dsspec_gen_stats gen;
    dsspec_cache_counters cache;
    int have_cache;
    int *tokens;              /* generated ids */
    int n_tokens, cap_tokens;
    dsspec_plan plan;
    uint64_t peak_rss;
    int interrupted;          /* the signal that stopped the run, 0 if none */
    int running;              /* a report refreshed while the run goes: gen holds the live counters */
    char started_at[40];      /* local time the run started, ISO 8601 */
} run_result;

/* quiet_output: print neither the generated text nor ids (ab). Returns the exit code: 0, 1 (runtime
 * error), 2 (usage) or DSSPEC_EXIT_SIGNAL. */
int run_once(const run_options *o, int quiet_output, run_result *res);
void run_result_free(run_result *r);

/* SIGINT, SIGTERM and SIGHUP set the returned flag (to the signal) instead of killing; a second
 * one kills. old gets the previous handlers (N_STOP_SIGNALS of them) for run_restore_signals. */
enum { N_STOP_SIGNALS = 3 };
volatile sig_atomic_t *run_catch_stop_signals(struct sigaction *old);
void run_restore_signals(const struct sigaction *old);
/* "SIGINT", "SIGTERM", "SIGHUP" */
const char *run_signal_name(int sig);

/* "dsspec run -p 'two words' ...": the command line, shell-quoted where needed, for reports. */
void run_command_line(const run_options *o, char *buf, size_t n);

/* The report JSON of a run (run_output.c); caller owns it. */
struct cJSON;
struct cJSON *run_report_json(const run_options *o, const run_result *r, dsspec *e);

#endif
