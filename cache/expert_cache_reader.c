/* The live cache over io/expert_io.h: the production reader behind expert_cache_io. Kept in its
 * own file so the cache can be linked and tested with other readers. */
#include <stdlib.h>
#include "cache/cache_internal.h"

typedef struct { const checkpoint *ck; expert_reader *r; } reader_ctx;

static int rd_submit(void *io, int layer, int expert, void *slot, uint64_t tag)
{
    return expert_reader_submit(((reader_ctx *)io)->r, layer, expert, slot, tag);
}

static int rd_reap(void *io, int min_complete, uint64_t *tags, int *status, int max)
{
    return expert_reader_reap(((reader_ctx *)io)->r, min_complete, tags, status, max);
}

static int rd_inflight(void *io) { return expert_reader_inflight(((reader_ctx *)io)->r); }

static void rd_view(void *io, int layer, int expert, const void *slot, expert_weights *out)
{
    expert_reader_view(((reader_ctx *)io)->r, layer, expert, slot, out);
}

static const char *rd_error(void *io) { return expert_reader_error(((reader_ctx *)io)->r); }

/* Payload bytes (what the checkpoint stores), not the 4 KiB-widened transfer: the decode cost. */
static uint64_t rd_expert_bytes(void *io, int layer, int expert)
{
    const expert_extent *x = checkpoint_expert(((reader_ctx *)io)->ck, layer, expert);
    uint64_t n = 0;
    for (int i = 0; x && i < x->npieces; i++) n += x->piece[i].length;
    return n;
}

static const expert_cache_io reader_io = {rd_submit, rd_reap, rd_inflight, rd_view, rd_error, rd_expert_bytes};

expert_cache *expert_cache_create(const checkpoint *ck, expert_reader *reader, int n_slots,
                                  cache_policy_kind policy, char *err, size_t errlen)
{
    if (!ck || !reader) { snprintf(err, errlen, "expert cache: no checkpoint or reader"); return NULL; }
    int layers = ck->cfg.num_hidden_layers + ck->cfg.num_nextn_predict_layers;
    reader_ctx *ctx = malloc(sizeof *ctx);
    if (!ctx) { snprintf(err, errlen, "expert cache: out of memory"); return NULL; }
    *ctx = (reader_ctx){ck, reader};
    expert_cache *c = expert_cache_create_io(&reader_io, ctx, layers, ck->cfg.n_routed_experts,
                                             expert_reader_slot_bytes(reader), n_slots, policy, err, errlen);
    if (!c) { free(ctx); return NULL; }
    expert_cache_own_io(c, ctx);
    /* Fixed buffers let io_uring pin the arena once instead of on every read (a large CPU saving at
     * low queue depth). Refused registration (memlock limits) only costs that saving. */
    (void)expert_reader_register_slots(reader, expert_cache_arena_base(c), n_slots);
    return c;
}
