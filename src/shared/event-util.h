#pragma once
/*
 * libevent glue shared by the daemons: running blocking work off the loop,
 * and the bufferevent chores every proxy repeats (below).
 *
 * event_util_run_job() runs work(job) on a new detached thread, then
 * done(job) on the loop thread (handed back with event_base_once(), which is
 * thread-safe after evthread_use_pthreads()). The worker must touch nothing
 * but its job; done owns the job. *counter (may be NULL) counts jobs in
 * flight, incremented here and decremented before done runs, on the loop.
 */
#include <event2/event.h>
#include <stddef.h>
#include <sys/types.h>

typedef void (*event_util_job_fn)(void *job);

int event_util_run_job(struct event_base *base, unsigned *counter, event_util_job_fn work,
                       event_util_job_fn done, void *job);

/*
 * Bufferevent helpers for the proxies (the ingress, space-gw).
 *
 * event_util_bev_stop(): callbacks off and I/O disabled now, NULL-safe; the
 * bufferevent itself is freed later, outside its callbacks (style.md R15).
 * event_util_close_later(): a connection's close: both its bufferevents
 * stopped, then `reaper` (an event whose callback frees the connection)
 * made active, so the memory goes from the loop, never inside a callback.
 */
struct bufferevent;

void event_util_bev_stop(struct bufferevent *bev);
void event_util_close_later(struct bufferevent *a, struct bufferevent *b, struct event *reaper);

/*
 * libevent 2.1 reads at most 4 KiB per wakeup into a socket bufferevent
 * (EVBUFFER_MAX_READ, not settable before 2.2): a bulk download then costs
 * an epoll round, a FIONREAD and a readv per 4 KiB. Called from bev's read
 * callback, this reads more from its socket straight into its input, until
 * the input holds `limit` bytes or the socket has nothing more. Only for
 * a plain socket bufferevent (an OpenSSL one has its own reads): it
 * unfreezes the input's end for its reads, as the bufferevent does for its own.
 *
 * Returns the bytes added (0: none now; an EOF is left for the bufferevent
 * to see and report on its next read), or -errno for a socket error (the
 * caller ends the connection: the bufferevent would not see it again).
 */
ssize_t event_util_bev_fill(struct bufferevent *bev, size_t limit);
