/* Private to speculate/: the expert meter, an expert_provider wrapped around the engine's, that sees
 * every expert request of the decode loop's passes and knows which belong to a draft. */
#ifndef DSSPEC_SPECULATE_INTERNAL_H
#define DSSPEC_SPECULATE_INTERNAL_H

#include "speculate/speculate.h"

enum { METER_MAX_K = 16 };

/* What a pass is, for the meter: every row the main model's (prefill, plain, row 1 of a verify);
 * a verify pass whose row 1 is a draft; the MTP layer drafting (all of its experts the draft's). */
typedef enum { PASS_PLAIN = 0, PASS_VERIFY, PASS_DRAFT } meter_pass;

typedef struct {
    expert_provider self;     /* the table the forward pass calls: entries below, self = this */
    expert_provider *inner;   /* the engine's */
    int (*resident)(void *ctx, int layer, int expert); /* NULL: the meter counts no misses */
    int (*free_slots)(void *ctx);                       /* NULL: none free */
    void *resident_ctx;
    int pass_prefetch;        /* the caller asked for router-lookahead prefetch (--prefetch) */
    int top_k;
    route_observer user_route;
    void *user_route_ctx;
    /* the current pass */
    meter_pass kind;
    int drop_enabled;         /* a verify pass may drop its draft row */
    int drop_max_misses;      /* drop when the draft row's predicted evicting loads in this pass
                                 would exceed this */
    int predicted;            /* the draft row's predicted evicting loads so far this pass */
    int rows_now;
    int route_layer, routes[2][METER_MAX_K];  /* rows 0 and 1 of the layer being computed */
    int guess_layer, guess_n, guess[2][METER_MAX_K];  /* rows 0 and 1 of the nearest guessed layer */
    int layer_now;            /* the layer being computed (keep_rows is asked before each) */
    int dropped;              /* the draft row left this pass */
    /* per pass, reset by meter_begin */
    int requests, misses, draft_misses;
    int draft_evictions;      /* draft misses that found no free slot: each pushed out an entry */
    double wait_s;
} expert_meter;

void meter_init(expert_meter *mt, expert_provider *inner, const gen_options *o, int top_k);
/* Starts a pass of the given kind; the request fields it needs (route observer, prefetch, row
 * dropping) are set in req. */
void meter_begin(expert_meter *mt, meter_pass kind, int drop_enabled, int drop_max_misses, forward_request *req);

#endif
