#pragma once
/*
 * Rolling snapshots (issue 12; architecture.md "A sandbox's life", "Rolling snapshots"): a
 * per-sandbox policy (how often a disk and a full snapshot are taken, how they are thinned
 * by age, how many bytes they may hold) and the pure retention rule that decides which of a
 * sandbox's rolling snapshots go. No store, no loop: the controller (rolling.c) feeds it rows
 * and deletes what it marks. User snapshots are never given to it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* The most tiers a policy may have, and the most snapshots one tier may keep. */
#define ROLLING_TIERS_MAX 8
#define ROLLING_TIER_KEEP_MAX 1000
/* The shortest period (seconds) a policy may ask for, unless space-api's
 * --rolling-min-period (a test option) lowers it. */
#define ROLLING_MIN_PERIOD_S 60
/* The longest a tier may reach back (seconds): a year. */
#define ROLLING_HORIZON_MAX_S (366LL * 86400)

/*
 * One age band, after the bands before it: every_s == 0 keeps every snapshot for for_s
 * seconds ({"keep_all_s": for_s}); otherwise it keeps the newest snapshot of each every_s
 * bucket (buckets are aligned to the epoch, so thinning is stable from one pass to the next)
 * for for_s seconds ({"every_s", "for_s"}).
 */
struct rolling_tier {
    int64_t every_s;
    int64_t for_s;
};

struct rolling_policy {
    int64_t disk_every_s; /* 0: no disk snapshots */
    int64_t full_every_s; /* 0: no full snapshots */
    struct rolling_tier tiers[ROLLING_TIERS_MAX];
    size_t n_tiers;
    int64_t max_bytes; /* 0: bounded only by the api-wide --rolling-max-bytes */
};

/*
 * Parses and checks a policy object: {"disk_every_s", "full_every_s", "tiers", "max_bytes"},
 * unknown fields refused. Periods are 0 (off) or >= min_period_s, at least one is on; tiers
 * default to [{"keep_all_s": 3600}, {"every_s": 3600, "for_s": 86400}, {"every_s": 86400,
 * "for_s": 604800}]; each tier's every_s >= min_period_s, for_s >= every_s, at most
 * ROLLING_TIER_KEEP_MAX snapshots per tier, the tiers' sum at most ROLLING_HORIZON_MAX_S;
 * max_bytes >= 0. 0 or -EINVAL with a message for the caller's 400 in err (size n).
 */
int rolling_policy_parse(const json_t *obj, int64_t min_period_s, struct rolling_policy *ret,
                         char *err, size_t n);
/* The policy as the API shows it (the same shape the parser takes, defaults filled in). */
json_t *rolling_policy_to_json(const struct rolling_policy *p);

struct rolling_item {
    int64_t created_at; /* unix microseconds */
    int64_t bytes;
    bool drop; /* out: delete it */
};

/*
 * Marks the items of one sandbox that its policy no longer keeps, given now (unix
 * microseconds). items must be newest first. Each tier keeps what it keeps (all, or the
 * newest per bucket) among the items whose age falls in its band; an item older than the
 * last band goes; then the oldest kept ones go until the rest fit in max_bytes (when set).
 * Items already marked stay marked. Returns how many are marked now.
 */
size_t rolling_retention(const struct rolling_policy *p, struct rolling_item *items, size_t n,
                         int64_t now_us);

/*
 * The api-wide bound: marks the oldest unmarked items (of every sandbox together, newest
 * first) until the unmarked ones fit in max_bytes. Returns how many it marked.
 */
size_t rolling_retention_total(struct rolling_item *items, size_t n, int64_t max_bytes);
