/* --mtp auto's try schedule; speculate_internal.h says when a try comes and why the gap grows. */
#include "speculate/speculate_internal.h"

void explore_schedule_init(explore_schedule *s)
{
    s->since = 0;
    s->gap = EXPLORE_GAP_MIN;
    s->last_pick = -1;
    s->budget = 0;
}

int explore_schedule_step(explore_schedule *s, int pick, double step_cost, double loss)
{
    if (s->last_pick >= 0 && pick != s->last_pick) s->gap = EXPLORE_GAP_MIN;
    s->last_pick = pick;
    s->budget += step_cost / EXPLORE_SHARE;
    if (loss < 0) loss = 0;
    ++s->since;
    if ((s->since >= s->gap && s->budget >= loss) || s->since >= EXPLORE_FORCED * s->gap) {
        s->since = 0;
        s->budget -= loss;
        s->gap = 2 * s->gap < EXPLORE_GAP_CAP ? 2 * s->gap : EXPLORE_GAP_CAP;
        return 1;
    }
    return 0;
}
