/* Prompts: text, one chat turn, or a messages array, encoded with the checkpoint's tokenizer. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include "engine/engine_internal.h"

int dsspec_check_ids(const dsspec *e, const int *ids, int n, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= e->info.vocab_size) {
            error_set(err, errlen, "prompt token id %d is outside the vocabulary [0, %d)", ids[i], e->info.vocab_size);
            return -1;
        }
    return 0;
}

/* The one-user-turn message list for chat_wrap, as JSON. */
static char *wrap_as_user_turn(const char *text, size_t len)
{
    char *copy = strndup(text, len);
    cJSON *msgs = cJSON_CreateArray(), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", copy ? copy : "");
    cJSON_AddItemToArray(msgs, m);
    char *s = cJSON_PrintUnformatted(msgs);
    cJSON_Delete(msgs);
    free(copy);
    return s;
}

static char *render_chat(dsspec *e, const dsspec_prompt *p, const char *text, size_t len, char *err, size_t errlen)
{
    char *json = p->messages_json ? strdup(p->messages_json) : wrap_as_user_turn(text, len);
    if (!json) { error_set(err, errlen, "out of memory"); return NULL; }
    char *rendered = tokenizer_render_chat(e->tok, json, 1, err, errlen);
    free(json);
    return rendered;
}

int dsspec_encode_prompt(dsspec *e, const dsspec_prompt *p, int **ids, char *err, size_t errlen)
{
    if (!e->tok) { error_set(err, errlen, "%s: no tokenizer loaded", e->opt.model_dir); return -1; }
    const char *text = p->text ? p->text : "";
    size_t len = p->len ? p->len : strlen(text);
    char *rendered = NULL;
    int add_bos = !p->no_bos;
    if (p->messages_json || p->chat_wrap) {
        if (!(rendered = render_chat(e, p, text, len, err, errlen))) return -1;
        text = rendered;
        len = strlen(rendered);
        add_bos = 0; /* the template writes BOS itself */
    }
    int32_t *raw = NULL;
    size_t nraw = 0;
    int n = -1;
    if (tokenizer_encode(e->tok, text, len, add_bos, &raw, &nraw) != 0) {
        error_set(err, errlen, "out of memory encoding the prompt");
    } else if ((*ids = malloc((nraw ? nraw : 1) * sizeof(int)))) {
        for (size_t i = 0; i < nraw; i++) (*ids)[i] = raw[i];
        n = (int)nraw;
    }
    free(raw);
    free(rendered);
    if (n >= 0 && dsspec_check_ids(e, *ids, n, err, errlen)) { free(*ids); *ids = NULL; n = -1; }
    return n;
}
