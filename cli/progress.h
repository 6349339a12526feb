/* The live progress line of a long run on stderr: tokens done of -n, tok/s (recent and average),
 * ETA, expert-cache hit rate, GB read, I/O stall, MTP acceptance; during prefill, prompt rows done
 * and ETA. On a terminal one line redrawn in place (\r); elsewhere a plain line per interval. */
#ifndef DSSPEC_CLI_PROGRESS_H
#define DSSPEC_CLI_PROGRESS_H

#include <stdio.h>
#include <time.h>
#include "engine/dsspec.h"

enum { PROGRESS_WINDOW = 16 };

typedef struct {
    int on, tty;
    double every;                 /* seconds between lines */
    const char *label;            /* prefix, e.g. "ab 1/2 MTP off" (NULL: none) */
    int max_new, drawn;           /* drawn: a \r line is on screen */
    struct timespec start;
    double last_draw, decode_start;
    int decode_from;              /* generated count when decoding started (restored tokens) */
    double win_t[PROGRESS_WINDOW];
    int win_g[PROGRESS_WINDOW], win_n;
    FILE *out;
} progress;

/* mode: -1 on when out is a terminal, 0 off, 1 on. every <= 0: 0.5 s on a terminal, 30 s else. */
void progress_init(progress *p, FILE *out, int mode, double every, const char *label, int max_new);
void progress_prefill(progress *p, int done, int n);
void progress_step(progress *p, dsspec *e, const dsspec_gen_stats *live);
/* Ends a redrawn line so what follows starts on its own line. */
void progress_end(progress *p);
/* "1h02m", "4m05s", "12s" */
void progress_format_duration(double s, char *buf, size_t n);

#endif
