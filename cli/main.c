/* dsspec: one binary, subcommands. The table below is the whole dispatch. */
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"
#include "engine/dsspec.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", cli_run, "generate text or ids (MTP speculation, expert cache, telemetry)"},
    {"eval", cli_eval, "dump logits.f32 / routes.json (and mtp_logits.f32) for a list of ids"},
    {"batch", cli_batch, "run a JSON-lines file of prompts in one process (warm cache; restart skips finished jobs)"},
    {"ab", cli_ab, "the same prompt with MTP off, then on: one comparison table"},
    {"inspect", cli_inspect, "checkpoint census and integrity check"},
    {"tokenize", cli_tokenize, "text -> token ids"},
    {"detokenize", cli_detokenize, "token ids -> text"},
    {"cache-sim", cli_cache_sim, "replay a routing trace through a cache policy (lru|lfu|arc|opt)"},
    {"report", cli_report, "render a --report JSON as text or a self-contained HTML page"},
    {"serve", cli_serve, "OpenAI-compatible HTTP server with Prometheus /metrics (one warm model)"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: dsspec COMMAND [flags]   (dsspec COMMAND --help for its flags)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].help);
    const char *model = dsspec_default_model_dir();
    fprintf(out, "\nWith no -m, dsspec uses the embedded model: %s\n", model ? model : "(not found; dsspec --version says where it looks)");
    fprintf(out, "dsspec --version prints the version, git commit, kernel path and I/O backend.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return 2; }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) { usage(stdout); return 0; }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) { dsspec_version_print(stdout); return 0; }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "dsspec: unknown command '%s' (see dsspec --help)\n", argv[1]);
    return 2;
}
