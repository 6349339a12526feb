/* io_uring engine: O_DIRECT reads on registered files, submitted in batches, completions peeked
 * without a syscall and waited for only when the caller asks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <liburing.h>
#include "io/io_backend.h"

typedef struct {
    struct io_uring ring;
    int pending_sqes;        /* prepared but not yet submitted */
    /* Requests that found the submission queue full wait here (the ring is sized so this is rare). */
    io_request *backlog;
    uint64_t *backlog_id;
    int backlog_n, backlog_cap;
    uint8_t *fixed_base;     /* registered buffers: n_fixed buffers of fixed_each bytes */
    size_t fixed_each;
    int n_fixed;
} uring_engine;

static int uring_fixed_index(const uring_engine *u, const io_request *rq)
{
    if (!u->fixed_base || rq->dst < u->fixed_base) return -1;
    size_t off = (size_t)(rq->dst - u->fixed_base);
    size_t idx = off / u->fixed_each;
    if (idx >= (size_t)u->n_fixed) return -1;
    if (off + rq->length > (idx + 1) * u->fixed_each) return -1;
    return (int)idx;
}

static int uring_prepare(uring_engine *u, const io_request *rq, uint64_t id)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    if (!sqe) return -EBUSY;
    int fixed = uring_fixed_index(u, rq);
    if (fixed >= 0)
        io_uring_prep_read_fixed(sqe, rq->shard, rq->dst, (unsigned)rq->length, rq->offset, fixed);
    else
        io_uring_prep_read(sqe, rq->shard, rq->dst, (unsigned)rq->length, rq->offset);
    sqe->flags |= IOSQE_FIXED_FILE; /* rq->shard is the index into the registered file table */
    io_uring_sqe_set_data64(sqe, id);
    u->pending_sqes++;
    return 0;
}

static int uring_flush(void *self)
{
    uring_engine *u = self;
    while (u->pending_sqes > 0) {
        int n = io_uring_submit(&u->ring);
        if (n == -EINTR || n == -EAGAIN) continue;
        if (n < 0) return n;
        u->pending_sqes -= n;
        if (n == 0) break;
    }
    /* Room freed by the submit: move backlog into the ring. */
    int moved = 0;
    while (moved < u->backlog_n && uring_prepare(u, &u->backlog[moved], u->backlog_id[moved]) == 0) moved++;
    if (moved) {
        memmove(u->backlog, u->backlog + moved, (size_t)(u->backlog_n - moved) * sizeof *u->backlog);
        memmove(u->backlog_id, u->backlog_id + moved, (size_t)(u->backlog_n - moved) * sizeof *u->backlog_id);
        u->backlog_n -= moved;
        return uring_flush(self);
    }
    return 0;
}

static int uring_start(void *self, const io_request *rq, uint64_t id)
{
    uring_engine *u = self;
    if (u->backlog_n == 0 && uring_prepare(u, rq, id) == 0) return 0;
    if (u->backlog_n == u->backlog_cap) return -EBUSY;
    u->backlog[u->backlog_n] = *rq;
    u->backlog_id[u->backlog_n] = id;
    u->backlog_n++;
    return 0;
}

static int uring_collect(void *self, int wait, io_done_fn done, void *ctx)
{
    uring_engine *u = self;
    int got = 0;
    for (;;) {
        struct io_uring_cqe *cqe = NULL;
        int rc = io_uring_peek_cqe(&u->ring, &cqe);
        if (rc == -EAGAIN || !cqe) {
            if (got > 0 || !wait) break;
            rc = io_uring_wait_cqe(&u->ring, &cqe);
            if (rc == -EINTR || rc == -EAGAIN) continue;
            if (rc < 0) return rc;
        } else if (rc < 0) {
            return rc;
        }
        uint64_t id = io_uring_cqe_get_data64(cqe);
        int64_t res = cqe->res;
        io_uring_cqe_seen(&u->ring, cqe);
        done(ctx, id, res); /* may start resubmissions */
        got++;
    }
    int rc = uring_flush(self);
    return rc < 0 ? rc : got;
}

static int uring_register_buffers(void *self, uint8_t *base, size_t each, int n)
{
    uring_engine *u = self;
    if (u->fixed_base) {
        io_uring_unregister_buffers(&u->ring);
        u->fixed_base = NULL;
    }
    struct iovec *iov = calloc((size_t)n, sizeof *iov);
    if (!iov) return -ENOMEM;
    for (int i = 0; i < n; i++) {
        iov[i].iov_base = base + (size_t)i * each;
        iov[i].iov_len = each;
    }
    int rc = io_uring_register_buffers(&u->ring, iov, (unsigned)n);
    free(iov);
    if (rc < 0) return rc;
    u->fixed_base = base;
    u->fixed_each = each;
    u->n_fixed = n;
    return 0;
}

static void uring_destroy(void *self)
{
    uring_engine *u = self;
    if (!u) return;
    io_uring_queue_exit(&u->ring);
    free(u->backlog);
    free(u->backlog_id);
    free(u);
}

static unsigned ring_entries_for(int max_requests)
{
    unsigned n = 8;
    while (n < (unsigned)max_requests && n < 4096) n <<= 1;
    return n;
}

int uring_engine_create(io_engine *out, const int *fds, int n_fds, int max_requests, char *err, size_t errlen)
{
    uring_engine *u = calloc(1, sizeof *u);
    if (!u) {
        snprintf(err, errlen, "io: out of memory creating the io_uring engine");
        return -ENOMEM;
    }
    u->backlog_cap = max_requests;
    u->backlog = calloc((size_t)max_requests, sizeof *u->backlog);
    u->backlog_id = calloc((size_t)max_requests, sizeof *u->backlog_id);
    if (!u->backlog || !u->backlog_id) {
        free(u->backlog);
        free(u->backlog_id);
        free(u);
        snprintf(err, errlen, "io: out of memory creating the io_uring engine");
        return -ENOMEM;
    }
    int rc = io_uring_queue_init(ring_entries_for(max_requests), &u->ring, 0);
    if (rc < 0) {
        snprintf(err, errlen, "io_uring setup refused: %s", strerror(-rc));
        free(u->backlog);
        free(u->backlog_id);
        free(u);
        return rc;
    }
    rc = io_uring_register_files(&u->ring, fds, (unsigned)n_fds);
    if (rc < 0) {
        snprintf(err, errlen, "io_uring file registration refused: %s", strerror(-rc));
        uring_destroy(u);
        return rc;
    }
    *out = (io_engine){
        .self = u,
        .start = uring_start,
        .flush = uring_flush,
        .collect = uring_collect,
        .register_buffers = uring_register_buffers,
        .destroy = uring_destroy,
    };
    return 0;
}
