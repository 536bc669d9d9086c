/* evhttp + jansson glue; see http-util.h. */
#include "shared/http-util.h"

#include <event2/buffer.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void http_util_reply_json(struct evhttp_request *req, int status, json_t *body)
{
    struct evbuffer *out = evbuffer_new();
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;

    json_decref(body);
    if (out && text) {
        evbuffer_add(out, text, strlen(text));
        evbuffer_add(out, "\n", 1);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "application/json");
    }
    evhttp_send_reply(req, status, NULL, text ? out : NULL);
    free(text);
    if (out) {
        evbuffer_free(out);
    }
}

void http_util_reply_error(struct evhttp_request *req, int status, const char *fmt, ...)
{
    char msg[4096];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    http_util_reply_json(req, status, json_pack("{s:i, s:s}", "code", status, "message", msg));
}

json_t *http_util_body_json(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    json_error_t err;
    json_t *j;

    if (len == 0) {
        return json_object();
    }
    j = json_loadb((const char *)evbuffer_pullup(in, -1), len, 0, &err);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        http_util_reply_error(req, 400, "request body is not a JSON object: %s",
                              j ? "not an object" : err.text);
        return NULL;
    }
    return j;
}

const char *http_util_path(struct evhttp_request *req)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    return uri ? evhttp_uri_get_path(uri) : NULL;
}
