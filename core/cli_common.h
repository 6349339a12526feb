/* Pieces every model-running subcommand shares: opening a checkpoint + model with the kernel path
 * and threads the user asked for, and parsing id lists and sizes. Private to the CLI. */
#ifndef DSSPEC_CLI_COMMON_H
#define DSSPEC_CLI_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include "core/checkpoint.h"
#include "core/kernels.h"
#include "core/model.h"
#include "core/threadpool.h"

typedef struct {
    checkpoint *ck;
    thread_pool *pool;
    model *m;
} engine;

/* cpu: NULL for the best path, else "scalar" | "avx2" | "avx512" (the highest path allowed). */
int engine_open(engine *e, const char *dir, int threads, const char *cpu, char *err, size_t errlen);
void engine_close(engine *e);

/* "3,17,42" -> malloc'd ids; returns count, or -1 with err naming the flag. */
int parse_id_list(const char *flag, const char *s, int **ids, char *err, size_t errlen);
/* "25G", "512M", "1.5GiB", "1048576" -> bytes; -1 on error. */
int64_t parse_size(const char *s);
/* Strict integer parse of a flag value into [lo, hi]; -1 with err naming the flag. */
int parse_int_flag(const char *flag, const char *s, long lo, long hi, long *out, char *err, size_t errlen);
int parse_double_flag(const char *flag, const char *s, double lo, double hi, double *out, char *err, size_t errlen);

/* Peak resident set (VmHWM) of this process in bytes, 0 if unknown. */
uint64_t process_peak_rss(void);

#endif
