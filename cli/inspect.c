/* dsspec inspect: open (and so fully validate) a checkpoint, print its census. */
#include <stdio.h>
#include "cli/cli.h"
#include "cli/flags.h"
#include "engine/dsspec.h"

int cli_inspect(int argc, char **argv)
{
    const char *dir = NULL;
    const flag flags[] = {
        {FLAG_STRING, "-m|--model", "DIR", &dir, .help = "checkpoint directory (default: the embedded model)"},
    };
    char usage[1024];
    snprintf(usage, sizeof usage,
             "usage: dsspec inspect [-m DIR]\n\n"
             "Validates a DeepSeek-V3/R1 checkpoint directory (config.json, model.safetensors.index.json,\n"
             "every shard header: offsets, sizes, dtypes and shapes against the config) and prints its census:\n"
             "tensors and bytes by dtype, by family and per layer, resident vs routed-expert bytes, and the\n"
             "routed-expert extents (contiguous, straddling two shards).\n"
             "Exit status: 0 valid, 1 integrity failure (one error line on stderr), 2 usage error.\n"
             "Default model: %s\n", dsspec_default_model_dir() ? dsspec_default_model_dir() : "(not found)");
    int rc = flags_parse("inspect", usage, flags, 1, argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : rc;
    char err[1024];
    if (dsspec_inspect(dir, stdout, err, sizeof err)) { fprintf(stderr, "dsspec inspect: %s\n", err); return 1; }
    return 0;
}
