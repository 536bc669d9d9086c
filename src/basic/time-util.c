/* Clock reads and sleeping in usec_t. */
#include "basic/time-util.h"

#include <errno.h>
#include <time.h>

static usec_t now_clock(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (usec_t)ts.tv_sec * USEC_PER_SEC + (usec_t)ts.tv_nsec / 1000;
}

usec_t now_monotonic(void)
{
    return now_clock(CLOCK_MONOTONIC);
}

usec_t now_realtime(void)
{
    return now_clock(CLOCK_REALTIME);
}

void sleep_usec(usec_t usec)
{
    struct timespec ts = { .tv_sec = (time_t)(usec / USEC_PER_SEC),
                           .tv_nsec = (long)(usec % USEC_PER_SEC) * 1000 };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}
