/* The reordering test backend (expert_reader_test_reorder): wraps a real engine so that reads
 * complete out of order and late, and a destination holds its bytes only once its completion is
 * delivered. The real engine reads into a private buffer per read; delivery copies it over the
 * poisoned destination. Only tests install it; the engine never does. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "io/io_backend.h"

enum { POISON = 0xEE };

typedef struct {
    io_request rq;           /* as the reader asked: rq.dst is the caller's destination */
    uint64_t id;
    uint8_t *bounce;         /* where the inner engine reads; NULL when the record is free */
    int64_t res;
    long due;                /* delivery time, in collect calls */
} reorder_read;

typedef struct {
    io_engine inner;
    io_test_reorder how;
    reorder_read *rd;        /* [cap] */
    int *free_rd, n_free;
    int *held, n_held;       /* finished by the inner engine, not delivered yet */
    int cap, outstanding;    /* outstanding: started on the inner engine, not finished there */
    long now;
    unsigned long long rng;
} reorder_engine;

static int rng_below(reorder_engine *e, int n)
{
    e->rng ^= e->rng << 13;
    e->rng ^= e->rng >> 7;
    e->rng ^= e->rng << 17;
    return (int)(e->rng % (unsigned long long)n);
}

static int reorder_start(void *self, const io_request *rq, uint64_t id)
{
    reorder_engine *e = self;
    if (e->n_free == 0) return -EBUSY;
    uint8_t *bounce = aligned_alloc(4096, (rq->length + 4095) / 4096 * 4096);
    if (!bounce) return -ENOMEM;
    int i = e->free_rd[--e->n_free];
    e->rd[i] = (reorder_read){.rq = *rq, .id = id, .bounce = bounce};
    if (e->how.on_start) e->how.on_start(e->how.ctx, rq->dst, rq->length);
    memset(rq->dst, POISON, rq->length);
    io_request inner_rq = *rq;
    inner_rq.dst = bounce;
    int rc = e->inner.start(e->inner.self, &inner_rq, (uint64_t)i);
    if (rc < 0) {
        free(bounce);
        e->rd[i].bounce = NULL;
        e->free_rd[e->n_free++] = i;
        return rc;
    }
    e->outstanding++;
    return 0;
}

static int reorder_flush(void *self)
{
    reorder_engine *e = self;
    return e->inner.flush(e->inner.self);
}

/* The inner engine finished read i: hold it back for a random while. */
static void inner_done(void *ctx, uint64_t id, int64_t res)
{
    reorder_engine *e = ctx;
    reorder_read *r = &e->rd[id];
    r->res = res;
    r->due = e->now + rng_below(e, e->how.max_delay + 1);
    e->held[e->n_held++] = (int)id;
    e->outstanding--;
}

/* Delivers every held read that is due, in random order. done() may start retries, which go to
 * the inner engine and come back through a later collect. */
static int deliver_due(reorder_engine *e, io_done_fn done, void *ctx)
{
    int delivered = 0;
    for (;;) {
        int n_due = 0;
        for (int k = 0; k < e->n_held; k++) n_due += e->rd[e->held[k]].due <= e->now;
        if (n_due == 0) return delivered;
        int pick = rng_below(e, n_due), k = 0;
        for (;; k++)
            if (e->rd[e->held[k]].due <= e->now && pick-- == 0) break;
        int i = e->held[k];
        e->held[k] = e->held[--e->n_held];
        reorder_read r = e->rd[i];
        if (r.res > 0) memcpy(r.rq.dst, r.bounce, (size_t)r.res < r.rq.length ? (size_t)r.res : r.rq.length);
        if (e->how.on_land) e->how.on_land(e->how.ctx, r.rq.dst, r.rq.length);
        free(r.bounce);
        e->rd[i].bounce = NULL;
        e->free_rd[e->n_free++] = i;
        done(ctx, r.id, r.res);
        delivered++;
    }
}

/* One collect is one tick of the clock. When asked to wait, the clock runs on (held reads) or the
 * inner engine is waited for (nothing held) until something is delivered. */
static int reorder_collect(void *self, int wait, io_done_fn done, void *ctx)
{
    reorder_engine *e = self;
    e->now++;
    int rc = e->inner.collect(e->inner.self, 0, inner_done, e);
    int delivered = rc < 0 ? 0 : deliver_due(e, done, ctx);
    while (rc >= 0 && wait && delivered == 0 && (e->n_held > 0 || e->outstanding > 0)) {
        if (e->n_held > 0) e->now++;
        rc = e->inner.collect(e->inner.self, e->n_held == 0, inner_done, e);
        if (rc >= 0) delivered = deliver_due(e, done, ctx);
    }
    return rc < 0 ? rc : delivered;
}

static void reorder_destroy(void *self)
{
    reorder_engine *e = self;
    if (!e) return;
    e->inner.destroy(e->inner.self); /* first: no read may still be landing in a bounce buffer */
    for (int i = 0; i < e->cap; i++) free(e->rd[i].bounce);
    free(e->rd);
    free(e->free_rd);
    free(e->held);
    free(e);
}

int reorder_engine_wrap(io_engine *engine, int max_requests, const io_test_reorder *how)
{
    reorder_engine *e = calloc(1, sizeof *e);
    if (!e) return -ENOMEM;
    e->rd = calloc((size_t)max_requests, sizeof *e->rd);
    e->free_rd = malloc((size_t)max_requests * sizeof *e->free_rd);
    e->held = malloc((size_t)max_requests * sizeof *e->held);
    if (!e->rd || !e->free_rd || !e->held) {
        free(e->rd);
        free(e->free_rd);
        free(e->held);
        free(e);
        return -ENOMEM;
    }
    e->inner = *engine;
    e->how = *how;
    if (e->how.max_delay < 0) e->how.max_delay = 0;
    e->rng = how->seed ? how->seed : 1;
    e->cap = max_requests;
    for (int i = 0; i < max_requests; i++) e->free_rd[i] = max_requests - 1 - i;
    e->n_free = max_requests;
    *engine = (io_engine){
        .self = e,
        .start = reorder_start,
        .flush = reorder_flush,
        .collect = reorder_collect,
        .register_buffers = NULL, /* the inner engine reads into bounce buffers, never the slots */
        .destroy = reorder_destroy,
    };
    return 0;
}
