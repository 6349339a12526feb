/* Private to speculate/: the expert meter, an expert_provider wrapped around the engine's, that sees
 * every expert request of the decode loop's passes and knows which belong to a draft. */
#ifndef DSSPEC_SPECULATE_INTERNAL_H
#define DSSPEC_SPECULATE_INTERNAL_H

#include "speculate/speculate.h"

enum { METER_MAX_K = 16 };

/* --mtp auto's tries of the mode its estimates do not pick (speculate/explore.c). A try comes at
 * most once per gap steps and only while what tries lost (estimated) stays under 1/EXPLORE_SHARE
 * of the run's time, so a try that costs ten plain steps waits ten times longer than one that
 * costs one; and at least once per EXPLORE_FORCED x gap steps whatever the budget, so that an
 * estimate taken at a bad moment (the cold cache of the first steps, a preempted pass) does not
 * stand for the whole run. Not more often than that: a try reads MTP-layer experts no plain step
 * needs, cold, and on the embedded model with everything cached the tries forced at 4 x gap cost
 * 2-5% of a 400-token run where the budget allowed none (docs/BENCHMARKS.md, MTP off / on / auto). The gap
 * starts at EXPLORE_GAP_MIN and doubles with each try, up to EXPLORE_GAP_CAP, while the pick stays
 * the same: a try's estimated loss misses what it does to a small cache (a draft pass reads the
 * MTP layer's experts over hot ones; measured on the embedded model at 12 slots, a try every 32
 * steps cost 10% of the run where its estimate said under 2%). */
enum { EXPLORE_GAP_MIN = 32, EXPLORE_GAP_CAP = 512, EXPLORE_SHARE = 64, EXPLORE_FORCED = 16 };
typedef struct {
    int since;       /* steps since the last try */
    int gap;
    int last_pick;   /* the previous step's pick (1: draft), -1 before the first */
    double budget;   /* seconds tries may still lose */
} explore_schedule;
void explore_schedule_init(explore_schedule *s);
/* One step: pick is what the estimates prefer, step_cost the picked mode's estimated seconds, loss
 * what a step of the other mode would lose against it. 1: try the other mode now. */
int explore_schedule_step(explore_schedule *s, int pick, double step_cost, double loss);

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
