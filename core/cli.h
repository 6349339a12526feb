/* Subcommands of the dsspec binary. Each parses its own flags, prints one clear error line on bad
 * input and returns the process exit code (0 ok, 1 runtime failure, 2 usage error). */
#ifndef DSSPEC_CLI_H
#define DSSPEC_CLI_H

int cli_run(int argc, char **argv);        /* generate (core/cli_run.c) */
int cli_eval(int argc, char **argv);       /* reference hook: logits/routes dump (core/cli_eval.c) */
int cli_ab(int argc, char **argv);         /* MTP off vs on (core/cli_ab.c) */
int cli_inspect(int argc, char **argv);    /* checkpoint census and integrity (core/cli_inspect.c) */
int cli_tokenize(int argc, char **argv);   /* text -> ids (core/cli_tokenize.c) */
int cli_detokenize(int argc, char **argv); /* ids -> text (core/cli_tokenize.c) */
int cli_cache_sim(int argc, char **argv);  /* replay a routing trace (core/cli_cache_sim.c) */
int cli_report(int argc, char **argv);     /* render a report (core/cli_report.c) */

/* The model dsspec uses when -m is not given: the embedded one shipped in models/. */
const char *cli_default_model_dir(void);

#endif
