/* dsspec tokenize / detokenize: the tokenizer module from the command line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/cli.h"
#include "tokenizer/tokenizer.h"

static void tokenize_usage(FILE *out)
{
    fprintf(out,
            "usage: dsspec tokenize [-m DIR] (-p TEXT | -f FILE | --chat MESSAGES.json) [--ids-only] [--no-bos]\n"
            "                       [--no-generation-prompt]\n"
            "  -m DIR                 model directory with tokenizer.json (+ tokenizer_config.json),\n"
            "                         or a tokenizer.json path (default: the embedded model)\n"
            "  -p TEXT                text to encode\n"
            "  -f FILE                encode the bytes of FILE ('-' = stdin); invalid UTF-8 becomes U+FFFD\n"
            "  --chat MESSAGES.json   render a JSON array of {role, content[, tool_calls]} messages with\n"
            "                         DeepSeek-R1's chat template, then encode it (the template adds BOS)\n"
            "  --no-generation-prompt with --chat: do not append \"<｜Assistant｜><think>\\n\"\n"
            "  --ids-only             print only the ids, comma-separated (the format of detokenize --ids)\n"
            "  --no-bos               do not prepend BOS (default: as tokenizer_config.json's add_bos_token)\n"
            "Output: one line per token, \"ID<TAB>text\" (text C-escaped), then the count.\n");
}

static void detokenize_usage(FILE *out)
{
    fprintf(out,
            "usage: dsspec detokenize [-m DIR] --ids LIST [--skip-special]\n"
            "  -m DIR          model directory or tokenizer.json (default: the embedded model)\n"
            "  --ids LIST      token ids separated by commas and/or spaces, e.g. 0,19923,2058\n"
            "  --skip-special  drop special tokens (BOS, EOS, ...) from the text\n"
            "Output: the decoded text, exactly (no newline is added). Ids that are not in the vocabulary\n"
            "are dropped, as Hugging Face's decode does.\n");
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) { fprintf(stderr, "dsspec: %s: cannot open: %s\n", path, strerror(errno)); return NULL; }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
        if (n == cap) {
            char *p = realloc(buf, cap * 2 + 1);
            if (!p) { free(buf); buf = NULL; break; }
            buf = p; cap *= 2;
        }
    }
    int bad = ferror(f);
    if (f != stdin) fclose(f);
    if (!buf || bad) { fprintf(stderr, "dsspec: %s: read error\n", path); free(buf); return NULL; }
    buf[n] = 0;
    *len = n;
    return buf;
}

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
    char err[512];
    tokenizer *tok = tokenizer_load(model ? model : cli_default_model_dir(), err, sizeof err);
    if (!tok) fprintf(stderr, "dsspec: %s\n", err);
    return tok;
}

struct tokenize_args {
    const char *model, *text, *file, *chat;
    int ids_only, no_bos, no_gen_prompt;
};

static int parse_tokenize_args(int argc, char **argv, struct tokenize_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) { tokenize_usage(stdout); return 1; }
        else if (!strcmp(arg, "-m") && has_value) a->model = argv[++i];
        else if (!strcmp(arg, "-p") && has_value) a->text = argv[++i];
        else if (!strcmp(arg, "-f") && has_value) a->file = argv[++i];
        else if (!strcmp(arg, "--chat") && has_value) a->chat = argv[++i];
        else if (!strcmp(arg, "--ids-only")) a->ids_only = 1;
        else if (!strcmp(arg, "--no-bos")) a->no_bos = 1;
        else if (!strcmp(arg, "--no-generation-prompt")) a->no_gen_prompt = 1;
        else {
            fprintf(stderr, "dsspec tokenize: %s '%s' (see dsspec tokenize --help)\n",
                    !strncmp(arg, "-", 1) && !has_value ? "missing value or unknown flag" : "unknown argument", arg);
            return 2;
        }
    }
    if (!!a->text + !!a->file + !!a->chat != 1) {
        fprintf(stderr, "dsspec tokenize: give exactly one of -p TEXT, -f FILE, --chat MESSAGES.json\n");
        return 2;
    }
    return 0;
}

/* The text to encode: -p as is, -f's bytes, or --chat rendered. NULL after printing an error. */
static char *input_text(const struct tokenize_args *a, const tokenizer *tok, size_t *len)
{
    if (a->text) { *len = strlen(a->text); return strdup(a->text); }
    if (a->file) return read_all(a->file, len);
    char *json = read_all(a->chat, len);
    if (!json) return NULL;
    char err[512];
    char *rendered = tokenizer_render_chat(tok, json, !a->no_gen_prompt, err, sizeof err);
    free(json);
    if (!rendered) { fprintf(stderr, "dsspec: %s: %s\n", a->chat, err); return NULL; }
    *len = strlen(rendered);
    return rendered;
}

int cli_tokenize(int argc, char **argv)
{
    struct tokenize_args a = {0};
    int rc = parse_tokenize_args(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    tokenizer *tok = open_tokenizer(a.model);
    if (!tok) return 1;
    size_t len = 0, n = 0;
    int32_t *ids = NULL;
    char *text = input_text(&a, tok, &len);
    /* a rendered chat already starts with the BOS text */
    int add_bos = !a.no_bos && !a.chat;
    if (!text || tokenizer_encode(tok, text, len, add_bos, &ids, &n)) {
        if (text) fprintf(stderr, "dsspec: out of memory encoding\n");
        free(text); tokenizer_free(tok);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (a.ids_only) { printf(i ? ",%d" : "%d", ids[i]); continue; }
        printf("%d\t", ids[i]);
        print_token(tok, ids[i]);
        putchar('\n');
    }
    if (a.ids_only) putchar('\n');
    else printf("%zu tokens\n", n);
    free(ids); free(text); tokenizer_free(tok);
    return 0;
}

/* "0, 19923 2058" -> ids; -1 and an error line on anything else. */
static int parse_id_list(const char *list, int32_t **ids, size_t *n)
{
    size_t cap = 16;
    *n = 0;
    *ids = malloc(cap * sizeof **ids);
    for (const char *p = list; *ids;) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n') p++;
        if (!*p) return 0;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) {
            fprintf(stderr, "dsspec detokenize: --ids: '%.20s' is not a token id (expected integers >= 0)\n", p);
            return -1;
        }
        if (*n == cap) {
            int32_t *q = realloc(*ids, (cap *= 2) * sizeof **ids);
            if (!q) break;
            *ids = q;
        }
        (*ids)[(*n)++] = (int32_t)v;
        p = end;
    }
    fprintf(stderr, "dsspec detokenize: out of memory\n");
    return -1;
}

int cli_detokenize(int argc, char **argv)
{
    const char *model = NULL, *list = NULL;
    int skip = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { detokenize_usage(stdout); return 0; }
        else if (!strcmp(argv[i], "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc) list = argv[++i];
        else if (!strcmp(argv[i], "--skip-special")) skip = 1;
        else {
            fprintf(stderr, "dsspec detokenize: unknown argument or missing value '%s' (see dsspec detokenize --help)\n", argv[i]);
            return 2;
        }
    }
    if (!list) { fprintf(stderr, "dsspec detokenize: --ids LIST is required\n"); return 2; }
    int32_t *ids = NULL;
    size_t n = 0;
    if (parse_id_list(list, &ids, &n)) { free(ids); return 2; }
    tokenizer *tok = open_tokenizer(model);
    if (!tok) { free(ids); return 1; }
    size_t len = 0;
    char *text = tokenizer_decode(tok, ids, n, skip, &len);
    int rc = 0;
    if (!text) { fprintf(stderr, "dsspec detokenize: out of memory\n"); rc = 1; }
    else fwrite(text, 1, len, stdout);
    free(text); free(ids); tokenizer_free(tok);
    return rc;
}
