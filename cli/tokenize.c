/* dsspec tokenize / detokenize: the tokenizer from the command line. */
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/flags.h"
#include "engine/dsspec.h"

static void print_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\\') fputs("\\\\", stdout);
        else if (c < 0x20 || c == 0x7F) printf("\\x%02x", c);
        else putchar(c);
    }
}

/* One token's bytes, escaped; bytes of a token that holds only part of a UTF-8 character (so
 * that decoding it alone would not give them back) are shown as \xNN. */
static void print_token(const tokenizer *tok, int32_t id)
{
    size_t n = 0, text_len = 0;
    const char *bytes = tokenizer_token_bytes(tok, id, &n);
    char *text = tokenizer_decode(tok, &id, 1, 0, &text_len);
    int whole = text && text_len == n && !memcmp(text, bytes, n);
    free(text);
    if (whole) { print_escaped(bytes, n); return; }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)bytes[i];
        if (c >= 0x80) printf("\\x%02x", c);
        else print_escaped((const char *)&c, 1);
    }
}

static tokenizer *open_tokenizer(const char *model)
{
    char err[768];
    tokenizer *tok = NULL;
    if (dsspec_resolve_model_dir(model, &model, err, sizeof err) == 0) tok = tokenizer_load(model, err, sizeof err);
    if (!tok) fprintf(stderr, "dsspec: %s\n", err);
    return tok;
}

typedef struct {
    const char *model, *text, *file, *chat;
    int ids_only, no_bos, no_gen_prompt;
} tokenize_args;

/* The text to encode: -p as is, -f's bytes, or --chat rendered. NULL after printing an error. */
static char *input_text(const tokenize_args *a, const tokenizer *tok, size_t *len)
{
    char err[1024];
    if (a->text) { *len = strlen(a->text); return strdup(a->text); }
    char *raw = dsspec_read_file(a->file ? a->file : a->chat, len, err, sizeof err);
    if (!raw) { fprintf(stderr, "dsspec: %s\n", err); return NULL; }
    if (a->file) return raw;
    char *rendered = tokenizer_render_chat(tok, raw, !a->no_gen_prompt, err, sizeof err);
    free(raw);
    if (!rendered) { fprintf(stderr, "dsspec: %s: %s\n", a->chat, err); return NULL; }
    *len = strlen(rendered);
    return rendered;
}

static void print_ids(const tokenizer *tok, const int32_t *ids, size_t n, int ids_only)
{
    for (size_t i = 0; i < n; i++) {
        if (ids_only) { printf(i ? ",%d" : "%d", ids[i]); continue; }
        printf("%d\t", ids[i]);
        print_token(tok, ids[i]);
        putchar('\n');
    }
    if (ids_only) putchar('\n');
    else printf("%zu tokens\n", n);
}

int cli_tokenize(int argc, char **argv)
{
    tokenize_args a = {0};
    const flag flags[] = {
        {FLAG_STRING, "-m|--model", "DIR", &a.model, .help = "model directory with tokenizer.json (+ tokenizer_config.json), or a tokenizer.json path (default: the embedded model)"},
        {FLAG_STRING, "-p|--prompt", "TEXT", &a.text, .help = "text to encode"},
        {FLAG_STRING, "-f|--file", "FILE", &a.file, .help = "encode the bytes of FILE ('-' = stdin); invalid UTF-8 becomes U+FFFD"},
        {FLAG_STRING, "--chat", "MESSAGES.json", &a.chat, .help = "render a JSON array of {role, content[, tool_calls]} messages with R1's chat template, then encode it (the template adds BOS)"},
        {FLAG_SWITCH, "--no-generation-prompt", NULL, &a.no_gen_prompt, .help = "with --chat: do not append \"<｜Assistant｜><think>\\n\""},
        {FLAG_SWITCH, "--ids-only", NULL, &a.ids_only, .help = "print only the ids, comma-separated (the format of detokenize --ids)"},
        {FLAG_SWITCH, "--no-bos", NULL, &a.no_bos, .help = "do not prepend BOS (default: as tokenizer_config.json's add_bos_token)"},
    };
    int rc = flags_parse("tokenize", "usage: dsspec tokenize [-m DIR] (-p TEXT | -f FILE | --chat MESSAGES.json) [--ids-only] [--no-bos] [--no-generation-prompt]\n"
                         "Output: one line per token, \"ID<TAB>text\" (text C-escaped), then the count.",
                         flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : rc;
    if (!!a.text + !!a.file + !!a.chat != 1) return flags_usage_error("tokenize", "give exactly one of -p TEXT, -f FILE, --chat MESSAGES.json");
    if (a.chat && a.no_bos) return flags_usage_error("tokenize", "--no-bos with --chat: the chat template writes BOS itself");
    if (!a.chat && a.no_gen_prompt) return flags_usage_error("tokenize", "--no-generation-prompt applies to --chat only");
    tokenizer *tok = open_tokenizer(a.model);
    if (!tok) return 1;
    size_t len = 0, n = 0;
    int32_t *ids = NULL;
    char *text = input_text(&a, tok, &len);
    int add_bos = !a.no_bos && !a.chat; /* a rendered chat already starts with the BOS text */
    rc = 0;
    if (!text) rc = 1;
    else if (tokenizer_encode(tok, text, len, add_bos, &ids, &n)) { fprintf(stderr, "dsspec: out of memory encoding\n"); rc = 1; }
    else print_ids(tok, ids, n, a.ids_only);
    free(ids); free(text); tokenizer_free(tok);
    return rc;
}

int cli_detokenize(int argc, char **argv)
{
    const char *model = NULL, *list = NULL;
    int skip = 0;
    const flag flags[] = {
        {FLAG_STRING, "-m|--model", "DIR", &model, .help = "model directory or tokenizer.json (default: the embedded model)"},
        {FLAG_STRING, "--ids", "LIST", &list, .help = "token ids separated by commas and/or spaces, e.g. 0,19923,2058"},
        {FLAG_SWITCH, "--skip-special", NULL, &skip, .help = "drop special tokens (BOS, EOS, ...) from the text"},
    };
    int rc = flags_parse("detokenize", "usage: dsspec detokenize [-m DIR] --ids LIST [--skip-special]\n"
                         "Output: the decoded text, exactly (no newline is added). Ids that are not in the vocabulary\n"
                         "are dropped, as Hugging Face's decode does.",
                         flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : rc;
    if (!list) return flags_usage_error("detokenize", "--ids LIST is required");
    char err[512];
    int *ids = NULL, n = parse_id_list("--ids", list, &ids, err, sizeof err);
    if (n < 0) return flags_usage_error("detokenize", "%s", err);
    tokenizer *tok = open_tokenizer(model);
    if (!tok) { free(ids); return 1; }
    int32_t *ids32 = malloc((size_t)n * sizeof *ids32);
    size_t len = 0;
    for (int i = 0; ids32 && i < n; i++) ids32[i] = ids[i];
    char *text = ids32 ? tokenizer_decode(tok, ids32, (size_t)n, skip, &len) : NULL;
    rc = 0;
    if (!text) { fprintf(stderr, "dsspec detokenize: out of memory\n"); rc = 1; }
    else fwrite(text, 1, len, stdout);
    free(text); free(ids); free(ids32); tokenizer_free(tok);
    return rc;
}
