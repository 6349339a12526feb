/* Fixed worker threads and one parallel-for at a time. A forward pass calls thread_pool_for a few
 * hundred times per token, microseconds apart: workers spin for a short while after each job so the
 * next one starts without a wake-up, then sleep on a condition variable so an idle pool costs no CPU. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "core/threadpool.h"

/* How long an idle worker polls before sleeping, and how long the caller polls for stragglers
 * before yielding its core (on a 2-core machine the straggler may need that core). */
#define POOL_SPIN_NS 50000L

struct thread_pool {
    int n_threads;            /* including the caller */
    pthread_t *workers;       /* n_threads - 1 */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_uint generation;   /* bumped (under lock) to publish a job or the stop request */
    atomic_int stop;
    /* The current job: written before the generation bump, read after seeing it. */
    void (*fn)(void *arg, int i);
    void *arg;
    int n_items;
    atomic_int next_item;
    atomic_int workers_done;  /* workers finished with the current generation */
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

static void run_items(thread_pool *p)
{
    for (;;) {
        int i = atomic_fetch_add_explicit(&p->next_item, 1, memory_order_relaxed);
        if (i >= p->n_items) return;
        p->fn(p->arg, i);
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
    pthread_mutex_lock(&p->lock);
    unsigned g;
    while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen)
        pthread_cond_wait(&p->wake, &p->lock);
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
        run_items(p);
        atomic_fetch_add_explicit(&p->workers_done, 1, memory_order_release);
    }
}

static void publish(thread_pool *p)
{
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
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
    atomic_init(&p->stop, 0);
    atomic_init(&p->next_item, 0);
    atomic_init(&p->workers_done, 0);
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
        atomic_store_explicit(&p->stop, 1, memory_order_release);
        publish(p);
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
    p->fn = fn;
    p->arg = arg;
    p->n_items = n;
    atomic_store_explicit(&p->next_item, 0, memory_order_relaxed);
    atomic_store_explicit(&p->workers_done, 0, memory_order_relaxed);
    publish(p);
    run_items(p);
    /* Every worker must check in before the job's fields may be reused by the next call. */
    long deadline = now_ns() + POOL_SPIN_NS;
    for (int spins = 0; atomic_load_explicit(&p->workers_done, memory_order_acquire) < p->n_threads - 1; spins++) {
        if ((spins & 63) == 63 && now_ns() > deadline) sched_yield();
        else cpu_relax();
    }
}
