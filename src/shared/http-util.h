#pragma once
/*
 * evhttp server helpers shared by space-node and space-api: JSON replies and
 * the one error shape {"code": <http status>, "message": "..."} that every
 * API of ours returns (E2B clients depend on the numeric code).
 */
#include <event2/http.h>
#include <jansson.h>

#include "basic/macro.h"

/* Sends body (stolen; NULL sends no body) as application/json with status. */
void http_util_reply_json(struct evhttp_request *req, int status, json_t *body);
void http_util_reply_error(struct evhttp_request *req, int status, const char *fmt, ...)
    _printf_(3, 4);
/* The request body as a JSON object ({} when empty); replies 400 and returns NULL otherwise. */
json_t *http_util_body_json(struct evhttp_request *req);
/* The request's path without query, or NULL. Borrowed from req. */
const char *http_util_path(struct evhttp_request *req);
