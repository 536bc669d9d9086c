/* Rolling snapshots: see rolling.h. */
#include "api/rolling.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/controller.h"
#include "api/operation.h"
#include "api/sandbox.h"
#include "api/snapshots.h"
#include "basic/log.h"
#include "basic/time-util.h"
#include "shared/http-util.h"
#include "shared/sandbox-id.h"

int rolling_parse(struct manager *m, const json_t *obj, struct rolling_policy *ret, char *err,
                  size_t n)
{
    return rolling_policy_parse(obj, m->rolling_min_period_s, ret, err, n);
}

int rolling_set(struct manager *m, const char *sandbox_id, const struct rolling_policy *p)
{
    int64_t now = (int64_t)now_realtime();
    json_t *j = rolling_policy_to_json(p);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    int r;

    json_decref(j);
    if (!text) {
        return -ENOMEM;
    }
    struct store_snapshot_policy row = {
        .sandbox_id = (char *)sandbox_id,
        .owner = SANDBOX_CLIENT_ID,
        .policy_json = text,
        .next_disk_at = p->disk_every_s ? now + p->disk_every_s * (int64_t)USEC_PER_SEC : 0,
        .next_full_at = p->full_every_s ? now + p->full_every_s * (int64_t)USEC_PER_SEC : 0,
        .created_at = now,
        .updated_at = now,
    };
    r = store_snapshot_policy_put(m->store, &row);
    free(text);
    return r;
}

/* The stored text back to a policy (it was checked when set: no minimum applies now). */
static int policy_load(const char *text, struct rolling_policy *ret)
{
    json_error_t e;
    json_t *obj = json_loads(text, 0, &e);
    char err[256];
    int r = obj ? rolling_policy_parse(obj, 1, ret, err, sizeof(err)) : -EINVAL;

    json_decref(obj);
    return r;
}

/* ---- turns ---- */

static void take_turn(struct manager *m, const struct store_snapshot_policy *pol, int64_t now)
{
    struct rolling_policy p;
    struct store_sandbox sb = { 0 };
    bool full = pol->next_full_at && pol->next_full_at <= now;
    int64_t every;
    int r;

    if (policy_load(pol->policy_json, &p) < 0) {
        log_sandbox_warning(pol->sandbox_id, "rolling snapshots: the stored policy is unreadable");
        return;
    }
    r = store_sandbox_get(m->store, pol->sandbox_id, &sb);
    if (r < 0 || strcmp(sb.state, SANDBOX_STATE_KILLED) == 0 ||
        strcmp(sb.desired_state, SANDBOX_STATE_KILLED) == 0) {
        goto out; /* the sweep deletes the policy */
    }
    every = full ? p.full_every_s : p.disk_every_s;
    /* The compare-and-set: whoever moves it forward takes this turn. The next one is a
     * period from now, not from the missed time: a stopped api does not come back to a burst. */
    r = store_snapshot_policy_advance(m->store, pol->sandbox_id, full,
                                      full ? pol->next_full_at : pol->next_disk_at,
                                      now + every * (int64_t)USEC_PER_SEC);
    if (r < 0) {
        if (r != -ESTALE) {
            log_sandbox_warning_errno(pol->sandbox_id, r, "rolling snapshots: cannot advance: %m");
        }
        goto out;
    }
    if (full && pol->next_disk_at && pol->next_disk_at <= now) {
        /* A full snapshot has the disk too: the disk turn due with it is this one. */
        (void)store_snapshot_policy_advance(m->store, pol->sandbox_id, false, pol->next_disk_at,
                                            now + p.disk_every_s * (int64_t)USEC_PER_SEC);
    }
    if (strcmp(sb.state, SANDBOX_STATE_RUNNING) != 0 ||
        strcmp(sb.desired_state, SANDBOX_STATE_RUNNING) != 0) {
        log_sandbox_debug(sb.id, "rolling snapshots: %s, turn skipped", sb.state);
        goto out;
    }

    char id[SANDBOX_ID_LEN + 1], op[33];
    enum sandbox_state state;
    if (sandbox_id_new(id) < 0) {
        goto out;
    }
    struct store_snapshot snap = { .id = id,
                                   .kind = full ? "full" : "disk",
                                   .state = STORE_SNAPSHOT_PENDING,
                                   .source = STORE_SNAPSHOT_SOURCE_ROLLING,
                                   .created_at = now,
                                   .updated_at = now };
    r = controller_request_snapshot(m, sb.id, &snap, op, &state);
    if (r == -EBUSY) {
        log_sandbox_debug(sb.id, "rolling snapshots: busy, turn skipped");
    } else if (r < 0) {
        log_sandbox_warning_errno(sb.id, r, "rolling snapshots: cannot take one: %m");
    } else {
        log_sandbox_debug(sb.id, "rolling snapshots: %s snapshot %s (operation %s)", snap.kind, id,
                          op);
    }
out:
    store_sandbox_release(&sb);
}

static void take_due_turns(struct manager *m)
{
    struct store_snapshot_policy *list = NULL;
    size_t n = 0;
    int64_t now = (int64_t)now_realtime();

    if (store_snapshot_policy_list(m->store, 0, &list, &n) < 0) {
        return;
    }
    for (size_t i = 0; i < n && !m->stopping; i++) {
        const struct store_snapshot_policy *p = &list[i];
        if ((p->next_full_at && p->next_full_at <= now) ||
            (p->next_disk_at && p->next_disk_at <= now)) {
            take_turn(m, p, now);
        }
    }
    store_snapshot_policy_list_free(list, n);
}

/* ---- retention ---- */

static void removed(struct manager *m, const char *id, int r, void *userdata)
{
    (void)userdata;
    if (m->rolling_deleting > 0) {
        m->rolling_deleting--;
    }
    if (r < 0) {
        log_warning_errno(r, "rolling snapshots: cannot delete snapshot %s: %m", id);
    } else {
        log_debug("rolling snapshots: deleted snapshot %s", id);
    }
}

/* Marks list[]'s items (one sandbox's rows, newest first, at the indices idx) by its policy. */
static void retain_sandbox(struct manager *m, const struct store_snapshot *list,
                           struct rolling_item *items, const size_t *idx, size_t k, int64_t now)
{
    struct store_snapshot_policy pol = { 0 };
    struct rolling_policy p;
    struct rolling_item *tmp = calloc(k, sizeof(*tmp));
    int r;

    if (!tmp) {
        return;
    }
    r = store_snapshot_policy_get(m->store, list[idx[0]].sandbox_id, &pol);
    if (r >= 0) {
        r = policy_load(pol.policy_json, &p);
    }
    if (r < 0) {
        /* Gone with its sandbox (or unreadable): the default tiers thin what is left. */
        json_t *obj = json_pack("{s:i}", "disk_every_s", 3600);
        char err[128];
        r = obj ? rolling_policy_parse(obj, 1, &p, err, sizeof(err)) : -ENOMEM;
        json_decref(obj);
    }
    if (r >= 0) {
        for (size_t i = 0; i < k; i++) {
            tmp[i] = items[idx[i]];
        }
        (void)rolling_retention(&p, tmp, k, now);
        for (size_t i = 0; i < k; i++) {
            items[idx[i]].drop = tmp[i].drop;
        }
    }
    store_snapshot_policy_release(&pol);
    free(tmp);
}

static void retention(struct manager *m)
{
    struct store_snapshot_filter f = { .owner = SANDBOX_CLIENT_ID,
                                       .source = STORE_SNAPSHOT_SOURCE_ROLLING,
                                       .complete_only = true };
    struct store_snapshot *list = NULL;
    struct rolling_item *items = NULL;
    size_t n = 0, *idx = NULL, started = 0;
    bool *seen = NULL;
    int64_t now = (int64_t)now_realtime();

    if (store_snapshot_list(m->store, &f, &list, &n) < 0 || n == 0) {
        goto out;
    }
    items = calloc(n, sizeof(*items));
    idx = calloc(n, sizeof(*idx));
    seen = calloc(n, sizeof(*seen));
    if (!items || !idx || !seen) {
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        items[i] =
            (struct rolling_item){ .created_at = list[i].created_at, .bytes = list[i].bytes };
    }
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        if (seen[i]) {
            continue;
        }
        for (size_t j = i; j < n; j++) {
            if (!seen[j] && strcmp(list[j].sandbox_id, list[i].sandbox_id) == 0) {
                seen[j] = true;
                idx[k++] = j;
            }
        }
        retain_sandbox(m, list, items, idx, k, now);
    }
    (void)rolling_retention_total(items, n, m->rolling_max_bytes);
    for (size_t i = 0; i < n && started < ROLLING_DELETES_MAX; i++) {
        if (!items[i].drop) {
            continue;
        }
        if (snapshots_remove(m, list[i].id, removed, NULL) >= 0) {
            m->rolling_deleting++;
            started++;
            log_sandbox_info(list[i].sandbox_id, "rolling snapshots: retention deletes %s",
                             list[i].id);
        }
    }
out:
    free(items);
    free(idx);
    free(seen);
    store_snapshot_list_free(list, n);
}

void rolling_tick(struct manager *m)
{
    usec_t mono = now_monotonic();

    take_due_turns(m);
    /* One pass of deletions at a time: the next one sees their rows "deleting" or gone. */
    if (m->rolling_deleting == 0 && mono - m->last_rolling_retention >= ROLLING_RETENTION_EVERY) {
        m->last_rolling_retention = mono;
        retention(m);
    }
    if (mono - m->last_rolling_sweep >= ROLLING_SWEEP_EVERY) {
        uint64_t deleted = 0;
        m->last_rolling_sweep = mono;
        if (store_snapshot_policy_sweep(m->store, &deleted) >= 0 && deleted) {
            log_debug("rolling snapshots: %llu policies of killed sandboxes deleted",
                      (unsigned long long)deleted);
        }
    }
}

/* ---- routes ---- */

/* The sandbox, when it is one of ours and alive (not killed, not being killed). */
static int live_sandbox(struct manager *m, const char *id)
{
    struct store_sandbox sb = { 0 };
    int r = store_sandbox_get(m->store, id, &sb);

    if (r >= 0 && (strcmp(sb.state, SANDBOX_STATE_KILLED) == 0 ||
                   strcmp(sb.desired_state, SANDBOX_STATE_KILLED) == 0 ||
                   strcmp(sb.client_id, SANDBOX_CLIENT_ID) != 0)) {
        r = -ENOENT;
    }
    store_sandbox_release(&sb);
    return r;
}

static json_t *time_or_null(int64_t usec)
{
    char buf[40];

    if (!usec) {
        return json_null();
    }
    sandbox_format_time(usec, buf);
    return json_string(buf);
}

static json_t *policy_to_json(const struct store_snapshot_policy *pol)
{
    json_error_t e;
    json_t *p = json_loads(pol->policy_json, 0, &e);

    return json_pack("{s:s, s:o, s:o, s:o}", "sandbox_id", pol->sandbox_id, "policy",
                     p ? p : json_object(), "next_disk_at", time_or_null(pol->next_disk_at),
                     "next_full_at", time_or_null(pol->next_full_at));
}

static void reply_policy(struct request_ctx *c, int status)
{
    struct store_snapshot_policy pol = { 0 };
    int r = store_snapshot_policy_get(c->m->store, c->id, &pol);

    if (r == -ENOENT) {
        http_util_reply_error(c->req, 404, "sandbox '%s' has no snapshot policy", c->id);
    } else if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot read the snapshot policy of '%s': %s", c->id,
                              strerror(-r));
    } else {
        http_util_reply_json(c->req, status, policy_to_json(&pol));
    }
    store_snapshot_policy_release(&pol);
}

void http_snapshot_policy_put(struct request_ctx *c)
{
    struct rolling_policy p;
    json_t *body;
    char err[256];
    int r = live_sandbox(c->m, c->id);

    if (r < 0) {
        http_util_reply_error(c->req, r == -ENOENT ? 404 : 500, "sandbox '%s' not found", c->id);
        return;
    }
    body = http_util_body_json(c->req);
    if (!body) {
        return;
    }
    r = rolling_parse(c->m, body, &p, err, sizeof(err));
    json_decref(body);
    if (r < 0) {
        http_util_reply_error(c->req, 400, "invalid snapshot policy: %s", err);
        return;
    }
    r = rolling_set(c->m, c->id, &p);
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot store the snapshot policy of '%s': %s", c->id,
                              strerror(-r));
        return;
    }
    log_sandbox_info(c->id, "rolling snapshots: policy set (disk every %llds, full every %llds)",
                     (long long)p.disk_every_s, (long long)p.full_every_s);
    reply_policy(c, 200);
}

void http_snapshot_policy_get(struct request_ctx *c)
{
    if (live_sandbox(c->m, c->id) < 0) {
        http_util_reply_error(c->req, 404, "sandbox '%s' not found", c->id);
        return;
    }
    reply_policy(c, 200);
}

void http_snapshot_policy_delete(struct request_ctx *c)
{
    int r = live_sandbox(c->m, c->id);

    if (r >= 0) {
        r = store_snapshot_policy_delete(c->m->store, c->id);
    }
    if (r == -ENOENT) {
        http_util_reply_error(c->req, 404, "sandbox '%s' has no snapshot policy", c->id);
        return;
    }
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot delete the snapshot policy of '%s': %s", c->id,
                              strerror(-r));
        return;
    }
    log_sandbox_info(c->id, "rolling snapshots: policy removed (default tiers thin what it took)");
    evhttp_send_reply(c->req, 204, "No Content", NULL);
}
