/* The warm pool's target from the recent create rate; see pool-target.h. */
#include "node/pool-target.h"

#include <limits.h>
#include <string.h>

#include "basic/macro.h"

void pool_rate_init(struct pool_rate *r, usec_t window)
{
    *r = (struct pool_rate){ .window = MAX(window, (usec_t)POOL_RATE_BUCKETS) };
}

static usec_t bucket_width(const struct pool_rate *r)
{
    return r->window / POOL_RATE_BUCKETS;
}

/* Moves the newest bucket up to the one now falls in, emptying the buckets passed over. */
static void advance(struct pool_rate *r, usec_t now)
{
    usec_t w = bucket_width(r);

    if (!r->started) {
        r->started = true;
        r->bucket_start = now - now % w;
        return;
    }
    if (now < r->bucket_start + w) {
        return; /* still the newest bucket (or a clock that did not move) */
    }
    usec_t steps = (now - r->bucket_start) / w;
    if (steps >= POOL_RATE_BUCKETS) {
        memset(r->counts, 0, sizeof(r->counts));
        r->head = 0;
    } else {
        for (usec_t i = 0; i < steps; i++) {
            r->head = (r->head + 1) % POOL_RATE_BUCKETS;
            r->counts[r->head] = 0;
        }
    }
    r->bucket_start += steps * w;
}

void pool_rate_add(struct pool_rate *r, usec_t now)
{
    advance(r, now);
    if (r->counts[r->head] < UINT_MAX) {
        r->counts[r->head]++;
    }
}

unsigned pool_rate_count(struct pool_rate *r, usec_t now)
{
    unsigned n = 0;

    if (!r->started) {
        return 0;
    }
    advance(r, now);
    for (unsigned i = 0; i < POOL_RATE_BUCKETS; i++) {
        n += r->counts[i];
    }
    return n;
}

double pool_rate_per_minute(struct pool_rate *r, usec_t now)
{
    return (double)pool_rate_count(r, now) * (60.0 * (double)USEC_PER_SEC) / (double)r->window;
}

unsigned pool_target(unsigned demand, unsigned min, unsigned max, unsigned level, unsigned room)
{
    unsigned t = demand;

    max = MAX(max, min);
    t = MAX(t, min);
    t = MIN(t, max);
    /* The budget wins over min: a full node keeps what it has and makes no more. */
    if (t > level + room) {
        t = level + room;
    }
    return t;
}
