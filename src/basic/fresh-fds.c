/* See fresh-fds.h. */
#include "basic/fresh-fds.h"

#include <errno.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

struct fresh_fds_job {
    int (*fn)(void *userdata);
    void *userdata;
    int r;
};

static void *fresh_fds_thread(void *p)
{
    struct fresh_fds_job *j = p;

    /* Unshared first, so closing touches only this thread's copy of the table. */
    if (syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_UNSHARE) < 0) {
        j->r = -errno;
        return NULL;
    }
    j->r = j->fn(j->userdata);
    return NULL;
}

int fresh_fds_run(int (*fn)(void *userdata), void *userdata)
{
    struct fresh_fds_job j = { .fn = fn, .userdata = userdata };
    pthread_t t;
    int r;

    r = pthread_create(&t, NULL, fresh_fds_thread, &j);
    if (r != 0) {
        return -r;
    }
    r = pthread_join(t, NULL);
    return r != 0 ? -r : j.r;
}
