/* Subcommands of the dsspec binary. Each parses its flags with cli/flags.h, prints one clear error
 * line on bad input and returns the process exit code (0 ok, 1 runtime failure, 2 usage error). */
#ifndef DSSPEC_CLI_H
#define DSSPEC_CLI_H

int cli_run(int argc, char **argv);        /* generate */
int cli_eval(int argc, char **argv);       /* reference hook: logits/routes dump */
int cli_ab(int argc, char **argv);         /* MTP off vs on */
int cli_inspect(int argc, char **argv);    /* checkpoint census and integrity */
int cli_tokenize(int argc, char **argv);   /* text -> ids */
int cli_detokenize(int argc, char **argv); /* ids -> text */
int cli_cache_sim(int argc, char **argv);  /* replay a routing trace */
int cli_report(int argc, char **argv);     /* render a report */
int cli_serve(int argc, char **argv);      /* OpenAI-compatible HTTP server */
int cli_batch(int argc, char **argv);      /* many prompts, one process, restartable */

#endif
