/* tokenizer_config.json beside a small valid tokenizer.json (tests/tokenizer/data/tiny): refused with one line, or loaded and
 * then able to encode with BOS and render a chat. */
#include <stdlib.h>
#include <string.h>
#include "tests/fuzz/fuzz_util.h"
#include "tokenizer/tokenizer.h"

static const char *dir;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    dir = fuzz_tmpdir();
    fuzz_copy_file(DSSPEC_SOURCE_DIR "/tests/tokenizer/data/tiny/tokenizer.json", dir, "tokenizer.json");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write_file(dir, "tokenizer_config.json", data, size);
    char err[1024] = "";
    tokenizer *tok = tokenizer_load(dir, err, sizeof err);
    if (!tok) { fuzz_check_error_line("tokenizer_load", err); return 0; }
    int32_t *ids = NULL;
    size_t n = 0;
    if (tokenizer_encode(tok, "hello", 5, 1, &ids, &n)) fuzz_fail("encode failed on a loaded tokenizer");
    if (tokenizer_adds_bos(tok) && tokenizer_bos_id(tok) >= 0 && (n == 0 || ids[0] != tokenizer_bos_id(tok)))
        fuzz_fail("add_bos_token is set but the encoding does not start with BOS %d", tokenizer_bos_id(tok));
    free(ids);
    char *chat = tokenizer_render_chat(tok, "[{\"role\":\"user\",\"content\":\"hi\"}]", 1, err, sizeof err);
    if (!chat) fuzz_fail("a one-turn chat did not render: %s", err);
    free(chat);
    tokenizer_free(tok);
    return 0;
}
