/* A fixed pool of worker threads running one parallel-for at a time. The caller's thread takes
 * part, so a pool of 1 runs everything inline with no thread at all. */
#ifndef DSSPEC_THREADPOOL_H
#define DSSPEC_THREADPOOL_H

typedef struct thread_pool thread_pool;

thread_pool *thread_pool_create(int n_threads);  /* n_threads >= 1 */
void thread_pool_free(thread_pool *p);
int thread_pool_size(const thread_pool *p);

/* Calls fn(arg, i) for every i in [0, n) across the pool and returns when all are done.
 * Work items are handed out dynamically; fn must not depend on which thread runs it. */
void thread_pool_for(thread_pool *p, int n, void (*fn)(void *arg, int i), void *arg);

/* Calls fn(arg, t) once on every thread of the pool, the caller's included, t a distinct index in
 * [0, size): for per-thread set-up (buffers a thread keeps), which thread_pool_for cannot target. */
void thread_pool_each(thread_pool *p, void (*fn)(void *arg, int t), void *arg);

#endif
