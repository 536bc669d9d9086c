#pragma once
/*
 * A small blocking HTTP/1.1 client for our own hops: CLI -> node over a Unix
 * socket, node -> agent over the sandbox's link. One request per connection
 * (`Connection: close`). The response is hostile input (it may come from a
 * guest): the status line and headers are capped at HTTP_CLIENT_MAX_HEADER
 * bytes, chunk sizes are bounded, and every read has a deadline.
 * Body bytes are handed to a callback as they arrive, so streams are never
 * buffered whole here.
 */
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "basic/time-util.h"

#define HTTP_CLIENT_MAX_HEADER (64u * 1024)

struct http_request {
    const char *method;
    const char *path;
    const char *host;           /* Host header; "localhost" when NULL */
    const char *const *headers; /* NULL-terminated "Name: value" lines, may be NULL */
    const void *body;
    size_t body_len;
};

/* Return <0 to abort the transfer with that error. */
typedef int (*http_body_cb)(const void *data, size_t len, void *userdata);

int http_connect_unix(const char *path, int *ret_fd);
struct sockaddr;
/* Connects the non-blocking socket fd to sa within timeout; fd stays non-blocking. */
int http_connect_fd(int fd, const struct sockaddr *sa, unsigned salen, usec_t timeout);
/* Connects with a timeout to a numeric IPv4 address. */
int http_connect_tcp(const char *ip, uint16_t port, usec_t timeout, int *ret_fd);

/*
 * Sends req on fd and reads the response. deadline is absolute
 * (now_monotonic() based); 0 means none. *ret_content_type (may be NULL) is
 * allocated. Returns 0, -ETIMEDOUT, -EPROTO for a malformed response, or -errno.
 */
int http_client_request(int fd, const struct http_request *req, usec_t deadline, int *ret_status,
                        char **ret_content_type, http_body_cb cb, void *userdata);

/*
 * One JSON request over a Unix socket (how our processes talk to each other).
 * body is borrowed (may be NULL). *ret_body gets the parsed response or NULL for an empty one
 * (caller decrefs). The response is capped at max bytes. timeout 0: none.
 * Returns 0, or -errno (-EPROTO when the response is not JSON).
 */
int http_client_unix_json(const char *socket_path, const char *method, const char *path,
                          json_t *body, usec_t timeout, size_t max, int *ret_status,
                          json_t **ret_body);
