/* Native v1: templates (from the node) and API keys. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/auth.h"
#include "api/node-client.h"
#include "api/routes.h"
#include "basic/macro.h"
#include "shared/event-util.h"
#include "shared/http-util.h"

struct templates_job {
    struct evhttp_request *req;
    char *node_socket;
    char name[64]; /* build: the template; list: "" */
    json_t *res;
    int status, r;
};

static void templates_work(void *p)
{
    struct templates_job *j = p;
    if (j->name[0]) {
        j->r = node_client_build_template(j->node_socket, j->name, &j->status, &j->res);
    } else {
        j->r = node_client_call(j->node_socket, "GET", "/v1/templates", NULL, &j->status,
                                &j->res);
    }
}

static void templates_done(void *p)
{
    struct templates_job *j = p;
    if (j->r < 0) {
        http_util_reply_error(j->req, 502, "node unreachable: %s", strerror(-j->r));
    } else {
        http_util_reply_json(j->req, j->status, TAKE_PTR(j->res));
    }
    json_decref(j->res);
    free(j->node_socket);
    free(j);
}

static void templates_relay(struct request_ctx *c, const char *build_name)
{
    struct templates_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->node_socket = strdup(c->m->node_socket))) {
        free(j);
        http_util_reply_error(c->req, 500, "out of memory");
        return;
    }
    j->req = c->req;
    snprintf(j->name, sizeof(j->name), "%s", build_name ? build_name : "");
    if (event_util_run_job(c->m->base, &c->m->jobs, templates_work, templates_done, j) < 0) {
        free(j->node_socket);
        free(j);
        http_util_reply_error(c->req, 500, "cannot start worker");
    }
}

void http_info(struct request_ctx *c)
{
    http_util_reply_json(c->req, 200,
                         json_pack("{s:s, s:s?, s:s?, s:s}", "version", SPACE_VERSION, "ingress",
                                   c->m->ingress_listen, "domain", c->m->domain, "store",
                                   store_kind(c->m->store)));
}

void http_templates_list(struct request_ctx *c)
{
    templates_relay(c, NULL);
}

void http_template_build(struct request_ctx *c)
{
    templates_relay(c, c->id);
}

static json_t *key_to_json(const struct store_api_key *k)
{
    return json_pack("{s:s, s:s, s:s, s:I, s:I}", "id", k->id, "name", k->name, "prefix",
                     k->prefix, "created_at_us", (json_int_t)k->created_at, "last_used_at_us",
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
