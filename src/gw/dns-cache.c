/*
 * The DNS proxy's answer cache (dns-cache.h has the contract): a flat array
 * scanned with a name hash first, like resolved.c; at most a few hundred
 * entries, so a scan of 64-bit hashes is cheaper than a query's syscalls.
 */
#include "gw/dns-cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"

struct dns_cache_entry {
    uint64_t hash;
    uint16_t qtype;
    usec_t stored, expires;
    size_t n;
    struct dns_answer *recs; /* n records, TTLs clamped */
    char name[DNS_NAME_MAX + 1];
};

struct dns_cache {
    struct dns_cache_entry *entries;
    size_t n, alloc, max;
};

static uint64_t name_hash(const char *s, uint16_t qtype)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ qtype;
    for (; *s; s++) {
        h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    }
    return h;
}

int dns_cache_new(size_t max, struct dns_cache **ret)
{
    struct dns_cache *c = calloc(1, sizeof(*c));

    if (!c) {
        return -ENOMEM;
    }
    c->max = max ? max : DNS_CACHE_MAX_DEFAULT;
    *ret = c;
    return 0;
}

void dns_cache_clear(struct dns_cache *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->entries[i].recs);
    }
    c->n = 0;
}

struct dns_cache *dns_cache_free(struct dns_cache *c)
{
    if (c) {
        dns_cache_clear(c);
        free(c->entries);
        free(c);
    }
    return NULL;
}

size_t dns_cache_count(const struct dns_cache *c)
{
    return c->n;
}

static struct dns_cache_entry *find(const struct dns_cache *c, uint64_t h, const char *name,
                                    uint16_t qtype)
{
    for (size_t i = 0; i < c->n; i++) {
        struct dns_cache_entry *e = &c->entries[i];
        if (e->hash == h && e->qtype == qtype && strcmp(e->name, name) == 0) {
            return e;
        }
    }
    return NULL;
}

struct collect {
    struct dns_answer recs[DNS_CACHE_RECORDS];
    size_t n;
    bool over, addr_last;
    uint32_t ttl_min, ttl_max;
};

static void collect_cb(const struct dns_answer *a, void *userdata)
{
    struct collect *k = userdata;

    if (k->n == DNS_CACHE_RECORDS) {
        k->over = true;
        return;
    }
    k->recs[k->n] = *a;
    k->recs[k->n].ttl = MAX(MIN(a->ttl, k->ttl_max), k->ttl_min);
    k->addr_last = a->type != DNS_TYPE_CNAME;
    k->n++;
}

int dns_cache_put(struct dns_cache *c, const struct dns_reply *r, uint32_t ttl_min,
                  uint32_t ttl_max, usec_t now)
{
    static struct collect k; /* 4 KiB: off the stack; one loop thread */
    struct dns_cache_entry *e;
    uint32_t ttl = UINT32_MAX;
    uint64_t h;
    struct dns_answer *recs;

    if (r->rcode != DNS_RCODE_NOERROR || (r->flags & DNS_FLAG_TC) || ttl_min < 1 ||
        ttl_min > ttl_max || strlen(r->qname) == 0) {
        return 0;
    }
    k.n = 0;
    k.over = k.addr_last = false;
    k.ttl_min = ttl_min;
    k.ttl_max = ttl_max;
    dns_reply_foreach_chain(r, collect_cb, &k);
    if (k.n == 0 || k.over || !k.addr_last) {
        return 0;
    }
    for (size_t i = 0; i < k.n; i++) {
        ttl = MIN(ttl, k.recs[i].ttl);
    }
    recs = malloc(k.n * sizeof(*recs));
    if (!recs) {
        return -ENOMEM;
    }
    memcpy(recs, k.recs, k.n * sizeof(*recs));
    h = name_hash(r->qname, r->qtype);
    e = find(c, h, r->qname, r->qtype);
    if (!e && c->n == c->max) {
        /* Full: the entry expiring first makes room (an expired one, if any, is that one). */
        e = &c->entries[0];
        for (size_t i = 1; i < c->n; i++) {
            if (c->entries[i].expires < e->expires) {
                e = &c->entries[i];
            }
        }
    } else if (!e) {
        if (c->n == c->alloc) {
            /* Grown on use: a sandbox that never resolves costs nothing. */
            size_t n = MIN(MAX(c->alloc * 2, (size_t)8), c->max);
            struct dns_cache_entry *p = realloc(c->entries, n * sizeof(*p));
            if (!p) {
                free(recs);
                return -ENOMEM;
            }
            c->entries = p;
            c->alloc = n;
        }
        e = &c->entries[c->n++];
        e->recs = NULL;
    }
    free(e->recs);
    e->hash = h;
    e->qtype = r->qtype;
    e->stored = now;
    e->expires = now + (usec_t)ttl * USEC_PER_SEC;
    e->n = k.n;
    e->recs = recs;
    snprintf(e->name, sizeof(e->name), "%s", r->qname);
    return 1;
}

bool dns_cache_get(struct dns_cache *c, const char *name, uint16_t qtype, usec_t now,
                   struct dns_reply *ret)
{
    struct dns_cache_entry *e = find(c, name_hash(name, qtype), name, qtype);
    uint32_t age;

    if (!e || now >= e->expires || now < e->stored) {
        return false;
    }
    age = (uint32_t)((now - e->stored) / USEC_PER_SEC);
    ret->id = 0;
    ret->flags = DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA;
    ret->rcode = DNS_RCODE_NOERROR;
    snprintf(ret->qname, sizeof(ret->qname), "%s", e->name);
    ret->qtype = qtype;
    ret->qclass = DNS_CLASS_IN;
    for (size_t i = 0; i < e->n; i++) {
        ret->answers[i] = e->recs[i];
        /* Expiry is at the smallest TTL, so every record has more than age left. */
        ret->answers[i].ttl = MAX(e->recs[i].ttl - MIN(age, e->recs[i].ttl), 1u);
    }
    ret->n_answers = e->n;
    ret->n_svcb_stripped = 0;
    ret->n_skipped = 0;
    return true;
}
