/* Each policy against sequences worked out by hand (the working is in the comments), through the
 * simulator, which drives the same cache_policy code as the live cache. */
#include <string.h>
#include "cache/expert_cache.h"
#include "tests/test_cache_check.h"

enum { A, B, C, D, E };
#define NOBIG 1000000 /* LFU halving interval longer than the sequence: no aging */

static void expect_run(const char *what, const int *keys, int n, int n_keys, int slots, cache_policy_kind kind,
                       int halve, const char *hits_expected, const int *victims_expected)
{
    uint8_t hit[64];
    int victim[64];
    cache_sim_result r;
    CHECK(cache_sim_run(keys, (size_t)n, n_keys, slots, kind, halve, &r, hit, victim) == 0, "%s: run", what);
    char got[65];
    for (int i = 0; i < n; i++) got[i] = hit[i] ? 'H' : 'm';
    got[n] = 0;
    CHECK(!strcmp(got, hits_expected), "%s: hit/miss %s, expected %s", what, got, hits_expected);
    for (int i = 0; victims_expected && i < n; i++)
        CHECK(victim[i] == victims_expected[i], "%s: request %d evicted %d, expected %d", what, i + 1, victim[i], victims_expected[i]);
}

/* LRU, 3 slots, A B C A D B E A (list shown most recent first):
 *  A m [A]  B m [B A]  C m [C B A]  A H [A C B]  D m evict B [D A C]
 *  B m evict C [B D A]  E m evict A [E B D]  A m evict D [A E B]            -> 1 hit */
static void test_lru(void)
{
    int seq[] = {A, B, C, A, D, B, E, A};
    int vic[] = {-1, -1, -1, -1, B, C, A, D};
    expect_run("lru", seq, 8, 5, 3, CACHE_POLICY_LRU, 0, "mmmHmmmm", vic);
}

/* LFU (no aging), 3 slots, same sequence; counts survive eviction; victim = (count, last request).
 *  A m c1  B m c1  C m c1  A H cA=2  D m: B(1,t2) C(1,t3) -> evict B
 *  B m cB=2: C(1,t3) D(1,t5) -> evict C   E m: A(2) D(1,t5) B(2) -> evict D   A H  -> 2 hits */
static void test_lfu(void)
{
    int seq[] = {A, B, C, A, D, B, E, A};
    int vic[] = {-1, -1, -1, -1, B, C, D, -1};
    expect_run("lfu", seq, 8, 5, 3, CACHE_POLICY_LFU, NOBIG, "mmmHmmmH", vic);
}

/* LFU aging, 2 slots, A A A B C B C, halving every 4 requests (after the 4th request's count):
 *  t1 A m cA1  t2 A H cA2  t3 A H cA3  t4 B m cB1, halve -> cA1 cB0 (room, no victim)
 *  t5 C m cC1: A(1) B(0) -> evict B   t6 B m cB1: A(1,t3) C(1,t5) -> evict A   t7 C H  -> 3 hits
 * Without aging A's early burst rules forever:
 *  t5 C: A(3) B(1) -> evict B   t6 B cB2: A(3) C(1) -> evict C   t7 C cC2: A(3) B(2) -> evict B -> 2 hits */
static void test_lfu_aging(void)
{
    int seq[] = {A, A, A, B, C, B, C};
    int aged[] = {-1, -1, -1, -1, B, A, -1};
    int unaged[] = {-1, -1, -1, -1, B, C, B};
    expect_run("lfu aged", seq, 7, 3, 2, CACHE_POLICY_LFU, 4, "mHHmmmH", aged);
    expect_run("lfu unaged", seq, 7, 3, 2, CACHE_POLICY_LFU, NOBIG, "mHHmmmm", unaged);
}

/* ARC, c = 2, p = 0: A B C A B A D B A D A
 *  1 A m T1[A]   2 B m T1[B A]   3 C m: |T1|+|B1| = c and |T1| = c -> drop T1's LRU A (no ghost) T1[C B]
 *  4 A m: drop B T1[A C]   5 B m: drop C T1[B A]   6 A H: -> T2[A] T1[B]
 *  7 D m: |T1|+|B1|=1 < c, directory 2 >= c, full: |T1|=1 > p=0 -> B to B1; T1[D] B1[B]
 *  8 B m, ghost in B1: p = 0 + max(|B2|/|B1|, 1) = 1; |T1|=1 not > p -> T2's LRU A to B2; T2[B]
 *  9 A m, ghost in B2: p = 1 - max(|B1|/|B2|, 1) = 0; |T1|=1 > 0 -> D to B1; T2[A B]
 * 10 D m, ghost in B1: p = 1; |T1|=0 -> T2's LRU B to B2; T2[D A]
 * 11 A H                                                                        -> 2 hits */
static void test_arc(void)
{
    int seq[] = {A, B, C, A, B, A, D, B, A, D, A};
    int vic[] = {-1, -1, A, B, C, -1, B, A, D, B, -1};
    expect_run("arc", seq, 11, 5, 2, CACHE_POLICY_ARC, 0, "mmmmmHmmmmH", vic);
}

/* Belady, 3 slots: A B C D A B E A B C D E
 *  D m: next uses A@5 B@6 C@10 -> evict C; A H B H; E m: A@8 B@9 D@11 -> evict D; A H B H
 *  C m: A, B never again, E@12 -> evict A or B; D m: evict a never-again key; E H -> 5 hits */
static void test_opt(void)
{
    int seq[] = {A, B, C, D, A, B, E, A, B, C, D, E};
    uint8_t hit[12];
    int victim[12];
    cache_sim_result r;
    CHECK(cache_sim_run(seq, 12, 5, 3, CACHE_POLICY_OPT, 0, &r, hit, victim) == 0, "opt run");
    CHECK(r.hits == 5 && r.misses == 7, "opt hits %llu misses %llu", (unsigned long long)r.hits, (unsigned long long)r.misses);
    CHECK(victim[3] == C && victim[6] == D, "opt victims %d %d", victim[3], victim[6]);
    CHECK(victim[9] == A || victim[9] == B, "opt victim at C: %d", victim[9]);
    CHECK(victim[10] != E && victim[10] >= 0, "opt must keep E (next use) at D, evicted %d", victim[10]);
}

/* Why frequency beats recency at R1's ratio, in miniature: 12 slots, steps of 16 requests = the same 8 hot
 * keys H0..H7, then 8 keys never seen again (one-offs), 4 steps (64 requests).
 *  LRU: a hot key's reuse distance is 15 distinct keys > 12 slots -> 0 hits.
 *  ARC: all keys sit in T1; with |T1| = c each miss drops T1's LRU without a ghost, so ARC is LRU
 *       here -> 0 hits.
 *  LFU (no aging, ties -> least recent): step 1 fills 12, then its one-offs 4..7 evict H0..H3 (all
 *       count 1, oldest first). Step 2: H0..H3 (count 2) evict H4..H7, H4..H7 (count 2) evict
 *       one-offs 0..3 of step 1; its own one-offs churn among the count-1 slots. Steps 3, 4: the 8
 *       hot keys hit -> 16 hits (25%).
 *  OPT: from step 1 on one-offs (never used again) are the victims -> hot keys hit in steps 2..4 ->
 *       24 hits (37.5%). */
static void test_hot_set_toy(void)
{
    int seq[64], n = 0, one_off = 8;
    for (int step = 0; step < 4; step++) {
        for (int h = 0; h < 8; h++) seq[n++] = h;
        for (int i = 0; i < 8; i++) seq[n++] = one_off++;
    }
    cache_policy_kind kinds[] = {CACHE_POLICY_LRU, CACHE_POLICY_ARC, CACHE_POLICY_LFU, CACHE_POLICY_OPT};
    uint64_t expect[] = {0, 0, 16, 24};
    for (int k = 0; k < 4; k++) {
        cache_sim_result r;
        int victim[64];
        CHECK(cache_sim_run(seq, 64, one_off, 12, kinds[k], NOBIG, &r, NULL, victim) == 0, "toy run");
        CHECK(r.hits == expect[k], "toy %s: %llu hits, expected %llu", cache_policy_name(kinds[k]),
              (unsigned long long)r.hits, (unsigned long long)expect[k]);
        if (kinds[k] == CACHE_POLICY_LFU) {
            for (int i = 0; i < 4; i++) CHECK(victim[12 + i] == i, "toy lfu: step 1 victim %d = %d", i, victim[12 + i]);
            for (int i = 0; i < 4; i++) CHECK(victim[16 + i] == 4 + i, "toy lfu: step 2 H%d evicted %d", i, victim[16 + i]);
            for (int i = 0; i < 4; i++) CHECK(victim[20 + i] == 8 + i, "toy lfu: step 2 H%d evicted %d", 4 + i, victim[20 + i]);
        }
    }
}

/* The live cache's admission rules on the policy directly: pinned keys are skipped, and a full
 * cache with nothing evictable refuses without changing state. */
static int only_odd(void *ctx, int key) { (void)ctx; return key & 1; }
static int none(void *ctx, int key) { (void)ctx; (void)key; return 0; }

static void test_evictable_filter(void)
{
    cache_policy_kind kinds[] = {CACHE_POLICY_LRU, CACHE_POLICY_LFU, CACHE_POLICY_ARC};
    for (int k = 0; k < 3; k++) {
        cache_policy *p = cache_policy_create(kinds[k], 10, 3, NOBIG);
        int v;
        for (int key = 0; key < 3; key++) CHECK(cache_policy_miss(p, key, NULL, NULL, &v) == 0 && v == -1, "fill");
        /* 0 is the LRU/LFU/ARC victim, but only 1 is evictable */
        CHECK(cache_policy_miss(p, 3, only_odd, NULL, &v) == 0 && v == 1, "%s: evicted %d, expected 1", cache_policy_name(kinds[k]), v);
        CHECK(cache_policy_miss(p, 4, none, NULL, &v) == -1, "%s: admitted with nothing evictable", cache_policy_name(kinds[k]));
        CHECK(!cache_policy_contains(p, 4) && cache_policy_size(p) == 3, "%s: state changed on refusal", cache_policy_name(kinds[k]));
        CHECK(cache_policy_contains(p, 0) && cache_policy_contains(p, 2) && cache_policy_contains(p, 3), "resident set");
        cache_policy_free(p);
    }
}

/* Prefetch ranking: LFU's guess takes the victim the next miss would take and, counting no request,
 * is itself the next victim until used; ARC takes only from T1 (seen once), never T2; LRU always
 * takes its oldest. */
static void test_prefetch_ranking(void)
{
    int v;
    cache_policy *lfu = cache_policy_create(CACHE_POLICY_LFU, 10, 2, NOBIG);
    cache_policy_miss(lfu, 0, NULL, NULL, &v);
    cache_policy_hit(lfu, 0); cache_policy_hit(lfu, 0);  /* c0 = 3, last request t3 */
    cache_policy_miss(lfu, 1, NULL, NULL, &v);
    cache_policy_hit(lfu, 1); cache_policy_hit(lfu, 1);  /* c1 = 3, t6 */
    /* guess 5: counts tie at 3, the older 0 goes; c5 stays 0 */
    CHECK(cache_policy_prefetch(lfu, 5, NULL, NULL, &v) == 0 && v == 0, "lfu: guess should take victim 0 (got %d)", v);
    cache_policy_miss(lfu, 6, NULL, NULL, &v);            /* c6 = 1 (t7): 1 (3) vs the unused guess 5 (0) */
    CHECK(v == 5, "lfu: the unused guess should go first (got %d)", v);
    /* guess 5 again: 1 (3, t6) vs 6 (1, t7) -> 6 */
    CHECK(cache_policy_prefetch(lfu, 5, NULL, NULL, &v) == 0 && v == 6, "lfu: guess should replace count-1 key 6 (got %d)", v);
    cache_policy_prefetch_used(lfu, 5);
    CHECK(cache_policy_contains(lfu, 1) && cache_policy_contains(lfu, 5), "lfu resident set");
    cache_policy_free(lfu);

    cache_policy *arc = cache_policy_create(CACHE_POLICY_ARC, 10, 2, 0);
    cache_policy_miss(arc, 0, NULL, NULL, &v);
    cache_policy_hit(arc, 0);                             /* 0 in T2 */
    cache_policy_miss(arc, 1, NULL, NULL, &v);            /* 1 in T1 */
    CHECK(cache_policy_prefetch(arc, 2, NULL, NULL, &v) == 0 && v == 1, "arc: guess should evict T1's 1 (got %d)", v);
    CHECK(cache_policy_prefetch(arc, 3, NULL, NULL, &v) == 0 && v == 2, "arc: guess should evict T1's 2 (got %d)", v);
    cache_policy_hit(arc, 3);                             /* now T2 = [3 0] */
    CHECK(cache_policy_prefetch(arc, 4, NULL, NULL, &v) == -1, "arc: a guess displaced a T2 key");
    cache_policy_free(arc);

    cache_policy *lru = cache_policy_create(CACHE_POLICY_LRU, 10, 2, 0);
    cache_policy_miss(lru, 0, NULL, NULL, &v);
    cache_policy_miss(lru, 1, NULL, NULL, &v);
    cache_policy_hit(lru, 0);
    CHECK(cache_policy_prefetch(lru, 2, NULL, NULL, &v) == 0 && v == 1, "lru: guess should evict 1 (got %d)", v);
    cache_policy_free(lru);
}

static void test_parse(void)
{
    cache_policy_kind k;
    CHECK(cache_policy_parse("lru", 0, &k) == 0 && k == CACHE_POLICY_LRU, "lru");
    CHECK(cache_policy_parse("lfu", 0, &k) == 0 && k == CACHE_POLICY_LFU, "lfu");
    CHECK(cache_policy_parse("arc", 0, &k) == 0 && k == CACHE_POLICY_ARC, "arc");
    CHECK(cache_policy_parse("opt", 0, &k) == -1, "opt is offline only");
    CHECK(cache_policy_parse("opt", 1, &k) == 0 && k == CACHE_POLICY_OPT, "opt in the simulator");
    CHECK(cache_policy_parse("LRU", 0, &k) == -1 && cache_policy_parse("", 1, &k) == -1, "bad names");
    CHECK(cache_policy_create(CACHE_POLICY_OPT, 10, 2, 0) == NULL, "opt has no online policy");
    CHECK(cache_policy_create(CACHE_POLICY_LRU, 10, 0, 0) == NULL, "zero capacity");
}

int main(void)
{
    test_lru();
    test_lfu();
    test_lfu_aging();
    test_arc();
    test_opt();
    test_hot_set_toy();
    test_evictable_filter();
    test_prefetch_ranking();
    test_parse();
    return check_report("test_cache_policy");
}
