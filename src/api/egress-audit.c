/* Pulling the nodes' egress audit rings into the store; see egress-audit.h. */
#include "api/egress-audit.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/node-client.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "shared/event-util.h"
#include "shared/sandbox-id.h"

/* The one node there is today (lifecycle.c places every sandbox on it). */
#define NODE_ID "local"
#define EPOCH_MAX 64
/* A record bigger than this is no record space-gw makes: refused, not stored. */
#define RECORD_MAX 16384
#define PULL_TIMEOUT (30 * USEC_PER_SEC)
/* After a failed pull: a node without the route (no gateway support) is asked rarely. */
#define RETRY_USEC (5 * USEC_PER_SEC)
#define RETRY_NO_ROUTE_USEC (60 * USEC_PER_SEC)
#define TOUCHED_MAX 4096

struct egress_audit {
    char epoch[EPOCH_MAX + 1]; /* "" until the first answer */
    uint64_t after;            /* the last seq stored in epoch */
    bool running, again;
    usec_t not_before; /* monotonic: no pull before (after a failure) */
    usec_t last_prune; /* monotonic */
    /* Sandboxes that got records since the last prune: the ones the count cap looks at. */
    char (*touched)[SANDBOX_ID_LEN + 1];
    size_t n_touched;
    uint64_t failures;
};

struct pull_job {
    struct manager *m;
    /* The state, also reachable from here: a pull still running at shutdown keeps it
     * (egress_audit_free() leaves it to the job, which the loop never finishes then). */
    struct egress_audit *a;
    char *node_socket;
    uint64_t after;
    int r, status;
    json_t *res;
};

static void pull_work(void *p)
{
    struct pull_job *j = p;
    char path[96];

    snprintf(path, sizeof(path), "/v1/egress-audit?after=%" PRIu64 "&limit=%d", j->after,
             EGRESS_AUDIT_PULL_LIMIT);
    j->r = node_client_call(j->node_socket, "GET", path, NULL, PULL_TIMEOUT, &j->status, &j->res);
}

static void touch(struct egress_audit *a, const char *id)
{
    for (size_t i = 0; i < a->n_touched; i++) {
        if (strcmp(a->touched[i], id) == 0) {
            return;
        }
    }
    if (a->n_touched < TOUCHED_MAX) {
        snprintf(a->touched[a->n_touched++], SANDBOX_ID_LEN + 1, "%s", id);
    }
}

static bool epoch_is_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > EPOCH_MAX) {
        return false;
    }
    for (; *s; s++) {
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) {
            return false;
        }
    }
    return true;
}

static const char *string_in(json_t *rec, const char *key, const char *const *allowed)
{
    const char *v = json_string_value(json_object_get(rec, key));

    for (; v && *allowed; allowed++) {
        if (strcmp(v, *allowed) == 0) {
            return v;
        }
    }
    return NULL;
}

/* The record's "secret": comma-joined secret names (gw-proto.h), or NULL for anything else. */
static const char *secret_names(json_t *rec)
{
    const char *v = json_string_value(json_object_get(rec, "secret"));
    size_t n = v ? strlen(v) : 0;

    if (n == 0 || n > 64 * 65) {
        return NULL;
    }
    for (const char *p = v; *p; p++) {
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              *p == '_' || *p == '-' || *p == ',')) {
            return NULL;
        }
    }
    return v;
}

/*
 * One record of the node's page as a store row (borrowing epoch): 0, or -EINVAL for one
 * that is not a record (skipped, with a warning). record_json is the record without its
 * seq, the rest copied out of it.
 */
static int record_from_json(json_t *rec, const char *epoch, struct store_egress_record *ret)
{
    static const char *const protos[] = { "dns", "http", "tls", "tcp", NULL };
    static const char *const verdicts[] = { "allow", "deny", NULL };
    json_t *seq = json_object_get(rec, "seq"), *copy;
    const char *sandbox = json_string_value(json_object_get(rec, "sandbox"));
    json_int_t t = json_integer_value(json_object_get(rec, "time"));
    char *text;

    if (!json_is_object(rec) || !json_is_integer(seq) || json_integer_value(seq) < 0) {
        return -EINVAL;
    }
    copy = json_copy(rec);
    if (!copy) {
        return -ENOMEM;
    }
    json_object_del(copy, "seq");
    text = json_dumps(copy, JSON_COMPACT);
    json_decref(copy);
    if (!text) {
        return -ENOMEM;
    }
    if (strlen(text) > RECORD_MAX) {
        free(text);
        return -EINVAL;
    }
    *ret = (struct store_egress_record){
        .node_id = (char *)NODE_ID,
        .epoch = (char *)epoch,
        .seq = json_integer_value(seq),
        .sandbox_id = sandbox && sandbox_id_is_valid(sandbox) ? (char *)sandbox : NULL,
        .time_us = t > 0 ? t : (int64_t)now_realtime(),
        .proto = (char *)string_in(rec, "proto", protos),
        .verdict = (char *)string_in(rec, "verdict", verdicts),
        .secret = (char *)secret_names(rec),
        .record_json = text,
    };
    return 0;
}

static void pull_failed(struct egress_audit *a, const struct pull_job *j)
{
    /* 404: a node without the route (an older one, or no gateway): nothing to pull. */
    bool no_route = j->r >= 0 && j->status == 404;

    a->not_before = now_monotonic() + (no_route ? RETRY_NO_ROUTE_USEC : RETRY_USEC);
    if (a->failures++ % 60 == 0 && !no_route) {
        if (j->r < 0) {
            log_warning_errno(j->r, "cannot pull the egress audit log from the node: %m");
        } else {
            log_warning("cannot pull the egress audit log from the node: HTTP %d", j->status);
        }
    }
}

/* Stores one page; returns how many records it held, or a negative errno (cursor kept). */
static int store_page(struct manager *m, struct egress_audit *a, json_t *records,
                      uint64_t *ret_last)
{
    size_t n = json_array_size(records), k = 0, i, inserted = 0;
    struct store_egress_record *v = calloc(n ? n : 1, sizeof(*v));
    uint64_t last = a->after;
    json_t *rec;
    int r = 0;

    if (!v) {
        return -ENOMEM;
    }
    json_array_foreach (records, i, rec) {
        r = record_from_json(rec, a->epoch, &v[k]);
        if (r == -ENOMEM) {
            goto out;
        }
        if (r < 0) {
            log_warning("egress audit: skipping a malformed record from the node");
            r = 0;
            continue;
        }
        last = MAX(last, (uint64_t)v[k].seq);
        if (!v[k].sandbox_id &&
            strcmp(json_string_value(json_object_get(rec, "reason")) ?: "", "audit-dropped") == 0) {
            log_warning("egress audit: the gateway or node dropped %" PRId64 " records",
                        (int64_t)json_integer_value(json_object_get(rec, "count")));
        }
        k++;
    }
    r = store_egress_audit_insert(m->store, v, k, &inserted);
    if (r < 0) {
        log_warning_errno(r, "egress audit: cannot store %zu records: %m", k);
        goto out;
    }
    for (i = 0; i < k; i++) {
        if (v[i].sandbox_id) {
            touch(a, v[i].sandbox_id);
        }
    }
    *ret_last = last;
    r = (int)MIN(n, (size_t)INT32_MAX);
out:
    for (i = 0; i < k; i++) {
        free(v[i].record_json);
    }
    free(v);
    return r;
}

static void start_pull(struct manager *m);

static void pull_done(void *p)
{
    struct pull_job *j = p;
    struct manager *m = j->m;
    struct egress_audit *a = j->a;
    const char *epoch = json_string_value(json_object_get(j->res, "epoch"));
    json_t *records = json_object_get(j->res, "records"), *next = json_object_get(j->res, "next");
    uint64_t last = 0;
    int r;

    a->running = false;
    if (m->stopping) {
        goto out;
    }
    if (j->r < 0 || j->status != 200 || !epoch_is_valid(epoch) || !json_is_array(records)) {
        if (j->r >= 0 && j->status == 200) {
            j->status = 502; /* an answer that is not a page */
        }
        pull_failed(a, j);
        goto out;
    }
    if (a->epoch[0] && strcmp(a->epoch, epoch) != 0) {
        /* The node restarted: our seq means nothing in its new epoch. */
        log_info("egress audit: the node has a new epoch, reading its log from the start");
        snprintf(a->epoch, sizeof(a->epoch), "%s", epoch);
        a->after = 0;
        a->again = true;
        goto out;
    }
    if (!a->epoch[0]) {
        snprintf(a->epoch, sizeof(a->epoch), "%s", epoch);
    }
    r = store_page(m, a, records, &last);
    if (r < 0) {
        a->not_before = now_monotonic() + RETRY_USEC;
        goto out;
    }
    a->failures = 0;
    /* next is the node's cursor; without one, the last seq stored. */
    a->after = json_is_integer(next) && json_integer_value(next) >= 0
                   ? MAX(last, (uint64_t)json_integer_value(next))
                   : last;
    a->again = r >= EGRESS_AUDIT_PULL_LIMIT;
out:
    json_decref(j->res);
    free(j->node_socket);
    free(j);
    if (a->again && !m->stopping) {
        a->again = false;
        start_pull(m);
    }
}

static void start_pull(struct manager *m)
{
    struct egress_audit *a = m->egress_audit;
    struct pull_job *j = calloc(1, sizeof(*j));

    if (!j || !(j->node_socket = strdup(m->node_socket))) {
        free(j);
        return;
    }
    j->m = m;
    j->a = a;
    j->after = a->after;
    if (event_util_run_job(m->base, &m->jobs, pull_work, pull_done, j) < 0) {
        free(j->node_socket);
        free(j);
        return;
    }
    a->running = true;
}

static void prune(struct manager *m, struct egress_audit *a)
{
    uint64_t old = 0, capped = 0, n;
    int r;

    r = store_egress_audit_prune_before(m->store, (int64_t)now_realtime() - EGRESS_AUDIT_KEEP_USEC,
                                        &old);
    if (r < 0) {
        log_warning_errno(r, "egress audit: cannot drop old records: %m");
    }
    for (size_t i = 0; i < a->n_touched; i++) {
        n = 0;
        r = store_egress_audit_prune_sandbox(m->store, a->touched[i], EGRESS_AUDIT_KEEP_PER_SANDBOX,
                                             &n);
        if (r < 0) {
            log_warning_errno(r, "egress audit: cannot cap the records of %s: %m", a->touched[i]);
        }
        capped += n;
    }
    a->n_touched = 0;
    if (old + capped > 0) {
        log_debug("egress audit: retention dropped %" PRIu64 " old and %" PRIu64
                  " over-cap records",
                  old, capped);
    }
}

void egress_audit_tick(struct manager *m)
{
    struct egress_audit *a = m->egress_audit;
    usec_t now = now_monotonic();

    if (!a) {
        a = calloc(1, sizeof(*a));
        if (!a || !(a->touched = calloc(TOUCHED_MAX, sizeof(*a->touched)))) {
            free(a);
            return;
        }
        a->last_prune = now;
        m->egress_audit = a;
    }
    if (now - a->last_prune >= EGRESS_AUDIT_PRUNE_USEC) {
        a->last_prune = now;
        prune(m, a);
    }
    if (!a->running && now >= a->not_before) {
        start_pull(m);
    }
}

void egress_audit_free(struct manager *m)
{
    struct egress_audit *a = m->egress_audit;

    /* A pull still running hands its job back to the loop later: it keeps the state. */
    if (!a || a->running) {
        return;
    }
    free(a->touched);
    free(a);
    m->egress_audit = NULL;
}
