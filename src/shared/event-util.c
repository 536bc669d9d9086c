/* Worker-thread jobs for a libevent loop; see event-util.h. */
#include "shared/event-util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

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
