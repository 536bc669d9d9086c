#pragma once
/*
 * libevent glue shared by the daemons: running blocking work off the loop.
 *
 * event_util_run_job() runs work(job) on a new detached thread, then
 * done(job) on the loop thread (handed back with event_base_once(), which is
 * thread-safe after evthread_use_pthreads()). The worker must touch nothing
 * but its job; done owns the job. *counter (may be NULL) counts jobs in
 * flight, incremented here and decremented before done runs, on the loop.
 */
#include <event2/event.h>

typedef void (*event_util_job_fn)(void *job);

int event_util_run_job(struct event_base *base, unsigned *counter, event_util_job_fn work,
                       event_util_job_fn done, void *job);
