/*
 * Routing and authentication. Patterns are matched segment by segment; a
 * `{id}` segment must be a valid sandbox id (or, for keys and operations,
 * 32 hex chars) before any handler runs. Public TCP clients need an API key
 * (E2B: X-API-Key; native: X-API-Key or `Authorization: Bearer`); the local
 * Unix socket is the host admin's and needs none.
 */
#include "api/routes.h"

#include <errno.h>
#include <event2/keyvalq_struct.h>
#include <string.h>
#include <sys/queue.h>

#include "api/auth.h"
#include "api/branch.h"
#include "api/secrets.h"
#include "api/rolling.h"
#include "api/snapshots.h"
#include "api/template-network.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "shared/http-util.h"
#include "shared/sandbox-id.h"

enum route_auth { AUTH_NONE, AUTH_KEY };
/* ID_ANY: any one segment, which the handler checks (secret names, E2B secret ids). */
enum route_id { ID_NONE, ID_SANDBOX, ID_HEX32, ID_TEMPLATE, ID_ANY };

/* Query parameters a route accepts: space-separated names; NULL accepts none, so
 * an unknown filter is a 400 instead of being ignored (issue 7 "no silent drops"). */
#define Q_ANY "*"

static const struct route {
    enum evhttp_cmd_type method;
    const char *pattern; /* "{id}" is captured and validated; "{*}" is any one segment */
    void (*fn)(struct request_ctx *c);
    enum route_auth auth;
    enum route_id id;
    const char *query;
    const char *feature; /* for e2b_not_implemented: what is missing, in the 501's message */
} routes[] = {
    /* native v1 */
    { EVHTTP_REQ_POST, "/v1/sandboxes", http_sandbox_create, AUTH_KEY, ID_NONE, "wait" },
    { EVHTTP_REQ_GET, "/v1/sandboxes", http_sandbox_list, AUTH_KEY, ID_NONE,
      "state metadata limit after order" },
    { EVHTTP_REQ_GET, "/v1/sandboxes/{id}", http_sandbox_get, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_DELETE, "/v1/sandboxes/{id}", http_sandbox_kill, AUTH_KEY, ID_SANDBOX, "wait" },
    { EVHTTP_REQ_POST, "/v1/sandboxes/{id}/timeout", http_sandbox_timeout, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_POST, "/v1/sandboxes/{id}/exec", http_sandbox_exec, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_POST, "/v1/sandboxes/{id}/pause", http_sandbox_pause, AUTH_KEY, ID_SANDBOX,
      "wait" },
    { EVHTTP_REQ_POST, "/v1/sandboxes/{id}/resume", http_sandbox_resume, AUTH_KEY, ID_SANDBOX,
      "wait" },
    { EVHTTP_REQ_POST, "/v1/sandboxes/{id}/suspend", http_sandbox_suspend, AUTH_KEY, ID_SANDBOX,
      "wait" },
    { EVHTTP_REQ_POST, "/v1/sandboxes/{id}/restore", http_sandbox_restore, AUTH_KEY, ID_SANDBOX,
      "wait" },
    { EVHTTP_REQ_PUT, "/v1/sandboxes/{id}/network", http_sandbox_network, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_GET, "/v1/sandboxes/{id}/egress", http_sandbox_egress, AUTH_KEY, ID_SANDBOX,
      "verdict proto after limit" },
    { EVHTTP_REQ_POST, "/v1/sandboxes/{id}/snapshots", http_snapshot_create, AUTH_KEY, ID_SANDBOX,
      "wait" },
    { EVHTTP_REQ_POST, "/v1/sandboxes/{id}/branch", http_sandbox_branch, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_PUT, "/v1/sandboxes/{id}/snapshot-policy", http_snapshot_policy_put, AUTH_KEY,
      ID_SANDBOX },
    { EVHTTP_REQ_GET, "/v1/sandboxes/{id}/snapshot-policy", http_snapshot_policy_get, AUTH_KEY,
      ID_SANDBOX },
    { EVHTTP_REQ_DELETE, "/v1/sandboxes/{id}/snapshot-policy", http_snapshot_policy_delete,
      AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_GET, "/v1/snapshots", http_snapshot_list, AUTH_KEY, ID_NONE,
      "sandbox name limit after" },
    { EVHTTP_REQ_GET, "/v1/snapshots/{id}", http_snapshot_get, AUTH_KEY, ID_ANY },
    { EVHTTP_REQ_DELETE, "/v1/snapshots/{id}", http_snapshot_delete, AUTH_KEY, ID_ANY },
    { EVHTTP_REQ_GET, "/v1/operations/{id}", http_operation_get, AUTH_KEY, ID_HEX32 },
    { EVHTTP_REQ_POST, "/v1/operations/{id}/wait", http_operation_wait, AUTH_KEY, ID_HEX32,
      "timeout_s" },
    { EVHTTP_REQ_GET, "/v1/templates", http_templates_list, AUTH_KEY, ID_NONE },
    { EVHTTP_REQ_GET, "/v1/pools", http_pools_list, AUTH_KEY, ID_NONE },
    { EVHTTP_REQ_GET, "/v1/capacity", http_capacity, AUTH_KEY, ID_NONE },
    { EVHTTP_REQ_GET, "/v1/egress-ca", http_egress_ca_get, AUTH_KEY, ID_NONE },
    { EVHTTP_REQ_POST, "/v1/egress-ca/rotate", http_egress_ca_rotate, AUTH_KEY, ID_NONE },
    { EVHTTP_REQ_POST, "/v1/templates/{id}/build", http_template_build, AUTH_KEY, ID_TEMPLATE },
    { EVHTTP_REQ_PUT, "/v1/templates/{id}/network", http_template_network_put, AUTH_KEY,
      ID_TEMPLATE },
    { EVHTTP_REQ_GET, "/v1/templates/{id}/network", http_template_network_get, AUTH_KEY,
      ID_TEMPLATE },
    { EVHTTP_REQ_DELETE, "/v1/templates/{id}/network", http_template_network_delete, AUTH_KEY,
      ID_TEMPLATE },
    { EVHTTP_REQ_GET, "/v1/info", http_info, AUTH_KEY, ID_NONE },
    { EVHTTP_REQ_POST, "/v1/keys", http_keys_create, AUTH_KEY, ID_NONE },
    { EVHTTP_REQ_GET, "/v1/keys", http_keys_list, AUTH_KEY, ID_NONE },
    { EVHTTP_REQ_DELETE, "/v1/keys/{id}", http_keys_delete, AUTH_KEY, ID_HEX32 },
    { EVHTTP_REQ_POST, "/v1/secrets", http_secret_create, AUTH_KEY, ID_NONE },
    { EVHTTP_REQ_GET, "/v1/secrets", http_secret_list, AUTH_KEY, ID_NONE, "limit after" },
    { EVHTTP_REQ_GET, "/v1/secrets/{id}", http_secret_get, AUTH_KEY, ID_ANY },
    { EVHTTP_REQ_PUT, "/v1/secrets/{id}", http_secret_rotate, AUTH_KEY, ID_ANY },
    { EVHTTP_REQ_DELETE, "/v1/secrets/{id}", http_secret_delete, AUTH_KEY, ID_ANY },
    /* E2B-compatible, both generations (e2b-compat.md §3.1). Before /sandboxes/{id}. */
    { EVHTTP_REQ_GET, "/sandboxes/metrics", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      "metrics of many sandboxes (GET /sandboxes/metrics)" },
    { EVHTTP_REQ_POST, "/sandboxes", e2b_sandbox_create, AUTH_KEY, ID_NONE },
    { EVHTTP_REQ_POST, "/v2/sandboxes", e2b_sandbox_create, AUTH_KEY, ID_NONE },
    { EVHTTP_REQ_GET, "/sandboxes", e2b_sandbox_list_v1, AUTH_KEY, ID_NONE, "metadata" },
    { EVHTTP_REQ_GET, "/v2/sandboxes", e2b_sandbox_list_v2, AUTH_KEY, ID_NONE,
      "metadata state limit nextToken order startedAfter startedBefore template" },
    { EVHTTP_REQ_GET, "/sandboxes/{id}", e2b_sandbox_get, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_DELETE, "/sandboxes/{id}", e2b_sandbox_kill, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_POST, "/sandboxes/{id}/timeout", e2b_sandbox_timeout, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_POST, "/sandboxes/{id}/refreshes", e2b_sandbox_refresh, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_POST, "/sandboxes/{id}/connect", e2b_sandbox_connect, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_POST, "/v2/sandboxes/{id}/connect", e2b_sandbox_connect, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_POST, "/sandboxes/{id}/resume", e2b_sandbox_resume, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_POST, "/sandboxes/{id}/pause", e2b_sandbox_pause, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_GET, "/sandboxes/{id}/metrics", e2b_sandbox_metrics, AUTH_KEY, ID_SANDBOX,
      "start end" },
    { EVHTTP_REQ_GET, "/sandboxes/{id}/logs", e2b_sandbox_logs, AUTH_KEY, ID_SANDBOX,
      "start limit" },
    { EVHTTP_REQ_GET, "/v2/sandboxes/{id}/logs", e2b_sandbox_logs, AUTH_KEY, ID_SANDBOX,
      "cursor limit direction level search" },
    /*
     * Everything else the SDKs call (e2b-sdk-surface.md §1.1) answers a clear 501 naming what
     * is missing: a 404 would read as "false"/"not found" to the SDK (kill, deleteSnapshot,
     * Template.exists) instead of as an error.
     */
    { EVHTTP_REQ_POST, "/sandboxes/{id}/fork", e2b_sandbox_fork, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_POST, "/sandboxes/{id}/snapshots", e2b_snapshot_create, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_PUT, "/sandboxes/{id}/network", e2b_sandbox_network, AUTH_KEY, ID_SANDBOX },
    { EVHTTP_REQ_GET, "/snapshots", e2b_snapshot_list, AUTH_KEY, ID_NONE,
      "sandboxID name limit nextToken" },
#define TEMPLATES                                                                                  \
    "template builds and management through the E2B API (space builds with POST "                  \
    "/v1/templates/{name}/build)"
    { EVHTTP_REQ_POST, "/v3/templates", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY, TEMPLATES },
    /* Read-only: the node's templates, each with its default size (cpuCount, memoryMB). */
    { EVHTTP_REQ_GET, "/templates", e2b_templates_list, AUTH_KEY, ID_NONE },
    { EVHTTP_REQ_POST, "/templates", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY, TEMPLATES },
    { EVHTTP_REQ_GET, "/v2/templates", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY, TEMPLATES },
    { EVHTTP_REQ_POST, "/v2/templates", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY, TEMPLATES },
    { EVHTTP_REQ_GET, "/templates/aliases/{*}", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      "template aliases (Template.exists)" },
    { EVHTTP_REQ_POST, "/templates/tags", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      "template tags (Template.assignTags)" },
    { EVHTTP_REQ_DELETE, "/templates/tags", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      "template tags (Template.removeTags)" },
    { EVHTTP_REQ_GET, "/templates/{*}/tags", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      "template tags (Template.getTags)" },
    { EVHTTP_REQ_GET, "/templates/{id}", e2b_template_get, AUTH_KEY, ID_ANY },
    { EVHTTP_REQ_POST, "/templates/{*}", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY, TEMPLATES },
    { EVHTTP_REQ_PATCH, "/templates/{*}", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      TEMPLATES },
    /* Sandbox.deleteSnapshot(): a snapshot id is deleted (204), anything else is 404. */
    { EVHTTP_REQ_DELETE, "/templates/{id}", e2b_template_delete, AUTH_KEY, ID_ANY },
    { EVHTTP_REQ_GET, "/v2/templates/{*}", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      TEMPLATES },
    { EVHTTP_REQ_PATCH, "/v2/templates/{*}", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      TEMPLATES },
    { EVHTTP_REQ_GET, "/templates/{*}/files/{*}", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      TEMPLATES },
    { EVHTTP_REQ_POST, "/templates/{*}/builds/{*}", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      TEMPLATES },
    { EVHTTP_REQ_POST, "/v2/templates/{*}/builds/{*}", e2b_not_implemented, AUTH_KEY, ID_NONE,
      Q_ANY, TEMPLATES },
    { EVHTTP_REQ_GET, "/templates/{*}/builds/{*}/status", e2b_not_implemented, AUTH_KEY, ID_NONE,
      Q_ANY, TEMPLATES },
    { EVHTTP_REQ_GET, "/templates/{*}/builds/{*}/logs", e2b_not_implemented, AUTH_KEY, ID_NONE,
      Q_ANY, TEMPLATES },
#define VOLUMES "volumes (Volume, volumeMounts)"
    { EVHTTP_REQ_GET, "/volumes", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY, VOLUMES },
    { EVHTTP_REQ_POST, "/volumes", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY, VOLUMES },
    { EVHTTP_REQ_GET, "/volumes/{*}", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY, VOLUMES },
    { EVHTTP_REQ_DELETE, "/volumes/{*}", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY, VOLUMES },
    /* The volume content service defaults to https://api.<domain>: this API. */
    { EVHTTP_REQ_GET, "/volumecontent/{*}/dir", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      VOLUMES },
    { EVHTTP_REQ_POST, "/volumecontent/{*}/dir", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      VOLUMES },
    { EVHTTP_REQ_GET, "/volumecontent/{*}/path", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      VOLUMES },
    { EVHTTP_REQ_PATCH, "/volumecontent/{*}/path", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      VOLUMES },
    { EVHTTP_REQ_DELETE, "/volumecontent/{*}/path", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      VOLUMES },
    { EVHTTP_REQ_GET, "/volumecontent/{*}/file", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      VOLUMES },
    { EVHTTP_REQ_PUT, "/volumecontent/{*}/file", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      VOLUMES },
    /* E2B's Secret class: {id} is the secretID or the name. */
    { EVHTTP_REQ_GET, "/secrets", e2b_secret_list, AUTH_KEY, ID_NONE, "limit nextToken" },
    { EVHTTP_REQ_POST, "/secrets", e2b_secret_create, AUTH_KEY, ID_NONE },
    { EVHTTP_REQ_GET, "/secrets/{id}", e2b_secret_get, AUTH_KEY, ID_ANY },
    { EVHTTP_REQ_POST, "/secrets/{id}", e2b_secret_update, AUTH_KEY, ID_ANY },
    { EVHTTP_REQ_DELETE, "/secrets/{id}", e2b_secret_delete, AUTH_KEY, ID_ANY },
#define TEAMS "teams and team metrics"
    { EVHTTP_REQ_GET, "/teams", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY, TEAMS },
    { EVHTTP_REQ_GET, "/teams/{*}/metrics", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY, TEAMS },
    { EVHTTP_REQ_GET, "/teams/{*}/metrics/max", e2b_not_implemented, AUTH_KEY, ID_NONE, Q_ANY,
      TEAMS },
};

int routes_status_from_errno(int r)
{
    switch (-r) {
    case ENOENT:
        return 404;
    case EINVAL:
        return 400;
    case EEXIST:
    case EBUSY:
        return 409;
    case EACCES:
        return 401;
    case EOPNOTSUPP:
        return 501;
    case EAGAIN:
        return 503;
    case ETIMEDOUT:
        return 504;
    default:
        return 500;
    }
}

char *routes_query(struct evhttp_request *req, const char *name)
{
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq params;
    char *v = NULL;

    if (!q || evhttp_parse_query_str(q, &params) < 0) {
        return NULL;
    }
    const char *found = evhttp_find_header(&params, name);
    if (found) {
        v = strdup(found);
    }
    evhttp_clear_headers(&params);
    return v;
}

static bool is_hex32(const char *s)
{
    if (strlen(s) != 32) {
        return false;
    }
    for (; *s; s++) {
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) {
            return false;
        }
    }
    return true;
}

/* Matches path against pattern; on success copies the {id} segment into id. */
static bool match(const char *pattern, const char *path, char *id, size_t id_size)
{
    while (*pattern && *path) {
        if (strncmp(pattern, "{id}", 4) == 0 || strncmp(pattern, "{*}", 3) == 0) {
            bool capture = pattern[1] == 'i';
            size_t n = strcspn(path, "/");
            if (n == 0 || (capture && n >= id_size)) {
                return false;
            }
            if (capture) {
                memcpy(id, path, n);
                id[n] = '\0';
            }
            pattern += capture ? 4 : 3;
            path += n;
            continue;
        }
        if (*pattern != *path) {
            return false;
        }
        pattern++;
        path++;
    }
    /* A trailing slash is tolerated: /v2/sandboxes/ == /v2/sandboxes. */
    return *pattern == '\0' && (*path == '\0' || (path[0] == '/' && path[1] == '\0'));
}

static bool word_in(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        size_t k = strcspn(p, " ");
        if (k == n && strncmp(p, word, n) == 0) {
            return true;
        }
        p += k + (p[k] == ' ');
    }
    return false;
}

const char *routes_unknown_field(json_t *obj, const char *known)
{
    const char *key;
    json_t *v;

    json_object_foreach (obj, key, v) {
        if (!word_in(known, key)) {
            return key;
        }
    }
    return NULL;
}

bool routes_check_fields(struct evhttp_request *req, json_t *obj, const char *what,
                         const char *known)
{
    const char *bad = routes_unknown_field(obj, known);
    if (bad) {
        http_util_reply_error(req, 400, "unknown field '%.64s' in %s (known: %s)", bad, what,
                              known);
        return false;
    }
    return true;
}

/* Refuses (400) a query the route does not know, or a parameter given twice: an ignored
 * filter returns wrong results. */
static bool query_allowed(struct evhttp_request *req, const char *allowed)
{
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq params;
    struct evkeyval *kv;
    bool ok = true;

    if (!q || !*q || (allowed && strcmp(allowed, Q_ANY) == 0)) {
        return true;
    }
    if (evhttp_parse_query_str(q, &params) < 0) {
        http_util_reply_error(req, 400, "invalid query string");
        return false;
    }
    TAILQ_FOREACH (kv, &params, next) {
        if (!word_in(allowed, kv->key)) {
            if (allowed) {
                http_util_reply_error(req, 400, "unknown query parameter '%.64s' (known: %s)",
                                      kv->key, allowed);
            } else {
                http_util_reply_error(req, 400, "unknown query parameter '%.64s' (none known)",
                                      kv->key);
            }
            ok = false;
            break;
        }
        for (struct evkeyval *o = TAILQ_NEXT(kv, next); o; o = TAILQ_NEXT(o, next)) {
            if (strcmp(o->key, kv->key) == 0) {
                http_util_reply_error(req, 400, "query parameter '%.64s' given more than once",
                                      kv->key);
                ok = false;
                break;
            }
        }
        if (!ok) {
            break;
        }
    }
    evhttp_clear_headers(&params);
    return ok;
}

static bool authorized(struct request_ctx *c)
{
    struct evkeyvalq *h = evhttp_request_get_input_headers(c->req);
    const char *key = evhttp_find_header(h, "X-API-Key");
    const char *bearer = evhttp_find_header(h, "Authorization");

    if (c->admin) {
        return true;
    }
    if (!key && bearer && strncmp(bearer, "Bearer ", 7) == 0) {
        key = bearer + 7;
    }
    return key && auth_key_verify(c->m->store, key) == 0;
}

void routes_dispatch(struct evhttp_request *req, void *userdata)
{
    struct listener *l = userdata;
    struct request_ctx c = { .m = l->m, .req = req, .admin = l->admin };
    const char *path = http_util_path(req);
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    bool path_known = false;
    char id[256];

    if (!path) {
        http_util_reply_error(req, 400, "invalid request URI");
        return;
    }
    if (strcmp(path, "/health") == 0) {
        evhttp_send_reply(req, 200, "OK", NULL);
        return;
    }
    if (c.m->stopping) {
        http_util_reply_error(req, 503, "space-api is shutting down");
        return;
    }
    for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
        const struct route *r = &routes[i];
        if (!match(r->pattern, path, id, sizeof(id))) {
            continue;
        }
        path_known = true;
        if (r->method != method) {
            continue;
        }
        if (r->auth == AUTH_KEY && !authorized(&c)) {
            http_util_reply_error(req, 401, "missing or invalid API key");
            return;
        }
        /* An id that cannot exist is as absent as one that does not: 404 with E2B's
         * {"code":404} (issue 8: `Sandbox.kill()` on a bad id returns false). */
        if (r->id == ID_SANDBOX && !sandbox_id_is_valid(id)) {
            http_util_reply_error(req, 404, "sandbox not found (not a sandbox id)");
            return;
        }
        if (r->id == ID_TEMPLATE && !template_name_is_valid(id)) {
            http_util_reply_error(req, 404, "template not found (not a template name)");
            return;
        }
        if (r->id == ID_HEX32 && !is_hex32(id)) {
            http_util_reply_error(req, 404, "not found (not an id)");
            return;
        }
        if (!query_allowed(req, r->query)) {
            return;
        }
        c.feature = r->feature;
        c.id = r->id == ID_NONE ? NULL : id;
        r->fn(&c);
        return;
    }
    if (path_known) {
        http_util_reply_error(req, 405, "method not allowed on %s", path);
    } else {
        http_util_reply_error(req, 404, "no route for %s", path);
    }
}

void routes_register(struct manager *m)
{
    m->public_listener = (struct listener){ .m = m, .admin = false };
    m->admin_listener = (struct listener){ .m = m, .admin = true };
    evhttp_set_gencb(m->http, routes_dispatch, &m->public_listener);
    evhttp_set_gencb(m->admin_http, routes_dispatch, &m->admin_listener);
}
