/* --mtp auto's try schedule (speculate/explore.c) on hand-worked step sequences: the steps at which
 * it tries the mode its estimates do not pick. */
#include <stdio.h>
#include <string.h>
#include "speculate/speculate_internal.h"
#include "tests/test_check.h"

/* The steps (1-based) of the first n tries over `steps` steps; pick_at(step) gives each step's pick. */
static int tries(int steps, double step_cost, double loss, int (*pick_at)(int), int *out, int n)
{
    explore_schedule s;
    explore_schedule_init(&s);
    int got = 0;
    for (int t = 1; t <= steps && got < n; t++)
        if (explore_schedule_step(&s, pick_at(t), step_cost, loss)) out[got++] = t;
    return got;
}

static int always_plain(int step) { (void)step; return 0; }
static int flips_at_50(int step) { return step >= 50; }

static void check(const char *what, const int *got, int n_got, const int *want, int n_want)
{
    int same = n_got == n_want && !memcmp(got, want, (size_t)n_want * sizeof(int));
    CHECK(same, "%s: %d tries, first at %d; expected %d, first at %d", what, n_got, n_got ? got[0] : -1, n_want, want[0]);
    if (!same)
        for (int i = 0; i < n_got || i < n_want; i++)
            fprintf(stderr, "  try %d: step %d, expected %d\n", i + 1, i < n_got ? got[i] : -1, i < n_want ? want[i] : -1);
}

int main(void)
{
    int got[16];
    /* Budget never short (no loss): tries at gaps of 32, 64, 128, 256, then 512 each. */
    const int free_tries[] = {32, 96, 224, 480, 992, 1504, 2016};
    check("a free try, the pick never changing", got, tries(2100, 1.0, 0.0, always_plain, got, 16), free_tries, 7);

    /* A try that would lose more than the budget ever holds: only the forced ones, at 16 x the gap
     * (512 steps, then 1024, 2048, 4096, 8192 apart). */
    const int forced[] = {512, 1536, 3584, 7680, 15872};
    check("a try too dear for the budget", got, tries(16000, 1e-9, 1.0, always_plain, got, 16), forced, 5);

    /* The budget (1/64 of each step's cost) pays a try worth 1 step's cost after 64 steps: the
     * first at 64 although the gap allows 32, the next 64 steps on (the gap, 64, and the budget
     * agree), then 128 and 256 apart as the gap grows past what the budget needs. */
    const int paid[] = {64, 128, 256, 512, 1024};
    check("a try worth one step", got, tries(1100, 1.0, 1.0, always_plain, got, 16), paid, 5);

    /* The pick changes at step 50: the gap, 64 after the try at 32, falls back to 32, so the next
     * try comes at 64 instead of 96; then 64 and 128 apart again. */
    const int flipped[] = {32, 64, 128, 256};
    check("the pick changing at step 50", got, tries(300, 1.0, 0.0, flips_at_50, got, 16), flipped, 4);

    if (!test_failures) printf("test_explore: every schedule as worked out by hand\n");
    return test_failures ? 1 : 0;
}
