/* The only door from the forward pass to routed-expert weights. core/ calls it and cannot depend on
 * what fills it, so it is a table. Two things fill it:
 *   expert_cache_provider (cache/expert_cache.h): expert_cache_want, _acquire_any, _acquire_ready,
 *     _release, _prefetch, _holds_layer, _error — bounded RAM over the io_uring reader (io/expert_io.h), what the
 *     engine uses;
 *   expert_direct_provider (core/expert_direct.h): reads each expert on every use, the reference
 *     path of `dsspec eval`.
 * The forward pass never learns whether an expert came from RAM, disk or a prefetch. */
#ifndef DSSPEC_EXPERT_PROVIDER_H
#define DSSPEC_EXPERT_PROVIDER_H

#include <stdint.h>

/* Pointers into memory the provider owns, valid from acquire until release. FP8 E4M3 weights
 * row-major; scales are the F32 weight_scale_inv grids ([ceil(rows/128)][ceil(cols/128)]). */
typedef struct {
    const uint8_t *gate, *up, *down;           /* [I][H], [I][H], [H][I] */
    const float *gate_scale, *up_scale, *down_scale;
} expert_weights;

typedef struct expert_provider {
    void *self;
    /* The experts layer `layer` is about to use (the union over the batch). A cache starts reads
     * for the misses now so that they overlap with computing the hits. */
    void (*want)(void *self, int layer, const int *experts, int n);
    /* Pin one of experts[0..n) that is ready (waiting only if none is); *which is its index in the
     * list. Returns 0, or -1 on an I/O error (message from error()). */
    int (*acquire_any)(void *self, int layer, const int *experts, int n, int *which, expert_weights *out);
    /* The same without waiting: 0 pinned, 1 when none is ready now, -1 on an I/O error. A provider
     * that can hold several experts pinned at once fills it; NULL means one at a time, and the
     * forward pass then takes and runs experts one by one. */
    int (*acquire_ready)(void *self, int layer, const int *experts, int n, int *which, expert_weights *out);
    void (*release)(void *self, int layer, int expert);
    /* A guess for a later layer (router lookahead, MTP draft). May be ignored; never pins. */
    void (*prefetch)(void *self, int layer, const int *experts, int n);
    /* 1 when every expert of the layer holds a slot (read or being read), so a guess for it would
     * change nothing and the forward pass need not compute one. NULL: never known. */
    int (*holds_layer)(void *self, int layer);
    const char *(*error)(void *self);
} expert_provider;

#endif
