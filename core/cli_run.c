/* dsspec run: generate from a prompt. The contract outside checkers rely on:
 *   dsspec run -m DIR --ids 3,17,42 -n 16 --temp 0 --print-ids
 * prints the generated ids, space-separated, on one line of stdout and nothing else on stdout. */
#include <stdio.h>
#include <string.h>
#include "core/cli.h"
#include "core/cli_runner.h"

static void run_usage(FILE *out)
{
    fprintf(out, "usage: dsspec run [flags]   (one of -p, -f, --ids, --chat=FILE gives the prompt)\n\n");
    run_options_print_help(out);
}

int cli_run(int argc, char **argv)
{
    run_options o;
    run_options_defaults(&o);
    char err[512];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { run_usage(stdout); return 0; }
        int r = run_options_parse_flag(&o, argc, argv, &i, err, sizeof err);
        if (r < 0) { fprintf(stderr, "dsspec run: %s (see dsspec run --help)\n", err); return 2; }
        if (r == 0) { fprintf(stderr, "dsspec run: unknown flag '%s' (see dsspec run --help)\n", argv[i]); return 2; }
    }
    run_result res;
    int rc = run_once(&o, 0, &res);
    run_result_free(&res);
    return rc;
}
