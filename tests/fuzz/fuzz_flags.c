/* The command-line parser with `run`'s flag table (shared by `ab`), then the checks that turn
 * strings into engine options and refuse conflicting flags. The input is argv: arguments
 * separated by NUL bytes. Whatever happens is help (1), a usage error (2) or a parse (0) whose
 * numbers lie inside each flag's declared range. */
#include <stdlib.h>
#include <string.h>
#include "cli/runner.h"
#include "tests/fuzz/fuzz_util.h"

enum { MAX_ARGS = 64 };

int LLVMFuzzerInitialize(int *argc, char ***argv) { (void)argc; (void)argv; return 0; }

static void check_ranges(const flag *f, int n)
{
    for (int i = 0; i < n; i++) {
        if (f[i].kind == FLAG_INT && (*(int *)f[i].dst < f[i].lo || *(int *)f[i].dst > f[i].hi) && *(int *)f[i].dst != 0)
            fuzz_fail("%s = %d outside [%g, %g]", f[i].names, *(int *)f[i].dst, f[i].lo, f[i].hi);
        if (f[i].kind == FLAG_DOUBLE) {
            double v = *(double *)f[i].dst;
            if (!(v >= f[i].lo && v <= f[i].hi) && v != 0 && v != -1) fuzz_fail("%s = %g outside [%g, %g]", f[i].names, v, f[i].lo, f[i].hi);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_cstring(data, size), *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "run";
    for (size_t at = 0; at <= size && argc <= MAX_ARGS; at += strlen(buf + at) + 1) argv[argc++] = buf + at;
    argv[argc] = NULL;
    run_options o;
    run_options_defaults(&o);
    int n;
    const flag *flags = run_flags(&o, &n);
    int rc = flags_parse("run", "usage: dsspec run [flags]", flags, n, argc, argv, NULL, 0, NULL);
    if (rc != 0 && rc != 1 && rc != 2) fuzz_fail("flags_parse returned %d", rc);
    if (rc == 0) {
        check_ranges(flags, n);
        rc = run_options_finish(&o, "run");
        if (rc != 0 && rc != 2) fuzz_fail("run_options_finish returned %d", rc);
    }
    free(buf);
    return 0;
}
