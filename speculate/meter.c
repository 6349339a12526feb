/* The expert meter: counts the expert loads of each pass (a request for an expert without a cache
 * slot), which of them only a draft needed, and the time the pass waited for reads; and drops a
 * verify pass's draft row before a layer whose predicted experts for it would be loaded. The
 * prediction is the model's router lookahead (forward_request.prefetch): during layer l the next
 * layer's router is applied to each row's residual stream and the guess comes to ep->prefetch,
 * where the meter keeps it and passes on only the guesses that cannot evict anything for a draft. */
#include <string.h>
#include <time.h>
#include "speculate/speculate_internal.h"

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int is_resident(const expert_meter *mt, int layer, int e)
{
    return !mt->resident || mt->resident(mt->resident_ctx, layer, e);
}

static int free_slots(const expert_meter *mt)
{
    return mt->free_slots ? mt->free_slots(mt->resident_ctx) : 0;
}

/* Of `draft` loads that come after `own` others, those that find no free slot left. */
static int evicting(const expert_meter *mt, int own, int draft)
{
    int room = free_slots(mt) - own;
    return draft - (room > 0 ? (room < draft ? room : draft) : 0);
}

static int listed(const int *ids, int n, int e)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == e) return 1;
    return 0;
}

/* Experts of `row` (k of them) that row 0's list does not have and that are not resident. */
static int draft_only_misses(const expert_meter *mt, int layer, const int *row, const int *row0, int k)
{
    int n = 0;
    for (int i = 0; i < k; i++) n += !listed(row0, k, row[i]) && !is_resident(mt, layer, row[i]);
    return n;
}

static void meter_want(void *self, int layer, const int *experts, int n)
{
    expert_meter *mt = self;
    int miss = 0;
    for (int i = 0; i < n; i++) miss += !is_resident(mt, layer, experts[i]);
    int draft = 0;
    if (mt->kind == PASS_DRAFT) draft = miss;
    else if (mt->kind == PASS_VERIFY && mt->rows_now == 2 && mt->route_layer == layer)
        draft = draft_only_misses(mt, layer, mt->routes[1], mt->routes[0], mt->top_k);
    mt->requests += n;
    mt->misses += miss;
    mt->draft_misses += draft;
    mt->draft_evictions += evicting(mt, miss - draft, draft);
    mt->inner->want(mt->inner->self, layer, experts, n);
}

static int meter_acquire_any(void *self, int layer, const int *experts, int n, int *which, expert_weights *out)
{
    expert_meter *mt = self;
    double t = seconds_now();
    int rc = mt->inner->acquire_any(mt->inner->self, layer, experts, n, which, out);
    mt->wait_s += seconds_now() - t;
    return rc;
}

static int meter_acquire_ready(void *self, int layer, const int *experts, int n, int *which, expert_weights *out)
{
    expert_meter *mt = self;
    return mt->inner->acquire_ready(mt->inner->self, layer, experts, n, which, out);
}

static int meter_holds_layer(void *self, int layer)
{
    expert_meter *mt = self;
    return mt->inner->holds_layer(mt->inner->self, layer);
}

static void meter_release(void *self, int layer, int expert)
{
    expert_meter *mt = self;
    mt->inner->release(mt->inner->self, layer, expert);
}

/* A verify pass's lookahead lists its rows rank by rank (row 0's best, row 1's best, ...) and may
 * reach past the next layer (--prefetch-depth): the nearest layer guessed is kept for keep_rows.
 * Only row 0's guesses are passed on: a guess may evict, and a draft row must not push out what
 * row 0 and later tokens use. */
static void meter_prefetch(void *self, int layer, const int *experts, int n)
{
    expert_meter *mt = self;
    int row0[MODEL_MAX_ROUTED_EXPERTS];
    if (mt->kind == PASS_VERIFY && mt->rows_now == 2 && n % 2 == 0 && n / 2 <= MODEL_MAX_ROUTED_EXPERTS) {
        int per_row = n / 2, keep = per_row < mt->top_k ? per_row : mt->top_k;
        if (mt->guess_layer <= mt->layer_now || layer < mt->guess_layer) {
            mt->guess_layer = layer;
            mt->guess_n = keep;
            for (int r = 0; r < keep; r++) {
                mt->guess[0][r] = experts[2 * r];
                mt->guess[1][r] = experts[2 * r + 1];
            }
        }
        for (int r = 0; r < per_row; r++) row0[r] = experts[2 * r];
        experts = row0;
        n = per_row;
    }
    if (mt->pass_prefetch && mt->inner->prefetch) mt->inner->prefetch(mt->inner->self, layer, experts, n);
}

static const char *meter_error(void *self)
{
    expert_meter *mt = self;
    return mt->inner->error ? mt->inner->error(mt->inner->self) : "expert read failed";
}

static void meter_route(void *ctx, int layer, int row, const int *experts, int k)
{
    expert_meter *mt = ctx;
    if (row < 2 && k <= METER_MAX_K) {
        mt->route_layer = layer;
        memcpy(mt->routes[row], experts, (size_t)k * sizeof(int));
    }
    if (mt->user_route) mt->user_route(mt->user_route_ctx, layer, row, experts, k);
}

/* Before layer `layer` of a verify pass: the draft row goes on unless the lookahead predicts that
 * the loads only it needs and that would push out a cached expert (a load into a free slot costs
 * its read only) add up this pass to more than drop_max_misses. Once dropped it stays out. */
static int meter_keep_rows(void *ctx, int layer, int nb)
{
    expert_meter *mt = ctx;
    mt->layer_now = layer;
    if (nb < 2 || !mt->drop_enabled || mt->guess_layer != layer) return mt->rows_now = nb;
    int own = 0;
    for (int i = 0; i < mt->guess_n; i++) own += !is_resident(mt, layer, mt->guess[0][i]);
    mt->predicted += evicting(mt, own, draft_only_misses(mt, layer, mt->guess[1], mt->guess[0], mt->guess_n));
    if (mt->predicted > mt->drop_max_misses) {
        mt->dropped = 1;
        return mt->rows_now = 1;
    }
    return mt->rows_now = nb;
}

void meter_init(expert_meter *mt, expert_provider *inner, const gen_options *o, int top_k)
{
    memset(mt, 0, sizeof *mt);
    mt->self = (expert_provider){.self = mt, .want = meter_want, .acquire_any = meter_acquire_any,
                                 .release = meter_release, .prefetch = meter_prefetch, .error = meter_error};
    mt->inner = inner;
    if (inner->acquire_ready) mt->self.acquire_ready = meter_acquire_ready;
    if (inner->holds_layer) mt->self.holds_layer = meter_holds_layer;
    mt->resident = o->expert_resident;
    mt->free_slots = o->expert_free_slots;
    mt->resident_ctx = o->resident_ctx;
    mt->pass_prefetch = o->prefetch;
    mt->top_k = top_k;
    mt->user_route = o->on_route;
    mt->user_route_ctx = o->route_ctx;
}

void meter_begin(expert_meter *mt, meter_pass kind, int drop_enabled, int drop_max_misses, forward_request *req)
{
    mt->kind = kind;
    mt->drop_enabled = drop_enabled && kind == PASS_VERIFY && mt->top_k <= METER_MAX_K;
    mt->drop_max_misses = drop_max_misses;
    mt->rows_now = kind == PASS_VERIFY ? 2 : 1;
    mt->route_layer = mt->guess_layer = -1;
    mt->layer_now = 0;
    mt->dropped = mt->predicted = 0;
    mt->requests = mt->misses = mt->draft_misses = mt->draft_evictions = 0;
    mt->wait_s = 0;
    if (!req) return;
    req->on_route = meter_route;
    req->route_ctx = mt;
    /* The lookahead runs for a verify pass even without --prefetch: the meter needs the guess and
     * passes nothing on then. */
    req->prefetch = mt->pass_prefetch > 0 ? mt->pass_prefetch : mt->drop_enabled;
    req->keep_rows = mt->drop_enabled ? meter_keep_rows : NULL;
    req->keep_ctx = mt;
}
