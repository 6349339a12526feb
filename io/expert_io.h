/* Reading routed experts from the checkpoint shards into caller-owned slots: io_uring with
 * O_DIRECT (reads widened to 4 KiB so they land in place, several in flight), or a pread thread
 * pool where io_uring or O_DIRECT is refused. Completions are reaped without blocking compute. */
#ifndef DSSPEC_EXPERT_IO_H
#define DSSPEC_EXPERT_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "core/checkpoint.h"
#include "core/expert_provider.h"

typedef enum { IO_BACKEND_AUTO = 0, IO_BACKEND_URING, IO_BACKEND_PREAD } io_backend;
const char *io_backend_name(io_backend b);
int io_backend_parse(const char *s, io_backend *out); /* "auto", "uring", "pread"; 0 ok */

typedef struct expert_reader expert_reader;

typedef struct {
    uint64_t reads_submitted, reads_completed, bytes_read; /* bytes actually transferred (widened) */
    uint64_t retries, errors;
    uint64_t max_inflight;
} expert_reader_stats;

/* queue_depth: reads in flight at most. err gets one line when NULL is returned. With
 * IO_BACKEND_AUTO the reader probes io_uring + O_DIRECT on the first shard and falls back to pread,
 * saying why in expert_reader_backend_note(). */
expert_reader *expert_reader_create(const checkpoint *ck, io_backend want, int queue_depth,
                                    char *err, size_t errlen);
void expert_reader_free(expert_reader *r);
io_backend expert_reader_backend(const expert_reader *r);
const char *expert_reader_backend_note(const expert_reader *r);

/* Bytes one slot must have for any expert of this checkpoint (4 KiB-widened pieces), a multiple of 4096. */
size_t expert_reader_slot_bytes(const expert_reader *r);

/* Queue a read of (layer, expert) into slot (4096-aligned, slot_bytes long). tag is returned on
 * completion. 0, or -1 when the queue is full (reap first) or the expert does not exist. */
int expert_reader_submit(expert_reader *r, int layer, int expert, void *slot, uint64_t tag);

/* Collect finished reads: waits until at least min_complete are done (0 = never waits), returns
 * how many were written to tags/status (status 0 ok, or -errno after retries; the error line is
 * in expert_reader_error()). Never waits for reads that were not submitted; -1 only if the
 * engine itself fails (error line set). */
int expert_reader_reap(expert_reader *r, int min_complete, uint64_t *tags, int *status, int max);
int expert_reader_inflight(const expert_reader *r);
/* Reads that can be submitted now without a reap (0: the queue is full). */
int expert_reader_queue_room(const expert_reader *r);
const char *expert_reader_error(const expert_reader *r);

/* The six tensors of (layer, expert) inside a filled slot. */
void expert_reader_view(const expert_reader *r, int layer, int expert, const void *slot, expert_weights *out);

expert_reader_stats expert_reader_get_stats(const expert_reader *r);

/* ---- Tuning: call before the first submit ---- */

/* Split every piece into reads of at most chunk_bytes (a multiple of 4096; 0 = one read per
 * piece, the default). 0 ok, -1 when the value is not a multiple of 4096 or reads are in flight. */
int expert_reader_set_chunk_bytes(expert_reader *r, size_t chunk_bytes);

/* io_uring only: register n_slots consecutive slots starting at base (slot_bytes apart, base
 * 4096-aligned) as fixed buffers, so the kernel pins their pages once instead of on every read.
 * Submits into those slots then use READ_FIXED. 0 ok, -1 with expert_reader_error() set (the
 * reader keeps working without registration). A no-op returning 0 on the pread backend. */
int expert_reader_register_slots(expert_reader *r, void *base, int n_slots);

/* Benchmarks: every kernel read from now on as a line of a fio v2 iolog (the header first), so fio
 * --read_iolog can replay exactly this request stream as a peer; NULL ends the log (its close
 * lines) and stops logging. The caller owns and closes f. */
void expert_reader_log_reads(expert_reader *r, FILE *f);

/* ---- Test hooks: for tests/ only, never used by the engine ---- */
typedef enum { IO_FAULT_NONE = 0, IO_FAULT_EINTR, IO_FAULT_EAGAIN, IO_FAULT_EIO, IO_FAULT_SHORT } io_fault;

/* The next `count` completions the reader sees (either backend) are replaced by the fault:
 * -EINTR / -EAGAIN / -EIO, or SHORT (the read reports a third of what it transferred, not
 * 4 KiB-aligned). They go through the same retry paths as real faults. */
void expert_reader_test_inject(expert_reader *r, io_fault fault, int count);

/* Every kernel read of (layer, expert) completes with -EIO, retries included, so its reads fail
 * the way a bad sector does; (-1, -1) stops it. */
void expert_reader_test_fail_expert(expert_reader *r, int layer, int expert);

/* Completions out of order, as a loaded disk delivers them. Each kernel read lands in a private
 * buffer; its destination is poisoned (0xEE) when the read starts and receives the bytes only
 * when the read is delivered, 0..max_delay reap calls after the disk finished it, in an order
 * drawn from seed. A caller that touches a slot before its completion is reaped sees poison. */
typedef struct {
    unsigned long long seed;
    int max_delay;
    /* Optional (NULL): told of each kernel read when it starts and when its bytes land. */
    void (*on_start)(void *ctx, const void *dst, size_t length);
    void (*on_land)(void *ctx, const void *dst, size_t length);
    void *ctx;
} io_test_reorder;

/* Wraps the reader's backend in that reordering; once, before the first submit. Registered slots
 * go unused (the kernel reads into the private buffers). 0 ok, -1 with expert_reader_error() set. */
int expert_reader_test_reorder(expert_reader *r, const io_test_reorder *how);

/* Makes later expert_reader_create calls behave as if open(O_DIRECT) were refused with EINVAL
 * (as on filesystems without direct I/O) and/or io_uring setup were refused with EPERM (as under
 * a seccomp profile), so tests can exercise the fallback on a disk that allows both. Process-wide;
 * reset with (0, 0). */
void expert_io_test_refuse(int refuse_direct, int refuse_uring);

#endif
