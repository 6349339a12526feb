/* The flag combinations of `run` (and `ab`) that cannot all be honoured: refused as usage errors
 * instead of one flag silently winning. */
#ifndef DSSPEC_CLI_RUN_CONFLICTS_H
#define DSSPEC_CLI_RUN_CONFLICTS_H

#include "cli/runner.h"

/* 0, or 2 after printing one usage line for cmd naming both flags. */
int run_options_check_conflicts(const run_options *o, const char *cmd);

#endif
