/* Every routed expert of the R1-format fixtures (tests/fixtures/<name>, opened by checkpoint_open),
 * read through both backends in a shuffled order with the queue kept full, compared tensor by
 * tensor with checkpoint_read (a plain buffered pread of each tensor's range).
 * usage: test_io_fixtures FIXTURE_DIR... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test_check.h"
#include "io/expert_io.h"


typedef struct {
    int layer, expert;
} expert_id;

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t rng_next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int tensors_match(const checkpoint *ck, expert_reader *r, expert_id id, const void *slot)
{
    expert_weights w;
    expert_reader_view(r, id.layer, id.expert, slot, &w);
    const void *got[EXPERT_NTENSORS] = {w.gate, w.gate_scale, w.up, w.up_scale, w.down, w.down_scale};
    const expert_extent *x = checkpoint_expert(ck, id.layer, id.expert);
    for (int k = 0; k < EXPERT_NTENSORS; k++) {
        const tensor_info *t = x->t[k];
        uint8_t *want = malloc(t->nbytes);
        char err[512];
        int ok = checkpoint_read(ck, t, 0, want, t->nbytes, err, sizeof err) == 0 && memcmp(want, got[k], t->nbytes) == 0;
        free(want);
        if (!ok) {
            fprintf(stderr, "  %s differs from checkpoint_read\n", t->name);
            return 0;
        }
    }
    return 1;
}

static int list_experts(const checkpoint *ck, expert_id **out, int *straddlers)
{
    int layers = ck->cfg.num_hidden_layers + ck->cfg.num_nextn_predict_layers, n = 0;
    *out = malloc((size_t)layers * ck->cfg.n_routed_experts * sizeof **out);
    *straddlers = 0;
    for (int l = 0; l < layers; l++)
        for (int e = 0; e < ck->cfg.n_routed_experts; e++) {
            const expert_extent *x = checkpoint_expert(ck, l, e);
            if (!x || x->npieces == 0) continue;
            (*out)[n++] = (expert_id){l, e};
            if (x->npieces == 2) (*straddlers)++;
        }
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rng_next() % (uint64_t)(i + 1));
        expert_id tmp = (*out)[i];
        (*out)[i] = (*out)[j];
        (*out)[j] = tmp;
    }
    return n;
}

static void read_all(const checkpoint *ck, io_backend b, int qd, const expert_id *ids, int n)
{
    char err[512] = "";
    expert_reader *r = expert_reader_create(ck, b, qd, err, sizeof err);
    CHECK(r != NULL, "%s: %s", ck->dir, err);
    if (!r) return;
    CHECK(expert_reader_backend(r) == b, "%s: asked %s, got %s", ck->dir, io_backend_name(b),
          expert_reader_backend_note(r));
    size_t sb = expert_reader_slot_bytes(r);
    uint8_t *slots = aligned_alloc(4096, sb * (size_t)qd);
    int *free_slot = malloc((size_t)qd * sizeof *free_slot), n_free = qd;
    for (int i = 0; i < qd; i++) free_slot[i] = i;
    int next = 0, done = 0;
    while (done < n) {
        while (next < n && n_free > 0) {
            int s = free_slot[n_free - 1];
            /* tag = index into ids * qd + slot */
            if (expert_reader_submit(r, ids[next].layer, ids[next].expert, slots + (size_t)s * sb,
                                     (uint64_t)next * (uint64_t)qd + (uint64_t)s) != 0)
                break;
            n_free--;
            next++;
        }
        uint64_t tags[64];
        int status[64];
        int got = expert_reader_reap(r, 1, tags, status, 64);
        CHECK(got >= 1, "reap: %s", expert_reader_error(r));
        if (got < 1) break;
        for (int i = 0; i < got; i++) {
            int idx = (int)(tags[i] / (uint64_t)qd), s = (int)(tags[i] % (uint64_t)qd);
            CHECK(status[i] == 0, "layer %d expert %d: %s", ids[idx].layer, ids[idx].expert, expert_reader_error(r));
            CHECK(tensors_match(ck, r, ids[idx], slots + (size_t)s * sb), "%s %s qd %d: layer %d expert %d", ck->dir,
                  io_backend_name(b), qd, ids[idx].layer, ids[idx].expert);
            free_slot[n_free++] = s;
            done++;
        }
    }
    expert_reader_stats st = expert_reader_get_stats(r);
    CHECK(st.reads_completed == (uint64_t)n && st.errors == 0, "completed %llu of %d, errors %llu",
          (unsigned long long)st.reads_completed, n, (unsigned long long)st.errors);
    free(free_slot);
    free(slots);
    expert_reader_free(r);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_io_fixtures FIXTURE_DIR...\n");
        return 2;
    }
    for (int a = 1; a < argc; a++) {
        char err[512] = "";
        checkpoint *ck = checkpoint_open(argv[a], err, sizeof err);
        CHECK(ck != NULL, "checkpoint_open %s: %s", argv[a], err);
        if (!ck) continue;
        expert_id *ids;
        int straddlers, n = list_experts(ck, &ids, &straddlers);
        CHECK(n > 0 && straddlers > 0, "%s: %d experts, %d straddling (the fixtures have at least one)", argv[a], n,
              straddlers);
        printf("%s: %d experts (%d straddling a shard boundary)\n", argv[a], n, straddlers);
        read_all(ck, IO_BACKEND_URING, 8, ids, n);
        read_all(ck, IO_BACKEND_PREAD, 4, ids, n);
        free(ids);
        checkpoint_close(ck);
    }
    if (test_failures) {
        fprintf(stderr, "test_io_fixtures: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_io_fixtures: all passed\n");
    return 0;
}
