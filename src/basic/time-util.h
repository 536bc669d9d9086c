#pragma once
/* One time type everywhere: usec_t, microseconds in a uint64_t (style.md R7). */
#include <stdint.h>

typedef uint64_t usec_t;

#define USEC_PER_SEC ((usec_t)1000000)
#define USEC_PER_MSEC ((usec_t)1000)

usec_t now_monotonic(void);
usec_t now_realtime(void);
/* Sleeps for usec, restarting on EINTR. */
void sleep_usec(usec_t usec);
