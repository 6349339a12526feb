#include "tests/fuzz/fuzz_tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

tokenizer *fuzz_embedded_tokenizer(void)
{
    char err[1024];
    tokenizer *tok = tokenizer_load(DSSPEC_SOURCE_DIR "/models/dsspec-tiny", err, sizeof err);
    if (!tok) fuzz_fail("%s", err);
    return tok;
}
