/*
 * Connect server plumbing on evhttp (e2b-compat.md §6.1).
 *
 * Unary calls are answered before rpc_dispatch() returns. A server stream
 * outlives the request callback: struct rpc_stream holds the evhttp
 * request and writes envelopes as HTTP/1.1 chunks. How the stream learns
 * things from evhttp:
 *   - client gone: evhttp detaches the request from the connection and
 *     runs the connection's close callback; we mark the stream closed and
 *     activate close_ev, whose callback tells the owner (never freeing
 *     anything inside evhttp's own callback, style.md R15);
 *   - output drained: evhttp_send_reply_chunk_with_cb() runs our callback
 *     when the connection's output buffer becomes empty; owners use it to
 *     resume reading a paused process (flow control);
 *   - end: the end-stream frame, evhttp_send_reply_end(); a detached
 *     request is freed by that same call.
 * evhttp gives every connection 50 s read/write timeouts; a stream whose
 * client sends nothing would be cut, so streams drop the read timeout and
 * restore the server's timeouts when the response completes.
 */
#include "agent/rpc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "agent/agent.h"
#include "agent/http-gate.h"
#include "agent/limits.h"
#include "agent/proto-codec.h"
#include "agent/reply.h"
#include "basic/log.h"
#include "basic/parse-util.h"
#include "shared/json-util.h"

#define RPC_DEFAULT_KEEPALIVE (90 * USEC_PER_SEC)
/* A streaming client that reads nothing for this long is dropped. */
#define RPC_STREAM_WRITE_TIMEOUT_SEC 600
/* Server-wide idle timeout restored on a connection after a stream (agent.c sets the same). */
#define RPC_HTTP_TIMEOUT_SEC 120

struct rpc_stream {
    struct agent *agent;
    struct evhttp_request *req;
    struct evhttp_connection *evcon; /* NULL once the client is gone */
    const struct rpc_method *method;
    bool proto;
    json_t *keepalive_msg;
    struct event *keepalive_ev;
    struct timeval keepalive_tv;
    struct event *close_ev;
    rpc_stream_cb_t on_close;
    rpc_stream_cb_t on_drain;
    void *userdata;
};

static bool content_type_is(const char *ct, const char *want)
{
    size_t n = strlen(want);

    if (!ct) {
        return false;
    }
    while (*ct == ' ') {
        ct++;
    }
    return strncasecmp(ct, want, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/*
 * Output events dominate streaming: {"event":{"data":{"stdout":"<base64>"}}}.
 * Dumping them through jansson re-scans every base64 byte (75% of the agent's
 * CPU when streaming); base64 needs no JSON escaping, so write the text
 * directly. Returns 1 when it handled msg, 0 when msg has another shape.
 */
static int encode_data_event(const json_t *msg, struct evbuffer *out)
{
    json_t *ev = json_object_get(msg, "event"), *data = json_object_get(ev, "data");
    const char *field, *b64;
    json_t *v;

    if (json_object_size(msg) != 1 || json_object_size(ev) != 1 || json_object_size(data) != 1) {
        return 0;
    }
    void *it = json_object_iter((json_t *)data);
    field = json_object_iter_key(it);
    v = json_object_iter_value(it);
    if (!json_is_string(v) || (strcmp(field, "stdout") != 0 && strcmp(field, "stderr") != 0 &&
                               strcmp(field, "pty") != 0)) {
        return 0;
    }
    b64 = json_string_value(v);
    /* Only ever base64 here; anything else takes the escaping path. */
    if (strspn(b64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") !=
        json_string_length(v)) {
        return 0;
    }
    if (evbuffer_add_printf(out, "{\"event\":{\"data\":{\"%s\":\"", field) < 0 ||
        evbuffer_add(out, b64, json_string_length(v)) < 0 || evbuffer_add(out, "\"}}}", 4) < 0) {
        return -ENOMEM;
    }
    return 1;
}

/* Serialises msg for the wire (JSON, or protobuf when the call uses it). */
static int encode_message(const struct rpc_method *m, bool proto, const json_t *msg,
                          struct evbuffer *out)
{
    char *s;
    int r;

    if (proto) {
        return proto_codec_encode(m->out_desc, msg, out);
    }
    r = encode_data_event(msg, out);
    if (r != 0) {
        return r < 0 ? r : 0;
    }
    s = json_dumps(msg, JSON_COMPACT);
    if (!s) {
        return -ENOMEM;
    }
    r = evbuffer_add(out, s, strlen(s)) < 0 ? -ENOMEM : 0;
    free(s);
    return r;
}

static json_t *error_json(enum connect_code code, const char *message)
{
    return json_pack("{s:s, s:o*}", "code", connect_code_to_string(code), "message",
                     json_util_string_lossy(message, strlen(message)));
}

/* Appends one envelope holding payload to out. */
static int add_envelope(struct evbuffer *out, uint8_t flags, struct evbuffer *payload)
{
    uint8_t hdr[CONNECT_ENVELOPE_HEADER];
    size_t n = evbuffer_get_length(payload);

    if (n > UINT32_MAX) {
        return -EMSGSIZE;
    }
    connect_envelope_header(flags, (uint32_t)n, hdr);
    if (evbuffer_add(out, hdr, sizeof(hdr)) < 0 || evbuffer_add_buffer(out, payload) < 0) {
        return -ENOMEM;
    }
    return 0;
}

/* The end-stream frame: {} or {"error":{...}}; always JSON, whatever the codec. */
static int add_end_stream(struct evbuffer *out, int code, const char *message)
{
    struct evbuffer *payload = evbuffer_new();
    json_t *j = NULL;
    char *s = NULL;
    int r = -ENOMEM;

    if (!payload) {
        return -ENOMEM;
    }
    if (code < 0) {
        j = json_object();
    } else {
        j = json_pack("{s:o*}", "error", error_json((enum connect_code)code, message));
    }
    if (!j) {
        goto out;
    }
    s = json_dumps(j, JSON_COMPACT);
    if (!s || evbuffer_add(payload, s, strlen(s)) < 0) {
        goto out;
    }
    r = add_envelope(out, CONNECT_FLAG_END_STREAM, payload);
out:
    free(s);
    json_decref(j);
    evbuffer_free(payload);
    return r;
}

static void fail_stream_before_open(struct rpc_call *call, enum connect_code code,
                                    const char *message)
{
    struct evbuffer *buf = evbuffer_new();

    if (!buf || add_end_stream(buf, (int)code, message) < 0) {
        if (buf) {
            evbuffer_free(buf);
        }
        evhttp_send_error(call->req, 500, NULL);
        call->req = NULL;
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(call->req), "Content-Type",
                      call->proto ? "application/connect+proto" : "application/connect+json");
    evhttp_send_reply(call->req, 200, "OK", buf);
    evbuffer_free(buf);
    call->req = NULL;
}

static void fail_message(struct rpc_call *call, enum connect_code code, const char *message)
{
    int status;

    if (!call->req) {
        log_warning("rpc %s: reply after reply, ignoring", call->method ? call->method->path : "?");
        return;
    }
    if (call->method && call->method->streaming) {
        fail_stream_before_open(call, code, message);
        return;
    }
    status = connect_code_to_http_status(code);
    reply_json(call->req, status, error_json(code, message));
    call->req = NULL;
}

void rpc_fail(struct rpc_call *call, enum connect_code code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fail_message(call, code, msg);
}

void rpc_fail_errno(struct rpc_call *call, int error, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    errno = error < 0 ? -error : error;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fail_message(call, connect_code_from_errno(error), msg);
}

void rpc_reply(struct rpc_call *call, json_t *msg)
{
    struct evbuffer *buf = NULL;
    int r;

    if (!call->req) {
        json_decref(msg);
        return;
    }
    if (!msg) {
        fail_message(call, CONNECT_INTERNAL, "out of memory");
        return;
    }
    buf = evbuffer_new();
    r = buf ? encode_message(call->method, call->proto, msg, buf) : -ENOMEM;
    json_decref(msg);
    if (r < 0) {
        if (buf) {
            evbuffer_free(buf);
        }
        rpc_fail_errno(call, r, "cannot encode response: %m");
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(call->req), "Content-Type",
                      call->proto ? "application/proto" : "application/json");
    evhttp_send_reply(call->req, 200, "OK", buf);
    evbuffer_free(buf);
    call->req = NULL;
}

/* "Connect-Timeout-Ms": at most 10 digits (connect protocol). */
static int parse_timeout_ms(const char *s, usec_t *ret)
{
    uint64_t ms;

    if (strlen(s) > 10 || parse_u64(s, &ms) < 0) {
        return -EINVAL;
    }
    *ret = ms * USEC_PER_MSEC;
    return 0;
}

static int decode_request(struct rpc_call *call, const uint8_t *payload, size_t len)
{
    json_error_t err;
    json_t *j;

    if (call->proto) {
        return proto_codec_decode(call->method->in_desc, payload, len, &call->msg);
    }
    if (len == 0) {
        call->msg = json_object();
        return call->msg ? 0 : -ENOMEM;
    }
    j = json_loadb((const char *)payload, len, JSON_REJECT_DUPLICATES, &err);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        return -EINVAL;
    }
    call->msg = j;
    return 0;
}

void rpc_dispatch(struct agent *a, struct evhttp_request *req, const struct rpc_method *m)
{
    struct rpc_call call = {
        .agent = a,
        .req = req,
        .method = m,
        .keepalive = RPC_DEFAULT_KEEPALIVE,
    };
    struct evkeyvalq *hdrs = evhttp_request_get_input_headers(req);
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    const char *ct = evhttp_find_header(hdrs, "Content-Type");
    const char *enc, *v;
    const uint8_t *payload;
    size_t len = evbuffer_get_length(body);
    int r;

    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
        reply_error(req, 405, "method not allowed, use POST");
        return;
    }
    if (m->streaming) {
        if (content_type_is(ct, "application/connect+json")) {
            call.proto = false;
        } else if (content_type_is(ct, "application/connect+proto") && m->in_desc) {
            call.proto = true;
        } else {
            evhttp_add_header(evhttp_request_get_output_headers(req), "Accept-Post",
                              "application/connect+json, application/connect+proto");
            reply_error(req, 415, "unsupported content type '%s'", ct ? ct : "");
            return;
        }
    } else {
        if (content_type_is(ct, "application/json")) {
            call.proto = false;
        } else if (content_type_is(ct, "application/proto") && m->in_desc) {
            call.proto = true;
        } else {
            evhttp_add_header(evhttp_request_get_output_headers(req), "Accept-Post",
                              "application/json, application/proto");
            reply_error(req, 415, "unsupported content type '%s'", ct ? ct : "");
            return;
        }
    }

    enc = evhttp_find_header(hdrs, m->streaming ? "Connect-Content-Encoding" : "Content-Encoding");
    if (enc && strcasecmp(enc, "identity") != 0) {
        rpc_fail(&call, CONNECT_UNIMPLEMENTED, "unsupported compression '%s'", enc);
        return;
    }
    v = evhttp_find_header(hdrs, "Connect-Timeout-Ms");
    if (v && parse_timeout_ms(v, &call.timeout) < 0) {
        rpc_fail(&call, CONNECT_INVALID_ARGUMENT, "invalid Connect-Timeout-Ms '%s'", v);
        return;
    }
    v = evhttp_find_header(hdrs, "Keepalive-Ping-Interval");
    if (v) {
        uint32_t sec;
        if (parse_u32(v, &sec) >= 0 && sec > 0 && sec <= 24 * 3600) {
            call.keepalive = sec * USEC_PER_SEC;
        }
    }

    if (len > AGENT_MAX_RPC_BODY + CONNECT_ENVELOPE_HEADER) {
        rpc_fail(&call, CONNECT_RESOURCE_EXHAUSTED, "message is larger than %u bytes",
                 AGENT_MAX_RPC_BODY);
        return;
    }
    payload = evbuffer_pullup(body, -1);
    if (len > 0 && !payload) {
        rpc_fail(&call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    if (m->streaming) {
        const uint8_t *msg;
        uint32_t msg_len;
        size_t used;
        uint8_t flags;

        r = connect_envelope_parse(payload, len, AGENT_MAX_RPC_BODY, &flags, &msg, &msg_len, &used);
        if (r == -EMSGSIZE) {
            rpc_fail(&call, CONNECT_RESOURCE_EXHAUSTED, "message is larger than %u bytes",
                     AGENT_MAX_RPC_BODY);
            return;
        }
        if (r <= 0 || used != len || (flags & CONNECT_FLAG_END_STREAM)) {
            rpc_fail(&call, CONNECT_INVALID_ARGUMENT,
                     "request body must be exactly one message envelope");
            return;
        }
        payload = msg;
        len = msg_len;
    }
    r = decode_request(&call, payload, len);
    if (r == -ENOMEM) {
        rpc_fail(&call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    if (r < 0) {
        rpc_fail(&call, CONNECT_INVALID_ARGUMENT, "cannot decode request message");
        return;
    }

    m->handler(&call);
    if (call.req) {
        log_error("rpc %s: handler sent no reply", m->path);
        rpc_fail(&call, CONNECT_INTERNAL, "no reply");
    }
    json_decref(call.msg);
}

/* --- streams ------------------------------------------------------------------------------- */

static void stream_closed_cb(struct evhttp_connection *evcon, void *userdata)
{
    struct rpc_stream *s = userdata;

    /* evhttp has detached s->req from the connection and is freeing the connection. */
    s->evcon = NULL;
    if (s->keepalive_ev) {
        event_del(s->keepalive_ev);
    }
    event_active(s->close_ev, 0, 0);
}

static void stream_close_event_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct rpc_stream *s = userdata;

    if (s->on_close) {
        s->on_close(s, s->userdata);
    }
}

static void stream_drained_cb(struct evhttp_connection *evcon, void *userdata)
{
    struct rpc_stream *s = userdata;

    if (s->on_drain && s->evcon) {
        s->on_drain(s, s->userdata);
    }
}

static void stream_keepalive_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct rpc_stream *s = userdata;

    if (s->keepalive_msg) {
        (void)rpc_stream_send(s, s->keepalive_msg);
    }
}

/* Puts the server's idle timeouts back once a stream's response is complete. */
static void stream_request_done_cb(struct evhttp_request *req, void *userdata)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);

    if (evcon) {
        evhttp_connection_set_timeout(evcon, RPC_HTTP_TIMEOUT_SEC);
    }
}

static struct rpc_stream *stream_free(struct rpc_stream *s)
{
    if (!s) {
        return NULL;
    }
    if (s->keepalive_ev) {
        event_free(s->keepalive_ev);
    }
    if (s->close_ev) {
        event_free(s->close_ev);
    }
    json_decref(s->keepalive_msg);
    free(s);
    return NULL;
}

int rpc_stream_open(struct rpc_call *call, json_t *keepalive_msg, rpc_stream_cb_t on_close,
                    rpc_stream_cb_t on_drain, void *userdata, struct rpc_stream **ret)
{
    struct rpc_stream *s = calloc(1, sizeof(*s));
    struct timeval write_tv = { .tv_sec = RPC_STREAM_WRITE_TIMEOUT_SEC };
    struct bufferevent *bev;

    assert(call->req);
    assert(call->method->streaming);

    if (!s) {
        json_decref(keepalive_msg);
        rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        return -ENOMEM;
    }
    s->agent = call->agent;
    s->req = call->req;
    s->evcon = evhttp_request_get_connection(call->req);
    s->method = call->method;
    s->proto = call->proto;
    s->keepalive_msg = keepalive_msg;
    s->on_close = on_close;
    s->on_drain = on_drain;
    s->userdata = userdata;
    s->close_ev = event_new(call->agent->base, -1, 0, stream_close_event_cb, s);
    if (keepalive_msg && call->keepalive > 0) {
        s->keepalive_ev = event_new(call->agent->base, -1, EV_PERSIST, stream_keepalive_cb, s);
    }
    if (!s->evcon || !s->close_ev || (keepalive_msg && call->keepalive > 0 && !s->keepalive_ev)) {
        stream_free(s);
        rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        return -ENOMEM;
    }

    evhttp_add_header(evhttp_request_get_output_headers(s->req), "Content-Type",
                      s->proto ? "application/connect+proto" : "application/connect+json");
    evhttp_send_reply_start(s->req, 200, "OK");
    http_gate_set_closecb(s->agent, s->evcon, stream_closed_cb, s);
    evhttp_request_set_on_complete_cb(s->req, stream_request_done_cb, NULL);
    bev = evhttp_connection_get_bufferevent(s->evcon);
    if (bev) {
        bufferevent_set_timeouts(bev, NULL, &write_tv);
    }
    if (s->keepalive_ev) {
        s->keepalive_tv = (struct timeval){
            .tv_sec = (time_t)(call->keepalive / USEC_PER_SEC),
            .tv_usec = (suseconds_t)(call->keepalive % USEC_PER_SEC),
        };
        event_add(s->keepalive_ev, &s->keepalive_tv);
    }
    call->req = NULL;
    *ret = s;
    return 0;
}

bool rpc_stream_is_closed(const struct rpc_stream *s)
{
    return !s->evcon;
}

size_t rpc_stream_pending(const struct rpc_stream *s)
{
    struct bufferevent *bev;

    if (!s->evcon) {
        return 0;
    }
    bev = evhttp_connection_get_bufferevent(s->evcon);
    return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

int rpc_stream_send(struct rpc_stream *s, const json_t *msg)
{
    struct evbuffer *payload = NULL, *frame = NULL;
    int r;

    if (!s->evcon) {
        return -EPIPE;
    }
    payload = evbuffer_new();
    frame = evbuffer_new();
    if (!payload || !frame) {
        r = -ENOMEM;
        goto out;
    }
    r = encode_message(s->method, s->proto, msg, payload);
    if (r < 0) {
        goto out;
    }
    r = add_envelope(frame, 0, payload);
    if (r < 0) {
        goto out;
    }
    evhttp_send_reply_chunk_with_cb(s->req, frame, stream_drained_cb, s);
    /* Keepalives are for idle streams (as envd): any other message restarts the timer. */
    if (s->keepalive_ev && msg != s->keepalive_msg) {
        event_add(s->keepalive_ev, &s->keepalive_tv);
    }
    r = 0;
out:
    if (payload) {
        evbuffer_free(payload);
    }
    if (frame) {
        evbuffer_free(frame);
    }
    return r;
}

void rpc_stream_finish(struct rpc_stream *s, int code, const char *message)
{
    struct evbuffer *frame;

    if (!s) {
        return;
    }
    if (s->evcon) {
        /* We end the response ourselves: evhttp must not call back into s any more. */
        http_gate_set_closecb(s->agent, s->evcon, NULL, NULL);
        frame = evbuffer_new();
        if (frame && add_end_stream(frame, code, message ? message : "") == 0) {
            evhttp_send_reply_chunk(s->req, frame);
        }
        if (frame) {
            evbuffer_free(frame);
        }
    }
    /* Frees the request too when the client already went away. */
    evhttp_send_reply_end(s->req);
    stream_free(s);
}
