/* Expert reader: turns (layer, expert) into 4 KiB-widened reads that land directly in a caller's
 * slot, and owns everything both engines share: the read plan of every expert, jobs (one per
 * expert read) and units (one per kernel read), short-read / EINTR / EAGAIN / EIO handling,
 * errors that name the file and offset, and statistics. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io/expert_io.h"
#include "io/io_backend.h"

#define IO_ALIGN 4096u
#define MAX_UNITS_PER_JOB 64       /* bounds chunking: an expert is at most this many kernel reads */
#define MAX_READ_BYTES (1u << 30)  /* Linux caps one read below 2 GiB; a piece is split above 1 GiB */
#define EIO_RETRIES 3              /* a transient media error is retried this often before failing */
#define AGAIN_RETRIES 1000         /* EINTR/EAGAIN are not failures, but never loop forever */
#define MAX_QUEUE_DEPTH 1024
#define MAX_PREAD_THREADS 16

static int g_refuse_direct, g_refuse_uring; /* test hooks, see expert_io_test_refuse */

/* One piece of an expert as it is read: file range [file_offset, file_offset + span) of shard
 * `shard`, landing at slot + slot_offset. Bytes past `need` are alignment padding (possibly past EOF). */
typedef struct {
    int shard;
    uint64_t file_offset, need, span, slot_offset;
} piece_plan;

typedef struct {
    int npieces;
    piece_plan piece[2];
    uint64_t tensor_slot_offset[EXPERT_NTENSORS];
} expert_plan;

/* One kernel read and its retry state: [offset, offset + length) is what is asked now; the
 * bytes up to need_end must arrive (the rest is alignment padding, possibly past EOF). */
typedef struct {
    int job, shard;
    uint64_t offset, length, need_end;
    uint8_t *dst;
    int eio_retries, again_retries;
} read_unit;

typedef struct {
    uint64_t tag;
    int layer, expert;
    int units_left, status;
} read_job;

struct expert_reader {
    const checkpoint *ck;
    int n_layers, n_experts;
    expert_plan *plans;              /* [n_layers * n_experts] */
    size_t slot_bytes;
    uint64_t chunk_bytes;            /* largest single kernel read */
    int queue_depth;
    read_job *jobs;                  /* [queue_depth] */
    read_unit *units;                /* [queue_depth * MAX_UNITS_PER_JOB]; job j owns a block */
    int *free_jobs, n_free;
    int *done_fifo, done_head, done_n;
    int inflight;                    /* jobs submitted and not yet reaped */
    int *fds;
    io_backend backend;
    io_engine engine;
    io_fault fault;
    int fault_count;
    int fail_layer, fail_expert;     /* test hook: this expert's reads always fail; -1 none */
    expert_reader_stats stats;
    FILE *iolog;                     /* every kernel read as a fio iolog line, or NULL */
    char note[512];
    char error[768];
};

const char *io_backend_name(io_backend b)
{
    switch (b) {
    case IO_BACKEND_AUTO: return "auto";
    case IO_BACKEND_URING: return "uring";
    case IO_BACKEND_PREAD: return "pread";
    }
    return "?";
}

int io_backend_parse(const char *s, io_backend *out)
{
    if (!s) return -1;
    if (!strcmp(s, "auto")) *out = IO_BACKEND_AUTO;
    else if (!strcmp(s, "uring")) *out = IO_BACKEND_URING;
    else if (!strcmp(s, "pread")) *out = IO_BACKEND_PREAD;
    else return -1;
    return 0;
}

void expert_io_test_refuse(int refuse_direct, int refuse_uring)
{
    g_refuse_direct = refuse_direct;
    g_refuse_uring = refuse_uring;
}

static uint64_t align_down(uint64_t x) { return x & ~(uint64_t)(IO_ALIGN - 1); }
static uint64_t align_up(uint64_t x) { return (x + IO_ALIGN - 1) & ~(uint64_t)(IO_ALIGN - 1); }

static void set_error(expert_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(expert_reader *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------- read plans */

/* Where tensor t lands in the slot: inside the piece of its shard that contains it. */
static int plan_tensor(const expert_extent *x, const expert_plan *p, const tensor_info *t, uint64_t *slot_off)
{
    for (int i = 0; i < x->npieces; i++) {
        if (x->piece[i].shard != t->shard) continue;
        if (t->offset < x->piece[i].offset || t->offset + t->nbytes > x->piece[i].offset + x->piece[i].length)
            continue;
        *slot_off = p->piece[i].slot_offset + (t->offset - p->piece[i].file_offset);
        return 0;
    }
    return -1;
}

static int plan_expert(expert_reader *r, int layer, int expert, char *err, size_t errlen)
{
    const checkpoint *ck = r->ck;
    const expert_extent *x = &ck->experts[(size_t)layer * r->n_experts + expert];
    expert_plan *p = &r->plans[(size_t)layer * r->n_experts + expert];
    if (x->npieces == 0) return 0;
    if (x->npieces < 0 || x->npieces > 2) {
        snprintf(err, errlen, "io: layer %d expert %d: %d pieces (expected 1 or 2)", layer, expert, x->npieces);
        return -1;
    }
    uint64_t slot_off = 0;
    for (int i = 0; i < x->npieces; i++) {
        int s = x->piece[i].shard;
        if (s < 0 || s >= ck->n_shards || x->piece[i].length == 0) {
            snprintf(err, errlen, "io: layer %d expert %d: piece %d names shard %d of %d (length %llu)",
                     layer, expert, i, s, ck->n_shards, (unsigned long long)x->piece[i].length);
            return -1;
        }
        piece_plan *pp = &p->piece[i];
        pp->shard = s;
        pp->file_offset = align_down(x->piece[i].offset);
        pp->need = x->piece[i].offset + x->piece[i].length - pp->file_offset;
        pp->span = align_up(pp->need);
        pp->slot_offset = slot_off; /* a multiple of 4 KiB: keeps O_DIRECT's alignment in the slot */
        slot_off += pp->span;
    }
    p->npieces = x->npieces;
    for (int k = 0; k < EXPERT_NTENSORS; k++) {
        const tensor_info *t = x->t[k];
        if (!t || plan_tensor(x, p, t, &p->tensor_slot_offset[k]) != 0) {
            snprintf(err, errlen, "io: layer %d expert %d: tensor %s lies outside the expert's %d on-disk piece(s)",
                     layer, expert, t && t->name ? t->name : "(missing)", x->npieces);
            return -1;
        }
    }
    for (int k = EXPERT_GATE_S; k < EXPERT_NTENSORS; k += 2) {
        if (p->tensor_slot_offset[k] % sizeof(float) != 0) {
            snprintf(err, errlen, "io: layer %d expert %d: F32 tensor %s starts at file offset %llu, not 4-byte aligned",
                     layer, expert, x->t[k]->name, (unsigned long long)x->t[k]->offset);
            return -1;
        }
    }
    if (slot_off > r->slot_bytes) r->slot_bytes = slot_off;
    return 0;
}

static int units_for(const expert_plan *p, uint64_t chunk)
{
    int n = 0;
    for (int i = 0; i < p->npieces; i++) n += (int)((p->piece[i].span + chunk - 1) / chunk);
    return n;
}

static int max_units_per_job(const expert_reader *r, uint64_t chunk)
{
    int most = 0;
    for (size_t i = 0; i < (size_t)r->n_layers * r->n_experts; i++) {
        int n = units_for(&r->plans[i], chunk);
        if (n > most) most = n;
    }
    return most;
}

static int build_plans(expert_reader *r, char *err, size_t errlen)
{
    const model_config *c = &r->ck->cfg;
    r->n_layers = c->num_hidden_layers + c->num_nextn_predict_layers;
    r->n_experts = c->n_routed_experts;
    if (r->n_layers <= 0 || r->n_experts <= 0 || !r->ck->experts) {
        snprintf(err, errlen, "io: checkpoint %s has no routed experts (layers %d, experts %d)",
                 r->ck->dir ? r->ck->dir : "?", r->n_layers, r->n_experts);
        return -1;
    }
    r->plans = calloc((size_t)r->n_layers * r->n_experts, sizeof *r->plans);
    if (!r->plans) {
        snprintf(err, errlen, "io: out of memory for expert read plans");
        return -1;
    }
    for (int l = 0; l < r->n_layers; l++)
        for (int e = 0; e < r->n_experts; e++)
            if (plan_expert(r, l, e, err, errlen) != 0) return -1;
    if (r->slot_bytes == 0) {
        snprintf(err, errlen, "io: checkpoint %s has no routed experts on disk", r->ck->dir ? r->ck->dir : "?");
        return -1;
    }
    r->slot_bytes = align_up(r->slot_bytes);
    r->chunk_bytes = MAX_READ_BYTES;
    if (max_units_per_job(r, r->chunk_bytes) > MAX_UNITS_PER_JOB) {
        snprintf(err, errlen, "io: an expert of %s is too large to read (> %d GiB)", r->ck->dir ? r->ck->dir : "?",
                 MAX_UNITS_PER_JOB);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- completions */

static int64_t apply_fault(expert_reader *r, const read_unit *u, int64_t res)
{
    if (r->fail_layer >= 0 && r->jobs[u->job].layer == r->fail_layer && r->jobs[u->job].expert == r->fail_expert)
        return -EIO;
    if (r->fault_count <= 0) return res;
    r->fault_count--;
    switch (r->fault) {
    case IO_FAULT_EINTR: return -EINTR;
    case IO_FAULT_EAGAIN: return -EAGAIN;
    case IO_FAULT_EIO: return -EIO;
    case IO_FAULT_SHORT: return res > 3 ? res / 3 : res;
    case IO_FAULT_NONE: break;
    }
    return res;
}

static const char *shard_path(const expert_reader *r, int shard) { return r->ck->shards[shard].path; }

static int resubmit(expert_reader *r, read_unit *u)
{
    r->stats.retries++;
    io_request rq = {.shard = u->shard, .offset = u->offset, .length = u->length, .dst = u->dst};
    int rc = r->engine.start(r->engine.self, &rq, (uint64_t)(u - r->units));
    if (rc < 0) {
        read_job *j = &r->jobs[u->job];
        set_error(r, "io: layer %d expert %d: cannot queue a retry of %s at offset %llu: %s", j->layer, j->expert,
                  shard_path(r, u->shard), (unsigned long long)u->offset, strerror(-rc));
        return rc;
    }
    return 0;
}

static int fail_unit(expert_reader *r, read_unit *u, int64_t res, const char *why)
{
    read_job *j = &r->jobs[u->job];
    set_error(r, "io: layer %d expert %d: read of %s at offset %llu (%llu bytes) failed: %s", j->layer, j->expert,
              shard_path(r, u->shard), (unsigned long long)u->offset, (unsigned long long)u->length, why);
    return (int)res;
}

/* 1: the unit has all its bytes; 0: resubmitted; < 0: failed (-errno). */
static int unit_advance(expert_reader *r, read_unit *u, int64_t res)
{
    char why[160];
    if (res == -EINTR || res == -EAGAIN) {
        if (++u->again_retries > AGAIN_RETRIES) {
            snprintf(why, sizeof why, "%s, %d times in a row", strerror((int)-res), AGAIN_RETRIES);
            return fail_unit(r, u, res, why);
        }
        return resubmit(r, u);
    }
    if (res < 0) {
        if (u->eio_retries < EIO_RETRIES) {
            u->eio_retries++;
            return resubmit(r, u);
        }
        snprintf(why, sizeof why, "%s (after %d retries)", strerror((int)-res), EIO_RETRIES);
        return fail_unit(r, u, res, why);
    }
    uint64_t end = u->offset + (uint64_t)res;
    if (end >= u->need_end) return 1;
    /* Short read. The file's size tells a truncated shard (fail now, naming where it ends) from a
     * transient short read (ask for the rest). */
    struct stat st;
    if (fstat(r->fds[u->shard], &st) == 0 && (uint64_t)st.st_size < u->need_end) {
        snprintf(why, sizeof why, "short read: the file ends at byte %llu but the expert needs bytes up to %llu",
                 (unsigned long long)st.st_size, (unsigned long long)u->need_end);
        return fail_unit(r, u, -EIO, why);
    }
    if (res == 0 || ++u->again_retries > AGAIN_RETRIES) {
        snprintf(why, sizeof why, "short read: no data at byte %llu of a %llu-byte file", (unsigned long long)end,
                 (unsigned long long)st.st_size);
        return fail_unit(r, u, -EIO, why);
    }
    /* Short read: ask again for the rest, from the 4 KiB boundary below it so O_DIRECT accepts it;
     * the few bytes read twice land on themselves. */
    uint64_t skip = align_down(end) - u->offset;
    u->offset += skip;
    u->dst += skip;
    u->length -= skip;
    return resubmit(r, u);
}

static void job_unit_finished(expert_reader *r, int job, int status)
{
    read_job *j = &r->jobs[job];
    if (status < 0 && j->status == 0) j->status = status;
    if (--j->units_left > 0) return;
    /* Only now: the kernel may write into the slot until the last unit of the job is done. */
    r->stats.reads_completed++;
    if (j->status != 0) r->stats.errors++;
    r->done_fifo[(r->done_head + r->done_n) % r->queue_depth] = job;
    r->done_n++;
}

static void unit_done(void *ctx, uint64_t id, int64_t res)
{
    expert_reader *r = ctx;
    read_unit *u = &r->units[id];
    res = apply_fault(r, u, res);
    if (res > 0) r->stats.bytes_read += (uint64_t)res;
    int rc = unit_advance(r, u, res);
    if (rc == 0) return;
    job_unit_finished(r, u->job, rc < 0 ? rc : 0);
}

/* ---------------------------------------------------------------- engines and probing */

typedef struct {
    int64_t res;
    int done;
} probe_result;

static void probe_done(void *ctx, uint64_t id, int64_t res)
{
    (void)id;
    probe_result *p = ctx;
    p->res = res;
    p->done = 1;
}

/* One 4 KiB read at offset 0 of shard 0 through the engine: O_DIRECT can be accepted by open()
 * and still refused by read() on some filesystems. */
static int probe_engine(expert_reader *r, char *why, size_t whylen)
{
    uint8_t *buf = aligned_alloc(IO_ALIGN, IO_ALIGN);
    if (!buf) {
        snprintf(why, whylen, "out of memory");
        return -ENOMEM;
    }
    io_request rq = {.shard = 0, .offset = 0, .length = IO_ALIGN, .dst = buf};
    probe_result pr = {0, 0};
    int rc = r->engine.start(r->engine.self, &rq, 0);
    if (rc == 0) rc = r->engine.flush(r->engine.self);
    while (rc >= 0 && !pr.done) rc = r->engine.collect(r->engine.self, 1, probe_done, &pr);
    free(buf);
    if (rc < 0) {
        snprintf(why, whylen, "%s", strerror(-rc));
        return rc;
    }
    if (pr.res < 0) {
        snprintf(why, whylen, "a probe read of %s failed: %s", shard_path(r, 0), strerror((int)-pr.res));
        return (int)pr.res;
    }
    return 0;
}

static void close_shards(expert_reader *r)
{
    if (!r->fds) return;
    for (int i = 0; i < r->ck->n_shards; i++)
        if (r->fds[i] >= 0) close(r->fds[i]);
    free(r->fds);
    r->fds = NULL;
}

/* Opens every shard; direct asks for O_DIRECT. 0, or -errno with `why` naming the file. */
static int open_shards(expert_reader *r, int direct, char *why, size_t whylen)
{
    r->fds = malloc((size_t)r->ck->n_shards * sizeof *r->fds);
    if (!r->fds) {
        snprintf(why, whylen, "out of memory");
        return -ENOMEM;
    }
    for (int i = 0; i < r->ck->n_shards; i++) r->fds[i] = -1;
    for (int i = 0; i < r->ck->n_shards; i++) {
        int fd = -1, e = EINVAL;
        if (!(direct && g_refuse_direct)) {
            fd = open(shard_path(r, i), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
            e = errno;
        }
        if (fd < 0) {
            snprintf(why, whylen, "cannot open %s%s: %s", shard_path(r, i), direct ? " with O_DIRECT" : "", strerror(e));
            close_shards(r);
            return -e;
        }
        r->fds[i] = fd;
    }
    return 0;
}

static int engine_requests(const expert_reader *r) { return r->queue_depth * MAX_UNITS_PER_JOB; }

/* A freshly created engine must read one expert correctly before it is trusted; if not, it and
 * the shard descriptors are given back so that the caller can try the next backend. */
static int probe_engine_or_close(expert_reader *r, char *why, size_t whylen)
{
    int rc = probe_engine(r, why, whylen);
    if (rc < 0) {
        r->engine.destroy(r->engine.self);
        r->engine.self = NULL;
        close_shards(r);
    }
    return rc;
}

static int start_uring(expert_reader *r, char *why, size_t whylen)
{
    int rc = open_shards(r, 1, why, whylen);
    if (rc < 0) return rc;
    if (g_refuse_uring) {
        snprintf(why, whylen, "io_uring setup refused: %s", strerror(EPERM));
        close_shards(r);
        return -EPERM;
    }
    rc = uring_engine_create(&r->engine, r->fds, r->ck->n_shards, engine_requests(r), why, whylen);
    if (rc < 0) {
        close_shards(r);
        return rc;
    }
    rc = probe_engine_or_close(r, why, whylen);
    if (rc < 0) return rc;
    r->backend = IO_BACKEND_URING;
    snprintf(r->note, sizeof r->note, "io_uring, O_DIRECT, registered files, queue depth %d", r->queue_depth);
    return 0;
}

static int start_pread_with(expert_reader *r, int direct, char *why, size_t whylen)
{
    int rc = open_shards(r, direct, why, whylen);
    if (rc < 0) return rc;
    int threads = r->queue_depth < MAX_PREAD_THREADS ? r->queue_depth : MAX_PREAD_THREADS;
    rc = pread_engine_create(&r->engine, r->fds, r->ck->n_shards, threads, engine_requests(r), why, whylen);
    if (rc < 0) {
        close_shards(r);
        return rc;
    }
    rc = probe_engine_or_close(r, why, whylen);
    if (rc < 0) return rc;
    r->backend = IO_BACKEND_PREAD;
    return threads;
}

/* pread with O_DIRECT when the filesystem allows it (the page cache must not eat the memory
 * budget), buffered otherwise. `because` says why pread was chosen. */
static int start_pread(expert_reader *r, const char *because, char *err, size_t errlen)
{
    char why[384];
    int threads = start_pread_with(r, 1, why, sizeof why);
    if (threads > 0) {
        snprintf(r->note, sizeof r->note, "pread thread pool (%d threads), O_DIRECT; %s", threads, because);
        return 0;
    }
    char direct_why[384];
    snprintf(direct_why, sizeof direct_why, "%s", why);
    threads = start_pread_with(r, 0, why, sizeof why);
    if (threads < 0) {
        snprintf(err, errlen, "io: %s", why);
        return -1;
    }
    snprintf(r->note, sizeof r->note, "pread thread pool (%d threads), buffered reads (%s); %s", threads, direct_why,
             because);
    return 0;
}

static int start_engine(expert_reader *r, io_backend want, char *err, size_t errlen)
{
    char why[384];
    if (want == IO_BACKEND_PREAD) return start_pread(r, "pread was asked for", err, errlen);
    if (start_uring(r, why, sizeof why) == 0) return 0;
    if (want == IO_BACKEND_URING) {
        snprintf(err, errlen, "io: io_uring backend unavailable: %s", why);
        return -1;
    }
    char because[450];
    snprintf(because, sizeof because, "io_uring refused: %s", why);
    return start_pread(r, because, err, errlen);
}

/* ---------------------------------------------------------------- public API */

static int alloc_queues(expert_reader *r)
{
    int qd = r->queue_depth;
    r->jobs = calloc((size_t)qd, sizeof *r->jobs);
    r->units = calloc((size_t)qd * MAX_UNITS_PER_JOB, sizeof *r->units);
    r->free_jobs = malloc((size_t)qd * sizeof *r->free_jobs);
    r->done_fifo = malloc((size_t)qd * sizeof *r->done_fifo);
    if (!r->jobs || !r->units || !r->free_jobs || !r->done_fifo) return -1;
    for (int i = 0; i < qd; i++) r->free_jobs[i] = qd - 1 - i;
    r->n_free = qd;
    return 0;
}

expert_reader *expert_reader_create(const checkpoint *ck, io_backend want, int queue_depth, char *err, size_t errlen)
{
    if (!ck || ck->n_shards <= 0) {
        snprintf(err, errlen, "io: no checkpoint shards to read experts from");
        return NULL;
    }
    if (queue_depth < 1 || queue_depth > MAX_QUEUE_DEPTH) {
        snprintf(err, errlen, "io: queue depth %d out of range (expected 1..%d)", queue_depth, MAX_QUEUE_DEPTH);
        return NULL;
    }
    if (want != IO_BACKEND_AUTO && want != IO_BACKEND_URING && want != IO_BACKEND_PREAD) {
        snprintf(err, errlen, "io: unknown backend %d (expected auto, uring or pread)", (int)want);
        return NULL;
    }
    expert_reader *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "io: out of memory");
        return NULL;
    }
    r->ck = ck;
    r->queue_depth = queue_depth;
    r->fail_layer = r->fail_expert = -1;
    if (build_plans(r, err, errlen) != 0) goto fail;
    if (alloc_queues(r) != 0) {
        snprintf(err, errlen, "io: out of memory for a queue of depth %d", queue_depth);
        goto fail;
    }
    if (start_engine(r, want, err, errlen) != 0) goto fail;
    return r;
fail:
    expert_reader_free(r);
    return NULL;
}

void expert_reader_free(expert_reader *r)
{
    if (!r) return;
    /* Never free slots' owners under the kernel's feet: drain what is still in flight. */
    if (r->engine.self) {
        while (r->inflight > r->done_n) {
            if (r->engine.collect(r->engine.self, 1, unit_done, r) < 0) break;
        }
        r->engine.destroy(r->engine.self);
    }
    close_shards(r);
    free(r->plans);
    free(r->jobs);
    free(r->units);
    free(r->free_jobs);
    free(r->done_fifo);
    free(r);
}

io_backend expert_reader_backend(const expert_reader *r) { return r->backend; }
int expert_reader_queue_room(const expert_reader *r) { return r->n_free; }
const char *expert_reader_backend_note(const expert_reader *r) { return r->note; }
size_t expert_reader_slot_bytes(const expert_reader *r) { return r->slot_bytes; }
int expert_reader_inflight(const expert_reader *r) { return r->inflight; }
const char *expert_reader_error(const expert_reader *r) { return r->error; }
expert_reader_stats expert_reader_get_stats(const expert_reader *r) { return r->stats; }

void expert_reader_test_inject(expert_reader *r, io_fault fault, int count)
{
    r->fault = fault;
    r->fault_count = count;
}

void expert_reader_test_fail_expert(expert_reader *r, int layer, int expert)
{
    r->fail_layer = layer;
    r->fail_expert = expert;
}

int expert_reader_test_reorder(expert_reader *r, const io_test_reorder *how)
{
    if (r->inflight > 0) {
        set_error(r, "io: completions cannot be reordered while %d reads are in flight", r->inflight);
        return -1;
    }
    int rc = reorder_engine_wrap(&r->engine, engine_requests(r), how);
    if (rc < 0) {
        set_error(r, "io: cannot wrap the backend: %s", strerror(-rc));
        return -1;
    }
    return 0;
}

int expert_reader_set_chunk_bytes(expert_reader *r, size_t chunk_bytes)
{
    if (r->inflight > 0) {
        set_error(r, "io: chunk size cannot change while %d reads are in flight", r->inflight);
        return -1;
    }
    uint64_t chunk = chunk_bytes ? chunk_bytes : MAX_READ_BYTES;
    if (chunk % IO_ALIGN != 0 || chunk > MAX_READ_BYTES) {
        set_error(r, "io: chunk size %zu is not a multiple of 4096 up to 1 GiB", chunk_bytes);
        return -1;
    }
    int n = max_units_per_job(r, chunk);
    if (n > MAX_UNITS_PER_JOB) {
        set_error(r, "io: chunk size %zu would split an expert into %d reads (at most %d)", chunk_bytes, n,
                  MAX_UNITS_PER_JOB);
        return -1;
    }
    r->chunk_bytes = chunk;
    return 0;
}

int expert_reader_register_slots(expert_reader *r, void *base, int n_slots)
{
    if (!r->engine.register_buffers) return 0;
    if (!base || ((uintptr_t)base % IO_ALIGN) != 0 || n_slots < 1) {
        set_error(r, "io: slots to register must be 4096-aligned and at least one (got %p, %d)", base, n_slots);
        return -1;
    }
    int rc = r->engine.register_buffers(r->engine.self, base, r->slot_bytes, n_slots);
    if (rc < 0) {
        set_error(r, "io: registering %d slots of %zu bytes as io_uring buffers failed: %s", n_slots, r->slot_bytes,
                  strerror(-rc));
        return -1;
    }
    return 0;
}

static const expert_plan *plan_of(const expert_reader *r, int layer, int expert)
{
    if (layer < 0 || layer >= r->n_layers || expert < 0 || expert >= r->n_experts) return NULL;
    const expert_plan *p = &r->plans[(size_t)layer * r->n_experts + expert];
    return p->npieces ? p : NULL;
}

/* Splits the job's pieces into units of at most chunk_bytes and hands them to the engine. */
static void start_job(expert_reader *r, int job, const expert_plan *p, uint8_t *slot)
{
    read_job *j = &r->jobs[job];
    read_unit *units = &r->units[(size_t)job * MAX_UNITS_PER_JOB];
    int n = 0;
    for (int i = 0; i < p->npieces; i++) {
        const piece_plan *pp = &p->piece[i];
        for (uint64_t at = 0; at < pp->span; at += r->chunk_bytes) {
            uint64_t len = pp->span - at < r->chunk_bytes ? pp->span - at : r->chunk_bytes;
            uint64_t need = pp->need - at < len ? pp->need - at : len;
            units[n++] = (read_unit){.job = job, .shard = pp->shard, .offset = pp->file_offset + at, .length = len,
                                     .need_end = pp->file_offset + at + need,
                                     .dst = slot + pp->slot_offset + at};
        }
    }
    j->units_left = n;
    for (int k = 0; r->iolog && k < n; k++)
        fprintf(r->iolog, "%s read %llu %llu\n", shard_path(r, units[k].shard), (unsigned long long)units[k].offset,
                (unsigned long long)units[k].length);
    for (int k = 0; k < n; k++) {
        io_request rq = {.shard = units[k].shard, .offset = units[k].offset, .length = units[k].length,
                         .dst = units[k].dst};
        int rc = r->engine.start(r->engine.self, &rq, (uint64_t)(&units[k] - r->units));
        if (rc < 0) {
            set_error(r, "io: layer %d expert %d: cannot queue a read of %s at offset %llu: %s", j->layer, j->expert,
                      shard_path(r, units[k].shard), (unsigned long long)units[k].offset, strerror(-rc));
            for (int rest = k; rest < n; rest++) job_unit_finished(r, job, rc);
            break;
        }
    }
    int rc = r->engine.flush(r->engine.self);
    if (rc < 0) set_error(r, "io: submitting reads failed: %s", strerror(-rc));
}

void expert_reader_log_reads(expert_reader *r, FILE *f)
{
    const checkpoint *ck = r->ck;
    if (r->iolog)
        for (int s = 0; s < ck->n_shards; s++) fprintf(r->iolog, "%s close\n", ck->shards[s].path);
    r->iolog = f;
    if (!f) return;
    fprintf(f, "fio version 2 iolog\n");
    for (int s = 0; s < ck->n_shards; s++) fprintf(f, "%s add\n", ck->shards[s].path);
    for (int s = 0; s < ck->n_shards; s++) fprintf(f, "%s open\n", ck->shards[s].path);
}

int expert_reader_submit(expert_reader *r, int layer, int expert, void *slot, uint64_t tag)
{
    const expert_plan *p = plan_of(r, layer, expert);
    if (!p) {
        set_error(r, "io: no routed expert %d in layer %d of %s", expert, layer, r->ck->dir ? r->ck->dir : "?");
        return -1;
    }
    if (!slot || (uintptr_t)slot % IO_ALIGN != 0) {
        set_error(r, "io: slot %p for layer %d expert %d is not 4096-aligned", slot, layer, expert);
        return -1;
    }
    if (r->n_free == 0) return -1; /* queue full: the caller reaps first */
    int job = r->free_jobs[--r->n_free];
    r->jobs[job] = (read_job){.tag = tag, .layer = layer, .expert = expert};
    r->inflight++;
    r->stats.reads_submitted++;
    if ((uint64_t)r->inflight > r->stats.max_inflight) r->stats.max_inflight = (uint64_t)r->inflight;
    start_job(r, job, p, slot);
    return 0;
}

int expert_reader_reap(expert_reader *r, int min_complete, uint64_t *tags, int *status, int max)
{
    if (max <= 0) return 0;
    if (min_complete > max) min_complete = max;
    int rc = r->engine.collect(r->engine.self, 0, unit_done, r);
    /* Wait only while asked to and while something is still running (never for nothing). */
    while (rc >= 0 && r->done_n < min_complete && r->done_n < r->inflight)
        rc = r->engine.collect(r->engine.self, 1, unit_done, r);
    if (rc < 0) {
        set_error(r, "io: collecting completions failed: %s", strerror(-rc));
        return -1;
    }
    int n = 0;
    while (n < max && r->done_n > 0) {
        int job = r->done_fifo[r->done_head];
        r->done_head = (r->done_head + 1) % r->queue_depth;
        r->done_n--;
        tags[n] = r->jobs[job].tag;
        status[n] = r->jobs[job].status;
        r->free_jobs[r->n_free++] = job;
        r->inflight--;
        n++;
    }
    return n;
}

void expert_reader_view(const expert_reader *r, int layer, int expert, const void *slot, expert_weights *out)
{
    const expert_plan *p = plan_of(r, layer, expert);
    if (!p) {
        *out = (expert_weights){0};
        return;
    }
    const uint8_t *s = slot;
    out->gate = s + p->tensor_slot_offset[EXPERT_GATE_W];
    out->up = s + p->tensor_slot_offset[EXPERT_UP_W];
    out->down = s + p->tensor_slot_offset[EXPERT_DOWN_W];
    /* The slot keeps each file offset's alignment modulo 4096 and create checked that the scale
     * grids start 4-byte aligned, so these pointers are aligned for float. */
    out->gate_scale = (const float *)(const void *)(s + p->tensor_slot_offset[EXPERT_GATE_S]);
    out->up_scale = (const float *)(const void *)(s + p->tensor_slot_offset[EXPERT_UP_S]);
    out->down_scale = (const float *)(const void *)(s + p->tensor_slot_offset[EXPERT_DOWN_S]);
}
