/* dsspec inspect: open (and so fully validate) a checkpoint, print its census. */
#include <stdio.h>
#include <string.h>
#include "core/checkpoint.h"
#include "core/cli.h"

static void inspect_usage(FILE *out)
{
    fprintf(out,
            "usage: dsspec inspect [-m DIR]\n\n"
            "Validates a DeepSeek-V3/R1 checkpoint directory (config.json, model.safetensors.index.json,\n"
            "every shard header: offsets, sizes, dtypes and shapes against the config) and prints its census:\n"
            "tensors and bytes by dtype, by family and per layer, resident vs routed-expert bytes, and the\n"
            "routed-expert extents (contiguous, straddling two shards).\n\n"
            "  -m, --model DIR   checkpoint directory (default: %s)\n"
            "  -h, --help        this help\n\n"
            "Exit status: 0 valid, 1 integrity failure (one error line on stderr), 2 usage error.\n",
            cli_default_model_dir());
}

int cli_inspect(int argc, char **argv)
{
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { inspect_usage(stdout); return 0; }
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) {
            if (i + 1 >= argc) { fprintf(stderr, "dsspec inspect: %s needs a directory\n", argv[i]); return 2; }
            dir = argv[++i];
        } else {
            fprintf(stderr, "dsspec inspect: unknown flag '%s' (see dsspec inspect --help)\n", argv[i]);
            return 2;
        }
    }
    if (!dir) dir = cli_default_model_dir();
    char err[1024];
    checkpoint *ck = checkpoint_open(dir, err, sizeof err);
    if (!ck) { fprintf(stderr, "dsspec inspect: %s\n", err); return 1; }
    checkpoint_print_census(ck, stdout);
    checkpoint_close(ck);
    return 0;
}
