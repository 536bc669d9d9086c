/*
 * See route-cache.h. A chained hash table keyed by sandbox id; it doubles
 * when it holds more entries than buckets, so a lookup stays a few string
 * compares whatever the number of sandboxes.
 */
#include "api/route-cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/sandbox.h"
#include "basic/log.h"

#define INITIAL_BUCKETS 64

struct node {
    struct route_entry e;
    struct node *next;
};

struct route_cache {
    struct node **buckets;
    size_t n_buckets; /* a power of two */
    size_t n;
    int64_t polled_since; /* the start of the previous poll or load (realtime us); 0: never */
};

static size_t hash_id(const char *id)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *id; id++) {
        h = (h ^ (unsigned char)*id) * 1099511628211ull;
    }
    return (size_t)h;
}

int route_cache_new(struct route_cache **ret)
{
    struct route_cache *rc = calloc(1, sizeof(*rc));

    if (!rc) {
        return -ENOMEM;
    }
    rc->buckets = calloc(INITIAL_BUCKETS, sizeof(*rc->buckets));
    if (!rc->buckets) {
        free(rc);
        return -ENOMEM;
    }
    rc->n_buckets = INITIAL_BUCKETS;
    *ret = rc;
    return 0;
}

static void free_nodes(struct node **buckets, size_t n_buckets)
{
    for (size_t i = 0; i < n_buckets; i++) {
        for (struct node *p = buckets[i], *next; p; p = next) {
            next = p->next;
            free(p);
        }
    }
    free(buckets);
}

struct route_cache *route_cache_free(struct route_cache *rc)
{
    if (rc) {
        free_nodes(rc->buckets, rc->n_buckets);
        free(rc);
    }
    return NULL;
}

static struct node **find(const struct route_cache *rc, const char *id)
{
    struct node **pp = &rc->buckets[hash_id(id) & (rc->n_buckets - 1)];

    while (*pp && strcmp((*pp)->e.id, id) != 0) {
        pp = &(*pp)->next;
    }
    return pp;
}

/* Doubles the table; on allocation failure it stays as it is (only slower). */
static void grow(struct route_cache *rc)
{
    size_t n = rc->n_buckets * 2;
    struct node **b = calloc(n, sizeof(*b));

    if (!b) {
        return;
    }
    for (size_t i = 0; i < rc->n_buckets; i++) {
        for (struct node *p = rc->buckets[i], *next; p; p = next) {
            next = p->next;
            size_t k = hash_id(p->e.id) & (n - 1);
            p->next = b[k];
            b[k] = p;
        }
    }
    free(rc->buckets);
    rc->buckets = b;
    rc->n_buckets = n;
}

void route_cache_remove(struct route_cache *rc, const char *id)
{
    struct node **pp = find(rc, id), *p = *pp;

    if (p) {
        *pp = p->next;
        free(p);
        rc->n--;
    }
}

static bool is_live(const struct store_sandbox *sb)
{
    return sb->state && sb->desired_state && strcmp(sb->state, SANDBOX_STATE_KILLED) != 0 &&
           strcmp(sb->desired_state, SANDBOX_STATE_KILLED) != 0;
}

static int entry_from_row(const struct store_sandbox *sb, struct route_entry *ret)
{
    *ret = (struct route_entry){ .updated_at = sb->updated_at };
    if (!sb->id || !sandbox_id_is_valid(sb->id)) {
        return -EINVAL;
    }
    memcpy(ret->id, sb->id, SANDBOX_ID_LEN + 1);
    ret->running = strcmp(sb->state, SANDBOX_STATE_RUNNING) == 0;
    /* The states sandbox_e2b_state() calls paused (sandbox.c is not linked here). */
    static const char *const paused[] = { "pausing",    "paused",    "resuming",
                                          "suspending", "suspended", "restoring" };
    for (size_t i = 0; i < sizeof(paused) / sizeof(paused[0]); i++) {
        ret->paused = ret->paused || strcmp(sb->state, paused[i]) == 0;
    }
    if (sb->envd_access_token) {
        size_t n = strlen(sb->envd_access_token);
        if (n > ROUTE_CACHE_TOKEN_MAX) {
            return -EINVAL;
        }
        memcpy(ret->access_token, sb->envd_access_token, n + 1);
        ret->has_token = true;
    }
    ret->private_traffic = sb->private_traffic;
    ret->auto_resume = sb->auto_resume;
    if (sb->private_traffic && ret->has_token &&
        traffic_token_derive(ret->access_token, ret->traffic_token) < 0) {
        ret->traffic_token[0] = '\0'; /* fail closed */
    }
    return 0;
}

int route_cache_apply(struct route_cache *rc, const struct store_sandbox *sb)
{
    struct route_entry e;
    struct node **pp, *p;
    int r;

    if (!sb->id || !sandbox_id_is_valid(sb->id)) {
        return -EINVAL;
    }
    if (!is_live(sb)) {
        route_cache_remove(rc, sb->id);
        return 0;
    }
    r = entry_from_row(sb, &e);
    if (r < 0) {
        route_cache_remove(rc, sb->id);
        return r;
    }
    pp = find(rc, sb->id);
    if (*pp) {
        (*pp)->e = e;
        return 0;
    }
    p = calloc(1, sizeof(*p));
    if (!p) {
        return -ENOMEM;
    }
    p->e = e;
    *pp = p;
    rc->n++;
    if (rc->n > rc->n_buckets) {
        grow(rc);
    }
    return 0;
}

int route_cache_lookup(const struct route_cache *rc, const char *id, struct route_entry *ret)
{
    const struct node *p = *find(rc, id);

    if (!p) {
        return -ENOENT;
    }
    if (ret) {
        *ret = p->e;
    }
    return p->e.running ? 0 : p->e.paused ? -EHOSTDOWN : -EAGAIN;
}

size_t route_cache_size(const struct route_cache *rc)
{
    return rc->n;
}

void route_cache_sync(struct route_cache *rc, struct store *s, const char *id)
{
    struct store_sandbox sb = { 0 };
    int r;

    if (!rc || !id) {
        return;
    }
    r = store_sandbox_get(s, id, &sb);
    if (r >= 0) {
        r = route_cache_apply(rc, &sb);
    }
    if (r < 0) {
        if (r != -ENOENT) {
            log_sandbox_warning(id, "cannot refresh its route: %s; refused until the next poll",
                                strerror(-r));
        }
        route_cache_remove(rc, id);
    }
    store_sandbox_release(&sb);
}

int route_cache_load(struct route_cache *rc, struct store *s, int64_t now)
{
    struct store_sandbox_filter f = { .hide_dying = true };
    struct store_sandbox *list = NULL;
    struct route_cache *fresh = NULL;
    size_t n = 0;
    int r;

    r = store_sandbox_list(s, &f, &list, &n);
    if (r < 0) {
        return r;
    }
    r = route_cache_new(&fresh);
    for (size_t i = 0; r >= 0 && i < n; i++) {
        r = route_cache_apply(fresh, &list[i]);
        if (r == -EINVAL) {
            log_sandbox_warning(list[i].id, "its row cannot be routed (bad id or token)");
            r = 0;
        }
    }
    store_sandbox_list_free(list, n);
    if (r < 0) {
        route_cache_free(fresh);
        return r;
    }
    /* Swap the tables: the old entries go, whatever a sync or poll did to them. */
    free_nodes(rc->buckets, rc->n_buckets);
    rc->buckets = fresh->buckets;
    rc->n_buckets = fresh->n_buckets;
    rc->n = fresh->n;
    rc->polled_since = now;
    free(fresh);
    return 0;
}

int route_cache_poll(struct route_cache *rc, struct store *s, int64_t now)
{
    int64_t since = rc->polled_since - ROUTE_CACHE_POLL_OVERLAP_USEC;
    struct store_sandbox_filter f = { .include_killed = true, .updated_after = &since };
    struct store_sandbox *list = NULL;
    size_t n = 0;
    int r;

    if (rc->polled_since == 0) {
        return route_cache_load(rc, s, now);
    }
    r = store_sandbox_list(s, &f, &list, &n);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < n; i++) {
        if (route_cache_apply(rc, &list[i]) == -ENOMEM) {
            r = -ENOMEM;
        }
    }
    store_sandbox_list_free(list, n);
    if (r >= 0) {
        rc->polled_since = now;
    }
    return r;
}
