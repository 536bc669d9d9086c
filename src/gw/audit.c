/*
 * The audit queue (audit.h has the contract): a ring of serialised records.
 */
#include "gw/audit.h"

#include <errno.h>

#include "basic/macro.h"
#include "basic/time-util.h"
#include "shared/gw-proto.h"

struct audit {
    char **ring; /* serialised records, oldest at head */
    size_t *lens;
    size_t max, head, n;
    uint64_t dropped;       /* since the last drop record went out */
    uint64_t dropped_total; /* since start */
    bool batch_has_drop;    /* the batch last built carries the drop record */
    uint64_t batch_dropped;
};

int audit_new(size_t max, struct audit **ret)
{
    struct audit *a = calloc(1, sizeof(*a));

    if (!a) {
        return -ENOMEM;
    }
    a->max = max ? max : GW_PROTO_AUDIT_QUEUE_MAX;
    a->ring = calloc(a->max, sizeof(*a->ring));
    a->lens = calloc(a->max, sizeof(*a->lens));
    if (!a->ring || !a->lens) {
        audit_free(a);
        return -ENOMEM;
    }
    *ret = a;
    return 0;
}

struct audit *audit_free(struct audit *a)
{
    if (!a) {
        return NULL;
    }
    if (a->ring) {
        for (size_t i = 0; i < a->n; i++) {
            free(a->ring[(a->head + i) % a->max]);
        }
    }
    free(a->ring);
    free(a->lens);
    free(a);
    return NULL;
}

json_t *audit_record_new(const char *sandbox, const char *proto)
{
    json_t *rec = json_object();

    if (!rec) {
        return NULL;
    }
    if ((sandbox && json_object_set_new(rec, "sandbox", json_string(sandbox)) < 0) ||
        json_object_set_new(rec, "time", json_integer((json_int_t)now_realtime())) < 0 ||
        (proto && json_object_set_new(rec, "proto", json_string(proto)) < 0)) {
        json_decref(rec);
        return NULL;
    }
    return rec;
}

static void drop_oldest(struct audit *a)
{
    free(a->ring[a->head]);
    a->ring[a->head] = NULL;
    a->head = (a->head + 1) % a->max;
    a->n--;
    a->dropped++;
    a->dropped_total++;
}

int audit_push(struct audit *a, json_t *rec)
{
    char *s = rec ? json_dumps(rec, JSON_COMPACT) : NULL;

    json_decref(rec);
    if (!s) {
        a->dropped++;
        a->dropped_total++;
        return -ENOMEM;
    }
    if (a->n == a->max) {
        drop_oldest(a);
    }
    size_t i = (a->head + a->n) % a->max;
    a->ring[i] = s;
    a->lens[i] = strlen(s);
    a->n++;
    return 0;
}

size_t audit_pending(const struct audit *a)
{
    return a->n;
}

uint64_t audit_dropped_total(const struct audit *a)
{
    return a->dropped_total;
}

int audit_batch(struct audit *a, size_t max_records, size_t max_bytes, struct strbuf *out)
{
    static const char prefix[] = "{\"type\":\"audit\",\"records\":[";
    static const char suffix[] = "]}";
    size_t n = 0;
    int r;

    strbuf_release(out);
    a->batch_has_drop = false;
    if (a->n == 0 && a->dropped == 0) {
        return 0;
    }
    r = strbuf_append(out, prefix, sizeof(prefix) - 1);
    if (r >= 0 && a->dropped > 0) {
        r = strbuf_appendf(out, "{\"time\":%llu,\"reason\":\"audit-dropped\",\"count\":%llu}",
                           (unsigned long long)now_realtime(), (unsigned long long)a->dropped);
        a->batch_has_drop = true;
        a->batch_dropped = a->dropped;
    }
    /* The drop record counts against max_records: the node refuses a longer batch. */
    while (r >= 0 && n < a->n && n + a->batch_has_drop < max_records) {
        size_t i = (a->head + n) % a->max;
        bool comma = out->len > sizeof(prefix) - 1;
        if (out->len + comma + a->lens[i] + sizeof(suffix) - 1 > max_bytes) {
            break;
        }
        if (comma) {
            r = strbuf_append(out, ",", 1);
        }
        if (r >= 0) {
            r = strbuf_append(out, a->ring[i], a->lens[i]);
        }
        n++;
    }
    if (r >= 0 && n == 0 && !a->batch_has_drop && a->n > 0) {
        /* A record larger than a datagram can never go: count it as dropped. */
        drop_oldest(a);
        strbuf_release(out);
        return audit_batch(a, max_records, max_bytes, out);
    }
    if (r >= 0) {
        r = strbuf_append(out, suffix, sizeof(suffix) - 1);
    }
    if (r < 0) {
        strbuf_release(out);
        a->batch_has_drop = false;
        return -ENOMEM;
    }
    return (int)n;
}

void audit_commit(struct audit *a, size_t n)
{
    n = MIN(n, a->n);
    for (size_t k = 0; k < n; k++) {
        free(a->ring[a->head]);
        a->ring[a->head] = NULL;
        a->head = (a->head + 1) % a->max;
        a->n--;
    }
    if (a->batch_has_drop) {
        a->dropped -= MIN(a->dropped, a->batch_dropped);
        a->batch_has_drop = false;
    }
}
