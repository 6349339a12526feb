/* bench_policy_lab: candidate replacement policies for the expert cache, simulated on routing
 * traces next to the live LFU (cache_sim_run, the code the engine runs) and Belady's OPT (the
 * referee, computed in the same run). Hit rate per expert request over the curve of 1%-25% of the
 * keys; the ratio to OPT is what issue targets are stated in.
 *
 * The candidates here are prototypes, not shipped policies: each is the idea in its simplest
 * honest form (exact counts where a real cache would keep a sketch, so each is an upper bound of
 * its idea). Every eviction scans the resident set for the lowest score, so they are slow (O(slots)
 * per miss) but simple to check.
 *   lfu-d16   frequency with exponential aging per token (half-life 16 tokens): LRFU's spectrum;
 *   phase     lfu-d16's count divided by the layers until the key's layer comes round again;
 *   learned   online estimate of P(requested at its next opportunity) from a table of (layer,
 *             tokens since last request, aged count) outcomes, updated as the trace goes;
 *   quota     per-layer quotas: the victim comes from the layer most over its share, shares
 *             proportional to each layer's aged count of reuses within 8 tokens;
 *   wtinylfu  W-TinyLFU: a 1% LRU window, an SLRU main (20% probation, 80% protected), and a
 *             frequency duel at the window's exit (exact counts halved every 10 x slots requests);
 *   prot2     lfu-d16 that never evicts a key the next 2 layers request (the real ones: a router
 *             lookahead with 100% recall, the ceiling of "protect what the lookahead predicts");
 *   nexttok   lfu-d16 that never evicts a key the next token requests (an oracle that knows one
 *             whole token ahead, 20 layers deeper than any router lookahead: a ceiling);
 *   warm      the live LFU warmed on another trace first (--warm FILE), hits counted on this one:
 *             what a --cache-history warm start would give.
 * Usage: bench_policy_lab [--warm TRACE] [--fast] TRACE...   (--selftest: W-TinyLFU by hand) */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cache/expert_cache.h"

enum { LAB_GAPS = 10, LAB_COUNTS = 16, LAB_MAX_LAYERS = 256 };

typedef enum { LAB_LFU_DECAY, LAB_PHASE, LAB_LEARNED, LAB_QUOTA, LAB_PROT2, LAB_NEXTTOK } lab_kind;

/* A trace with each request's token and layer, and each request's next use (for the oracles). */
typedef struct {
    const cache_trace *t;
    int L, E, K;
    int *tok, *layer;
    size_t *next_use;       /* index of the key's next request, SIZE_MAX if none */
    size_t per_token;       /* requests in one token (the nexttok oracle's window) */
} lab_trace;

typedef struct {
    lab_kind kind;
    const lab_trace *lt;
    int cap, nres, *res, *pos;
    double *logc;           /* log2(aged count) + last_tok / H: comparable across keys at one moment */
    int *last_tok;          /* -1: never requested */
    size_t *nu;             /* resident key's next use (oracles) */
    double *trials, *succ;  /* learned: [layer][gap][count] */
    double *reuse;          /* quota: aged reuses per layer */
    int *per_layer;         /* quota: resident keys per layer */
    double half;
    int cur_tok, cur_layer;
    size_t now;
} lab_cache;

static double aged_count(const lab_cache *c, int k, int at_tok)
{
    if (c->last_tok[k] < 0) return 0;
    return exp2(c->logc[k] - (double)at_tok / c->half);
}

static int gap_bucket(int gap)
{
    if (gap < 4) return gap;
    if (gap < 8) return 4;
    if (gap < 16) return 5;
    if (gap < 32) return 6;
    if (gap < 64) return 7;
    return 8;
}

static int count_bucket(double cnt)
{
    if (cnt < 0.25) return 0;
    int b = 1 + (int)floor(2 * log2(cnt) + 5);
    return b < 1 ? 1 : b >= LAB_COUNTS ? LAB_COUNTS - 1 : b;
}

/* The learned table's cell for key k at the token of its next opportunity. */
static size_t learned_cell(const lab_cache *c, int k, int opp_tok)
{
    int l = k / c->lt->E;
    int g = c->last_tok[k] < 0 ? LAB_GAPS - 1 : gap_bucket(opp_tok - c->last_tok[k] - 1);
    int n = count_bucket(aged_count(c, k, opp_tok));
    return ((size_t)l * LAB_GAPS + (size_t)g) * LAB_COUNTS + (size_t)n;
}

/* Layers until key k's layer comes round again (1..L). */
static int layers_until(const lab_cache *c, int k)
{
    int L = c->lt->L, d = (k / c->lt->E - c->cur_layer + L) % L;
    return d == 0 ? L : d;
}

/* Lower = evicted first. */
static double score(const lab_cache *c, int k)
{
    const lab_trace *lt = c->lt;
    double freq = c->logc[k] + (c->last_tok[k] < 0 ? -1e9 : 0);
    switch (c->kind) {
    case LAB_PHASE: return log2(aged_count(c, k, c->cur_tok) + 1e-9) - log2(layers_until(c, k));
    case LAB_LEARNED: {
        int opp = c->cur_tok + (k / lt->E <= c->cur_layer ? 1 : 0);
        size_t i = learned_cell(c, k, opp);
        return (c->succ[i] + 0.1) / (c->trials[i] + 1.0) + 1e-9 * freq;
    }
    case LAB_PROT2: {
        size_t horizon = (size_t)2 * (lt->per_token / (size_t)lt->L);
        return c->nu[k] != SIZE_MAX && c->nu[k] - c->now <= horizon ? 1e18 : freq;
    }
    case LAB_NEXTTOK:
        return c->nu[k] != SIZE_MAX && c->nu[k] - c->now <= lt->per_token ? 1e18 : freq;
    default: return freq;
    }
}

/* quota: the layer most over its share gives its lowest-count key. */
static int quota_layer(const lab_cache *c)
{
    double total = 0, worst = -1e18;
    int pick = -1;
    for (int l = 0; l < c->lt->L; l++) total += c->reuse[l] + 1;
    for (int l = 0; l < c->lt->L; l++) {
        if (!c->per_layer[l]) continue;
        double over = c->per_layer[l] - c->cap * (c->reuse[l] + 1) / total;
        if (over > worst) { worst = over; pick = l; }
    }
    return pick;
}

static int pick_victim(const lab_cache *c, int incoming)
{
    int best = -1, only_layer = c->kind == LAB_QUOTA ? quota_layer(c) : -1;
    double bs = 0;
    for (int r = 0; r < c->nres; r++) {
        int k = c->res[r];
        if (k == incoming || (only_layer >= 0 && k / c->lt->E != only_layer)) continue;
        double s = score(c, k);
        if (best < 0 || s < bs) { best = k; bs = s; }
    }
    return best;
}

static void lab_admit(lab_cache *c, int k)
{
    if (c->nres >= c->cap) {
        int v = pick_victim(c, k), i = c->pos[v], last = c->res[--c->nres];
        c->res[i] = last;
        c->pos[last] = i;
        c->pos[v] = -1;
        c->per_layer[v / c->lt->E]--;
    }
    c->pos[k] = c->nres;
    c->res[c->nres++] = k;
    c->per_layer[k / c->lt->E]++;
}

/* Before a layer's requests: the learned table records, for every key of the layer, whether its
 * opportunity now was taken. */
static void learn_layer(lab_cache *c, int l, const uint8_t *requested)
{
    for (int e = 0; e < c->lt->E; e++) {
        size_t i = learned_cell(c, l * c->lt->E + e, c->cur_tok);
        c->trials[i] += 1;
        c->succ[i] += requested[e];
    }
}

static void count_request(lab_cache *c, int k, size_t req)
{
    int l = k / c->lt->E;
    double cnt = aged_count(c, k, c->cur_tok);
    if (c->last_tok[k] >= 0 && c->cur_tok - c->last_tok[k] <= 8) c->reuse[l] += 1;
    c->logc[k] = log2(cnt + 1) + (double)c->cur_tok / c->half;
    c->last_tok[k] = c->cur_tok;
    c->nu[k] = c->lt->next_use[req];
}

static void lab_cache_free(lab_cache *c)
{
    free(c->res); free(c->pos); free(c->logc); free(c->last_tok); free(c->nu);
    free(c->trials); free(c->succ); free(c->reuse); free(c->per_layer);
}

static int lab_cache_init(lab_cache *c, lab_kind kind, const lab_trace *lt, int slots)
{
    size_t K = (size_t)lt->K, cells = (size_t)lt->L * LAB_GAPS * LAB_COUNTS;
    *c = (lab_cache){.kind = kind, .lt = lt, .cap = slots, .half = 16};
    c->res = malloc(K * sizeof(int));
    c->pos = malloc(K * sizeof(int));
    c->logc = calloc(K, sizeof(double));
    c->last_tok = malloc(K * sizeof(int));
    c->nu = malloc(K * sizeof(size_t));
    c->trials = calloc(cells, sizeof(double));
    c->succ = calloc(cells, sizeof(double));
    c->reuse = calloc((size_t)lt->L, sizeof(double));
    c->per_layer = calloc((size_t)lt->L, sizeof(int));
    if (!c->res || !c->pos || !c->logc || !c->last_tok || !c->nu || !c->trials || !c->succ || !c->reuse || !c->per_layer) {
        lab_cache_free(c);
        return -1;
    }
    for (size_t k = 0; k < K; k++) { c->pos[k] = -1; c->last_tok[k] = -1; c->nu[k] = SIZE_MAX; }
    return 0;
}

/* One layer's group of requests [i, j): learn, serve, count; returns hits. */
static uint64_t lab_group(lab_cache *c, size_t i, size_t j, uint8_t *requested)
{
    const lab_trace *lt = c->lt;
    uint64_t hits = 0;
    int l = lt->layer[i];
    memset(requested, 0, (size_t)lt->E);
    for (size_t q = i; q < j; q++) requested[lt->t->key[q] % lt->E] = 1;
    if (c->kind == LAB_LEARNED) learn_layer(c, l, requested);
    if (c->kind == LAB_QUOTA)
        for (int x = 0; x < lt->L; x++) c->reuse[x] *= exp2(-1.0 / (c->half * lt->L));
    for (size_t q = i; q < j; q++) {
        int k = lt->t->key[q];
        c->now = q;
        if (c->pos[k] >= 0) hits++;
        else lab_admit(c, k);
    }
    for (size_t q = i; q < j; q++) count_request(c, lt->t->key[q], q);
    return hits;
}

static double lab_run(lab_kind kind, const lab_trace *lt, int slots)
{
    lab_cache c;
    uint8_t *requested = malloc((size_t)lt->E);
    if (!requested || lab_cache_init(&c, kind, lt, slots) < 0) { free(requested); return -1; }
    uint64_t hits = 0;
    for (size_t i = 0; i < lt->t->n;) {
        size_t j = i;
        while (j < lt->t->n && lt->layer[j] == lt->layer[i] && lt->tok[j] == lt->tok[i]) j++;
        c.cur_tok = lt->tok[i];
        c.cur_layer = lt->layer[i];
        hits += lab_group(&c, i, j, requested);
        i = j;
    }
    lab_cache_free(&c);
    free(requested);
    return (double)hits / (double)lt->t->n;
}

/* ------------------------------------------------------------------ W-TinyLFU */

enum { W_NONE = 0, W_WINDOW, W_PROBATION, W_PROTECTED, W_LISTS };

typedef struct {
    int *prev, *next, head[W_LISTS], tail[W_LISTS], size[W_LISTS];
    uint8_t *where;
    uint32_t *freq;
    uint64_t clock, halve_every;
    int window_cap, protected_cap, main_cap;
} wtiny;

static void w_unlink(wtiny *w, int k)
{
    int l = w->where[k];
    if (w->prev[k] >= 0) w->next[w->prev[k]] = w->next[k]; else w->head[l] = w->next[k];
    if (w->next[k] >= 0) w->prev[w->next[k]] = w->prev[k]; else w->tail[l] = w->prev[k];
    w->size[l]--;
    w->where[k] = W_NONE;
}

static void w_push(wtiny *w, int l, int k)
{
    w->prev[k] = -1;
    w->next[k] = w->head[l];
    if (w->head[l] >= 0) w->prev[w->head[l]] = k; else w->tail[l] = k;
    w->head[l] = k;
    w->size[l]++;
    w->where[k] = (uint8_t)l;
}

static void w_count(wtiny *w, int k, int n_keys)
{
    if (w->freq[k] < UINT32_MAX) w->freq[k]++;
    if (++w->clock % w->halve_every == 0)
        for (int i = 0; i < n_keys; i++) w->freq[i] >>= 1;
}

/* The window's oldest key leaves it: into main if main has room or it out-counts main's victim. */
static void w_window_exit(wtiny *w)
{
    int cand = w->tail[W_WINDOW];
    w_unlink(w, cand);
    if (w->size[W_PROBATION] + w->size[W_PROTECTED] < w->main_cap) { w_push(w, W_PROBATION, cand); return; }
    int from = w->size[W_PROBATION] > 0 ? W_PROBATION : W_PROTECTED, victim = w->tail[from];
    if (victim >= 0 && w->freq[cand] > w->freq[victim]) {
        w_unlink(w, victim);
        w_push(w, W_PROBATION, cand);
    }
}

static int w_access(wtiny *w, int k, int n_keys)
{
    int where = w->where[k];
    w_count(w, k, n_keys);
    if (where == W_WINDOW) { w_unlink(w, k); w_push(w, W_WINDOW, k); return 1; }
    if (where == W_PROTECTED) { w_unlink(w, k); w_push(w, W_PROTECTED, k); return 1; }
    if (where == W_PROBATION) {
        w_unlink(w, k);
        w_push(w, W_PROTECTED, k);
        if (w->size[W_PROTECTED] > w->protected_cap) {
            int d = w->tail[W_PROTECTED];
            w_unlink(w, d);
            w_push(w, W_PROBATION, d);
        }
        return 1;
    }
    w_push(w, W_WINDOW, k);
    if (w->size[W_WINDOW] > w->window_cap) w_window_exit(w);
    return 0;
}

/* hits (optional, n bytes) gets 1/0 per request. */
static double wtiny_run_keys(const int *keys, size_t n, int K, int slots, uint8_t *hits_out)
{
    wtiny w = {0};
    w.prev = malloc(sizeof(int) * (size_t)K);
    w.next = malloc(sizeof(int) * (size_t)K);
    w.where = calloc((size_t)K, 1);
    w.freq = calloc((size_t)K, sizeof(uint32_t));
    double rate = -1;
    if (w.prev && w.next && w.where && w.freq) {
        for (int l = 0; l < W_LISTS; l++) w.head[l] = w.tail[l] = -1;
        w.window_cap = slots / 100 > 1 ? slots / 100 : 1;
        w.main_cap = slots - w.window_cap;
        w.protected_cap = w.main_cap * 4 / 5;
        w.halve_every = (uint64_t)cache_policy_default_lfu_halve_every(K);
        uint64_t hits = 0;
        for (size_t i = 0; i < n; i++) {
            int h = w_access(&w, keys[i], K);
            hits += (uint64_t)h;
            if (hits_out) hits_out[i] = (uint8_t)h;
        }
        rate = (double)hits / (double)n;
    }
    free(w.prev); free(w.next); free(w.where); free(w.freq);
    return rate;
}

static double wtiny_run(const cache_trace *t, int slots)
{
    return wtiny_run_keys(t->key, t->n, t->n_layers * t->n_experts, slots, NULL);
}

/* W-TinyLFU by hand, 3 slots of 64 keys: window 1, main 2 (protected 1), no halving this short.
 * A B C A D C B C D A (A=0 .. D=3), counts in brackets:
 *  A m win[A]   B m win[B], A -> probation (main has room)   C m win[C], B -> probation [B A]
 *  A H -> protected [A]   D m win[D], C(1) vs probation tail B(1): not more frequent -> C dropped
 *  C m (2) win[C], D(1) vs B(1) -> D dropped   B H -> protected [B A] over 1 -> A back to probation
 *  C H (window)   D m (2) win[D], C(3) vs probation tail A(2) -> A evicted, C to probation
 *  A m                                                                -> mmmHmmHHmm */
static int selftest(void)
{
    int seq[] = {0, 1, 2, 0, 3, 2, 1, 2, 3, 0};
    uint8_t hit[10];
    char got[11];
    wtiny_run_keys(seq, 10, 64, 3, hit);
    for (int i = 0; i < 10; i++) got[i] = hit[i] ? 'H' : 'm';
    got[10] = 0;
    int ok = !strcmp(got, "mmmHmmHHmm");
    printf("bench_policy_lab selftest: W-TinyLFU %s, expected mmmHmmHHmm: %s\n", got, ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

/* ------------------------------------------------------------------ the bench */

static int lab_trace_init(lab_trace *lt, const cache_trace *t)
{
    *lt = (lab_trace){.t = t, .L = t->n_layers, .E = t->n_experts, .K = t->n_layers * t->n_experts};
    lt->tok = malloc(sizeof(int) * t->n);
    lt->layer = malloc(sizeof(int) * t->n);
    lt->next_use = malloc(sizeof(size_t) * t->n);
    size_t *seen = malloc(sizeof(size_t) * (size_t)lt->K);
    if (!lt->tok || !lt->layer || !lt->next_use || !seen) { free(seen); return -1; }
    int tok = 0, prev = -1;
    for (size_t i = 0; i < t->n; i++) {
        lt->layer[i] = t->key[i] / lt->E;
        if (lt->layer[i] < prev) tok++;
        prev = lt->layer[i];
        lt->tok[i] = tok;
    }
    for (int k = 0; k < lt->K; k++) seen[k] = SIZE_MAX;
    for (size_t i = t->n; i-- > 0;) {
        lt->next_use[i] = seen[t->key[i]];
        seen[t->key[i]] = i;
    }
    free(seen);
    lt->per_token = t->n / (size_t)(tok + 1);
    return 0;
}

static void lab_trace_release(lab_trace *lt)
{
    free(lt->tok); free(lt->layer); free(lt->next_use);
}

static double sim_rate(const int *keys, size_t n, int K, int slots, cache_policy_kind kind)
{
    cache_sim_result r;
    if (cache_sim_run(keys, n, K, slots, kind, 0, &r, NULL, NULL) < 0) return -1;
    return (double)r.hits / (double)n;
}

/* The live LFU over `warm` then `t` (one key space: both traces must have the same shape), hits
 * counted on t only. -1 when the shapes differ. */
static double warm_lfu_rate(const cache_trace *warm, const cache_trace *t, int slots)
{
    int K = t->n_layers * t->n_experts;
    if (!warm || warm->n_layers != t->n_layers || warm->n_experts != t->n_experts) return -1;
    size_t n = warm->n + t->n;
    int *keys = malloc(sizeof(int) * n);
    uint8_t *hit = malloc(n);
    cache_sim_result r;
    double rate = -1;
    if (keys && hit) {
        memcpy(keys, warm->key, sizeof(int) * warm->n);
        memcpy(keys + warm->n, t->key, sizeof(int) * t->n);
        if (cache_sim_run(keys, n, K, slots, CACHE_POLICY_LFU, 0, &r, hit, NULL) == 0) {
            uint64_t h = 0;
            for (size_t i = warm->n; i < n; i++) h += hit[i];
            rate = (double)h / (double)t->n;
        }
    }
    free(keys);
    free(hit);
    return rate;
}

static const char *const LAB_NAMES[] = {"lfu-d16", "phase", "learned", "quota", "prot2", "nexttok"};
enum { LAB_N = 6 };

static void lab_row(const lab_trace *lt, const cache_trace *warm, int slots)
{
    const cache_trace *t = lt->t;
    double opt = sim_rate(t->key, t->n, lt->K, slots, CACHE_POLICY_OPT);
    double lfu = sim_rate(t->key, t->n, lt->K, slots, CACHE_POLICY_LFU);
    printf("%6d %5.2f%% | %5.2f%% | %5.2f%% %4.2f", slots, 100.0 * slots / lt->K, 100 * opt, 100 * lfu, lfu / opt);
    for (int k = 0; k < LAB_N; k++) {
        double r = lab_run((lab_kind)k, lt, slots);
        printf(" | %5.2f%% %4.2f", 100 * r, r / opt);
    }
    double w = wtiny_run(t, slots), wl = warm_lfu_rate(warm, t, slots);
    printf(" | %5.2f%% %4.2f", 100 * w, w / opt);
    if (wl >= 0) printf(" | %5.2f%% %4.2f", 100 * wl, wl / opt);
    printf("\n");
    fflush(stdout);
}

static void lab_curve(const char *path, const cache_trace *warm, int fast)
{
    char err[512];
    cache_trace *t = cache_trace_load(path, -1, -1, err, sizeof err);
    lab_trace lt;
    if (!t) { fprintf(stderr, "bench_policy_lab: %s\n", err); return; }
    if (lab_trace_init(&lt, t) < 0) { fprintf(stderr, "bench_policy_lab: out of memory\n"); cache_trace_free(t); return; }
    printf("\n== %s: %d tokens, %d layers x %d experts = %d keys\n", path, t->n_tokens, lt.L, lt.E, lt.K);
    printf("%6s %6s | %6s | %-11s", "slots", "%keys", "opt", "lfu (live)");
    for (int k = 0; k < LAB_N; k++) printf(" | %-11s", LAB_NAMES[k]);
    printf(" | %-11s%s\n", "wtinylfu", warm ? " | warm lfu" : "");
    double fracs[] = {0.01, 0.013, 0.02, 0.03, 0.05, 0.10, 0.15, 0.25};
    int nf = fast ? 4 : 8;
    for (int f = 0; f < nf; f++) {
        int slots = (int)(fracs[f] * lt.K + 0.5);
        lab_row(&lt, warm, slots < 1 ? 1 : slots);
    }
    lab_trace_release(&lt);
    cache_trace_free(t);
}

int main(int argc, char **argv)
{
    char err[512];
    cache_trace *warm = NULL;
    int fast = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench_policy_lab [--fast] [--warm TRACE] TRACE...\n"
                   "  (hit rate and ratio to OPT per policy; --fast: 1%%-3%% only)\n");
            return 0;
        }
        if (!strcmp(argv[i], "--fast")) { fast = 1; continue; }
        if (!strcmp(argv[i], "--selftest")) return selftest();
        if (!strcmp(argv[i], "--warm") && i + 1 < argc) {
            cache_trace_free(warm);
            if (!(warm = cache_trace_load(argv[++i], -1, -1, err, sizeof err))) {
                fprintf(stderr, "bench_policy_lab: %s\n", err);
                return 1;
            }
            continue;
        }
        lab_curve(argv[i], warm, fast);
    }
    cache_trace_free(warm);
    return 0;
}
