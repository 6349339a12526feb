/* Fixed worker threads and one parallel-for at a time. A forward pass calls thread_pool_for a few
 * hundred times per token, microseconds apart: workers spin for a short while after each job so the
 * next one starts without a wake-up, then sleep on a condition variable so an idle pool costs no CPU.
 *
 * Work is claimed from one 64-bit word, generation << 32 | next index, by compare-and-swap: a worker
 * that wakes up late finds a newer generation and claims nothing, so the caller only waits for the
 * items that were actually claimed, never for a worker the OS has not scheduled yet (on a busy
 * machine the caller may simply run every item itself). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "core/threadpool.h"

/* How long an idle worker polls before sleeping, and how long the caller polls for claimed items
 * before yielding its core (on a small machine the thread running them may need that core). */
#define POOL_SPIN_NS 50000L

struct thread_pool {
    int n_threads;                /* including the caller */
    pthread_t *workers;           /* n_threads - 1 */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_uint generation;       /* the current job's number; bumped to publish a job or stop */
    atomic_int sleepers;          /* workers blocked (or about to block) on wake */
    atomic_int stop;
    _Atomic uint64_t work;        /* generation << 32 | next unclaimed index */
    atomic_int n_items;           /* read by late workers racing a new job: atomic, checked by the CAS */
    atomic_int items_done;
    /* Read only after claiming an item of the current generation, so never while being rewritten. */
    void (*fn)(void *arg, int i);
    void *arg;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Claims and runs items of generation g until none is left; returns at once for a stale g. */
static void run_items(thread_pool *p, unsigned g)
{
    uint64_t v = atomic_load_explicit(&p->work, memory_order_acquire);
    for (;;) {
        if ((unsigned)(v >> 32) != g) return;
        uint32_t i = (uint32_t)v;
        if (i >= (uint32_t)atomic_load_explicit(&p->n_items, memory_order_acquire)) return;
        if (!atomic_compare_exchange_weak_explicit(&p->work, &v, v + 1, memory_order_acq_rel, memory_order_acquire))
            continue;  /* v now holds the current word */
        p->fn(p->arg, (int)i);
        atomic_fetch_add_explicit(&p->items_done, 1, memory_order_release);
        v = atomic_load_explicit(&p->work, memory_order_acquire);
    }
}

static unsigned wait_for_generation(thread_pool *p, unsigned seen)
{
    long deadline = now_ns() + POOL_SPIN_NS;
    for (int spins = 0;; spins++) {
        unsigned g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen) return g;
        if ((spins & 63) == 63 && now_ns() > deadline) break;
        cpu_relax();
    }
    /* sleepers is raised before generation is re-read, and the caller bumps generation before it
     * reads sleepers (both seq_cst): one of the two always sees the other, so no wake-up is lost. */
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add(&p->sleepers, 1);
    unsigned g;
    while ((g = atomic_load(&p->generation)) == seen) pthread_cond_wait(&p->wake, &p->lock);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->lock);
    return g;
}

static void *worker_main(void *arg)
{
    thread_pool *p = arg;
    unsigned seen = 0;
    for (;;) {
        seen = wait_for_generation(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
        run_items(p, seen);
    }
}

/* Makes generation g visible and wakes the sleeping workers, if any. */
static void publish(thread_pool *p, unsigned g)
{
    atomic_store(&p->generation, g);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }
}

thread_pool *thread_pool_create(int n_threads)
{
    if (n_threads < 1) {
        fprintf(stderr, "thread_pool_create: %d threads requested, expected >= 1\n", n_threads);
        return NULL;
    }
    thread_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->work, 0);
    atomic_init(&p->n_items, 0);
    atomic_init(&p->items_done, 0);
    p->workers = calloc((size_t)n_threads, sizeof *p->workers);
    if (!p->workers) {
        thread_pool_free(p);
        return NULL;
    }
    for (int t = 0; t < n_threads - 1; t++) {
        if (pthread_create(&p->workers[t], NULL, worker_main, p) != 0) {
            fprintf(stderr, "thread_pool_create: could not start worker %d of %d\n", t + 1, n_threads - 1);
            p->n_threads = t + 1;  /* free joins only the workers that started */
            thread_pool_free(p);
            return NULL;
        }
    }
    return p;
}

void thread_pool_free(thread_pool *p)
{
    if (!p) return;
    if (p->workers) {
        atomic_store(&p->stop, 1);
        publish(p, atomic_load(&p->generation) + 1);
        for (int t = 0; t < p->n_threads - 1; t++) pthread_join(p->workers[t], NULL);
    }
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p->workers);
    free(p);
}

int thread_pool_size(const thread_pool *p) { return p->n_threads; }

void thread_pool_for(thread_pool *p, int n, void (*fn)(void *arg, int i), void *arg)
{
    if (n <= 0) return;
    if (p->n_threads == 1 || n == 1) {
        for (int i = 0; i < n; i++) fn(arg, i);
        return;
    }
    unsigned g = atomic_load_explicit(&p->generation, memory_order_relaxed) + 1;
    /* The word is closed (new generation, no index left) before n_items changes: a worker leaving
     * the previous call may have read that call's word and be about to compare its index with
     * n_items; with the old word still in place a larger new n_items let it claim a phantom item,
     * run it on this call's arg and count it as done, so the call returned before a real item had. */
    atomic_store_explicit(&p->work, (uint64_t)g << 32 | UINT32_MAX, memory_order_relaxed);
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->n_items, n, memory_order_release);
    atomic_store_explicit(&p->items_done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->work, (uint64_t)g << 32, memory_order_release);
    publish(p, g);
    run_items(p, g);
    long deadline = now_ns() + POOL_SPIN_NS;
    for (int spins = 0; atomic_load_explicit(&p->items_done, memory_order_acquire) < n; spins++) {
        if ((spins & 63) == 63 && now_ns() > deadline) sched_yield();
        else cpu_relax();
    }
}

/* Each item waits until all n_threads items have started: a thread inside one cannot claim a
 * second, so every thread (the caller included) runs exactly one. */
typedef struct {
    void (*fn)(void *arg, int t);
    void *arg;
    int n;
    atomic_int started;
} each_job;

static void each_item(void *arg, int t)
{
    each_job *j = arg;
    atomic_fetch_add(&j->started, 1);
    while (atomic_load(&j->started) < j->n) sched_yield();
    j->fn(j->arg, t);
}

void thread_pool_each(thread_pool *p, void (*fn)(void *arg, int t), void *arg)
{
    each_job j = {.fn = fn, .arg = arg, .n = p->n_threads};
    atomic_init(&j.started, 0);
    thread_pool_for(p, p->n_threads, each_item, &j);
}
