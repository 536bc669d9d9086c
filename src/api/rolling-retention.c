/* See rolling-retention.h. */
#include "api/rolling-retention.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "basic/macro.h"

#define USEC_PER_S 1000000LL

static const struct rolling_tier default_tiers[] = {
    { .every_s = 0, .for_s = 3600 },
    { .every_s = 3600, .for_s = 86400 },
    { .every_s = 86400, .for_s = 604800 },
};

static int fail(char *err, size_t n, const char *fmt, ...) _printf_(3, 4);
static int fail(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* Every key of obj is one of the space-separated names in allowed. */
static const char *unknown_field(const json_t *obj, const char *allowed)
{
    const char *key;
    json_t *v;

    json_object_foreach ((json_t *)obj, key, v) {
        size_t k = strlen(key);
        const char *p = allowed;
        bool found = false;
        while (*p && !found) {
            size_t w = strcspn(p, " ");
            found = w == k && strncmp(p, key, k) == 0;
            p += w + (p[w] == ' ');
        }
        if (!found) {
            return key;
        }
    }
    return NULL;
}

/* An optional integer member in [lo, hi]; absent or null leaves *ret. */
static int get_int(const json_t *obj, const char *name, int64_t lo, int64_t hi, int64_t *ret,
                   char *err, size_t n)
{
    json_t *v = json_object_get(obj, name);

    if (!v || json_is_null(v)) {
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        return fail(err, n, "'%s' must be an integer from %lld to %lld", name, (long long)lo,
                    (long long)hi);
    }
    *ret = json_integer_value(v);
    return 0;
}

static int period_ok(int64_t v, int64_t min_period_s)
{
    return v == 0 || (v >= min_period_s && v <= ROLLING_HORIZON_MAX_S);
}

int rolling_policy_parse(const json_t *obj, int64_t min_period_s, struct rolling_policy *ret,
                         char *err, size_t n)
{
    struct rolling_policy p = { 0 };
    const char *bad;
    json_t *tiers;
    int64_t horizon = 0;
    int r;

    if (min_period_s < 1) {
        min_period_s = 1;
    }
    if (!json_is_object(obj)) {
        return fail(err, n, "the snapshot policy must be an object");
    }
    bad = unknown_field(obj, "disk_every_s full_every_s tiers max_bytes");
    if (bad) {
        return fail(err, n, "unknown field '%s' in the snapshot policy", bad);
    }
    r = get_int(obj, "disk_every_s", 0, ROLLING_HORIZON_MAX_S, &p.disk_every_s, err, n);
    if (r >= 0) {
        r = get_int(obj, "full_every_s", 0, ROLLING_HORIZON_MAX_S, &p.full_every_s, err, n);
    }
    if (r >= 0) {
        r = get_int(obj, "max_bytes", 0, INT64_MAX, &p.max_bytes, err, n);
    }
    if (r < 0) {
        return r;
    }
    if (!period_ok(p.disk_every_s, min_period_s) || !period_ok(p.full_every_s, min_period_s)) {
        return fail(err, n, "'disk_every_s' and 'full_every_s' must be 0 (off) or at least %lld",
                    (long long)min_period_s);
    }
    if (p.disk_every_s == 0 && p.full_every_s == 0) {
        return fail(err, n,
                    "the snapshot policy takes nothing: set 'disk_every_s' or "
                    "'full_every_s'");
    }
    tiers = json_object_get(obj, "tiers");
    if (!tiers || json_is_null(tiers)) {
        memcpy(p.tiers, default_tiers, sizeof(default_tiers));
        p.n_tiers = sizeof(default_tiers) / sizeof(default_tiers[0]);
    } else if (!json_is_array(tiers) || json_array_size(tiers) == 0 ||
               json_array_size(tiers) > ROLLING_TIERS_MAX) {
        return fail(err, n, "'tiers' must be an array of 1 to %d tiers", ROLLING_TIERS_MAX);
    } else {
        /* The shortest period taken is what a keep-all band fills at most with. */
        int64_t fastest = p.disk_every_s && p.full_every_s
                              ? (p.disk_every_s < p.full_every_s ? p.disk_every_s : p.full_every_s)
                              : (p.disk_every_s ? p.disk_every_s : p.full_every_s);
        size_t i;
        json_t *t;
        json_array_foreach (tiers, i, t) {
            struct rolling_tier *tier = &p.tiers[i];
            bool keep_all = json_is_object(t) && json_object_get(t, "keep_all_s");
            if (!json_is_object(t)) {
                return fail(err, n, "tier %zu must be an object", i);
            }
            bad = unknown_field(t, keep_all ? "keep_all_s" : "every_s for_s");
            if (bad) {
                return fail(err, n,
                            "unknown field '%s' in tier %zu: a tier is {\"keep_all_s\"} or "
                            "{\"every_s\", \"for_s\"}",
                            bad, i);
            }
            if (keep_all) {
                r = get_int(t, "keep_all_s", min_period_s, ROLLING_HORIZON_MAX_S, &tier->for_s, err,
                            n);
            } else {
                r = get_int(t, "every_s", min_period_s, ROLLING_HORIZON_MAX_S, &tier->every_s, err,
                            n);
                if (r >= 0) {
                    r = get_int(t, "for_s", min_period_s, ROLLING_HORIZON_MAX_S, &tier->for_s, err,
                                n);
                }
                if (r >= 0 && (tier->every_s == 0 || tier->for_s < tier->every_s)) {
                    r = fail(err, n, "tier %zu needs 'every_s' and 'for_s' >= 'every_s'", i);
                }
            }
            if (r < 0) {
                return r;
            }
            if (tier->for_s / (tier->every_s ? tier->every_s : fastest) > ROLLING_TIER_KEEP_MAX) {
                return fail(err, n, "tier %zu would keep more than %d snapshots", i,
                            ROLLING_TIER_KEEP_MAX);
            }
            horizon += tier->for_s;
            p.n_tiers++;
        }
    }
    if (horizon > ROLLING_HORIZON_MAX_S) {
        return fail(err, n, "the tiers reach back more than %lld seconds",
                    (long long)ROLLING_HORIZON_MAX_S);
    }
    *ret = p;
    return 0;
}

json_t *rolling_policy_to_json(const struct rolling_policy *p)
{
    json_t *tiers = json_array();

    for (size_t i = 0; tiers && i < p->n_tiers; i++) {
        const struct rolling_tier *t = &p->tiers[i];
        json_array_append_new(
            tiers, t->every_s ? json_pack("{s:I, s:I}", "every_s", (json_int_t)t->every_s, "for_s",
                                          (json_int_t)t->for_s)
                              : json_pack("{s:I}", "keep_all_s", (json_int_t)t->for_s));
    }
    return json_pack("{s:I, s:I, s:o, s:I}", "disk_every_s", (json_int_t)p->disk_every_s,
                     "full_every_s", (json_int_t)p->full_every_s, "tiers", tiers, "max_bytes",
                     (json_int_t)p->max_bytes);
}

/* Floor division (created_at may be before the epoch in a test's clock). */
static int64_t bucket_of(int64_t t_us, int64_t every_s)
{
    int64_t w = every_s * USEC_PER_S;
    return t_us >= 0 ? t_us / w : -((-t_us + w - 1) / w);
}

size_t rolling_retention(const struct rolling_policy *p, struct rolling_item *items, size_t n,
                         int64_t now_us)
{
    size_t marked = 0, tier = 0;
    int64_t band_end = p->n_tiers ? p->tiers[0].for_s * USEC_PER_S : 0, band_start = 0;
    bool have_bucket = false;
    int64_t last_bucket = 0, kept_bytes = 0;

    for (size_t i = 0; i < n; i++) {
        struct rolling_item *it = &items[i];
        int64_t age = now_us - it->created_at;

        if (it->drop) {
            continue;
        }
        if (age < 0) {
            age = 0; /* a clock step: newest */
        }
        while (tier < p->n_tiers && age >= band_end) {
            tier++;
            have_bucket = false;
            band_start = band_end;
            if (tier < p->n_tiers) {
                band_end = band_start + p->tiers[tier].for_s * USEC_PER_S;
            }
        }
        if (tier >= p->n_tiers) {
            it->drop = true; /* older than the last band */
        } else if (p->tiers[tier].every_s) {
            int64_t b = bucket_of(it->created_at, p->tiers[tier].every_s);
            /* Newest first: the first of a bucket is the one it keeps. */
            it->drop = have_bucket && b == last_bucket;
            have_bucket = true;
            last_bucket = b;
        }
        if (it->drop) {
            marked++;
        }
    }
    if (p->max_bytes <= 0) {
        return marked;
    }
    /* Newest first: keep while they fit, then everything older goes. */
    for (size_t i = 0; i < n; i++) {
        if (items[i].drop) {
            continue;
        }
        if (kept_bytes + items[i].bytes > p->max_bytes) {
            for (size_t k = i; k < n; k++) {
                if (!items[k].drop) {
                    items[k].drop = true;
                    marked++;
                }
            }
            break;
        }
        kept_bytes += items[i].bytes;
    }
    return marked;
}

size_t rolling_retention_total(struct rolling_item *items, size_t n, int64_t max_bytes)
{
    int64_t kept = 0;
    size_t marked = 0;

    for (size_t i = 0; i < n; i++) {
        if (items[i].drop) {
            continue;
        }
        if (marked || kept + items[i].bytes > max_bytes) {
            items[i].drop = true;
            marked++;
        } else {
            kept += items[i].bytes;
        }
    }
    return marked;
}
