#pragma once
/*
 * How many members a warm pool keeps (pool.h): a pure computation, no
 * clock of its own (callers pass `now`), so it is tested with synthetic time.
 *
 * Demand is the number of creates that asked one pool (a template and size)
 * in the last `window`: served by a member or not. The target is that demand
 * clamped to the pool's [min, max] and then to what the node's budgets still
 * take (`room`: members that fit on top of those there are). When creates
 * stop, the window empties and the target falls back to min: that is the
 * quiet period after which the pool shrinks. One count per create and a
 * window split into POOL_RATE_BUCKETS buckets: bounded memory, no history.
 */
#include <stdbool.h>

#include "basic/time-util.h"

#define POOL_RATE_BUCKETS 12

struct pool_rate {
    usec_t window;       /* creates are counted over this span; > 0 */
    bool started;        /* a create was counted (bucket_start means something) */
    usec_t bucket_start; /* where the newest bucket begins */
    unsigned head;       /* index of the newest bucket */
    unsigned counts[POOL_RATE_BUCKETS];
};

void pool_rate_init(struct pool_rate *r, usec_t window);
/* One create at now (monotonic, never decreasing). */
void pool_rate_add(struct pool_rate *r, usec_t now);
/* Creates in the window that ends at now (at most one bucket's width more). */
unsigned pool_rate_count(struct pool_rate *r, usec_t now);
/* The same as creates per minute, for GET /v1/pools. */
double pool_rate_per_minute(struct pool_rate *r, usec_t now);

/*
 * The members to keep: demand clamped to [min, max] (max < min counts as min), and never
 * more than level + room (the members there are plus those the budgets still take).
 */
unsigned pool_target(unsigned demand, unsigned min, unsigned max, unsigned level, unsigned room);
