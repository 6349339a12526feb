/* dsspec serve: an OpenAI-compatible HTTP server over one engine opened once, so the weights load
 * once and the expert cache stays warm across requests.
 *
 * HTTP is GNU libmicrohttpd (Debian's libmicrohttpd-dev): a small, long-maintained C library that
 * does HTTP/1.1 itself (keep-alive, chunked replies for streaming, 100-continue, request limits),
 * so this file only routes. It runs a thread per connection: a connection may block while its
 * request waits in the queue and while its reply streams, and can notice its client hang up. */
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli/cli.h"
#include "cli/runner.h"
#include "cli/serve.h"

typedef struct {
    serve_config cfg;
    serve_queue *q;
    const char *api_key;
    int64_t max_body;
    int verbose;
} server;

/* Per request: the body as it arrives. */
typedef struct {
    sbuf body;
    int too_large;
} request;

static int connection_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static enum MHD_Result respond(server *s, struct MHD_Connection *c, int status, const char *type, char *body, int queue_pos)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(body ? strlen(body) : 0, body ? body : "", MHD_RESPMEM_MUST_COPY);
    free(body);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (queue_pos >= 0) {
        char pos[16];
        snprintf(pos, sizeof pos, "%d", queue_pos);
        MHD_add_response_header(r, "X-Queue-Position", pos);
    }
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    serve_queue_count_response(s->q, status);
    return rc;
}

static enum MHD_Result respond_error(server *s, struct MHD_Connection *c, int status, const char *message)
{
    if (s->verbose) fprintf(stderr, "dsspec serve: %d %s\n", status, message);
    return respond(s, c, status, "application/json", serve_api_error(message, status >= 500 ? "server_error" : "invalid_request_error"), -1);
}

/* ------------------------------------------------------------------ streaming replies */

typedef struct {
    serve_job *job;
    size_t sent;
    int last_ahead, fd;
} stream_state;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream_state *st = cls;
    (void)pos;
    ssize_t n = serve_job_read(st->job, &st->sent, &st->last_ahead, buf, max, st->fd);
    return n > 0 ? n : n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

/* The reply is gone (sent, or the client left): a generation still running stops at its next step. */
static void stream_free(void *cls)
{
    stream_state *st = cls;
    serve_job_cancel(st->job);
    serve_job_release(st->job);
    free(st);
}

static enum MHD_Result respond_stream(server *s, struct MHD_Connection *c, serve_job *j, int ahead)
{
    stream_state *st = calloc(1, sizeof *st);
    if (!st) { serve_job_cancel(j); serve_job_release(j); return MHD_NO; }
    *st = (stream_state){.job = j, .last_ahead = -2, .fd = connection_fd(c)};
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
    if (!r) { stream_free(st); return MHD_NO; }
    char pos[16];
    snprintf(pos, sizeof pos, "%d", ahead);
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Queue-Position", pos);
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    serve_queue_count_response(s->q, 200);
    return rc;
}

/* ------------------------------------------------------------------ routes */

static enum MHD_Result generate(server *s, struct MHD_Connection *c, serve_kind kind, const request *r)
{
    char err[1024];
    int status, ahead;
    serve_job *j = serve_api_parse(&s->cfg, kind, r->body.p ? r->body.p : "", r->body.len, &status, err, sizeof err);
    if (!j) return respond_error(s, c, status, err);
    if (serve_queue_push(s->q, j, &ahead)) {
        serve_job_release(j);
        return respond_error(s, c, 503, "the server is busy: the queue is full (--max-queue) or the server is stopping");
    }
    if (j->stream) return respond_stream(s, c, j, ahead);
    if (serve_job_wait(j, connection_fd(c))) { serve_job_release(j); return MHD_NO; } /* the client left */
    enum MHD_Result rc = j->failed ? respond_error(s, c, 500, j->error)
                                   : respond(s, c, 200, "application/json", serve_api_reply(j), ahead);
    serve_job_release(j);
    return rc;
}

/* With --api-key, every route but /health needs "Authorization: Bearer KEY". */
static int authorized(const server *s, struct MHD_Connection *c, const char *url)
{
    if (!s->api_key || !strcmp(url, "/health")) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7)) return 0;
    const char *got = h + 7, *want = s->api_key;
    size_t gl = strlen(got), wl = strlen(want);
    unsigned diff = gl != wl;
    for (size_t i = 0; i < wl; i++) diff |= (unsigned char)want[i] ^ (unsigned char)(i < gl ? got[i] : 0);
    return diff == 0;
}

static enum MHD_Result get_route(server *s, struct MHD_Connection *c, const char *url)
{
    if (!strcmp(url, "/health")) return respond(s, c, 200, "application/json", strdup("{\"status\":\"ok\"}"), -1);
    if (!strcmp(url, "/v1/models")) return respond(s, c, 200, "application/json", serve_api_models(&s->cfg), -1);
    serve_stats st;
    serve_queue_stats(s->q, &st);
    char *text = serve_metrics_text(&st, &s->cfg);
    cJSON_Delete(st.cache);
    return respond(s, c, 200, "text/plain; version=0.0.4; charset=utf-8", text, -1);
}

static enum MHD_Result route(server *s, struct MHD_Connection *c, const char *url, const char *method, const request *r)
{
    static const struct { const char *path, *method; } routes[] = {
        {"/v1/chat/completions", "POST"}, {"/v1/completions", "POST"}, {"/v1/models", "GET"}, {"/health", "GET"}, {"/metrics", "GET"},
    };
    int i = 0, n = (int)(sizeof routes / sizeof routes[0]);
    while (i < n && strcmp(url, routes[i].path)) i++;
    if (i == n) {
        char msg[300];
        snprintf(msg, sizeof msg, "no route %.200s (dsspec serves /v1/chat/completions, /v1/completions, /v1/models, /health, /metrics)", url);
        return respond_error(s, c, 404, msg);
    }
    if (!authorized(s, c, url)) return respond_error(s, c, 401, "invalid or missing API key: send \"Authorization: Bearer KEY\" (--api-key)");
    if (strcmp(method, routes[i].method) && !(!strcmp(method, "HEAD") && !strcmp(routes[i].method, "GET"))) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s takes %s, not %.16s", url, routes[i].method, method);
        return respond_error(s, c, 405, msg);
    }
    if (r->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body exceeds %lld bytes (--max-body)", (long long)s->max_body);
        return respond_error(s, c, 413, msg);
    }
    if (i < 2) return generate(s, c, i == 0 ? SERVE_CHAT : SERVE_COMPLETION, r);
    return get_route(s, c, url);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    server *s = cls;
    request *r = *con_cls;
    (void)version;
    if (!r) {
        if (!(r = calloc(1, sizeof *r))) return MHD_NO;
        *con_cls = r;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        /* Refused before the body is read: it is never transferred. */
        if (cl && strtoull(cl, NULL, 10) > (unsigned long long)s->max_body) {
            r->too_large = 1;
            return route(s, c, url, method, r);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (r->too_large || r->body.len + *upload_size > (size_t)s->max_body || sbuf_append(&r->body, upload, *upload_size))
            r->too_large = 1;
        *upload_size = 0;
        return MHD_YES;
    }
    return route(s, c, url, method, r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    request *r = *con_cls;
    (void)cls, (void)c, (void)toe;
    if (!r) return;
    sbuf_free(&r->body);
    free(r);
    *con_cls = NULL;
}

/* ------------------------------------------------------------------ the command */

typedef struct {
    run_options run;             /* the engine flags, parsed as `run` parses them */
    const char *host, *api_key, *api_key_file;
    int port, max_queue, max_connections, n_predict;
    int64_t max_body;
} serve_args;

static const flag *serve_flags(serve_args *a, int *n)
{
    static flag f[40];
    dsspec_options *e = &a->run.engine;
    const flag table[] = {
        {FLAG_SECTION, .help = "HTTP"},
        {FLAG_STRING, "--host", "ADDR", &a->host, .help = "address to listen on (default 127.0.0.1; 0.0.0.0 or :: for every interface)"},
        {FLAG_INT, "--port", "N", &a->port, 0, 65535, .help = "TCP port (default 8080; 0 picks a free one, printed on stdout)"},
        {FLAG_STRING, "--api-key", "KEY", &a->api_key, .help = "require \"Authorization: Bearer KEY\" on every route but /health"},
        {FLAG_STRING, "--api-key-file", "FILE", &a->api_key_file, .help = "the key from the first line of FILE (kept out of ps)"},
        {FLAG_INT, "--max-queue", "N", &a->max_queue, 1, 1 << 20, .help = "requests that may wait for the decoder; more get 503 (default 16)"},
        {FLAG_INT, "--max-connections", "N", &a->max_connections, 2, 1 << 16, .help = "open connections at most (default 64)"},
        {FLAG_CUSTOM, "--max-body", "SIZE", &a->max_body, .parse = flag_parse_size, .help = "largest request body, e.g. 1M (default 1M); larger gets 413"},
        {FLAG_INT, "-n|--n-predict", "N", &a->n_predict, 0, 100000000, .help = "max_tokens of a request that names none (default 0: up to the context)"},
        {FLAG_SWITCH, "-v|--verbose", NULL, &a->run.verbose, .help = "log every error reply on stderr"},
        {FLAG_SWITCH, "--quiet", NULL, &a->run.quiet, .help = "do not print the memory plan"},
        {FLAG_SECTION, .help = "model"},
        {FLAG_STRING, "-m|--model", "DIR", &e->model_dir, .help = "checkpoint directory (default: the embedded model)"},
    };
    _Static_assert(sizeof table / sizeof table[0] + RUN_ENGINE_FLAGS <= sizeof f / sizeof f[0], "serve's flags fit f");
    *n = (int)(sizeof table / sizeof table[0]);
    memcpy(f, table, sizeof table);
    *n += run_engine_flags(&a->run, f + *n); /* speculation, memory and compute: run's flags and texts */
    return f;
}

static int read_key_file(serve_args *a, char *key, size_t len)
{
    char err[512];
    char *text = dsspec_read_file(a->api_key_file, NULL, err, sizeof err);
    if (!text) { fprintf(stderr, "dsspec serve: --api-key-file %s\n", err); return 1; }
    snprintf(key, len, "%s", text);
    key[strcspn(key, "\r\n")] = 0;
    free(text);
    if (!key[0]) return flags_usage_error("serve", "--api-key-file %s: the first line is empty", a->api_key_file);
    a->api_key = key;
    return 0;
}

/* The listening address: a numeric IPv4/IPv6 address or a host name. */
static int resolve_host(const char *host, int port, struct sockaddr_storage *addr, socklen_t *len)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    if (getaddrinfo(host, service, &hints, &res) || !res) return -1;
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static struct MHD_Daemon *start_daemon(server *s, const serve_args *a, int *port)
{
    struct sockaddr_storage addr;
    socklen_t len;
    if (resolve_host(a->host, a->port, &addr, &len)) {
        fprintf(stderr, "dsspec serve: --host %s: not an address or a name this machine resolves\n", a->host);
        return NULL;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (addr.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(flags, (uint16_t)a->port, NULL, NULL, on_request, s,
                                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)a->max_connections,
                                            MHD_OPTION_CONNECTION_TIMEOUT, 120u, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "dsspec serve: cannot listen on %s port %d (in use, or not this machine's address)\n", a->host, a->port);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *port = di && di->port ? di->port : a->port;
    return d;
}

static void setup_config(serve_config *cfg, dsspec *e, const char *model_dir, int n_predict)
{
    static char name[256];
    snprintf(name, sizeof name, "%s", model_dir);
    size_t l = strlen(name);
    while (l > 1 && name[l - 1] == '/') name[--l] = 0;
    const char *base = strrchr(name, '/');
    cfg->e = e;
    cfg->model_name = base ? base + 1 : name;
    snprintf(cfg->fingerprint, sizeof cfg->fingerprint, "dsspec-%s-%s", dsspec_version(), dsspec_git_commit());
    cfg->ctx = dsspec_get_plan(e)->ctx;
    cfg->default_max_tokens = n_predict;
    cfg->started = (long)time(NULL);
    pthread_mutex_init(&cfg->encode_mu, NULL);
}

/* Serves until SIGINT, SIGTERM or SIGHUP: then running and waiting requests are cancelled, their
 * clients get what was generated, and the engine closes. */
static int serve_until_signal(server *s, const serve_args *a, const char *model_dir)
{
    int port = 0;
    struct MHD_Daemon *d = NULL;
    if (!(s->q = serve_queue_create(s->cfg.e, a->max_queue)) || serve_queue_start(s->q) || !(d = start_daemon(s, a, &port))) {
        if (!d && s->q) fprintf(stderr, "dsspec serve: not started\n");
        serve_queue_free(s->q);
        return 1;
    }
    int v6 = strchr(a->host, ':') != NULL;
    printf("dsspec serve: listening on http://%s%s%s:%d (model %s, %s)\n", v6 ? "[" : "", a->host, v6 ? "]" : "", port,
           s->cfg.model_name, model_dir);
    fflush(stdout);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "dsspec serve: %s: stopping\n", strsignal(sig));
    serve_queue_stop(s->q);
    MHD_stop_daemon(d);
    serve_queue_free(s->q);
    return 0;
}

int cli_serve(int argc, char **argv)
{
    serve_args a = {.host = "127.0.0.1", .port = 8080, .max_queue = 16, .max_connections = 64, .max_body = 1 << 20};
    run_options_defaults(&a.run);
    int n;
    const flag *flags = serve_flags(&a, &n);
    int rc = flags_parse("serve", "usage: dsspec serve [flags]\n"
                         "OpenAI-compatible: POST /v1/chat/completions, POST /v1/completions (\"stream\": true for server-sent\n"
                         "events), GET /v1/models, GET /health, GET /metrics (Prometheus). One model, loaded once; requests\n"
                         "queue and decode one at a time.\n", flags, n, argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : rc;
    if ((rc = run_options_finish(&a.run, "serve"))) return rc;
    char key[1024], err[1024];
    if (a.api_key_file && (rc = read_key_file(&a, key, sizeof key))) return rc;
    if (a.api_key && !a.api_key[0]) return flags_usage_error("serve", "--api-key: expected a non-empty key");
    /* Signals go to sigwait alone: every thread started from here on inherits the mask. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    const char *model_dir;
    if (dsspec_resolve_model_dir(a.run.engine.model_dir, &model_dir, err, sizeof err)) { fprintf(stderr, "dsspec serve: %s\n", err); return 1; }
    a.run.engine.model_dir = model_dir;
    int usage = 0;
    dsspec *e = dsspec_open(&a.run.engine, &usage, err, sizeof err);
    if (!e) { fprintf(stderr, "dsspec serve: %s\n", err); return usage ? 2 : 1; }
    if (!a.run.quiet) dsspec_plan_print(dsspec_get_plan(e), stderr);
    server s = {.api_key = a.api_key, .max_body = a.max_body, .verbose = a.run.verbose};
    setup_config(&s.cfg, e, model_dir, a.n_predict);
    rc = serve_until_signal(&s, &a, model_dir);
    pthread_mutex_destroy(&s.cfg.encode_mu);
    dsspec_close(e);
    return rc;
}
