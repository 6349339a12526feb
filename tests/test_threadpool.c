/* thread_pool_for: every index exactly once, across pool sizes and many back-to-back calls. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include "tests/test_check.h"
#include "core/threadpool.h"


typedef struct {
    atomic_int *visits;
    atomic_long sum;
} visit_job;

static void visit(void *arg, int i)
{
    visit_job *job = arg;
    atomic_fetch_add(&job->visits[i], 1);
    atomic_fetch_add(&job->sum, i);
}

static void check_pool(int threads, int n, int repeats)
{
    thread_pool *p = thread_pool_create(threads);
    CHECK(p && thread_pool_size(p) == threads, "pool of %d", threads);
    visit_job job;
    job.visits = calloc((size_t)(n > 0 ? n : 1), sizeof(atomic_int));
    for (int rep = 0; rep < repeats; rep++) {
        for (int i = 0; i < n; i++) atomic_store(&job.visits[i], 0);
        atomic_store(&job.sum, 0);
        thread_pool_for(p, n, visit, &job);
        /* Every index done by the time thread_pool_for returns, each exactly once. */
        for (int i = 0; i < n; i++)
            CHECK(atomic_load(&job.visits[i]) == 1, "pool %d, n %d, call %d: index %d visited %d times", threads, n, rep, i, atomic_load(&job.visits[i]));
        CHECK(atomic_load(&job.sum) == (long)n * (n - 1) / 2 || n == 0, "pool %d n %d: index sum", threads, n);
    }
    free(job.visits);
    thread_pool_free(p);
}

/* Items that take long enough for all threads to join in: the pool must still wait for them. */
typedef struct {
    atomic_int done;
} slow_job;

static void slow_item(void *arg, int i)
{
    slow_job *job = arg;
    volatile double s = 0;
    for (int k = 0; k < 20000 + (i % 7) * 5000; k++) s += k;
    (void)s;
    atomic_fetch_add(&job->done, 1);
}

/* Jobs of alternating sizes back to back, each on its own stack frame: an item must only ever run
 * for the call in progress, with an index below that call's n (a worker still leaving the previous
 * call once claimed "item n" of it against the next call's larger n). */
typedef struct {
    int n, live;
    atomic_int ran;
} live_job;

static atomic_int stray_items;

static void live_item(void *arg, int i)
{
    live_job *job = arg;
    if (!job->live || i >= job->n) atomic_fetch_add(&stray_items, 1);
    atomic_fetch_add(&job->ran, 1);
}

static void run_live_job(thread_pool *p, int n)
{
    live_job job = { .n = n, .live = 1 };
    atomic_init(&job.ran, 0);
    thread_pool_for(p, n, live_item, &job);
    CHECK(atomic_load(&job.ran) == n, "alternating jobs: %d of %d items ran", atomic_load(&job.ran), n);
    job.live = 0;
}

static void check_alternating_sizes(int threads, int calls)
{
    thread_pool *p = thread_pool_create(threads);
    for (int c = 0; c < calls; c++) run_live_job(p, c & 1 ? 2 + c % 5 : 64);
    thread_pool_free(p);
    CHECK(atomic_load(&stray_items) == 0, "pool %d: %d items ran outside their call", threads, atomic_load(&stray_items));
}

int main(void)
{
    for (int threads = 2; threads <= 4; threads++) check_alternating_sizes(threads, 300000);
    const int sizes[] = { 0, 1, 2, 3, 7, 64, 1000 };
    for (int threads = 1; threads <= 5; threads++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) check_pool(threads, sizes[s], sizes[s] > 100 ? 50 : 2000);
    thread_pool *p = thread_pool_create(3);
    for (int rep = 0; rep < 200; rep++) {
        slow_job job;
        atomic_init(&job.done, 0);
        thread_pool_for(p, 17, slow_item, &job);
        CHECK(atomic_load(&job.done) == 17, "slow items: %d of 17 done on return", atomic_load(&job.done));
    }
    thread_pool_free(p);
    CHECK(thread_pool_create(0) == NULL, "a pool of 0 threads must be refused");
    if (test_failures) return 1;
    printf("all thread pool tests passed\n");
    return 0;
}
