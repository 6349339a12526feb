/* noaux_tc routing on hand-worked cases. sig(x) = 1/(1+e^-x); sig(x) + sig(-x) = 1. */
#include <math.h>
#include <string.h>
#include "core/router.h"
#include "tests/engine/engine_test.h"

static double sig(double x) { return 1.0 / (1.0 + exp(-x)); }

static void route(const router_params *p, const float *logits, const float *bias, int *ids, float *w)
{
    float scratch[2 * 64];
    router_select(p, logits, bias, ids, w, scratch);
}

#define CHECK_IDS(ids, n, ...) do { int want_[] = {__VA_ARGS__}; CHECK(!memcmp(ids, want_, n * sizeof(int)), \
    "%s: got %d %d ...", #ids, ids[0], ids[1]); } while (0)
#define CHECK_NEAR(a, b) CHECK(fabs((a) - (b)) < 1e-6, "%s = %.9f, want %.9f", #a, (double)(a), (double)(b))

int main(void)
{
    float zero[64] = {0}, w[8];
    int ids[8];

    /* 1. Group limiting beats the single best expert. Groups of 2:
     *    g0 = sig(0)+sig(0) = 1.0, g1 = sig(3)+sig(-3) = 1.0, g2 = 2 sig(1) = 1.462, g3 = sig(-1)+sig(2) = 1.150.
     *    Keep g2, g3 -> candidates 4..7; best two: 7 (sig 2 = .881) and a tie 4/5 (sig 1 = .731) -> 4.
     *    Expert 2 (sig 3 = .953, the best overall) is excluded with its group. */
    router_params p = {8, 4, 2, 2, 1, 2.5};
    float l1[8] = {0, 0, 3, -3, 1, 1, -1, 2};
    route(&p, l1, zero, ids, w);
    CHECK_IDS(ids, 2, 4, 7);
    CHECK_NEAR(w[0], 2.5 * sig(1) / (sig(1) + sig(2)));
    CHECK_NEAR(w[1], 2.5 * sig(2) / (sig(1) + sig(2)));

    /* 2. The bias steers the choice but not the weights: bias[6] = +1 -> choice 6 = 1.269;
     *    g3 = 1.269 + .881 = 2.150 beats g2 = 1.462; best two choices 6 then 7; weights from sig alone. */
    float b2[8] = {0, 0, 0, 0, 0, 0, 1, 0};
    route(&p, l1, b2, ids, w);
    CHECK_IDS(ids, 2, 6, 7);
    CHECK_NEAR(w[0], 2.5 * sig(-1) / (sig(-1) + sig(2)));
    CHECK_NEAR(w[1], 2.5 * sig(2) / (sig(-1) + sig(2)));

    /* 3. A group is scored by its TWO best: groups of 4, keep 1 group, top-2.
     *    gA = [5, -5, -5, -5]: sig(5)+sig(-5) = 1.0; gB = [1, 1, 1, -5]: 2 sig(1) = 1.462 -> gB.
     *    Three-way tie at sig(1) in gB -> lowest ids 4, 5. */
    router_params p3 = {8, 2, 1, 2, 1, 1.0};
    float l3[8] = {5, -5, -5, -5, 1, 1, 1, -5};
    route(&p3, l3, zero, ids, w);
    CHECK_IDS(ids, 2, 4, 5);
    CHECK_NEAR(w[0], 0.5);
    CHECK_NEAR(w[1], 0.5);

    /* 4. All equal: groups tie -> lowest groups 0, 1; experts tie -> lowest ids; norm off -> weight =
     *    sig(0) * scaling = 0.5 * 2.5. */
    router_params p4 = {8, 4, 2, 3, 0, 2.5};
    route(&p4, zero, zero, ids, w);
    CHECK_IDS(ids, 3, 0, 1, 2);
    for (int i = 0; i < 3; i++) CHECK_NEAR(w[i], 1.25);

    /* 5. A negative bias can push a strong expert out even inside a kept group: 1 group of 4, top-2,
     *    logits [4, 3, 2, 1], bias[0] = -2 -> choices .982-2, .953, .881, .731 -> experts 1, 2. */
    router_params p5 = {4, 1, 1, 2, 1, 1.0};
    float l5[4] = {4, 3, 2, 1}, b5[4] = {-2, 0, 0, 0};
    route(&p5, l5, b5, ids, w);
    CHECK_IDS(ids, 2, 1, 2);
    CHECK_NEAR(w[0], sig(3) / (sig(3) + sig(2)));

    /* 6. Output is in ascending id order whatever the selection order: top-3 picks 7, 0, 3 by value. */
    router_params p6 = {8, 1, 1, 3, 1, 1.0};
    float l6[8] = {2, -1, -1, 1, -1, -1, -1, 3};
    route(&p6, l6, zero, ids, w);
    CHECK_IDS(ids, 3, 0, 3, 7);
    CHECK_NEAR(w[2], sig(3) / (sig(3) + sig(2) + sig(1)));

    /* 7. router_rank continues router_select's order past top_k, case 1's logits: kept groups g2, g3
     *    by choice: 7 (.881), 4 and 5 (.731, lower id first), 6 (.269); then the dropped groups:
     *    2 (.953), 0 and 1 (.5), 3 (.047). Its first top_k (7, 4) are router_select's set {4, 7}. */
    int order[8];
    float rank_scratch[64];
    router_rank(&p, l1, zero, order, 8, rank_scratch);
    CHECK_IDS(order, 8, 7, 4, 5, 6, 2, 0, 1, 3);
    /* with case 2's bias (choice 6 = 1.269, groups g3 then g2): 6, 7, 4, 5, then 2, 0, 1, 3; n_out 3 */
    int first3[3];
    router_rank(&p, l1, b2, first3, 3, rank_scratch);
    CHECK_IDS(first3, 3, 6, 7, 4);

    printf("%s\n", test_failures ? "FAILED" : "router: all hand-worked cases pass");
    return test_failures ? 1 : 0;
}
