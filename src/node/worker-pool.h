#pragma once
/*
 * A capped pool of worker threads for space-node's blocking work, with a
 * bounded queue. work(job) runs on a pool thread; done(job) then runs on the
 * loop thread (handed back with event_base_once(), thread-safe after
 * evthread_use_pthreads()). A worker touches nothing but its job; done owns
 * it. When every thread is busy and the queue is full, submit fails with
 * -EAGAIN and the caller answers 503 (the node never grows without bound).
 */
#include <event2/event.h>

typedef void (*worker_fn)(void *job);

struct worker_pool;

int worker_pool_new(struct event_base *base, unsigned threads, unsigned queue_max,
                    struct worker_pool **ret);
/*
 * Stops taking jobs and lets idle threads exit. Threads in the middle of a
 * job finish it (its done never runs once the loop is gone); the pool is
 * not freed while any still run, so this never blocks.
 */
void worker_pool_stop(struct worker_pool *p);
/* Loop thread only. */
int worker_pool_submit(struct worker_pool *p, worker_fn work, worker_fn done, void *job);
/* Jobs queued or running whose done has not run yet. Loop thread only. */
unsigned worker_pool_pending(const struct worker_pool *p);
