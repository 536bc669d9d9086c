/*
 * The per-sandbox attribution table (resolved.h has the contract): a flat
 * array scanned with a name hash first. A sandbox holds at most a few
 * thousand entries and a lookup runs once per connection or request, so a
 * linear scan of 64-bit hashes costs microseconds and needs no rehashing.
 */
#include "gw/resolved.h"

#include <errno.h>

#include "basic/macro.h"
#include "gw/dns-msg.h"

struct resolved_entry {
    uint64_t hash;
    uint32_t addr;
    usec_t expires;
    char name[DNS_NAME_MAX + 1];
};

struct resolved {
    struct resolved_entry *entries;
    size_t n, alloc, max;
};

/* FNV-1a: cheap, and only a filter before strcmp(). */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) {
        h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    }
    return h;
}

int resolved_new(size_t max, struct resolved **ret)
{
    struct resolved *r = calloc(1, sizeof(*r));

    if (!r) {
        return -ENOMEM;
    }
    r->max = max ? max : RESOLVED_MAX_DEFAULT;
    *ret = r;
    return 0;
}

struct resolved *resolved_free(struct resolved *r)
{
    if (r) {
        free(r->entries);
        free(r);
    }
    return NULL;
}

static struct resolved_entry *find(const struct resolved *r, uint64_t h, const char *name,
                                   uint32_t addr)
{
    for (size_t i = 0; i < r->n; i++) {
        struct resolved_entry *e = &r->entries[i];
        if (e->hash == h && e->addr == addr && strcmp(e->name, name) == 0) {
            return e;
        }
    }
    return NULL;
}

int resolved_add(struct resolved *r, const char *name, uint32_t addr, usec_t expires)
{
    uint64_t h;
    struct resolved_entry *e;
    size_t len = strlen(name);

    if (len == 0 || len > DNS_NAME_MAX) {
        return -EINVAL;
    }
    h = name_hash(name);
    e = find(r, h, name, addr);
    if (e) {
        e->expires = MAX(e->expires, expires);
        return 0;
    }
    if (r->n == r->max) {
        /* Full: the entry expiring first makes room (an expired one, if any, is that one). */
        size_t victim = 0;
        for (size_t i = 1; i < r->n; i++) {
            if (r->entries[i].expires < r->entries[victim].expires) {
                victim = i;
            }
        }
        e = &r->entries[victim];
    } else {
        if (r->n == r->alloc) {
            /* Grown on use: a sandbox that never resolves costs nothing. */
            size_t n = MIN(MAX(r->alloc * 2, (size_t)16), r->max);
            struct resolved_entry *p = realloc(r->entries, n * sizeof(*p));
            if (!p) {
                return -ENOMEM;
            }
            r->entries = p;
            r->alloc = n;
        }
        e = &r->entries[r->n++];
    }
    e->hash = h;
    e->addr = addr;
    e->expires = expires;
    memcpy(e->name, name, len + 1);
    return 0;
}

bool resolved_has(const struct resolved *r, const char *name, uint32_t addr, usec_t now)
{
    const struct resolved_entry *e = find(r, name_hash(name), name, addr);
    return e && e->expires > now;
}

size_t resolved_count(const struct resolved *r)
{
    return r->n;
}
