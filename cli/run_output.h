/* What a run writes while it goes and when it ends: the plan, streamed text or ids, telemetry
 * lines, the routing trace, the summary and the report. Private to cli/runner.c. */
#ifndef DSSPEC_CLI_RUN_OUTPUT_H
#define DSSPEC_CLI_RUN_OUTPUT_H

#include <signal.h>
#include <time.h>
#include "cli/progress.h"
#include "cli/runner.h"

struct cJSON;

typedef struct {
    const run_options *o;
    int quiet_output;
    dsspec *e;
    run_result *res;
    int print_text;                /* the generated text goes to stdout (on_text), not ids */
    FILE *telemetry, *trace;
    struct cJSON **trace_rows;     /* per batch row, the trace line being built */
    int trace_cap, last_moe_layer;
    struct timespec start;
    int last_telemetry_at;
    double last_report_at;         /* seconds since start when the report was last refreshed */
    volatile sig_atomic_t *stop;   /* set by the signal handler */
    dsspec_gen_stats live;         /* counters so far, kept by the engine (params.live) */
    progress progress;
    int report_written, report_failed;
    int write_failed;              /* telemetry or the final report could not be written: exit 1 */
} run_output;

/* Opens the telemetry and trace files and checks that the report can be written, before any model
 * loads. 0, or -1 with err naming the flag and path. */
int run_output_open(run_output *out, const run_options *o, int quiet_output, run_result *res, char *err, size_t errlen);
/* Once the engine is open and the prompt known: prints the plan, decides whether text is printed, starts the clock. */
void run_output_start(run_output *out, dsspec *e);
/* Points the generation's callbacks at out; generation stops when *stop becomes non-zero. */
void run_output_bind(run_output *out, dsspec_generate_params *g, volatile sig_atomic_t *stop);
/* After generation (also a failed or interrupted one: what was generated is never lost): the rest
 * of the text, the ids, the last telemetry line, the summary and the report. */
void run_output_finish(run_output *out, dsspec *e);
void run_output_close(run_output *out);

#endif
