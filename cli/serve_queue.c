/* The server's queue: requests wait in FIFO order and one worker thread decodes them one at a
 * time through the one engine (at R1 scale the machine's memory bandwidth serves one decode), so
 * the expert cache stays warm from one request to the next. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli/serve.h"

/* How often the worker refreshes the cache snapshot /metrics reads, and how long a streaming
 * client may hear nothing before it gets a keep-alive comment. */
#define STATS_REFRESH_SECONDS 0.5
#define KEEPALIVE_SECONDS 5.0

struct serve_queue {
    dsspec *e;
    int max_waiting;
    pthread_mutex_t mu;
    pthread_cond_t changed;      /* any job's state or output changed; the queue changed */
    serve_job *head, *tail;      /* waiting, in order */
    serve_job *running;
    int n_waiting, stopping, worker_started;
    pthread_t worker;
    serve_stats stats;           /* stats.cache owned here */
    double last_refresh;
};

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int sbuf_append(sbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

void sbuf_free(sbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

serve_queue *serve_queue_create(dsspec *e, int max_waiting)
{
    serve_queue *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->e = e;
    q->max_waiting = max_waiting;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->changed, NULL);
    q->stats.cache = dsspec_cache_stats_json(e);
    return q;
}

serve_job *serve_job_new(const serve_config *cfg, serve_kind kind)
{
    serve_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->cfg = cfg;
    j->kind = kind;
    j->refs = 1;
    atomic_init(&j->cancelled, 0);
    dsspec_generate_params_default(&j->gen);
    return j;
}

static void job_free(serve_job *j)
{
    free(j->prompt);
    for (int i = 0; i < j->n_stop; i++) free(j->stops[i]);
    sbuf_free(&j->pending);
    sbuf_free(&j->reasoning);
    sbuf_free(&j->content);
    sbuf_free(&j->text);
    sbuf_free(&j->out);
    free(j);
}

void serve_job_release(serve_job *j)
{
    if (!j) return;
    serve_queue *q = j->q;
    if (q) pthread_mutex_lock(&q->mu);
    int last = --j->refs == 0;
    if (q) pthread_mutex_unlock(&q->mu);
    if (last) job_free(j);
}

void serve_job_cancel(serve_job *j)
{
    atomic_store(&j->cancelled, 1);
}

int serve_queue_push(serve_queue *q, serve_job *j, int *ahead)
{
    pthread_mutex_lock(&q->mu);
    int ok = !q->stopping && q->n_waiting < q->max_waiting;
    if (ok) {
        j->q = q;
        j->refs++;
        j->next = NULL;
        if (q->tail) q->tail->next = j;
        else q->head = j;
        q->tail = j;
        *ahead = q->n_waiting++ + (q->running != NULL);
        q->stats.waiting = q->n_waiting;
        pthread_cond_broadcast(&q->changed);
    }
    pthread_mutex_unlock(&q->mu);
    return ok ? 0 : -1;
}

/* Jobs before j (the running one included), -1 once j runs. Under q->mu. */
static int jobs_ahead(const serve_queue *q, const serve_job *j)
{
    if (j->started) return -1;
    int n = q->running != NULL;
    for (const serve_job *w = q->head; w && w != j; w = w->next) n++;
    return n;
}

void serve_job_emit(serve_job *j, const char *data, size_t len)
{
    pthread_mutex_lock(&j->q->mu);
    if (sbuf_append(&j->out, data, len)) atomic_store(&j->cancelled, 1); /* out of memory: end it */
    pthread_cond_broadcast(&j->q->changed);
    pthread_mutex_unlock(&j->q->mu);
}

/* Whether the client on fd closed its end (it sends nothing more while it waits for a reply). */
static int client_gone(int fd)
{
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* Waits on q->changed for at most ms milliseconds. Under q->mu. */
static void wait_changed(serve_queue *q, int ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += (long)ms * 1000000;
    t.tv_sec += t.tv_nsec / 1000000000;
    t.tv_nsec %= 1000000000;
    pthread_cond_timedwait(&q->changed, &q->mu, &t);
}

ssize_t serve_job_read(serve_job *j, size_t *sent, int *last_ahead, char *buf, size_t max, int client_fd)
{
    serve_queue *q = j->q;
    double quiet_since = now_seconds();
    ssize_t n;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        if (*sent < j->out.len) {
            n = (ssize_t)(j->out.len - *sent < max ? j->out.len - *sent : max);
            memcpy(buf, j->out.p + *sent, (size_t)n);
            *sent += (size_t)n;
            break;
        }
        if (j->done) { n = 0; break; }
        if (client_gone(client_fd)) { atomic_store(&j->cancelled, 1); n = -1; break; }
        /* SSE comments: clients skip them; they go out whole or not yet */
        char note[64] = "";
        int ahead = jobs_ahead(q, j);
        if (ahead >= 0 && ahead != *last_ahead) snprintf(note, sizeof note, ": queue position %d\n\n", ahead);
        else if (now_seconds() - quiet_since > KEEPALIVE_SECONDS) snprintf(note, sizeof note, ": keep-alive\n\n");
        if (note[0] && strlen(note) <= max) {
            if (ahead >= 0) *last_ahead = ahead;
            n = (ssize_t)strlen(note);
            memcpy(buf, note, (size_t)n);
            break;
        }
        wait_changed(q, 200);
    }
    pthread_mutex_unlock(&q->mu);
    return n;
}

int serve_job_wait(serve_job *j, int client_fd)
{
    serve_queue *q = j->q;
    int rc = 0;
    pthread_mutex_lock(&q->mu);
    while (!j->done) {
        if (client_gone(client_fd)) { atomic_store(&j->cancelled, 1); rc = -1; break; }
        wait_changed(q, 200);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

/* The cache snapshot /metrics reads; taken on the worker, the only thread that runs the engine. */
static void refresh_stats(serve_queue *q, int force)
{
    double now = now_seconds();
    if (!force && now - q->last_refresh < STATS_REFRESH_SECONDS) return;
    q->last_refresh = now;
    cJSON *c = dsspec_cache_stats_json(q->e);
    pthread_mutex_lock(&q->mu);
    cJSON *old = q->stats.cache;
    q->stats.cache = c;
    pthread_mutex_unlock(&q->mu);
    cJSON_Delete(old);
}

static int job_step(void *ctx, int generated)
{
    serve_job *j = ctx;
    (void)generated;
    refresh_stats(j->q, 0);
    return atomic_load(&j->cancelled);
}

/* A finished job's counters into the totals. Under q->mu. */
static void account(serve_queue *q, const serve_job *j)
{
    serve_stats *s = &q->stats;
    const dsspec_gen_stats *g = &j->stats;
    s->prompt_tokens += (uint64_t)g->prompt_tokens;
    s->generated_tokens += (uint64_t)g->generated;
    s->drafts += (uint64_t)g->drafts;
    s->accepted += (uint64_t)g->accepted;
    s->prefill_seconds += g->prefill_seconds;
    s->decode_seconds += g->decode_seconds;
    if (g->generated > 1) s->last_decode_tps = dsspec_decode_tokens_per_second(g);
    if (atomic_load(&j->cancelled)) s->cancelled++;
    else if (j->failed) s->failed++;
    else s->finished++;
}

static void run_job(serve_queue *q, serve_job *j)
{
    if (atomic_load(&j->cancelled)) {
        j->failed = 1;
        snprintf(j->error, sizeof j->error, "cancelled before it started");
    } else {
        j->gen.on_step = job_step;
        if (dsspec_generate(q->e, j->prompt, j->n_prompt, &j->gen, &j->stats, j->error, sizeof j->error)) j->failed = 1;
    }
    /* The totals first: a client that reads /metrics after its [DONE] finds its tokens counted. */
    pthread_mutex_lock(&q->mu);
    account(q, j);
    pthread_mutex_unlock(&q->mu);
    refresh_stats(q, 1);
    if (j->finish) j->finish(j);
}

static void *worker_main(void *arg)
{
    serve_queue *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->head && !q->stopping) pthread_cond_wait(&q->changed, &q->mu);
        if (!q->head) break;
        serve_job *j = q->head;
        if (!(q->head = j->next)) q->tail = NULL;
        q->n_waiting--;
        q->running = j;
        j->started = 1;
        q->stats.waiting = q->n_waiting;
        q->stats.running = 1;
        pthread_cond_broadcast(&q->changed);
        pthread_mutex_unlock(&q->mu);
        run_job(q, j);
        pthread_mutex_lock(&q->mu);
        q->running = NULL;
        q->stats.running = 0;
        j->done = 1;
        pthread_cond_broadcast(&q->changed);
        pthread_mutex_unlock(&q->mu);
        serve_job_release(j);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int serve_queue_start(serve_queue *q)
{
    if (pthread_create(&q->worker, NULL, worker_main, q)) return -1;
    q->worker_started = 1;
    return 0;
}

void serve_queue_stop(serve_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->stopping = 1;
    for (serve_job *j = q->head; j; j = j->next) atomic_store(&j->cancelled, 1);
    if (q->running) atomic_store(&q->running->cancelled, 1);
    pthread_cond_broadcast(&q->changed);
    pthread_mutex_unlock(&q->mu);
    if (q->worker_started) pthread_join(q->worker, NULL);
    q->worker_started = 0;
}

void serve_queue_free(serve_queue *q)
{
    if (!q) return;
    serve_queue_stop(q);
    cJSON_Delete(q->stats.cache);
    pthread_cond_destroy(&q->changed);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

void serve_queue_stats(serve_queue *q, serve_stats *out)
{
    pthread_mutex_lock(&q->mu);
    *out = q->stats;
    out->cache = q->stats.cache ? cJSON_Duplicate(q->stats.cache, 1) : NULL;
    pthread_mutex_unlock(&q->mu);
}

void serve_queue_count_response(serve_queue *q, int http_status)
{
    serve_stats *s = &q->stats;
    pthread_mutex_lock(&q->mu);
    int i = 0;
    while (i < s->n_codes && s->codes[i] != http_status) i++;
    if (i == s->n_codes && i < (int)(sizeof s->codes / sizeof s->codes[0])) s->codes[s->n_codes++] = http_status;
    if (i < s->n_codes) s->code_counts[i]++;
    pthread_mutex_unlock(&q->mu);
}
