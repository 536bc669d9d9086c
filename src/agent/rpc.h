#pragma once
/*
 * The server side of the Connect protocol (e2b-compat.md §6.1) on evhttp:
 * decoding one request (unary JSON body, or one envelope for a server
 * stream), unary replies and errors, and server streams with keepalives,
 * flow-control hooks and disconnect detection.
 *
 * Handlers see requests and produce responses as proto3 JSON (json_t);
 * the binary proto codec, when a client asks for it, converts at this
 * boundary so handlers never know which codec is on the wire.
 *
 * Caller protocol for a handler:
 *   1. read call->msg (borrowed; valid until the handler returns);
 *   2. unary: finish with exactly one rpc_reply() or rpc_fail();
 *      streaming: either rpc_fail() (an end-stream error with HTTP 200) or
 *      rpc_stream_open(), which takes the HTTP request over; the stream
 *      then lives until rpc_stream_finish().
 * All of this runs on the event-loop thread.
 */
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "basic/macro.h"
#include "basic/time-util.h"
#include "shared/connect.h"

struct agent;
struct evhttp_request;
struct rpc_call;
struct rpc_stream;

typedef void (*rpc_handler_t)(struct rpc_call *call);

struct rpc_method {
    const char *path; /* "/process.Process/Start" */
    bool streaming;
    rpc_handler_t handler;
    /* protobuf-c message descriptors for the binary codec (NULL: JSON only). */
    const void *in_desc;
    const void *out_desc;
};

struct rpc_call {
    struct agent *agent;
    struct evhttp_request *req; /* NULL once replied or handed to a stream */
    const struct rpc_method *method;
    bool proto;       /* binary protobuf codec */
    json_t *msg;      /* the decoded request message */
    usec_t timeout;   /* Connect-Timeout-Ms; 0 = none */
    usec_t keepalive; /* Keepalive-Ping-Interval (default 90 s) */
};

/* Validates, decodes and runs one Connect request for method m. */
void rpc_dispatch(struct agent *a, struct evhttp_request *req, const struct rpc_method *m);

/* Unary success; takes ownership of msg (NULL means out of memory). */
void rpc_reply(struct rpc_call *call, json_t *msg);
/* Connect error: unary JSON error with the code's HTTP status, or for a
 * stream that has not started, HTTP 200 plus an end-stream error frame. */
void rpc_fail(struct rpc_call *call, enum connect_code code, const char *fmt, ...) _printf_(3, 4);
/* Like rpc_fail() with the code mapped from a negative errno; "%m" works. */
void rpc_fail_errno(struct rpc_call *call, int error, const char *fmt, ...) _printf_(3, 4);

typedef void (*rpc_stream_cb_t)(struct rpc_stream *s, void *userdata);

/*
 * Starts the streaming response (200 and headers, flushed at once) and
 * takes over call->req. keepalive_msg (stolen, may be NULL) is sent every
 * call->keepalive while the stream is open. on_close runs (from its own
 * loop event, never inside an evhttp callback) when the client goes away;
 * the owner must then rpc_stream_finish() the stream. on_drain runs when
 * everything queued for the client has been written (flow control).
 * Returns 0 or -ENOMEM (then the call has been failed already).
 */
int rpc_stream_open(struct rpc_call *call, json_t *keepalive_msg, rpc_stream_cb_t on_close,
                    rpc_stream_cb_t on_drain, void *userdata, struct rpc_stream **ret);
/* Queues one message envelope. Returns 0, -EPIPE once the client is gone, -ENOMEM. */
int rpc_stream_send(struct rpc_stream *s, const json_t *msg);
/* Bytes queued for the client and not yet written. */
size_t rpc_stream_pending(const struct rpc_stream *s);
bool rpc_stream_is_closed(const struct rpc_stream *s);
/*
 * Ends the stream: the end-stream frame ({} when code is negative, else
 * {"error":{code,message}}), then the HTTP response, then frees s.
 * s is invalid after the call.
 */
void rpc_stream_finish(struct rpc_stream *s, int code, const char *message);
