/* When --mtp auto tries the mode its estimates do not pick (a draft when plain looks better, a
 * plain step when drafting does): estimates go stale (a cache that fills or empties, a prompt
 * whose acceptance changes, a machine that gets busy), and only a try measures the other mode.
 * Tries are spaced by a gap and paid from a budget; the gap doubles while tries leave the pick as
 * it was and falls back to the minimum when the pick changes. */
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
    if ((s->since >= s->gap && s->budget >= loss) || s->since >= 4 * s->gap) {
        s->since = 0;
        s->budget -= loss;
        s->gap = 2 * s->gap < EXPLORE_GAP_CAP ? 2 * s->gap : EXPLORE_GAP_CAP;
        return 1;
    }
    return 0;
}
