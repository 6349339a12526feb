/* DeepSeek-R1's chat template, written out in C. It follows the Jinja source of R1's
 * tokenizer_config.json (tests/tokenizer/data/r1_chat_template.jinja) statement by statement,
 * including its quirks: all system messages are hoisted to the front, `is_first` and
 * `is_output_first` are never reset (only the first tool-calling assistant turn gets the
 * <｜Assistant｜> prefix; only the first tool output opens <｜tool▁outputs▁begin｜>), and an
 * assistant turn keeps only the text after its last </think>. Where Jinja would fail (content
 * that is not a string), this returns an error instead. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include "core/text_file.h"
#include "tokenizer/tokenizer_internal.h"

#define USER "<｜User｜>"
#define ASSISTANT "<｜Assistant｜>"
#define EOS "<｜end▁of▁sentence｜>"
#define CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define CALLS_END "<｜tool▁calls▁end｜>"
#define CALL_BEGIN "<｜tool▁call▁begin｜>"
#define CALL_END "<｜tool▁call▁end｜>"
#define TOOL_SEP "<｜tool▁sep｜>"
#define OUTPUTS_BEGIN "<｜tool▁outputs▁begin｜>"
#define OUTPUTS_END "<｜tool▁outputs▁end｜>"
#define OUTPUT_BEGIN "<｜tool▁output▁begin｜>"
#define OUTPUT_END "<｜tool▁output▁end｜>"

typedef struct {
    byte_buf out;
    int is_first, is_tool, is_output_first;
    char *err; size_t errlen;
    int failed;
} chat_state;

static void put(chat_state *c, const char *s)
{
    if (!c->failed && byte_buf_append(&c->out, s, strlen(s))) {
        error_set(c->err, c->errlen, "out of memory rendering the chat");
        c->failed = 1;
    }
}

/* message[key] as a string; NULL (and an error) when it is missing or not a string. */
static const char *field_string(chat_state *c, const cJSON *obj, const char *key, const char *where, size_t idx)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsString(v)) return v->valuestring;
    if (!c->failed) error_set(c->err, c->errlen, "messages[%zu]: %s \"%s\" must be a string", idx, where, key);
    c->failed = 1;
    return NULL;
}

/* Every message is an object with one of the template's four roles: any other role would render
 * as nothing, silently dropping a turn the caller meant the model to read. */
static int check_message(const cJSON *m, size_t idx, char *err, size_t errlen)
{
    static const char *const roles[] = {"system", "user", "assistant", "tool"};
    if (!cJSON_IsObject(m)) { error_set(err, errlen, "messages[%zu]: expected an object", idx); return -1; }
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsString(r)) {
        error_set(err, errlen, "messages[%zu]: \"role\" %s (expected \"system\", \"user\", \"assistant\" or \"tool\")", idx,
                r ? "must be a string" : "is missing");
        return -1;
    }
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (!strcmp(r->valuestring, roles[i])) return 0;
    error_set(err, errlen, "messages[%zu]: role \"%.64s\" is not one of \"system\", \"user\", \"assistant\", \"tool\"", idx, r->valuestring);
    return -1;
}

static const char *role_of(const cJSON *m)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
    return cJSON_IsString(r) ? r->valuestring : "";
}

static void render_system_prompt(chat_state *c, const cJSON *messages)
{
    size_t idx = 0;
    int first = 1;
    for (const cJSON *m = messages->child; m; m = m->next, idx++) {
        if (strcmp(role_of(m), "system")) continue;
        const char *content = field_string(c, m, "content", "system", idx);
        if (!content) return;
        if (!first) put(c, "\n\n");
        put(c, content);
        first = 0;
    }
}

static void render_tool_call(chat_state *c, const cJSON *call, size_t idx)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
    const char *type = field_string(c, call, "type", "tool_calls[]", idx);
    const char *name = fn ? field_string(c, fn, "name", "tool_calls[].function", idx) : NULL;
    const char *args = fn ? field_string(c, fn, "arguments", "tool_calls[].function", idx) : NULL;
    if (!fn && !c->failed) {
        error_set(c->err, c->errlen, "messages[%zu]: tool_calls[] needs a \"function\" object", idx);
        c->failed = 1;
    }
    if (c->failed) return;
    put(c, CALL_BEGIN); put(c, type); put(c, TOOL_SEP); put(c, name);
    put(c, "\n```json\n"); put(c, args); put(c, "\n```" CALL_END);
}

static void render_tool_calls(chat_state *c, const cJSON *m, const cJSON *calls, size_t idx)
{
    c->is_tool = 0;
    if (!cJSON_IsArray(calls)) {
        error_set(c->err, c->errlen, "messages[%zu]: \"tool_calls\" must be an array", idx);
        c->failed = 1;
        return;
    }
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    for (const cJSON *call = calls->child; call && !c->failed; call = call->next) {
        if (!c->is_first) {
            put(c, ASSISTANT);
            if (!cJSON_IsNull(content)) { /* a missing content fails here, as in Jinja */
                const char *text = field_string(c, m, "content", "assistant", idx);
                if (text) put(c, text);
            }
            put(c, CALLS_BEGIN);
            render_tool_call(c, call, idx);
            c->is_first = 1;
        } else {
            put(c, "\n");
            render_tool_call(c, call, idx);
        }
    }
    put(c, CALLS_END EOS);
}

/* Jinja's content.split('</think>')[-1]: the text after the last </think>. */
static const char *after_last_think(const char *s)
{
    const char *last = NULL;
    for (const char *p = strstr(s, "</think>"); p; p = strstr(p + 1, "</think>")) last = p;
    return last ? last + strlen("</think>") : s;
}

static void render_assistant(chat_state *c, const cJSON *m, size_t idx)
{
    const char *content = field_string(c, m, "content", "assistant", idx);
    if (!content) return;
    if (c->is_tool) {
        put(c, OUTPUTS_END); put(c, content); put(c, EOS);
        c->is_tool = 0;
    } else {
        put(c, ASSISTANT); put(c, after_last_think(content)); put(c, EOS);
    }
}

static void render_tool_output(chat_state *c, const cJSON *m, size_t idx)
{
    c->is_tool = 1;
    const char *content = field_string(c, m, "content", "tool", idx);
    if (!content) return;
    put(c, c->is_output_first ? OUTPUTS_BEGIN OUTPUT_BEGIN : OUTPUT_BEGIN);
    put(c, content); put(c, OUTPUT_END);
    c->is_output_first = 0;
}

static void render_message(chat_state *c, const cJSON *m, size_t idx)
{
    const char *role = role_of(m);
    if (!strcmp(role, "user")) {
        c->is_tool = 0;
        const char *content = field_string(c, m, "content", "user", idx);
        if (content) { put(c, USER); put(c, content); }
    } else if (!strcmp(role, "assistant")) {
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (calls) render_tool_calls(c, m, calls, idx);
        else render_assistant(c, m, idx);
    } else if (!strcmp(role, "tool")) {
        render_tool_output(c, m, idx);
    } /* system messages are already hoisted to the front; check_message refused any other role */
}

char *tokenizer_render_chat(const tokenizer *tok, const char *messages_json, int add_generation_prompt,
                            char *err, size_t errlen)
{
    if (err && errlen) err[0] = 0;
    cJSON *messages = messages_json ? cJSON_Parse(messages_json) : NULL;
    if (!messages) { error_set(err, errlen, "messages: malformed JSON"); return NULL; }
    chat_state c = {.is_output_first = 1, .err = err, .errlen = errlen};
    if (!cJSON_IsArray(messages)) {
        error_set(err, errlen, "messages: expected a JSON array of {\"role\", \"content\"} objects");
        c.failed = 1;
    }
    size_t idx = 0;
    for (const cJSON *m = c.failed ? NULL : messages->child; m && !c.failed; m = m->next, idx++)
        c.failed = check_message(m, idx, err, errlen) != 0;
    put(&c, "");
    if (!c.failed) {
        put(&c, tok && tok->bos_text ? tok->bos_text : "");
        render_system_prompt(&c, messages);
    }
    idx = 0;
    for (const cJSON *m = c.failed ? NULL : messages->child; m && !c.failed; m = m->next, idx++)
        render_message(&c, m, idx);
    if (c.is_tool) put(&c, OUTPUTS_END);
    if (add_generation_prompt && !c.is_tool) put(&c, ASSISTANT "<think>\n");
    cJSON_Delete(messages);
    if (c.failed) { free(c.out.data); return NULL; }
    return c.out.data;
}
