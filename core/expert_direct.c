#include <stdio.h>
#include <stdlib.h>
#include "core/expert_direct.h"

struct expert_direct {
    const checkpoint *ck;
    void *held[EXPERT_NTENSORS];  /* one expert pinned at a time: the forward pass releases before the next */
    int held_layer, held_expert;
    unsigned long long experts_read, bytes_read;
    char err[512];
};

expert_direct *expert_direct_create(const checkpoint *ck)
{
    expert_direct *d = calloc(1, sizeof *d);
    if (d) { d->ck = ck; d->held_layer = d->held_expert = -1; }
    return d;
}

static void drop_held(expert_direct *d)
{
    for (int i = 0; i < EXPERT_NTENSORS; i++) { free(d->held[i]); d->held[i] = NULL; }
    d->held_layer = d->held_expert = -1;
}

void expert_direct_free(expert_direct *d)
{
    if (!d) return;
    drop_held(d);
    free(d);
}

static void direct_want(void *self, int layer, const int *experts, int n) { (void)self; (void)layer; (void)experts; (void)n; }
static void direct_prefetch(void *self, int layer, const int *experts, int n) { (void)self; (void)layer; (void)experts; (void)n; }

static int direct_acquire_any(void *self, int layer, const int *experts, int n, int *which, expert_weights *out)
{
    expert_direct *d = self;
    if (n <= 0) { snprintf(d->err, sizeof d->err, "acquire of an empty expert list"); return -1; }
    drop_held(d);
    const expert_extent *x = checkpoint_expert(d->ck, layer, experts[0]);
    if (!x || x->npieces == 0) {
        snprintf(d->err, sizeof d->err, "%s: expert %d of layer %d is not in the checkpoint", d->ck->dir, experts[0], layer);
        return -1;
    }
    for (int i = 0; i < EXPERT_NTENSORS; i++) {
        const tensor_info *t = x->t[i];
        if (!(d->held[i] = malloc(t->nbytes))) { snprintf(d->err, sizeof d->err, "out of memory reading %s", t->name); return -1; }
        if (checkpoint_read(d->ck, t, 0, d->held[i], t->nbytes, d->err, sizeof d->err)) return -1;
        d->bytes_read += t->nbytes;
    }
    d->experts_read++;
    d->held_layer = layer;
    d->held_expert = experts[0];
    *which = 0;
    out->gate = d->held[EXPERT_GATE_W];
    out->gate_scale = d->held[EXPERT_GATE_S];
    out->up = d->held[EXPERT_UP_W];
    out->up_scale = d->held[EXPERT_UP_S];
    out->down = d->held[EXPERT_DOWN_W];
    out->down_scale = d->held[EXPERT_DOWN_S];
    return 0;
}

static void direct_release(void *self, int layer, int expert)
{
    expert_direct *d = self;
    if (layer == d->held_layer && expert == d->held_expert) drop_held(d);
}

static const char *direct_error(void *self) { return ((expert_direct *)self)->err; }

expert_provider expert_direct_provider(expert_direct *d)
{
    /* one expert held at a time: no acquire_ready */
    return (expert_provider){.self = d, .want = direct_want, .acquire_any = direct_acquire_any, .release = direct_release,
                             .prefetch = direct_prefetch, .error = direct_error};
}

void expert_direct_counts(const expert_direct *d, unsigned long long *experts, unsigned long long *bytes)
{
    *experts = d->experts_read;
    *bytes = d->bytes_read;
}
