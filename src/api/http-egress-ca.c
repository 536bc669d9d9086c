/*
 * GET /v1/egress-ca, POST /v1/egress-ca/rotate: the rotation of the egress
 * gateways' deployment CA (src/gw/ca-set.h), over every node (one today,
 * --node-socket; the answer is a list already, as GET /v1/capacity's).
 *
 * GET aggregates the nodes' GET /v1/egress-ca: each node's phase,
 * fingerprints and how many of its running sandboxes hold the bundle, and
 * the totals. POST is the host admin's (the local socket): it forwards the
 * step to every node, which forwards it to its space-gw. A node's refusal
 * (409: a step out of order, or a switch before every running sandbox has
 * the staged bundle; 404: a node without a gateway) is passed through; a
 * node that does not answer is 502, one whose space-gw is down 503. Nothing is stored by the api:
 * the phase lives in each gateway's data directory.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/node-client.h"
#include "api/routes.h"
#include "basic/macro.h"
#include "shared/event-util.h"
#include "shared/http-util.h"

#define EGRESS_CA_TIMEOUT (30 * USEC_PER_SEC) /* a stage creates a key */

struct egress_ca_job {
    struct evhttp_request *req;
    char *node_socket;
    json_t *body; /* rotate: {"step"}; NULL for GET */
    json_t *res;
    int status, r;
};

static void job_free(struct egress_ca_job *j)
{
    json_decref(j->body);
    json_decref(j->res);
    free(j->node_socket);
    free(j);
}

static void egress_ca_work(void *p)
{
    struct egress_ca_job *j = p;

    if (j->body) {
        j->r = node_client_call(j->node_socket, "POST", "/v1/egress-ca/rotate", j->body,
                                EGRESS_CA_TIMEOUT, &j->status, &j->res);
    } else {
        j->r = node_client_call(j->node_socket, "GET", "/v1/egress-ca", NULL, EGRESS_CA_TIMEOUT,
                                &j->status, &j->res);
    }
}

/* The node's message, for the aggregate's error text. */
static const char *node_message(const struct egress_ca_job *j)
{
    const char *msg = json_string_value(json_object_get(j->res, "message"));
    return msg ? msg : "no message";
}

static void egress_ca_done(void *p)
{
    struct egress_ca_job *j = p;
    json_t *nodes, *node;
    const char *phase;

    if (j->r < 0) {
        http_util_reply_error(j->req, 502, "node 'local' unreachable: %s", strerror(-j->r));
        goto out;
    }
    if (j->status != 200 || !json_is_object(j->res)) {
        /* 409 (out of order, sandboxes without the bundle), 400 and 404 (a node without a
         * gateway) as the node said them; a gateway that is down (the node's 503) stays 503;
         * anything else is the node's failure: 502. */
        int status = j->status == 409 || j->status == 400 || j->status == 404 || j->status == 503
                         ? j->status
                         : 502;
        if (j->status == 503) {
            evhttp_add_header(evhttp_request_get_output_headers(j->req), "Retry-After", "1");
        }
        http_util_reply_error(j->req, status, "node 'local': %s", node_message(j));
        goto out;
    }
    node = json_deep_copy(j->res);
    json_object_set_new(node, "node", json_string("local"));
    phase = json_string_value(json_object_get(node, "phase"));
    nodes = json_array();
    json_array_append_new(nodes, node);
    /* One node: its phase is everyone's. With more, "mixed" until they agree. */
    http_util_reply_json(
        j->req, 200,
        json_pack("{s:s, s:o, s:I, s:I, s:I}", "phase", phase ? phase : "unknown", "nodes", nodes,
                  "sandboxes", json_integer_value(json_object_get(node, "sandboxes")),
                  "with_bundle", json_integer_value(json_object_get(node, "with_bundle")),
                  "not_running", json_integer_value(json_object_get(node, "not_running"))));
out:
    job_free(j);
}

static void run(struct request_ctx *c, json_t *body)
{
    struct egress_ca_job *j = calloc(1, sizeof(*j));

    if (!j || !(j->node_socket = strdup(c->m->node_socket))) {
        free(j);
        json_decref(body);
        http_util_reply_error(c->req, 500, "out of memory");
        return;
    }
    j->req = c->req;
    j->body = body;
    if (event_util_run_job(c->m->base, &c->m->jobs, egress_ca_work, egress_ca_done, j) < 0) {
        job_free(j);
        http_util_reply_error(c->req, 500, "cannot start worker");
    }
}

void http_egress_ca_get(struct request_ctx *c)
{
    run(c, NULL);
}

void http_egress_ca_rotate(struct request_ctx *c)
{
    json_t *body;
    const char *step;

    if (!c->admin) {
        http_util_reply_error(c->req, 403,
                              "rotating the egress CA is the host admin's (space-api's local "
                              "socket)");
        return;
    }
    body = http_util_body_json(c->req);
    if (!body) {
        return;
    }
    if (!json_is_object(body)) {
        http_util_reply_error(c->req, 400, "the body must be {\"step\": ...}");
        json_decref(body);
        return;
    }
    if (!routes_check_fields(c->req, body, "the rotate request", "step")) {
        json_decref(body);
        return;
    }
    step = json_string_value(json_object_get(body, "step"));
    if (!step || (strcmp(step, "stage") != 0 && strcmp(step, "switch") != 0 &&
                  strcmp(step, "finish") != 0)) {
        http_util_reply_error(c->req, 400, "'step' must be \"stage\", \"switch\" or \"finish\"");
        json_decref(body);
        return;
    }
    run(c, body);
}
