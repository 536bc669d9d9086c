/*
 * GET /v1/capacity: every node's GET /v1/capacity (src/node/capacity.h), and
 * their sum. The api has one node today (--node-socket); the answer is a list
 * already so that a cluster only adds entries. A node that does not answer
 * is listed with its error and counts for nothing in the total.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/lifecycle.h"
#include "api/node-client.h"
#include "api/routes.h"
#include "basic/macro.h"
#include "shared/event-util.h"
#include "shared/http-util.h"

/* The sections of a node's answer whose integer members add up across nodes. */
static const char *const summed[] = { "memory_mib", "vcpus", "sandboxes", "disk" };

struct capacity_job {
    struct evhttp_request *req;
    struct manager *m;
    char *node_socket;
    json_t *res;
    int status, r;
};

static void capacity_work(void *p)
{
    struct capacity_job *j = p;
    j->r = node_client_call(j->node_socket, "GET", "/v1/capacity", NULL, NODE_CLIENT_TIMEOUT,
                            &j->status, &j->res);
}

static void add_section(json_t *total, const char *name, json_t *section)
{
    json_t *sum = json_object_get(total, name);
    const char *k;
    json_t *v;

    if (!sum) {
        sum = json_object();
        json_object_set_new(total, name, sum);
    }
    json_object_foreach (section, k, v) {
        if (json_is_integer(v)) {
            json_int_t was = json_integer_value(json_object_get(sum, k));
            json_object_set_new(sum, k, json_integer(was + json_integer_value(v)));
        }
    }
}

static void capacity_done(void *p)
{
    struct capacity_job *j = p;
    json_t *nodes = json_array(), *total = json_object(), *node;

    if (j->r < 0 || j->status != 200 || !json_is_object(j->res)) {
        char msg[128];
        snprintf(msg, sizeof(msg), "%s",
                 j->r < 0 ? strerror(-j->r) : "the node did not answer its capacity");
        node = json_pack("{s:s, s:b, s:s}", "node", "local", "reachable", false, "error", msg);
    } else {
        node = json_incref(j->res);
        /* Where the node keeps its data is the host admin's business, not an API client's. */
        json_object_del(json_object_get(node, "disk"), "path");
        json_object_set_new(node, "node", json_string("local"));
        json_object_set_new(node, "reachable", json_true());
        for (size_t i = 0; i < ARRAY_SIZE(summed); i++) {
            add_section(total, summed[i], json_object_get(node, summed[i]));
        }
    }
    json_array_append_new(nodes, node);
    http_util_reply_json(j->req, 200,
                         json_pack("{s:o, s:o, s:{s:I, s:I}}", "nodes", nodes, "total", total,
                                   "api", "sandboxes", (json_int_t)lifecycle_count_live(j->m),
                                   "max_sandboxes", (json_int_t)j->m->max_sandboxes));
    json_decref(j->res);
    free(j->node_socket);
    free(j);
}

void http_capacity(struct request_ctx *c)
{
    struct capacity_job *j = calloc(1, sizeof(*j));

    if (!j || !(j->node_socket = strdup(c->m->node_socket))) {
        free(j);
        http_util_reply_error(c->req, 500, "out of memory");
        return;
    }
    j->req = c->req;
    j->m = c->m;
    if (event_util_run_job(c->m->base, &c->m->jobs, capacity_work, capacity_done, j) < 0) {
        free(j->node_socket);
        free(j);
        http_util_reply_error(c->req, 500, "cannot start worker");
    }
}
