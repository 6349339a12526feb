/* dsspec run: generate from a prompt. The contract outside checkers rely on:
 *   dsspec run -m DIR --ids 3,17,42 -n 16 --temp 0 --print-ids
 * prints the generated ids, space-separated, on one line of stdout and nothing else on stdout. */
#include "cli/cli.h"
#include "cli/runner.h"

int cli_run(int argc, char **argv)
{
    run_options o;
    run_options_defaults(&o);
    int n;
    const flag *flags = run_flags(&o, &n);
    int rc = flags_parse("run", "usage: dsspec run [flags]   (one of -p, -f, --ids, --chat FILE gives the prompt; -f - reads stdin)\nexit status: 0 finished, 1 runtime error, 2 usage error, 3 stopped by SIGINT/SIGTERM/SIGHUP (report written)\n",
                         flags, n, argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : rc;
    if ((rc = run_options_finish(&o, "run"))) return rc;
    o.argc = argc;
    o.argv = argv;
    run_result res;
    rc = run_once(&o, 0, &res);
    run_result_free(&res);
    return rc;
}
