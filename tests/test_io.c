/* Expert reader tests over a hand-built checkpoint: two shards with unaligned offsets, a foreign
 * tensor between experts, one expert straddling the shard boundary. Every byte the reader puts in
 * a slot is checked, through expert_reader_view, against a plain pread of the tensor's range.
 * usage: test_io WORKDIR   (WORKDIR on a real disk: O_DIRECT must be allowed there) */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tests/test_check.h"
#include "io/expert_io.h"


/* ---------------------------------------------------------------- the synthetic checkpoint */

enum { N_LAYERS = 2, N_EXPERTS = 6, MOE_LAYER = 1, STRADDLER = 3 };
/* Tensor sizes of one expert (I=256, H=128, 128x128 blocks): F8 weights and small F32 grids. */
static const uint64_t expert_tensor_bytes[EXPERT_NTENSORS] = {256 * 128, 2 * 1 * 4, 256 * 128, 2 * 1 * 4,
                                                              128 * 256, 1 * 2 * 4};
static const char *expert_tensor_suffix[EXPERT_NTENSORS] = {
    "gate_proj.weight", "gate_proj.weight_scale_inv", "up_proj.weight",
    "up_proj.weight_scale_inv", "down_proj.weight", "down_proj.weight_scale_inv"};

typedef struct {
    checkpoint ck;
    tensor_info tensors[64];
    shard_info shards[2];
    expert_extent experts[N_LAYERS * N_EXPERTS];
    char names[64][96];
    char paths[2][512];
    char files[2][64];
} fixture;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void write_random_file(const char *path, uint64_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "test_io: cannot create %s: %s\n", path, strerror(errno));
        exit(2);
    }
    for (uint64_t i = 0; i < size; i += 8) {
        uint64_t v = rng_next();
        fwrite(&v, 1, size - i < 8 ? size - i : 8, f);
    }
    fclose(f);
}

static tensor_info *add_tensor(fixture *fx, int *nt, const char *name, int shard, uint64_t *cursor, uint64_t nbytes,
                               dtype_t dt)
{
    tensor_info *t = &fx->tensors[*nt];
    snprintf(fx->names[*nt], sizeof fx->names[*nt], "%s", name);
    *t = (tensor_info){.name = fx->names[*nt], .shard = shard, .offset = *cursor, .nbytes = nbytes, .dtype = dt,
                       .ndim = 1, .shape = {(int64_t)nbytes}};
    *cursor += nbytes;
    (*nt)++;
    return t;
}

/* Shard 0: data at 2008 (8 + a 2000-byte header), experts 0-1, a foreign BF16 tensor, expert 2,
 * expert 3's gate weight + scale. Shard 1: data at 1032, the rest of expert 3, experts 4-5. */
static void build_fixture(fixture *fx, const char *dir)
{
    memset(fx, 0, sizeof *fx);
    static const uint64_t data_start[2] = {2008, 1032};
    uint64_t cursor[2] = {data_start[0], data_start[1]};
    int nt = 0;
    char name[96];
    for (int e = 0; e < N_EXPERTS; e++) {
        expert_extent *x = &fx->experts[MOE_LAYER * N_EXPERTS + e];
        if (e == 2) {
            add_tensor(fx, &nt, "model.layers.1.mlp.gate.weight", 0, &cursor[0], 6 * 128 * 2, DTYPE_BF16);
        }
        for (int k = 0; k < EXPERT_NTENSORS; k++) {
            int shard = e < STRADDLER || (e == STRADDLER && k < 2) ? 0 : 1;
            snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%d.%s", MOE_LAYER, e, expert_tensor_suffix[k]);
            x->t[k] = add_tensor(fx, &nt, name, shard, &cursor[shard], expert_tensor_bytes[k],
                                 k % 2 ? DTYPE_F32 : DTYPE_F8_E4M3);
            int p = x->npieces > 0 && x->piece[x->npieces - 1].shard == shard ? x->npieces - 1 : x->npieces++;
            if (x->piece[p].length == 0) {
                x->piece[p].shard = shard;
                x->piece[p].offset = x->t[k]->offset;
            }
            x->piece[p].length += x->t[k]->nbytes;
        }
        x->contiguous = 1;
    }
    for (int s = 0; s < 2; s++) {
        snprintf(fx->files[s], sizeof fx->files[s], "model-0000%d-of-00002.safetensors", s + 1);
        snprintf(fx->paths[s], sizeof fx->paths[s], "%s/%s", dir, fx->files[s]);
        write_random_file(fx->paths[s], cursor[s]);
        fx->shards[s] = (shard_info){.path = fx->paths[s], .file = fx->files[s], .fd = -1, .size = cursor[s],
                                     .header_len = data_start[s] - 8};
    }
    fx->ck.dir = (char *)dir;
    fx->ck.cfg.num_hidden_layers = N_LAYERS;
    fx->ck.cfg.n_routed_experts = N_EXPERTS;
    fx->ck.cfg.first_k_dense_replace = 1;
    fx->ck.n_shards = 2;
    fx->ck.shards = fx->shards;
    fx->ck.n_tensors = nt;
    fx->ck.tensors = fx->tensors;
    fx->ck.experts = fx->experts;
}

/* Independent reference for the slot size: widen each piece by hand and sum. */
static size_t expected_slot_bytes(const fixture *fx)
{
    size_t most = 0;
    for (int i = 0; i < N_LAYERS * N_EXPERTS; i++) {
        const expert_extent *x = &fx->experts[i];
        size_t sum = 0;
        for (int p = 0; p < x->npieces; p++) {
            uint64_t lo = x->piece[p].offset / 4096 * 4096;
            uint64_t hi = (x->piece[p].offset + x->piece[p].length + 4095) / 4096 * 4096;
            sum += hi - lo;
        }
        if (sum > most) most = sum;
    }
    return most;
}

/* ---------------------------------------------------------------- checking a filled slot */

static int tensor_matches_disk(const fixture *fx, const tensor_info *t, const void *got)
{
    uint8_t *want = malloc(t->nbytes);
    int fd = open(fx->shards[t->shard].path, O_RDONLY);
    ssize_t n = fd >= 0 ? pread(fd, want, t->nbytes, (off_t)t->offset) : -1;
    if (fd >= 0) close(fd);
    int ok = n == (ssize_t)t->nbytes && memcmp(want, got, t->nbytes) == 0;
    free(want);
    return ok;
}

static int slot_matches_disk(const fixture *fx, expert_reader *r, int layer, int expert, const void *slot)
{
    expert_weights w;
    expert_reader_view(r, layer, expert, slot, &w);
    const void *ptr[EXPERT_NTENSORS] = {w.gate, w.gate_scale, w.up, w.up_scale, w.down, w.down_scale};
    const expert_extent *x = &fx->experts[layer * N_EXPERTS + expert];
    for (int k = 0; k < EXPERT_NTENSORS; k++) {
        if (!tensor_matches_disk(fx, x->t[k], ptr[k])) {
            fprintf(stderr, "  layer %d expert %d tensor %s differs from disk\n", layer, expert, x->t[k]->name);
            return 0;
        }
    }
    return 1;
}

static uint8_t *new_slots(expert_reader *r, int n)
{
    size_t bytes = expert_reader_slot_bytes(r) * (size_t)n;
    uint8_t *s = aligned_alloc(4096, bytes);
    memset(s, 0xAB, bytes);
    return s;
}

/* Reads every expert of the MoE layer (in a shuffled order, keeping the queue full) into its own
 * slot and checks every byte. Returns how many reaped tags arrived out of submission order. */
static int read_all_and_check(const fixture *fx, expert_reader *r, uint8_t *slots)
{
    int order[N_EXPERTS];
    for (int i = 0; i < N_EXPERTS; i++) order[i] = i;
    for (int i = N_EXPERTS - 1; i > 0; i--) {
        int j = (int)(rng_next() % (uint64_t)(i + 1)), tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    size_t sb = expert_reader_slot_bytes(r);
    int seen[N_EXPERTS] = {0}, submitted = 0, reaped = 0, inversions = 0, last_submit_index = -1;
    int submit_index[N_EXPERTS];
    while (reaped < N_EXPERTS) {
        while (submitted < N_EXPERTS) {
            int e = order[submitted];
            if (expert_reader_submit(r, MOE_LAYER, e, slots + (size_t)e * sb, (uint64_t)(100 + e)) != 0) break;
            submit_index[e] = submitted++;
        }
        uint64_t tags[N_EXPERTS];
        int status[N_EXPERTS];
        int n = expert_reader_reap(r, 1, tags, status, N_EXPERTS);
        CHECK(n >= 1, "reap(min 1) returned %d: %s", n, expert_reader_error(r));
        if (n < 1) return -1;
        for (int i = 0; i < n; i++) {
            int e = (int)tags[i] - 100;
            CHECK(e >= 0 && e < N_EXPERTS && !seen[e], "unexpected or repeated tag %llu", (unsigned long long)tags[i]);
            if (e < 0 || e >= N_EXPERTS || seen[e]) continue;
            CHECK(status[i] == 0, "expert %d status %d: %s", e, status[i], expert_reader_error(r));
            CHECK(slot_matches_disk(fx, r, MOE_LAYER, e, slots + (size_t)e * sb), "expert %d bytes", e);
            if (submit_index[e] < last_submit_index) inversions++;
            last_submit_index = submit_index[e];
            seen[e] = 1;
            reaped++;
        }
    }
    CHECK(expert_reader_inflight(r) == 0, "inflight %d after reaping everything", expert_reader_inflight(r));
    return inversions;
}

/* ---------------------------------------------------------------- tests */

static expert_reader *open_reader(const fixture *fx, io_backend b, int qd)
{
    char err[512] = "";
    expert_reader *r = expert_reader_create(&fx->ck, b, qd, err, sizeof err);
    CHECK(r != NULL, "create %s qd %d: %s", io_backend_name(b), qd, err);
    if (r && b != IO_BACKEND_AUTO)
        CHECK(expert_reader_backend(r) == b, "asked %s got %s (%s)", io_backend_name(b),
              io_backend_name(expert_reader_backend(r)), expert_reader_backend_note(r));
    return r;
}

static void test_read_everything(const fixture *fx, io_backend b)
{
    for (int qd = 1; qd <= 8; qd *= 2) {
        expert_reader *r = open_reader(fx, b, qd);
        if (!r) return;
        CHECK(expert_reader_slot_bytes(r) == expected_slot_bytes(fx), "slot bytes %zu, expected %zu",
              expert_reader_slot_bytes(r), expected_slot_bytes(fx));
        CHECK(expert_reader_slot_bytes(r) % 4096 == 0, "slot bytes %zu", expert_reader_slot_bytes(r));
        uint8_t *slots = new_slots(r, N_EXPERTS);
        read_all_and_check(fx, r, slots);
        expert_reader_stats st = expert_reader_get_stats(r);
        CHECK(st.reads_submitted == N_EXPERTS && st.reads_completed == N_EXPERTS, "stats %llu/%llu",
              (unsigned long long)st.reads_submitted, (unsigned long long)st.reads_completed);
        CHECK(st.errors == 0 && st.retries == 0, "errors %llu retries %llu", (unsigned long long)st.errors,
              (unsigned long long)st.retries);
        CHECK(st.max_inflight >= 1 && st.max_inflight <= (uint64_t)qd, "max_inflight %llu qd %d",
              (unsigned long long)st.max_inflight, qd);
        /* Widened bytes: every piece rounded out to 4 KiB, except a tail past EOF (not here: the
         * checker below allows the shards' last partial page). */
        CHECK(st.bytes_read >= N_EXPERTS * 98328ull && st.bytes_read <= N_EXPERTS * (98328ull + 3 * 8192),
              "bytes_read %llu", (unsigned long long)st.bytes_read);
        free(slots);
        expert_reader_free(r);
    }
}

static void test_queue_full_and_bad_requests(const fixture *fx, io_backend b)
{
    expert_reader *r = open_reader(fx, b, 2);
    if (!r) return;
    uint8_t *slots = new_slots(r, 3);
    size_t sb = expert_reader_slot_bytes(r);
    CHECK(expert_reader_submit(r, MOE_LAYER, 0, slots, 1) == 0, "%s", expert_reader_error(r));
    CHECK(expert_reader_submit(r, MOE_LAYER, 3, slots + sb, 2) == 0, "%s", expert_reader_error(r));
    CHECK(expert_reader_submit(r, MOE_LAYER, 4, slots + 2 * sb, 3) == -1, "a third read fits in a queue of 2");
    CHECK(expert_reader_inflight(r) == 2, "inflight %d", expert_reader_inflight(r));
    uint64_t tags[4];
    int status[4];
    CHECK(expert_reader_reap(r, 0, tags, status, 0) == 0, "reap with max 0");
    int n = expert_reader_reap(r, 2, tags, status, 4);
    CHECK(n == 2, "reap(min 2) gave %d", n);
    CHECK(expert_reader_inflight(r) == 0, "inflight %d", expert_reader_inflight(r));
    CHECK(expert_reader_reap(r, 1, tags, status, 4) == 0, "reap with nothing in flight must not wait or invent");
    CHECK(expert_reader_submit(r, MOE_LAYER, 4, slots + 2 * sb, 3) == 0, "after reaping: %s", expert_reader_error(r));
    n = expert_reader_reap(r, 1, tags, status, 4);
    CHECK(n == 1 && tags[0] == 3 && status[0] == 0, "n %d tag %llu", n, (unsigned long long)tags[0]);
    CHECK(slot_matches_disk(fx, r, MOE_LAYER, 4, slots + 2 * sb), "expert 4 after a full queue");

    CHECK(expert_reader_submit(r, 0, 0, slots, 9) == -1, "dense layer 0 has no experts");
    CHECK(strstr(expert_reader_error(r), "layer 0") != NULL, "error: %s", expert_reader_error(r));
    CHECK(expert_reader_submit(r, MOE_LAYER, N_EXPERTS, slots, 9) == -1, "expert out of range");
    CHECK(expert_reader_submit(r, N_LAYERS, 0, slots, 9) == -1, "layer out of range");
    CHECK(expert_reader_submit(r, MOE_LAYER, 0, slots + 8, 9) == -1, "unaligned slot accepted");
    CHECK(strstr(expert_reader_error(r), "aligned") != NULL, "error: %s", expert_reader_error(r));
    CHECK(expert_reader_inflight(r) == 0, "a refused submit left something in flight");
    free(slots);
    expert_reader_free(r);
}

/* Reads the straddling expert (two pieces) with `count` injected faults; returns its status. */
static int read_with_faults(const fixture *fx, io_backend b, io_fault f, int count, int expert, char *err, size_t errlen,
                            expert_reader_stats *st)
{
    expert_reader *r = open_reader(fx, b, 2);
    if (!r) return 1;
    uint8_t *slot = new_slots(r, 1);
    expert_reader_test_inject(r, f, count);
    int status = 1;
    uint64_t tag;
    CHECK(expert_reader_submit(r, MOE_LAYER, expert, slot, 7) == 0, "%s", expert_reader_error(r));
    CHECK(expert_reader_reap(r, 1, &tag, &status, 1) == 1, "reap");
    if (status == 0) CHECK(slot_matches_disk(fx, r, MOE_LAYER, expert, slot), "fault %d x%d: bytes", (int)f, count);
    snprintf(err, errlen, "%s", expert_reader_error(r));
    *st = expert_reader_get_stats(r);
    free(slot);
    expert_reader_free(r);
    return status;
}

static void test_faults(const fixture *fx, io_backend b)
{
    char err[768];
    expert_reader_stats st;
    static const io_fault recoverable[] = {IO_FAULT_EINTR, IO_FAULT_EAGAIN, IO_FAULT_SHORT, IO_FAULT_EIO};
    for (int i = 0; i < 4; i++) {
        /* 3 faults: EIO is retried exactly 3 times, so this is the most that still succeeds. */
        int status = read_with_faults(fx, b, recoverable[i], 3, STRADDLER, err, sizeof err, &st);
        CHECK(status == 0, "%s fault %d x3: status %d (%s)", io_backend_name(b), (int)recoverable[i], status, err);
        CHECK(st.retries >= 3 && st.errors == 0, "fault %d: retries %llu errors %llu", (int)recoverable[i],
              (unsigned long long)st.retries, (unsigned long long)st.errors);
    }
    /* Expert 0 is one piece (one unit): four EIOs in a row exhaust its retries. */
    int status = read_with_faults(fx, b, IO_FAULT_EIO, 4, 0, err, sizeof err, &st);
    CHECK(status == -EIO, "EIO x4: status %d", status);
    CHECK(strstr(err, fx->shards[0].path) && strstr(err, "offset") && strstr(err, "Input/output error"),
          "error line must name the file and offset: %s", err);
    CHECK(st.errors == 1 && st.retries == 3, "errors %llu retries %llu", (unsigned long long)st.errors,
          (unsigned long long)st.retries);
    /* Many short completions in a row still converge (each makes progress). */
    status = read_with_faults(fx, b, IO_FAULT_SHORT, 12, STRADDLER, err, sizeof err, &st);
    CHECK(status == 0, "SHORT x12: %d %s", status, err);
}

/* A shard cut inside expert 5: reading it is a short read at EOF and must fail naming the file
 * and offset; expert 4, wholly before the cut, still reads. */
static void test_truncated_shard(const char *dir, io_backend b)
{
    fixture *fx = malloc(sizeof *fx);
    char sub[512];
    snprintf(sub, sizeof sub, "%s/truncated", dir);
    mkdir(sub, 0755);
    build_fixture(fx, sub);
    const tensor_info *cut_in = fx->experts[MOE_LAYER * N_EXPERTS + 5].t[EXPERT_UP_W];
    uint64_t cut = cut_in->offset + 1000;
    CHECK(truncate(fx->paths[1], (off_t)cut) == 0, "truncate %s", fx->paths[1]);
    expert_reader *r = open_reader(fx, b, 2);
    if (r) {
        uint8_t *slots = new_slots(r, 2);
        uint64_t tags[2];
        int status[2] = {1, 1};
        CHECK(expert_reader_submit(r, MOE_LAYER, 4, slots, 4) == 0, "%s", expert_reader_error(r));
        CHECK(expert_reader_submit(r, MOE_LAYER, 5, slots + expert_reader_slot_bytes(r), 5) == 0, "%s",
              expert_reader_error(r));
        CHECK(expert_reader_reap(r, 2, tags, status, 2) == 2, "reap 2");
        for (int i = 0; i < 2; i++) {
            if (tags[i] == 4) {
                CHECK(status[i] == 0, "expert 4 is before the cut: %d", status[i]);
                CHECK(slot_matches_disk(fx, r, MOE_LAYER, 4, slots), "expert 4 bytes");
            } else {
                CHECK(tags[i] == 5 && status[i] < 0, "expert 5 past EOF: tag %llu status %d",
                      (unsigned long long)tags[i], status[i]);
            }
        }
        const char *e = expert_reader_error(r);
        char cut_text[32];
        snprintf(cut_text, sizeof cut_text, "%llu", (unsigned long long)cut);
        CHECK(strstr(e, fx->paths[1]) && strstr(e, "offset") && strstr(e, cut_text),
              "error must name the file, offset and where it ends (%s): %s", cut_text, e);
        free(slots);
        expert_reader_free(r);
    }
    free(fx);
}

static void test_fallback(const fixture *fx)
{
    char err[512] = "";
    /* O_DIRECT refused (as on a filesystem without it): auto falls back to buffered pread. */
    expert_io_test_refuse(1, 0);
    expert_reader *r = expert_reader_create(&fx->ck, IO_BACKEND_AUTO, 4, err, sizeof err);
    CHECK(r && expert_reader_backend(r) == IO_BACKEND_PREAD, "auto without O_DIRECT: %s", r ? "uring" : err);
    if (r) {
        const char *note = expert_reader_backend_note(r);
        CHECK(strstr(note, "buffered") && strstr(note, "O_DIRECT") && strstr(note, fx->shards[0].path),
              "note must say why: %s", note);
        uint8_t *slots = new_slots(r, N_EXPERTS);
        read_all_and_check(fx, r, slots);
        free(slots);
        expert_reader_free(r);
    }
    r = expert_reader_create(&fx->ck, IO_BACKEND_URING, 4, err, sizeof err);
    CHECK(r == NULL && strstr(err, "O_DIRECT") && strstr(err, fx->shards[0].path), "forced uring without O_DIRECT: %s",
          err);
    expert_reader_free(r);

    /* io_uring refused (seccomp): auto falls back to pread, still O_DIRECT. */
    expert_io_test_refuse(0, 1);
    r = expert_reader_create(&fx->ck, IO_BACKEND_AUTO, 4, err, sizeof err);
    CHECK(r && expert_reader_backend(r) == IO_BACKEND_PREAD, "auto without io_uring: %s", r ? "uring" : err);
    if (r) {
        const char *note = expert_reader_backend_note(r);
        CHECK(strstr(note, "io_uring refused") && strstr(note, "O_DIRECT") && !strstr(note, "buffered"), "note: %s",
              note);
        uint8_t *slots = new_slots(r, N_EXPERTS);
        read_all_and_check(fx, r, slots);
        free(slots);
        expert_reader_free(r);
    }
    r = expert_reader_create(&fx->ck, IO_BACKEND_URING, 4, err, sizeof err);
    CHECK(r == NULL && strstr(err, "io_uring"), "forced uring when refused: %s", err);
    expert_reader_free(r);
    expert_io_test_refuse(0, 0);

    /* Nothing refused: auto picks io_uring. */
    r = expert_reader_create(&fx->ck, IO_BACKEND_AUTO, 4, err, sizeof err);
    CHECK(r && expert_reader_backend(r) == IO_BACKEND_URING, "auto on a disk with O_DIRECT: %s",
          r ? expert_reader_backend_note(r) : err);
    expert_reader_free(r);
}

static void test_bad_create(const fixture *fx)
{
    char err[512] = "";
    CHECK(!expert_reader_create(&fx->ck, IO_BACKEND_AUTO, 0, err, sizeof err) && strstr(err, "queue depth"), "%s", err);
    fixture *bad = malloc(sizeof *bad);
    memcpy(bad, fx, sizeof *bad);
    bad->ck.shards = bad->shards;
    bad->ck.experts = bad->experts;
    snprintf(bad->paths[1], sizeof bad->paths[1], "%s.missing", fx->paths[1]);
    bad->shards[1].path = bad->paths[1];
    CHECK(!expert_reader_create(&bad->ck, IO_BACKEND_PREAD, 2, err, sizeof err) && strstr(err, bad->paths[1]),
          "missing shard: %s", err);
    memcpy(bad, fx, sizeof *bad);
    bad->ck.shards = bad->shards;
    bad->ck.experts = bad->experts;
    bad->experts[MOE_LAYER * N_EXPERTS + 2].piece[0].length -= 8; /* last scale no longer inside */
    CHECK(!expert_reader_create(&bad->ck, IO_BACKEND_AUTO, 2, err, sizeof err) && strstr(err, "down_proj"),
          "tensor outside its piece: %s", err);
    free(bad);
    io_backend b;
    CHECK(io_backend_parse("uring", &b) == 0 && b == IO_BACKEND_URING, "parse uring");
    CHECK(io_backend_parse("pread", &b) == 0 && b == IO_BACKEND_PREAD, "parse pread");
    CHECK(io_backend_parse("auto", &b) == 0 && b == IO_BACKEND_AUTO, "parse auto");
    CHECK(io_backend_parse("mmap", &b) == -1, "parse mmap");
}

static void test_chunks_and_fixed_buffers(const fixture *fx)
{
    expert_reader *r = open_reader(fx, IO_BACKEND_URING, 4);
    if (!r) return;
    CHECK(expert_reader_set_chunk_bytes(r, 4095) == -1, "chunk 4095 accepted");
    CHECK(expert_reader_set_chunk_bytes(r, 4096) == 0, "%s", expert_reader_error(r)); /* 25 reads an expert */
    uint8_t *slots = new_slots(r, N_EXPERTS);
    CHECK(expert_reader_register_slots(r, slots, N_EXPERTS) == 0, "%s", expert_reader_error(r));
    read_all_and_check(fx, r, slots);
    expert_reader_test_inject(r, IO_FAULT_SHORT, 5);
    read_all_and_check(fx, r, slots);
    expert_reader_free(r);
    free(slots);
}

/* Many reads in flight, faults sprinkled: whatever order completions come back in, every tag comes
 * back once with its own bytes. */
static void test_out_of_order(const fixture *fx, io_backend b)
{
    expert_reader *r = open_reader(fx, b, 8);
    if (!r) return;
    expert_reader_set_chunk_bytes(r, 16384);
    uint8_t *slots = new_slots(r, N_EXPERTS);
    int inversions = 0;
    for (int round = 0; round < 12; round++) {
        expert_reader_test_inject(r, (io_fault)(1 + round % 4), 1 + round % 3);
        inversions += read_all_and_check(fx, r, slots);
    }
    printf("  %s: %d out-of-order completions over 12 rounds\n", io_backend_name(b), inversions);
    free(slots);
    expert_reader_free(r);
}

/* The same reads on tmpfs, where O_DIRECT is refused before Linux 6.6 and accepted after: auto
 * must pick a working backend either way and say which. */
static void test_tmpfs(void)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/dev/shm/dsspec_test_io_%d", (int)getpid());
    if (mkdir(dir, 0700) != 0) {
        printf("tmpfs case not run: cannot create %s: %s\n", dir, strerror(errno));
        return;
    }
    fixture *fx = malloc(sizeof *fx);
    build_fixture(fx, dir);
    expert_reader *r = open_reader(fx, IO_BACKEND_AUTO, 4);
    if (r) {
        printf("  tmpfs: %s\n", expert_reader_backend_note(r));
        uint8_t *slots = new_slots(r, N_EXPERTS);
        read_all_and_check(fx, r, slots);
        free(slots);
        expert_reader_free(r);
    }
    r = open_reader(fx, IO_BACKEND_PREAD, 4);
    if (r) {
        uint8_t *slots = new_slots(r, N_EXPERTS);
        read_all_and_check(fx, r, slots);
        free(slots);
        expert_reader_free(r);
    }
    unlink(fx->paths[0]);
    unlink(fx->paths[1]);
    rmdir(dir);
    free(fx);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_io WORKDIR\n");
        return 2;
    }
    char dir[512];
    snprintf(dir, sizeof dir, "%s/test_io_data", argv[1]);
    mkdir(dir, 0755);
    fixture *fx = malloc(sizeof *fx);
    build_fixture(fx, dir);
    CHECK(fx->experts[MOE_LAYER * N_EXPERTS + STRADDLER].npieces == 2, "the fixture must have a straddler");

    const io_backend backends[] = {IO_BACKEND_URING, IO_BACKEND_PREAD};
    for (int i = 0; i < 2; i++) {
        printf("backend %s\n", io_backend_name(backends[i]));
        test_read_everything(fx, backends[i]);
        test_queue_full_and_bad_requests(fx, backends[i]);
        test_faults(fx, backends[i]);
        test_truncated_shard(dir, backends[i]);
        test_out_of_order(fx, backends[i]);
    }
    test_fallback(fx);
    test_bad_create(fx);
    test_chunks_and_fixed_buffers(fx);
    free(fx);
    test_tmpfs();
    if (test_failures) {
        fprintf(stderr, "test_io: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_io: all passed\n");
    return 0;
}
