/* Native v1: templates (from the node) and API keys; E2B's read-only template routes. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/auth.h"
#include "api/node-client.h"
#include "api/routes.h"
#include "api/sandbox.h"
#include "basic/macro.h"
#include "shared/event-util.h"
#include "shared/http-util.h"
#include "shared/sandbox-id.h"

/*
 * Pass-through to the node on a worker (node calls block): the node's status and
 * JSON body go back to the client as they are, or as `shape` makes them (on the loop:
 * a new body for *status, or NULL after it replied itself).
 */
struct relay_job;
typedef json_t *(*relay_shape_fn)(struct relay_job *j, int *status);
struct relay_job {
    struct evhttp_request *req;
    char *node_socket;
    char *method, *path;
    json_t *body, *res;
    usec_t timeout;
    int status, r;
    relay_shape_fn shape;
    char arg[64]; /* for shape: the template asked for */
};

static void relay_job_free(struct relay_job *j)
{
    json_decref(j->body);
    json_decref(j->res);
    free(j->node_socket);
    free(j->method);
    free(j->path);
    free(j);
}

static void relay_work(void *p)
{
    struct relay_job *j = p;
    j->r = node_client_call(j->node_socket, j->method, j->path, j->body, j->timeout, &j->status,
                            &j->res);
}

static void relay_done(void *p)
{
    struct relay_job *j = p;
    if (j->r < 0) {
        http_util_reply_error(j->req, 502, "node unreachable: %s", strerror(-j->r));
    } else if (!j->shape) {
        http_util_reply_json(j->req, j->status, TAKE_PTR(j->res));
    } else {
        int status = j->status;
        json_t *out = j->shape(j, &status);
        if (out) {
            http_util_reply_json(j->req, status, out);
        }
    }
    relay_job_free(j);
}

static void relay_shaped(struct request_ctx *c, const char *method, const char *path, json_t *body,
                         usec_t timeout, relay_shape_fn shape, const char *arg)
{
    struct relay_job *j = calloc(1, sizeof(*j));

    if (!j) {
        json_decref(body);
        http_util_reply_error(c->req, 500, "out of memory");
        return;
    }
    *j = (struct relay_job){ .req = c->req,
                             .body = body,
                             .timeout = timeout,
                             .node_socket = strdup(c->m->node_socket),
                             .method = strdup(method),
                             .path = strdup(path),
                             .shape = shape };
    snprintf(j->arg, sizeof(j->arg), "%s", arg ? arg : "");
    if (!j->node_socket || !j->method || !j->path) {
        relay_job_free(j);
        http_util_reply_error(c->req, 500, "out of memory");
        return;
    }
    if (event_util_run_job(c->m->base, &c->m->jobs, relay_work, relay_done, j) < 0) {
        relay_job_free(j);
        http_util_reply_error(c->req, 500, "cannot start worker");
    }
}

void http_relay_to_node(struct request_ctx *c, const char *method, const char *path, json_t *body,
                        usec_t timeout)
{
    relay_shaped(c, method, path, body, timeout, NULL, NULL);
}

/* ---- E2B GET /templates, GET /templates/{templateID} (read-only) ---- */

/* E2B's buildID is a UUID: the first 32 hex digits of the template's image key as one. */
static void build_id(const json_t *t, char out[37])
{
    const char *k = json_string_value(json_object_get(t, "image_key"));
    char hex[33] = "00000000000000000000000000000000";
    for (size_t i = 0; k && i < 32 && k[i]; i++) {
        hex[i] = k[i];
    }
    snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
}

/* The E2B Template for the node's template t ({name, vcpus, memory_mb, built_at, ...}). Every
 * key may create from every template: public. space counts no spawns (spawnCount 0,
 * lastSpawnedAt null) and builds each template once (buildCount 1). */
static json_t *e2b_template(const json_t *t, bool with_builds)
{
    const char *name = json_string_value(json_object_get(t, "name"));
    const char *at = json_string_value(json_object_get(t, "built_at"));
    json_int_t vcpus = json_integer_value(json_object_get(t, "vcpus"));
    json_int_t memory = json_integer_value(json_object_get(t, "memory_mb"));
    char bid[37];

    build_id(t, bid);
    at = at ? at : "1970-01-01T00:00:00Z";
    json_t *o =
        json_pack("{s:s, s:s, s:I, s:I, s:i, s:b, s:[s], s:[s], s:s, s:s, s:n, s:n, s:i, "
                  "s:s}",
                  "templateID", name ? name : "", "buildID", bid, "cpuCount", vcpus, "memoryMB",
                  memory, "diskSizeMB", 2048, "public", 1, "aliases", name ? name : "", "names",
                  name ? name : "", "createdAt", at, "updatedAt", at, "createdBy", "lastSpawnedAt",
                  "spawnCount", 0, "envdVersion", SANDBOX_ENVD_VERSION);
    if (o && with_builds) {
        json_object_set_new(o, "builds",
                            json_pack("[{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:i, s:s}]", "buildID",
                                      bid, "status", "ready", "createdAt", at, "updatedAt", at,
                                      "finishedAt", at, "cpuCount", vcpus, "memoryMB", memory,
                                      "diskSizeMB", 2048, "envdVersion", SANDBOX_ENVD_VERSION));
    } else if (o) {
        json_object_set_new(o, "buildCount", json_integer(1));
        json_object_set_new(o, "buildStatus", json_string("ready"));
    }
    return o;
}

static json_t *shape_templates(struct relay_job *j, int *status, bool one)
{
    json_t *t, *list = json_array();
    size_t i;

    if (*status != 200 || !list) {
        json_decref(list);
        http_util_reply_error(j->req, 502, "the node answered %d to its template listing", *status);
        return NULL;
    }
    json_array_foreach (json_object_get(j->res, "templates"), i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        if (!name || (one && strcmp(name, j->arg) != 0)) {
            continue;
        }
        if (one) {
            json_decref(list);
            return e2b_template(t, true);
        }
        json_array_append_new(list, e2b_template(t, false));
    }
    if (one) {
        json_decref(list);
        http_util_reply_error(j->req, 404, "template '%s' not found", j->arg);
        return NULL;
    }
    return list;
}

static json_t *shape_list(struct relay_job *j, int *status)
{
    return shape_templates(j, status, false);
}

static json_t *shape_one(struct relay_job *j, int *status)
{
    return shape_templates(j, status, true);
}

void e2b_templates_list(struct request_ctx *c)
{
    relay_shaped(c, "GET", "/v1/templates", NULL, NODE_CLIENT_TIMEOUT, shape_list, NULL);
}

void e2b_template_get(struct request_ctx *c)
{
    if (!template_name_is_valid(c->id)) {
        http_util_reply_error(c->req, 404, "template '%s' not found", c->id);
        return;
    }
    relay_shaped(c, "GET", "/v1/templates", NULL, NODE_CLIENT_TIMEOUT, shape_one, c->id);
}

void http_templates_list(struct request_ctx *c)
{
    http_relay_to_node(c, "GET", "/v1/templates", NULL, NODE_CLIENT_TIMEOUT);
}

void http_pools_list(struct request_ctx *c)
{
    /* The node's warm-pool levels (src/node/pool.h), as it answers them. */
    http_relay_to_node(c, "GET", "/v1/pools", NULL, NODE_CLIENT_TIMEOUT);
}

void http_template_build(struct request_ctx *c)
{
    char path[128];
    json_t *body = http_util_body_json(c->req);
    bool ok = body && routes_check_fields(c->req, body, "the build request (it takes none)", "");

    json_decref(body);
    if (!ok) {
        return;
    }
    snprintf(path, sizeof(path), "/v1/templates/%s/build", c->id);
    /* A first kernel build takes minutes on small hosts. */
    http_relay_to_node(c, "POST", path, NULL, 3600 * USEC_PER_SEC);
}

void http_info(struct request_ctx *c)
{
    http_util_reply_json(c->req, 200,
                         json_pack("{s:s, s:s?, s:s?, s:s}", "version", SPACE_VERSION, "ingress",
                                   c->m->ingress_listen, "domain", c->m->domain, "store",
                                   store_kind(c->m->store)));
}

static json_t *key_to_json(const struct store_api_key *k)
{
    return json_pack("{s:s, s:s, s:s, s:I, s:I}", "id", k->id, "name", k->name, "prefix", k->prefix,
                     "created_at_us", (json_int_t)k->created_at, "last_used_at_us",
                     (json_int_t)k->last_used_at);
}

void http_keys_create(struct request_ctx *c)
{
    struct store_api_key row = { 0 };
    json_t *body = http_util_body_json(c->req);
    char *key = NULL;

    if (!body) {
        return;
    }
    if (!routes_check_fields(c->req, body, "the key request", "name")) {
        goto out;
    }
    const char *name = json_string_value(json_object_get(body, "name"));
    if (!name || !*name || strlen(name) > 128) {
        http_util_reply_error(c->req, 400, "'name' must be a string of 1 to 128 characters");
        goto out;
    }
    int r = auth_key_create(c->m->store, name, &key, &row);
    if (r < 0) {
        http_util_reply_error(c->req, routes_status_from_errno(r), "cannot create key: %s",
                              strerror(-r));
        goto out;
    }
    json_t *res = key_to_json(&row);
    json_object_set_new(res, "key", json_string(key)); /* shown once */
    http_util_reply_json(c->req, 201, res);
out:
    store_api_key_release(&row);
    free(key);
    json_decref(body);
}

void http_keys_list(struct request_ctx *c)
{
    struct store_api_key *keys = NULL;
    size_t n = 0;
    int r = store_api_key_list(c->m->store, &keys, &n);
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot list keys: %s", strerror(-r));
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, key_to_json(&keys[i]));
    }
    http_util_reply_json(c->req, 200, json_pack("{s:o}", "keys", arr));
    store_api_key_list_free(keys, n);
}

void http_keys_delete(struct request_ctx *c)
{
    int r = store_api_key_delete(c->m->store, c->id);
    if (r < 0) {
        http_util_reply_error(c->req, routes_status_from_errno(r), "key '%s' %s", c->id,
                              r == -ENOENT ? "not found" : strerror(-r));
        return;
    }
    evhttp_send_reply(c->req, 204, "No Content", NULL);
}
