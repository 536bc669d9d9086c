/* Plain HTTP reply helpers over evhttp; every error body is JSON (e2b-compat.md §6.1). */
#include "agent/reply.h"

#include <stdarg.h>
#include <stdio.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "agent/agent.h"
#include "shared/json-util.h"

const char *reply_reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 409:
        return "Conflict";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Payload Too Large";
    case 415:
        return "Unsupported Media Type";
    case 416:
        return "Range Not Satisfiable";
    case 429:
        return "Too Many Requests";
    case 499:
        return "Client Closed Request";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 507:
        return "Insufficient Storage";
    default:
        return status >= 500 ? "Internal Server Error" : "Error";
    }
}

void reply_json(struct evhttp_request *req, int status, json_t *body)
{
    struct evbuffer *buf;
    char *s;

    if (!body) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    s = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    buf = evbuffer_new();
    if (!s || !buf) {
        free(s);
        if (buf) {
            evbuffer_free(buf);
        }
        evhttp_send_error(req, 500, NULL);
        return;
    }
    evbuffer_add(buf, s, strlen(s));
    free(s);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, status, reply_reason(status), buf);
    evbuffer_free(buf);
}

void reply_error(struct evhttp_request *req, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* The message may quote client bytes (file names) that are not UTF-8. */
    reply_json(req, status,
               json_pack("{s:i, s:o*}", "code", status, "message",
                         json_util_string_lossy(msg, strlen(msg))));
}

void reply_empty(struct evhttp_request *req, int status)
{
    evhttp_send_reply(req, status, reply_reason(status), NULL);
}
