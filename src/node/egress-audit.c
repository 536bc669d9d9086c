/*
 * The audit ring (see egress-audit.h). Records are kept as compact JSON
 * text, a few hundred bytes each, rather than as jansson trees (several
 * times that): 65536 of them are then some 20 MiB. The dropped-record
 * marker is made when a puller reads, from the gap between its cursor and
 * the oldest record kept, so it costs nothing to keep and is exact for
 * every puller.
 */
#include "node/egress-audit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/random-util.h"

struct egress_audit {
    char **text; /* ring of capacity slots; the oldest at head */
    size_t capacity, head, count;
    size_t bytes, max_bytes;
    uint64_t last_seq; /* of the newest record; the oldest is last_seq - count + 1 */
    uint64_t dropped;
    char epoch[33];
};

int egress_audit_new(size_t capacity, size_t max_bytes, struct egress_audit **ret)
{
    struct egress_audit *a;
    int r;

    if (capacity == 0 || max_bytes == 0) {
        return -EINVAL;
    }
    a = calloc(1, sizeof(*a));
    if (!a) {
        return -ENOMEM;
    }
    a->text = calloc(capacity, sizeof(*a->text));
    r = a->text ? random_hex(a->epoch, 16) : -ENOMEM;
    if (r < 0) {
        egress_audit_free(a);
        return r;
    }
    a->capacity = capacity;
    a->max_bytes = max_bytes;
    *ret = a;
    return 0;
}

struct egress_audit *egress_audit_free(struct egress_audit *a)
{
    if (!a) {
        return NULL;
    }
    for (size_t i = 0; a->text && i < a->count; i++) {
        free(a->text[(a->head + i) % a->capacity]);
    }
    free(a->text);
    free(a);
    return NULL;
}

const char *egress_audit_epoch(const struct egress_audit *a)
{
    return a->epoch;
}

uint64_t egress_audit_last_seq(const struct egress_audit *a)
{
    return a->last_seq;
}

uint64_t egress_audit_dropped(const struct egress_audit *a)
{
    return a->dropped;
}

static void drop_oldest(struct egress_audit *a)
{
    char **slot = &a->text[a->head];
    a->bytes -= strlen(*slot);
    free(*slot);
    *slot = NULL;
    a->head = (a->head + 1) % a->capacity;
    a->count--;
    a->dropped++;
}

int egress_audit_push(struct egress_audit *a, const json_t *record)
{
    json_t *copy;
    char *text;
    size_t len;

    if (!json_is_object(record)) {
        return -EINVAL;
    }
    /* The number is ours: whatever "seq" the record came with is not kept. */
    copy = json_copy((json_t *)record);
    if (!copy) {
        return -ENOMEM;
    }
    json_object_del(copy, "seq");
    text = json_dumps(copy, JSON_COMPACT);
    json_decref(copy);
    if (!text) {
        return -ENOMEM;
    }
    len = strlen(text);
    if (len > a->max_bytes / 16) {
        free(text);
        return -E2BIG;
    }
    while (a->count == a->capacity || (a->count > 0 && a->bytes + len > a->max_bytes)) {
        drop_oldest(a);
    }
    a->text[(a->head + a->count) % a->capacity] = text;
    a->count++;
    a->bytes += len;
    a->last_seq++;
    return 0;
}

static int append_record(json_t *list, json_t *rec, uint64_t seq)
{
    if (!rec || json_object_set_new(rec, "seq", json_integer((json_int_t)seq)) < 0) {
        json_decref(rec);
        return -ENOMEM;
    }
    return json_array_append_new(list, rec) < 0 ? -ENOMEM : 0;
}

json_t *egress_audit_read(const struct egress_audit *a, uint64_t after, size_t limit)
{
    uint64_t first = a->last_seq - a->count + 1, next = after, seq;
    json_t *list = json_array();
    json_error_t jerr;

    if (!list) {
        return NULL;
    }
    if (after > a->last_seq) {
        /* A cursor from the future (another epoch's): nothing, and where "now" is. */
        next = a->last_seq;
    }
    if (limit > 0 && after + 1 < first) {
        /* Records after the cursor were dropped before it got them. */
        json_t *marker = json_pack("{s:s, s:I}", "reason", "audit-dropped", "count",
                                   (json_int_t)(first - 1 - after));
        if (append_record(list, marker, first - 1) < 0) {
            goto oom;
        }
        next = first - 1;
        limit--;
    }
    for (seq = next + 1 > first ? next + 1 : first; seq <= a->last_seq && limit > 0;
         seq++, limit--) {
        const char *text = a->text[(a->head + (seq - first)) % a->capacity];
        if (append_record(list, json_loads(text, 0, &jerr), seq) < 0) {
            goto oom;
        }
        next = seq;
    }
    json_t *reply =
        json_pack("{s:s, s:o, s:I}", "epoch", a->epoch, "records", list, "next", (json_int_t)next);
    return reply;
oom:
    json_decref(list);
    return NULL;
}
