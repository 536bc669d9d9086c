/* JSON calls to space-node; see node-client.h. */
#include "api/node-client.h"

#include "api/egress.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "basic/macro.h"
#include "shared/http-client.h"

#define NODE_MAX_RESPONSE (256u * 1024 * 1024)

int node_client_call(const char *node_socket, const char *method, const char *path, json_t *body,
                     usec_t timeout, int *ret_status, json_t **ret_body)
{
    return http_client_unix_json(node_socket, method, path, body, timeout, NODE_MAX_RESPONSE,
                                 ret_status, ret_body);
}

static char *error_message(json_t *res, int status)
{
    const char *msg = json_string_value(json_object_get(res, "message"));
    char buf[64];
    if (!msg) {
        snprintf(buf, sizeof(buf), "node answered HTTP %d", status);
        msg = buf;
    }
    return strdup(msg);
}

int node_client_create(const char *node_socket, const struct store_sandbox *sb,
                       const struct store_snapshot *from, const char *init_json, int *ret_status,
                       char **ret_error, json_t **ret_timings, int64_t *ret_vcpus,
                       int64_t *ret_memory_mb)
{
    json_t *body = NULL, *res = NULL, *init = NULL;
    json_error_t err;
    int status = 0;
    int r;

    *ret_error = NULL;
    *ret_timings = NULL;
    *ret_vcpus = 0;
    *ret_memory_mb = 0;
    if (init_json) {
        init = json_loads(init_json, 0, &err);
    }
    /* From a snapshot: its template (the sandbox's template_id is the snapshot's id) and the
     * node restores it instead of the template's own. */
    body = json_pack("{s:s, s:s}", "id", sb->id, "template",
                     from ? from->template_id : sb->template_id);
    /* 0: the template's default size, which the node knows (its answer says which). */
    if (body && sb->vcpus > 0) {
        json_object_set_new(body, "vcpus", json_integer(sb->vcpus));
    }
    if (body && sb->memory_mb > 0) {
        json_object_set_new(body, "memory_mb", json_integer(sb->memory_mb));
    }
    if (body && from) {
        json_object_set_new(body, "from_snapshot", json_string(from->id));
    }
    /* 0: the node's own limit; the node refuses one beyond it (400). */
    if (body && sb->net_bps > 0) {
        json_object_set_new(body, "net_bps", json_integer(sb->net_bps));
    }
    if (body && sb->disk_bps > 0) {
        json_object_set_new(body, "disk_bps", json_integer(sb->disk_bps));
    }
    if (body && sb->disk_iops > 0) {
        json_object_set_new(body, "disk_iops", json_integer(sb->disk_iops));
    }
    if (!body) {
        json_decref(init);
        return -ENOMEM;
    }
    if (init) {
        json_object_set_new(body, "init", init);
    }
    /* The policy the node attaches the instance with (absent would mean deny all too). */
    json_object_set_new(body, "network", egress_native(sb->network_json));
    /* 409: the node is still creating this id (we are re-running the operation after a
     * restart of space-api); wait for that create to finish instead of failing. */
    /* A cold boot under TCG with several creates in parallel can take a while. */
    usec_t deadline = now_monotonic() + NODE_CLIENT_TIMEOUT;
    for (;;) {
        r = node_client_call(node_socket, "POST", "/v1/sandboxes", body, NODE_CLIENT_TIMEOUT,
                             &status, &res);
        if (r < 0 || status != 409 || now_monotonic() >= deadline) {
            break;
        }
        json_decref(res);
        res = NULL;
        sleep_usec(500 * USEC_PER_MSEC);
    }
    if (r < 0) {
        *ret_status = 502;
        *ret_error = strdup(strerror(-r));
        goto out;
    }
    *ret_status = status;
    if (status != 200 && status != 201) {
        *ret_error = error_message(res, status);
        r = -EIO;
    } else {
        *ret_timings = json_incref(json_object_get(res, "timings_ms"));
        json_t *v = json_object_get(res, "vcpus"), *mem = json_object_get(res, "memory_mb");
        *ret_vcpus = json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : 0;
        *ret_memory_mb =
            json_is_integer(mem) && json_integer_value(mem) > 0 ? json_integer_value(mem) : 0;
    }
out:
    json_decref(body);
    json_decref(res);
    return r;
}

int node_client_set_network(const char *node_socket, const char *id, const char *network_json,
                            int *ret_status, char **ret_error)
{
    char path[128];
    json_t *body = egress_native(network_json), *res = NULL;
    int status = 0;
    int r;

    *ret_error = NULL;
    if (!body) {
        return -ENOMEM;
    }
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/network", id);
    r = node_client_call(node_socket, "PUT", path, body, NODE_CLIENT_TIMEOUT, &status, &res);
    json_decref(body);
    if (r < 0) {
        *ret_status = 502;
        *ret_error = strdup(strerror(-r));
        return r;
    }
    *ret_status = status;
    if (status != 200 && status != 204) {
        *ret_error = error_message(res, status);
        r = -EIO;
    }
    json_decref(res);
    return r;
}

int node_client_kill(const char *node_socket, const char *id, int *ret_status, char **ret_error)
{
    char path[128];
    json_t *res = NULL;
    int status = 0;
    int r;

    *ret_error = NULL;
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
    r = node_client_call(node_socket, "DELETE", path, NULL, NODE_CLIENT_TIMEOUT, &status, &res);
    if (r < 0) {
        *ret_status = 502;
        *ret_error = strdup(strerror(-r));
        return r;
    }
    *ret_status = status;
    if (status != 204 && status != 404) {
        *ret_error = error_message(res, status);
        r = -EIO;
    }
    json_decref(res);
    return r;
}

int node_client_list(const char *node_socket, json_t **ret, json_t **ret_failed)
{
    json_t *res = NULL;
    int status = 0;
    int r = node_client_call(node_socket, "GET", "/v1/sandboxes", NULL, NODE_CLIENT_TIMEOUT,
                             &status, &res);
    if (r < 0) {
        return r;
    }
    if (status != 200 || !json_is_array(json_object_get(res, "sandboxes"))) {
        json_decref(res);
        return -EPROTO;
    }
    *ret = json_incref(json_object_get(res, "sandboxes"));
    if (ret_failed) {
        json_t *failed = json_object_get(res, "failed");
        *ret_failed = json_is_array(failed) ? json_incref(failed) : json_array();
    }
    json_decref(res);
    return 0;
}
