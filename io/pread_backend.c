/* pread engine: the fallback where io_uring or O_DIRECT is refused. A few worker threads each take
 * one request, pread it into the slot, and post the raw result; retries stay in expert_reader.c so
 * both engines share one error path. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "io/io_backend.h"

typedef struct {
    io_request rq;
    uint64_t id;
    int64_t res;
} pread_task;

/* A fixed-capacity FIFO of tasks; capacity = max requests in flight, so it never overflows. */
typedef struct {
    pread_task *items;
    int head, count, cap;
} task_fifo;

typedef struct {
    const int *fds;
    int n_fds;
    pthread_mutex_t mu;
    pthread_cond_t work_ready, done_ready;
    task_fifo todo, done;
    int stopping;
    int n_threads;
    pthread_t *threads;
} pread_engine;

static int fifo_init(task_fifo *f, int cap)
{
    f->items = calloc((size_t)cap, sizeof *f->items);
    f->head = f->count = 0;
    f->cap = cap;
    return f->items ? 0 : -ENOMEM;
}

static int fifo_push(task_fifo *f, const pread_task *t)
{
    if (f->count == f->cap) return -EBUSY;
    f->items[(f->head + f->count) % f->cap] = *t;
    f->count++;
    return 0;
}

static pread_task fifo_pop(task_fifo *f)
{
    pread_task t = f->items[f->head];
    f->head = (f->head + 1) % f->cap;
    f->count--;
    return t;
}

/* One pread, no retry loop: a short read or EINTR goes back to the reader's common retry path. */
static int64_t pread_once(int fd, const io_request *rq)
{
    ssize_t n = pread(fd, rq->dst, rq->length, (off_t)rq->offset);
    return n < 0 ? -(int64_t)errno : (int64_t)n;
}

static void *pread_worker(void *arg)
{
    pread_engine *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stopping && p->todo.count == 0) pthread_cond_wait(&p->work_ready, &p->mu);
        if (p->stopping) break;
        pread_task t = fifo_pop(&p->todo);
        pthread_mutex_unlock(&p->mu);
        t.res = pread_once(p->fds[t.rq.shard], &t.rq);
        pthread_mutex_lock(&p->mu);
        fifo_push(&p->done, &t); /* cannot fail: done holds at most max_requests */
        pthread_cond_signal(&p->done_ready);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static int pread_start(void *self, const io_request *rq, uint64_t id)
{
    pread_engine *p = self;
    pread_task t = {.rq = *rq, .id = id, .res = 0};
    pthread_mutex_lock(&p->mu);
    int rc = fifo_push(&p->todo, &t);
    if (rc == 0) pthread_cond_signal(&p->work_ready);
    pthread_mutex_unlock(&p->mu);
    return rc;
}

static int pread_flush(void *self)
{
    (void)self; /* tasks are visible to the workers as soon as they are queued */
    return 0;
}

static int pread_collect(void *self, int wait, io_done_fn done, void *ctx)
{
    pread_engine *p = self;
    pthread_mutex_lock(&p->mu);
    while (wait && p->done.count == 0) pthread_cond_wait(&p->done_ready, &p->mu);
    int n = p->done.count;
    pread_task *batch = n ? malloc((size_t)n * sizeof *batch) : NULL;
    if (n && !batch) {
        pthread_mutex_unlock(&p->mu);
        return -ENOMEM;
    }
    for (int i = 0; i < n; i++) batch[i] = fifo_pop(&p->done);
    pthread_mutex_unlock(&p->mu);
    /* done() may start new tasks (retries), which takes the lock: call it outside. */
    for (int i = 0; i < n; i++) done(ctx, batch[i].id, batch[i].res);
    free(batch);
    return n;
}

static void pread_destroy(void *self)
{
    pread_engine *p = self;
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->work_ready);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_ready);
    pthread_cond_destroy(&p->done_ready);
    free(p->todo.items);
    free(p->done.items);
    free(p->threads);
    free(p);
}

int pread_engine_create(io_engine *out, const int *fds, int n_fds, int n_threads, int max_requests,
                        char *err, size_t errlen)
{
    pread_engine *p = calloc(1, sizeof *p);
    if (!p) goto oom;
    p->fds = fds;
    p->n_fds = n_fds;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_ready, NULL);
    pthread_cond_init(&p->done_ready, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads || fifo_init(&p->todo, max_requests) || fifo_init(&p->done, max_requests)) {
        pread_destroy(p);
        goto oom;
    }
    for (int i = 0; i < n_threads; i++) {
        int rc = pthread_create(&p->threads[i], NULL, pread_worker, p);
        if (rc) {
            snprintf(err, errlen, "io: cannot start pread worker thread: %s", strerror(rc));
            pread_destroy(p);
            return -rc;
        }
        p->n_threads++;
    }
    *out = (io_engine){
        .self = p,
        .start = pread_start,
        .flush = pread_flush,
        .collect = pread_collect,
        .register_buffers = NULL,
        .destroy = pread_destroy,
    };
    return 0;
oom:
    snprintf(err, errlen, "io: out of memory creating the pread engine");
    return -ENOMEM;
}
