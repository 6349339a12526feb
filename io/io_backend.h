/* Private to io/: the two ways a read unit reaches the disk (plus a test wrapper around either). expert_reader.c owns the bookkeeping
 * (jobs, units, retries, errors); a backend only starts units and hands back their raw results. */
#ifndef DSSPEC_IO_BACKEND_H
#define DSSPEC_IO_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "io/expert_io.h"

/* One read as the kernel sees it: file range [offset, offset + length) of shard `shard` into dst.
 * offset, length and dst stay 4 KiB-aligned so O_DIRECT accepts them. */
typedef struct {
    int shard;
    uint64_t offset;
    uint64_t length;
    uint8_t *dst;
} io_request;

/* Called by a backend for every finished request: res = bytes read (may be short) or -errno. */
typedef void (*io_done_fn)(void *ctx, uint64_t id, int64_t res);

typedef struct io_engine {
    void *self;
    /* Queue one request (id comes back in done). 0, or -errno when it cannot be queued at all. */
    int (*start)(void *self, const io_request *rq, uint64_t id);
    /* Make queued requests visible to the kernel / workers. */
    int (*flush)(void *self);
    /* Deliver finished requests to done(); when wait, block until at least one is delivered.
     * Returns how many were delivered, or -errno. */
    int (*collect)(void *self, int wait, io_done_fn done, void *ctx);
    /* Fixed buffers (uring only; NULL elsewhere): register / look up the index of dst's buffer. */
    int (*register_buffers)(void *self, uint8_t *base, size_t each, int n);
    void (*destroy)(void *self);
} io_engine;

/* fds[i] is shard i's descriptor (owned by the caller, kept open while the engine lives).
 * max_requests bounds how many requests can be in flight at once. */
int uring_engine_create(io_engine *out, const int *fds, int n_fds, int max_requests, char *err, size_t errlen);
int pread_engine_create(io_engine *out, const int *fds, int n_fds, int n_threads, int max_requests,
                        char *err, size_t errlen);
/* Tests only (expert_reader_test_reorder): *engine becomes a wrapper that owns the engine it held and
 * delivers its completions late and out of order. 0, or -ENOMEM (engine unchanged). */
int reorder_engine_wrap(io_engine *engine, int max_requests, const io_test_reorder *how);

#endif
