/* The OpenAI-compatible surface: request bodies validated into jobs (every field checked, one
 * message naming it when wrong), and replies in OpenAI's shapes, streamed as server-sent events
 * or whole. Chat replies split R1's reasoning from its answer the way DeepSeek's API does: the
 * text up to "</think>" is reasoning_content (R1's generation prompt already opened <think>), the
 * rest, without its leading newlines, is content. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include "cli/serve.h"

#define THINK_END "</think>"

/* ------------------------------------------------------------------ request fields */

/* A number field in [lo, hi] (integral when integer); 0 absent, 1 present, -1 wrong (err set). */
static int number_field(const cJSON *req, const char *name, double lo, double hi, int integer, double *out, char *err,
                        size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, name);
    if (!v || cJSON_IsNull(v)) return 0;
    double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(x >= lo && x <= hi) || (integer && x != floor(x))) {
        snprintf(err, errlen, "'%s' must be %s in [%g, %g]", name, integer ? "an integer" : "a number", lo, hi);
        return -1;
    }
    *out = x;
    return 1;
}

static int bool_field(const cJSON *req, const char *name, int *out, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, name);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) { snprintf(err, errlen, "'%s' must be true or false", name); return -1; }
    *out = cJSON_IsTrue(v);
    return 1;
}

/* stop: a string or an array of at most SERVE_MAX_STOP non-empty strings. */
static int read_stop(const cJSON *req, serve_job *j, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, "stop"), *s;
    if (!v || cJSON_IsNull(v)) return 0;
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    if ((!cJSON_IsArray(v) && !cJSON_IsString(v)) || n > SERVE_MAX_STOP) {
        snprintf(err, errlen, "'stop' must be a string or an array of at most %d strings", SERVE_MAX_STOP);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        s = cJSON_IsArray(v) ? cJSON_GetArrayItem(v, i) : v;
        if (!cJSON_IsString(s) || !s->valuestring[0]) { snprintf(err, errlen, "'stop' strings must be non-empty strings"); return -1; }
        if (!(j->stops[j->n_stop] = strdup(s->valuestring))) { snprintf(err, errlen, "out of memory"); return -1; }
        j->n_stop++;
    }
    j->gen.stop = (const char *const *)j->stops;
    j->gen.n_stop = j->n_stop;
    return 0;
}

static uint64_t random_seed(void)
{
    uint64_t s;
    if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s) s = (uint64_t)time(NULL) ^ (uint64_t)clock();
    return s;
}

/* Fields OpenAI defines that dsspec does not do are refused rather than silently ignored. */
static int refuse_unsupported(const cJSON *req, char *err, size_t errlen)
{
    double n = 1;
    int on = 0;
    if (number_field(req, "n", 1, 1, 1, &n, err, errlen) < 0) { snprintf(err, errlen, "'n' must be 1 (one choice per request)"); return -1; }
    if (bool_field(req, "logprobs", &on, err, errlen) < 0 || on) { snprintf(err, errlen, "'logprobs' is not supported"); return -1; }
    if (bool_field(req, "echo", &on, err, errlen) < 0 || on) { snprintf(err, errlen, "'echo' is not supported"); return -1; }
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(req, "model");
    if (m && !cJSON_IsString(m) && !cJSON_IsNull(m)) { snprintf(err, errlen, "'model' must be a string"); return -1; }
    return 0;
}

static int read_sampling(const cJSON *req, serve_job *j, char *err, size_t errlen)
{
    dsspec_generate_params *g = &j->gen;
    double x;
    int r;
    if (refuse_unsupported(req, err, errlen)) return -1;
    if ((r = number_field(req, "max_tokens", 1, 1e8, 1, &x, err, errlen)) < 0) return -1;
    if (!r && (r = number_field(req, "max_completion_tokens", 1, 1e8, 1, &x, err, errlen)) < 0) return -1;
    g->max_new = r ? (int)x : j->cfg->default_max_tokens > 0 ? j->cfg->default_max_tokens : j->cfg->ctx;
    if ((r = number_field(req, "temperature", 0, 100, 0, &x, err, errlen)) < 0) return -1;
    if (r) g->temperature = x;
    if ((r = number_field(req, "top_p", 1e-9, 1, 0, &x, err, errlen)) < 0) return -1;
    if (r) g->top_p = x;
    if ((r = number_field(req, "top_k", 0, 1 << 30, 1, &x, err, errlen)) < 0) return -1;
    if (r) g->top_k = (int)x;
    if ((r = number_field(req, "min_p", 0, 1, 0, &x, err, errlen)) < 0) return -1;
    if (r) g->min_p = x;
    if ((r = number_field(req, "seed", 0, 9007199254740991.0, 1, &x, err, errlen)) < 0) return -1;
    g->seed = r ? (uint64_t)x : random_seed();
    if (bool_field(req, "stream", &j->stream, err, errlen) < 0) return -1;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(req, "stream_options");
    if (so && !cJSON_IsNull(so) && (!cJSON_IsObject(so) || bool_field(so, "include_usage", &j->include_usage, err, errlen) < 0)) {
        snprintf(err, errlen, "'stream_options' must be an object {\"include_usage\": bool}");
        return -1;
    }
    return read_stop(req, j, err, errlen);
}

/* ------------------------------------------------------------------ prompts */

/* Content given as parts ([{"type": "text", "text": ...}], as newer clients send) becomes the
 * one string R1's template takes. */
static int flatten_content(cJSON *msgs, char *err, size_t errlen)
{
    int i = 0;
    for (cJSON *m = msgs->child; m; m = m->next, i++) {
        cJSON *c = cJSON_IsObject(m) ? cJSON_GetObjectItemCaseSensitive(m, "content") : NULL;
        if (!cJSON_IsArray(c)) continue;
        sbuf text = {0};
        int k = 0;
        for (cJSON *part = c->child; part; part = part->next, k++) {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type"), *t = cJSON_GetObjectItemCaseSensitive(part, "text");
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(t)) {
                snprintf(err, errlen, "messages[%d].content[%d]: only {\"type\": \"text\", \"text\": string} parts are supported", i, k);
                sbuf_free(&text);
                return -1;
            }
            sbuf_append(&text, t->valuestring, strlen(t->valuestring));
        }
        cJSON_ReplaceItemInObjectCaseSensitive(m, "content", cJSON_CreateString(text.p ? text.p : ""));
        sbuf_free(&text);
    }
    return 0;
}

static int encode(serve_config *cfg, const dsspec_prompt *p, int **ids, char *err, size_t errlen)
{
    pthread_mutex_lock(&cfg->encode_mu);
    int n = dsspec_encode_prompt(cfg->e, p, ids, err, errlen);
    pthread_mutex_unlock(&cfg->encode_mu);
    return n;
}

static int chat_prompt(serve_config *cfg, cJSON *req, serve_job *j, char *err, size_t errlen)
{
    cJSON *msgs = cJSON_GetObjectItemCaseSensitive(req, "messages");
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) {
        snprintf(err, errlen, "'messages' must be a non-empty array of {\"role\", \"content\"} objects");
        return -1;
    }
    if (flatten_content(msgs, err, errlen)) return -1;
    char *json = cJSON_PrintUnformatted(msgs), inner[400];
    if (!json) { snprintf(err, errlen, "out of memory"); return -1; }
    j->n_prompt = encode(cfg, &(dsspec_prompt){.messages_json = json}, &j->prompt, inner, sizeof inner);
    free(json);
    if (j->n_prompt < 0) snprintf(err, errlen, "'messages': %s", inner);
    return j->n_prompt < 0 ? -1 : 0;
}

/* prompt: a string, an array of one string, or an array of token ids. */
static int completion_prompt(serve_config *cfg, const cJSON *req, serve_job *j, char *err, size_t errlen)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(req, "prompt");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(p->child)) p = p->child;
    if (cJSON_IsString(p)) {
        j->n_prompt = encode(cfg, &(dsspec_prompt){.text = p->valuestring}, &j->prompt, err, errlen);
        return j->n_prompt < 0 ? -1 : 0;
    }
    int n = cJSON_IsArray(p) ? cJSON_GetArraySize(p) : 0;
    if (n > 0 && !(j->prompt = malloc((size_t)n * sizeof *j->prompt))) { snprintf(err, errlen, "out of memory"); return -1; }
    int i = 0;
    for (const cJSON *t = n ? p->child : NULL; t; t = t->next, i++) {
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 || t->valuedouble > 2147483647.0) break;
        j->prompt[i] = (int)t->valuedouble;
    }
    if (n == 0 || i < n) {
        snprintf(err, errlen, "'prompt' must be a string, an array of one string, or a non-empty array of token ids");
        return -1;
    }
    j->n_prompt = n;
    char inner[300];
    if (dsspec_check_ids(cfg->e, j->prompt, n, inner, sizeof inner)) { snprintf(err, errlen, "'prompt': %s", inner); return -1; }
    return 0;
}

static int check_fits(const serve_config *cfg, serve_job *j, char *err, size_t errlen)
{
    if (j->n_prompt == 0) { snprintf(err, errlen, "the prompt is empty: at least one token is needed"); return -1; }
    if (j->n_prompt + 1 > cfg->ctx) {
        snprintf(err, errlen, "the prompt has %d tokens; the server's context holds %d (--ctx), and the reply needs one more",
                 j->n_prompt, cfg->ctx);
        return -1;
    }
    if (j->gen.max_new > cfg->ctx - j->n_prompt) j->gen.max_new = cfg->ctx - j->n_prompt;
    return 0;
}

/* ------------------------------------------------------------------ replies */

static const char *finish_reason(const serve_job *j)
{
    switch (j->stats.stopped_by) {
    case DSSPEC_STOP_MAX_TOKENS:
    case DSSPEC_STOP_CTX_FULL: return "length";
    default: return "stop";
    }
}

static cJSON *reply_base(const serve_job *j, const char *object)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", j->cfg->model_name);
    cJSON_AddStringToObject(o, "system_fingerprint", j->cfg->fingerprint);
    return o;
}

static cJSON *usage_json(const serve_job *j)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", j->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", j->stats.generated);
    cJSON_AddNumberToObject(u, "total_tokens", j->n_prompt + j->stats.generated);
    return u;
}

/* One server-sent event: "data: JSON\n\n". Takes o. */
static void emit_event(serve_job *j, cJSON *o)
{
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text) { serve_job_cancel(j); return; }
    sbuf ev = {0};
    if (!sbuf_append(&ev, "data: ", 6) && !sbuf_append(&ev, text, strlen(text)) && !sbuf_append(&ev, "\n\n", 2))
        serve_job_emit(j, ev.p, ev.len);
    else
        serve_job_cancel(j);
    sbuf_free(&ev);
    free(text);
}

/* A streamed chunk: chat's {"delta": delta} or a completion's {"text": text}, with a finish reason. */
static void emit_chunk(serve_job *j, cJSON *delta, const char *text, size_t len, const char *finish)
{
    cJSON *o = reply_base(j, j->kind == SERVE_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    if (delta) cJSON_AddItemToObject(c, "delta", delta);
    if (j->kind == SERVE_COMPLETION) {
        char *t = strndup(text ? text : "", len);
        cJSON_AddStringToObject(c, "text", t ? t : "");
        free(t);
    }
    cJSON_AddNullToObject(c, "logprobs");
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(choices, c);
    emit_event(j, o);
}

/* A piece of chat text for the reasoning_content or content field. */
static void chat_piece(serve_job *j, const char *field, const char *s, size_t n)
{
    if (!n) return;
    if (!j->stream) { sbuf_append(!strcmp(field, "content") ? &j->content : &j->reasoning, s, n); return; }
    if (!j->head_sent) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "role", "assistant");
        cJSON_AddStringToObject(d, "content", "");
        emit_chunk(j, d, NULL, 0, NULL);
        j->head_sent = 1;
    }
    char *t = strndup(s, n);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, field, t ? t : "");
    free(t);
    emit_chunk(j, d, NULL, 0, NULL);
}

static void answer_text(serve_job *j, const char *s, size_t n)
{
    if (!j->content_started) {
        while (n && *s == '\n') { s++; n--; }
        if (!n) return;
        j->content_started = 1;
    }
    chat_piece(j, "content", s, n);
}

/* Generated chat text: reasoning until "</think>" (held back while it may be starting), then answer. */
static void chat_text(void *ctx, const char *s, size_t n)
{
    serve_job *j = ctx;
    if (j->think_done) { answer_text(j, s, n); return; }
    if (sbuf_append(&j->pending, s, n)) { serve_job_cancel(j); return; }
    const size_t tl = strlen(THINK_END);
    const char *end = memmem(j->pending.p, j->pending.len, THINK_END, tl);
    if (end) {
        size_t at = (size_t)(end - j->pending.p);
        chat_piece(j, "reasoning_content", j->pending.p, at);
        j->think_done = 1;
        answer_text(j, end + tl, j->pending.len - at - tl);
        j->pending.len = 0;
        return;
    }
    size_t hold = tl - 1 < j->pending.len ? tl - 1 : j->pending.len;
    while (hold && memcmp(j->pending.p + j->pending.len - hold, THINK_END, hold)) hold--;
    chat_piece(j, "reasoning_content", j->pending.p, j->pending.len - hold);
    memmove(j->pending.p, j->pending.p + j->pending.len - hold, hold);
    j->pending.len = hold;
}

static void completion_text(void *ctx, const char *s, size_t n)
{
    serve_job *j = ctx;
    if (!j->stream) { if (sbuf_append(&j->text, s, n)) serve_job_cancel(j); return; }
    emit_chunk(j, NULL, s, n, NULL);
}

/* The end of a streamed reply: an error event, or the last chunk with its finish reason (and the
 * usage when asked for), then [DONE]. */
static void finish_job(serve_job *j)
{
    if (j->kind == SERVE_CHAT && !j->think_done && j->pending.len) chat_piece(j, "reasoning_content", j->pending.p, j->pending.len);
    j->pending.len = 0;
    if (!j->stream || atomic_load(&j->cancelled)) return;
    if (j->failed) {
        char *e = serve_api_error(j->error, "server_error");
        if (e) { serve_job_emit(j, "data: ", 6); serve_job_emit(j, e, strlen(e)); serve_job_emit(j, "\n\n", 2); }
        free(e);
        return;
    }
    emit_chunk(j, j->kind == SERVE_CHAT ? cJSON_CreateObject() : NULL, "", 0, finish_reason(j));
    if (j->include_usage) {
        cJSON *o = reply_base(j, j->kind == SERVE_CHAT ? "chat.completion.chunk" : "text_completion");
        cJSON_AddArrayToObject(o, "choices");
        cJSON_AddItemToObject(o, "usage", usage_json(j));
        emit_event(j, o);
    }
    serve_job_emit(j, "data: [DONE]\n\n", 14);
}

/* ------------------------------------------------------------------ entry points */

serve_job *serve_api_parse(serve_config *cfg, serve_kind kind, const char *body, size_t len, int *status, char *err,
                           size_t errlen)
{
    static atomic_uint_fast64_t counter;
    *status = 400;
    const char *end = NULL;
    cJSON *req = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!cJSON_IsObject(req)) {
        if (!req) snprintf(err, errlen, "the request body is not valid JSON (at byte %zu)", end && end >= body ? (size_t)(end - body) : 0);
        else snprintf(err, errlen, "the request body must be a JSON object");
        cJSON_Delete(req);
        return NULL;
    }
    serve_job *j = serve_job_new(cfg, kind);
    if (!j) { *status = 500; snprintf(err, errlen, "out of memory"); cJSON_Delete(req); return NULL; }
    int bad = read_sampling(req, j, err, errlen) ||
              (kind == SERVE_CHAT ? chat_prompt(cfg, req, j, err, errlen) : completion_prompt(cfg, req, j, err, errlen)) ||
              check_fits(cfg, j, err, errlen);
    cJSON_Delete(req);
    if (bad) { serve_job_release(j); return NULL; }
    snprintf(j->id, sizeof j->id, "%s-%llx%llx", kind == SERVE_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)time(NULL),
             (unsigned long long)atomic_fetch_add(&counter, 1));
    j->created = (long)time(NULL);
    j->gen.on_text = kind == SERVE_CHAT ? chat_text : completion_text;
    j->gen.ctx = j;
    j->finish = finish_job;
    return j;
}

static char *print_and_free(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *serve_api_reply(const serve_job *j)
{
    cJSON *o = reply_base(j, j->kind == SERVE_CHAT ? "chat.completion" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    if (j->kind == SERVE_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "content", j->content.p ? j->content.p : "");
        cJSON_AddStringToObject(m, "reasoning_content", j->reasoning.p ? j->reasoning.p : "");
    } else {
        cJSON_AddStringToObject(c, "text", j->text.p ? j->text.p : "");
    }
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", finish_reason(j));
    cJSON_AddItemToArray(choices, c);
    cJSON_AddItemToObject(o, "usage", usage_json(j));
    return print_and_free(o);
}

char *serve_api_error(const char *message, const char *type)
{
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", message);
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNullToObject(e, "param");
    cJSON_AddNullToObject(e, "code");
    return print_and_free(o);
}

char *serve_api_models(const serve_config *cfg)
{
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddStringToObject(m, "id", cfg->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)cfg->started);
    cJSON_AddStringToObject(m, "owned_by", "dsspec");
    cJSON_AddItemToArray(data, m);
    return print_and_free(o);
}
