/* dsspec: one binary, subcommands. The table below is the whole dispatch. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <limits.h>
#include "core/cli.h"

#ifndef DSSPEC_SOURCE_DIR
#define DSSPEC_SOURCE_DIR "."
#endif
#define DSSPEC_DEFAULT_MODEL_NAME "dsspec-tiny"

const char *cli_default_model_dir(void)
{
    /* Prefer the model next to the binary's source tree (a build), then ../models from the binary. */
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/models/%s", DSSPEC_SOURCE_DIR, DSSPEC_DEFAULT_MODEL_NAME);
    if (access(path, R_OK) == 0) return path;
    char exe[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(path, sizeof path, "%s/../models/%s", exe, DSSPEC_DEFAULT_MODEL_NAME);
    }
    return path;
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", cli_run, "generate text or ids (MTP speculation, expert cache, telemetry)"},
    {"eval", cli_eval, "dump logits.f32 / routes.json (and mtp_logits.f32) for a list of ids"},
    {"ab", cli_ab, "the same prompt with MTP off, then on: one comparison table"},
    {"inspect", cli_inspect, "checkpoint census and integrity check"},
    {"tokenize", cli_tokenize, "text -> token ids"},
    {"detokenize", cli_detokenize, "token ids -> text"},
    {"cache-sim", cli_cache_sim, "replay a routing trace through a cache policy (lru|lfu|arc|opt)"},
    {"report", cli_report, "render a --report JSON as text or a self-contained HTML page"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: dsspec COMMAND [flags]   (dsspec COMMAND --help for its flags)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\nWith no -m, dsspec uses the embedded model: %s\n", cli_default_model_dir());
}

int main(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return 2; }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) { usage(stdout); return 0; }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "dsspec: unknown command '%s' (see dsspec --help)\n", argv[1]);
    return 2;
}
