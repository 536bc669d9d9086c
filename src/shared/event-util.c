/* Worker-thread jobs and bufferevent helpers for a libevent loop; see event-util.h. */
#include "shared/event-util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "basic/macro.h"

struct job_slot {
    struct event_base *base;
    unsigned *counter;
    event_util_job_fn work, done;
    void *job;
};

static void job_done_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct job_slot *slot = userdata;
    if (slot->counter) {
        (*slot->counter)--;
    }
    slot->done(slot->job);
    free(slot);
}

static void *job_thread(void *userdata)
{
    struct job_slot *slot = userdata;
    struct timeval now = { 0, 0 };

    slot->work(slot->job);
    if (event_base_once(slot->base, -1, EV_TIMEOUT, job_done_cb, slot, &now) < 0) {
        /* Only on OOM inside libevent; losing the completion would wedge a request. */
        abort();
    }
    return NULL;
}

int event_util_run_job(struct event_base *base, unsigned *counter, event_util_job_fn work,
                       event_util_job_fn done, void *job)
{
    struct job_slot *slot = malloc(sizeof(*slot));
    pthread_attr_t attr;
    pthread_t t;
    int r;

    if (!slot) {
        return -ENOMEM;
    }
    *slot = (struct job_slot){
        .base = base, .counter = counter, .work = work, .done = done, .job = job
    };
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    r = -pthread_create(&t, &attr, job_thread, slot);
    pthread_attr_destroy(&attr);
    if (r < 0) {
        free(slot);
        return r;
    }
    if (counter) {
        (*counter)++;
    }
    return 0;
}

void event_util_bev_stop(struct bufferevent *bev)
{
    if (bev) {
        bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
        bufferevent_disable(bev, EV_READ | EV_WRITE);
    }
}

void event_util_close_later(struct bufferevent *a, struct bufferevent *b, struct event *reaper)
{
    event_util_bev_stop(a);
    event_util_bev_stop(b);
    event_active(reaper, EV_TIMEOUT, 1);
}

#define FILL_CHUNK (256u * 1024) /* per readv: a few of these drain a busy socket */

/* The reads of event_util_bev_fill(); in is unfrozen around them. */
static ssize_t fill(struct evbuffer *in, int fd, size_t limit)
{
    size_t added = 0;

    while (evbuffer_get_length(in) < limit) {
        size_t want = MIN(limit - evbuffer_get_length(in), (size_t)FILL_CHUNK);
        struct evbuffer_iovec v[2];
        int nv = evbuffer_reserve_space(in, (ev_ssize_t)want, v, 2);
        size_t room = 0, left;
        int used = 0;
        ssize_t n;

        if (nv <= 0) {
            return added > 0 ? (ssize_t)added : -ENOMEM;
        }
        /* reserve_space may offer more than asked: read no more than want. */
        for (int i = 0; i < nv; i++) {
            v[i].iov_len = MIN(v[i].iov_len, want - room);
            room += v[i].iov_len;
        }
        n = readv(fd, (struct iovec *)v, nv);
        if (n <= 0) {
            int e = n < 0 ? errno : 0;
            if (n < 0 && e != EAGAIN && e != EINTR) {
                return -e;
            }
            break; /* drained, or EOF: the bufferevent reads the EOF itself next time */
        }
        left = (size_t)n;
        for (int i = 0; i < nv && left > 0; i++, used++) {
            v[i].iov_len = MIN(v[i].iov_len, left);
            left -= v[i].iov_len;
        }
        if (evbuffer_commit_space(in, v, used) < 0) {
            return -ENOMEM;
        }
        added += (size_t)n;
        if ((size_t)n < room) {
            break; /* the socket had less than asked: it is empty now */
        }
    }
    return (ssize_t)added;
}

ssize_t event_util_bev_fill(struct bufferevent *bev, size_t limit)
{
    struct evbuffer *in = bufferevent_get_input(bev);
    evutil_socket_t fd = bufferevent_getfd(bev);
    ssize_t n;

    if (fd < 0) {
        return 0;
    }
    /* A socket bufferevent keeps its input's end frozen except while it reads itself: the
     * same here. */
    (void)evbuffer_unfreeze(in, 0);
    n = fill(in, fd, limit);
    (void)evbuffer_freeze(in, 0);
    return n;
}
