/* dsspec serve, private to cli/serve*.c: one engine, one decode worker, requests queued FIFO.
 *
 *   serve.c          flags, the HTTP daemon (GNU libmicrohttpd, a thread per connection), routing,
 *                    authentication, body limits, responses
 *   serve_api.c      the OpenAI-compatible JSON: requests validated into jobs, replies, SSE chunks
 *   serve_queue.c    the job queue and the one worker thread that runs dsspec_generate
 *   serve_metrics.c  /metrics in Prometheus' text format
 *
 * Threads: libmicrohttpd runs each connection on its own thread; only the worker touches the
 * engine's generation (dsspec_generate, dsspec_cache_stats_json), so connection threads see the
 * cache through a snapshot the worker refreshes. Prompts are encoded on connection threads, one at
 * a time (the tokenizer encodes on one thread at a time; the worker only decodes). */
#ifndef DSSPEC_CLI_SERVE_H
#define DSSPEC_CLI_SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include "engine/dsspec.h"

struct cJSON;

enum { SERVE_MAX_STOP = 16 };

typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

/* 0, or -1 when out of memory (the buffer is unchanged). */
int sbuf_append(sbuf *b, const char *s, size_t n);
void sbuf_free(sbuf *b);

typedef enum { SERVE_CHAT, SERVE_COMPLETION } serve_kind;

/* What every request shares. */
typedef struct {
    dsspec *e;
    const char *model_name;      /* what /v1/models lists and replies name */
    char fingerprint[64];        /* system_fingerprint: version and commit */
    int ctx;                     /* positions a prompt and its reply share */
    int default_max_tokens;      /* when a request names none; <= 0: up to the context */
    long started;                /* unix time the server started */
    pthread_mutex_t encode_mu;   /* one prompt encoding at a time */
} serve_config;

typedef struct serve_queue serve_queue;
typedef struct serve_job serve_job;

/* One request's generation. The request half is fixed before it is queued; the worker writes the
 * generation half; out, done and position are shared under the queue's mutex. */
struct serve_job {
    serve_kind kind;
    int stream, include_usage;
    int *prompt, n_prompt;
    dsspec_generate_params gen;  /* gen.on_text/ctx set by serve_api.c, gen.on_step by the queue */
    char *stops[SERVE_MAX_STOP];
    int n_stop;
    char id[48];
    long created;
    const serve_config *cfg;
    void (*finish)(serve_job *j); /* after generation, on the worker: the reply's ending */
    /* the worker's */
    dsspec_gen_stats stats;
    int failed;
    char error[512];
    int head_sent, think_done, content_started;
    sbuf pending;                /* chat text that may begin "</think>" */
    sbuf reasoning, content, text;
    /* shared */
    sbuf out;                    /* bytes for a streaming client */
    int done, started;
    atomic_int cancelled;
    int refs;
    serve_queue *q;
    serve_job *next;
};

/* ---- serve_queue.c */
serve_queue *serve_queue_create(dsspec *e, int max_waiting);
int serve_queue_start(serve_queue *q);
/* Cancels every job and waits for the worker to mark them all done; later pushes fail. */
void serve_queue_stop(serve_queue *q);
/* Stops (if not yet) and frees; no job may still be held. */
void serve_queue_free(serve_queue *q);
/* Queues a job (the queue takes a reference). 0 with *ahead = jobs before it (the running one
 * included); -1 when max_waiting jobs already wait or the server is stopping. */
int serve_queue_push(serve_queue *q, serve_job *j, int *ahead);
/* A new job with one reference (the caller's). */
serve_job *serve_job_new(const serve_config *cfg, serve_kind kind);
void serve_job_release(serve_job *j);
/* Bytes for a streaming client, from the worker. */
void serve_job_emit(serve_job *j, const char *data, size_t len);
/* Streaming: the next bytes for the client into buf, waiting for them; ": queue position N"
 * comments while the job waits, a keep-alive comment after a quiet while. >0 bytes; 0 when the
 * job is done and everything was read; -1 when the client at client_fd hung up (the job is
 * cancelled). *sent is the caller's read offset, *last_ahead the last position it reported. */
ssize_t serve_job_read(serve_job *j, size_t *sent, int *last_ahead, char *buf, size_t max, int client_fd);
/* Non-streaming: waits until the job is done (0) or the client hangs up (-1, job cancelled). */
int serve_job_wait(serve_job *j, int client_fd);
void serve_job_cancel(serve_job *j);

typedef struct {
    uint64_t prompt_tokens, generated_tokens, drafts, accepted, finished, cancelled, failed;
    double prefill_seconds, decode_seconds, last_decode_tps;
    int waiting, running;
    int codes[16];
    uint64_t code_counts[16];
    int n_codes;
    struct cJSON *cache;         /* the cache's statistics at the last refresh; NULL without a cache */
} serve_stats;

/* A copy of the counters (stats->cache is the caller's to cJSON_Delete). */
void serve_queue_stats(serve_queue *q, serve_stats *out);
void serve_queue_count_response(serve_queue *q, int http_status);

/* ---- serve_api.c */
/* A request body -> a job with its prompt encoded. NULL with *status (400, 500) and err. */
serve_job *serve_api_parse(serve_config *cfg, serve_kind kind, const char *body, size_t len, int *status,
                           char *err, size_t errlen);
/* The non-streaming reply of a finished job (malloc'd JSON). */
char *serve_api_reply(const serve_job *j);
/* OpenAI's error object: {"error": {"message", "type", "param", "code"}} (malloc'd). */
char *serve_api_error(const char *message, const char *type);
char *serve_api_models(const serve_config *cfg);

/* ---- serve_metrics.c */
/* /metrics in Prometheus' text exposition format 0.0.4 (malloc'd). */
char *serve_metrics_text(const serve_stats *s, const serve_config *cfg);

#endif
