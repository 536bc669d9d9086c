/*
 * Blocking HTTP/1.1 client. A tiny buffered reader (struct reader) sits on
 * the fd; every refill polls with the remaining time to the deadline.
 * Responses are read with the shared strict parser (http1.h): the head by
 * http1_parse_response(), the body by http1_body_feed(), so a guest's reply
 * is framed exactly as the ingress would frame it (chunked included: bare
 * LF, bad sizes and a missing last chunk are errors, not a short body).
 */
#include "shared/http-client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/strbuf.h"
#include "shared/http1.h"

struct reader {
    int fd;
    usec_t deadline;
    char buf[16384];
    size_t pos, len;
};

static int wait_fd(int fd, short events, usec_t deadline)
{
    for (;;) {
        int timeout = -1;
        if (deadline) {
            usec_t now = now_monotonic();
            if (now >= deadline) {
                return -ETIMEDOUT;
            }
            timeout = (int)MIN((deadline - now + 999) / 1000, (usec_t)INT32_MAX);
        }
        struct pollfd p = { .fd = fd, .events = events };
        int n = poll(&p, 1, timeout);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        if (n == 0) {
            return -ETIMEDOUT;
        }
        return 0;
    }
}

static int reader_fill(struct reader *rd)
{
    ssize_t n;
    int r;

    if (rd->pos < rd->len) {
        return 1;
    }
    r = wait_fd(rd->fd, POLLIN, rd->deadline);
    if (r < 0) {
        return r;
    }
    n = read(rd->fd, rd->buf, sizeof(rd->buf));
    if (n < 0) {
        return errno == EINTR ? reader_fill(rd) : -errno;
    }
    rd->pos = 0;
    rd->len = (size_t)n;
    return n > 0;
}

static int send_request(int fd, const struct http_request *req, usec_t deadline)
{
    struct strbuf sb = STRBUF_INIT;
    int r;

    r = strbuf_appendf(&sb, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", req->method,
                       req->path, req->host ? req->host : "localhost");
    for (const char *const *h = req->headers; r >= 0 && h && *h; h++) {
        r = strbuf_appendf(&sb, "%s\r\n", *h);
    }
    if (r >= 0 && (req->body || strcmp(req->method, "GET") != 0)) {
        r = strbuf_appendf(&sb, "Content-Length: %zu\r\n", req->body_len);
    }
    if (r >= 0) {
        r = strbuf_appends(&sb, "\r\n");
    }
    if (r >= 0 && req->body_len > 0) {
        r = strbuf_append(&sb, req->body, req->body_len);
    }
    for (size_t off = 0; r >= 0 && off < sb.len;) {
        r = wait_fd(fd, POLLOUT, deadline);
        if (r < 0) {
            break;
        }
        ssize_t n = send(fd, sb.buf + off, sb.len - off, MSG_NOSIGNAL);
        if (n < 0 && errno != EINTR && errno != EAGAIN) {
            r = -errno;
        } else if (n > 0) {
            off += (size_t)n;
        }
    }
    strbuf_release(&sb);
    return r < 0 ? r : 0;
}

/*
 * Reads one response head into head (from what rd holds, then the fd):
 * bytes after the head stay in rd. Returns the head's length, or -EPROTO
 * for EOF or a head past HTTP_CLIENT_MAX_HEADER.
 */
static int read_head(struct reader *rd, struct strbuf *head)
{
    size_t resume = 0;

    head->len = 0;
    for (;;) {
        int r = reader_fill(rd);
        if (r <= 0) {
            return r == 0 ? -EPROTO : r;
        }
        size_t before = head->len;
        size_t take = MIN(rd->len - rd->pos, (size_t)HTTP_CLIENT_MAX_HEADER - head->len);
        if (take == 0 || strbuf_append(head, rd->buf + rd->pos, take) < 0) {
            return -EPROTO; /* over the cap */
        }
        size_t end = http1_find_end(head->buf, head->len, &resume);
        if (end > 0) {
            rd->pos += end - before; /* the rest belongs to the body */
            return (int)end;
        }
        rd->pos += take;
    }
}

struct body_sink {
    http_body_cb cb;
    void *userdata;
};

static int body_sink_cb(const char *data, size_t len, void *userdata)
{
    struct body_sink *sink = userdata;
    return sink->cb ? sink->cb(data, len, sink->userdata) : 0;
}

/* Passes the body to cb through the strict decoder; EOF before its end is -EPROTO. */
static int read_body(struct reader *rd, struct http1_body *body, http_body_cb cb, void *userdata)
{
    struct body_sink sink = { cb, userdata };

    while (!body->done) {
        int r = reader_fill(rd);
        if (r < 0) {
            return r;
        }
        if (r == 0) {
            return body->kind == HTTP1_BODY_UNTIL_EOF ? 0 : -EPROTO;
        }
        ssize_t n =
            http1_body_feed(body, rd->buf + rd->pos, rd->len - rd->pos, body_sink_cb, &sink);
        if (n < 0) {
            return n == -EBADMSG ? -EPROTO : (int)n;
        }
        rd->pos += (size_t)n;
    }
    return 0;
}

int http_client_request(int fd, const struct http_request *req, usec_t deadline, int *ret_status,
                        char **ret_content_type, http_body_cb cb, void *userdata)
{
    struct reader *rd = NULL;
    struct strbuf head;
    struct http1_response resp;
    struct http1_body body;
    struct http1_span value = { 0 };
    char *content_type = NULL;
    int r;

    strbuf_init(&head, HTTP_CLIENT_MAX_HEADER);
    r = send_request(fd, req, deadline);
    if (r < 0) {
        goto out;
    }
    rd = calloc(1, sizeof(*rd));
    if (!rd) {
        r = -ENOMEM;
        goto out;
    }
    rd->fd = fd;
    rd->deadline = deadline;

    /* Interim 1xx heads (100 Continue) come before the final one; we never upgrade. */
    do {
        r = read_head(rd, &head);
        if (r < 0) {
            goto out;
        }
        if (http1_parse_response(head.buf, (size_t)r, &resp) < 0 || resp.status == 101) {
            r = -EPROTO;
            goto out;
        }
    } while (resp.status < 200);

    struct http1_span name, v;
    size_t pos = 0;
    while (!value.p && http1_field_next(head.buf, resp.head_len, &pos, &name, &v)) {
        if (http1_span_eq_ci(name, "Content-Type")) {
            value = v;
        }
    }
    if (value.p) {
        content_type = strndup(value.p, value.n);
        if (!content_type) {
            r = -ENOMEM;
            goto out;
        }
    }

    http1_body_init_response(&body, &resp, strcmp(req->method, "HEAD") == 0);
    r = read_body(rd, &body, cb, userdata);
    if (r < 0) {
        goto out;
    }

    *ret_status = (int)resp.status;
    if (ret_content_type) {
        *ret_content_type = TAKE_PTR(content_type);
    }
    r = 0;
out:
    free(content_type);
    free(rd);
    strbuf_release(&head);
    return r;
}

int http_connect_unix(const char *path, int *ret_fd)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = -EBADF;
    int r;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    r = NERRNO(connect(fd, (struct sockaddr *)&sa, sizeof(sa)));
    if (r < 0) {
        close_safe(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

int http_connect_fd(int fd, const struct sockaddr *sa, unsigned salen, usec_t timeout)
{
    socklen_t len = sizeof(int);
    int err = 0;
    int r;

    if (connect(fd, sa, salen) == 0) {
        return 0;
    }
    if (errno != EINPROGRESS) {
        return -errno;
    }
    r = wait_fd(fd, POLLOUT, now_monotonic() + timeout);
    if (r < 0) {
        return r;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) {
        return -errno;
    }
    return err ? -err : 0;
}

int http_connect_tcp(const char *ip, uint16_t port, usec_t timeout, int *ret_fd)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    int fd = -EBADF;
    int r;

    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
        return -EINVAL;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return -errno;
    }
    r = http_connect_fd(fd, (struct sockaddr *)&sa, sizeof(sa), timeout);
    if (r < 0) {
        close_safe(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

static int collect_cb(const void *data, size_t len, void *userdata)
{
    return strbuf_append(userdata, data, len);
}

int http_client_unix_json(const char *socket_path, const char *method, const char *path,
                          json_t *body, usec_t timeout, size_t max, int *ret_status,
                          json_t **ret_body)
{
    const char *headers[] = { "Content-Type: application/json", NULL };
    struct strbuf sb;
    char *text = NULL;
    json_t *res = NULL;
    int fd = -EBADF, status = 0;
    int r;

    strbuf_init(&sb, max);
    if (body) {
        text = json_dumps(body, JSON_COMPACT);
        if (!text) {
            return -ENOMEM;
        }
    }
    r = http_connect_unix(socket_path, &fd);
    if (r < 0) {
        goto out;
    }
    struct http_request req = { .method = method,
                                .path = path,
                                .headers = headers,
                                .body = text,
                                .body_len = text ? strlen(text) : 0 };
    r = http_client_request(fd, &req, timeout ? now_monotonic() + timeout : 0, &status, NULL,
                            collect_cb, &sb);
    if (r < 0) {
        goto out;
    }
    if (sb.len > 0) {
        json_error_t err;
        res = json_loadb(sb.buf, sb.len, 0, &err);
        if (!res) {
            r = -EPROTO;
            goto out;
        }
    }
    *ret_status = status;
    *ret_body = TAKE_PTR(res);
    r = 0;
out:
    json_decref(res);
    close_safe(fd);
    free(text);
    strbuf_release(&sb);
    return r;
}
