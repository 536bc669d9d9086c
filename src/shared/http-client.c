/*
 * Blocking HTTP/1.1 client. A tiny buffered reader (struct reader) sits on
 * the fd; every refill polls with the remaining time to the deadline.
 * Bodies are framed by Content-Length, chunked encoding, or EOF.
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

/* Reads one CRLF-terminated line into sb (without CRLF). */
static int reader_line(struct reader *rd, struct strbuf *sb)
{
    sb->len = 0;
    for (;;) {
        int r = reader_fill(rd);
        if (r <= 0) {
            return r == 0 ? -EPROTO : r;
        }
        char *nl = memchr(rd->buf + rd->pos, '\n', rd->len - rd->pos);
        size_t take = nl ? (size_t)(nl - (rd->buf + rd->pos)) + 1 : rd->len - rd->pos;
        r = strbuf_append(sb, rd->buf + rd->pos, take);
        if (r < 0) {
            return -EPROTO;
        }
        rd->pos += take;
        if (nl) {
            while (sb->len > 0 && (sb->buf[sb->len - 1] == '\n' || sb->buf[sb->len - 1] == '\r')) {
                sb->buf[--sb->len] = '\0';
            }
            return 0;
        }
    }
}

/* Passes up to n bytes (UINT64_MAX: until EOF) to cb. */
static int reader_body(struct reader *rd, uint64_t n, http_body_cb cb, void *userdata)
{
    while (n > 0) {
        int r = reader_fill(rd);
        if (r < 0) {
            return r;
        }
        if (r == 0) {
            return n == UINT64_MAX ? 0 : -EPROTO;
        }
        size_t take = (size_t)MIN((uint64_t)(rd->len - rd->pos), n);
        if (cb) {
            r = cb(rd->buf + rd->pos, take, userdata);
            if (r < 0) {
                return r;
            }
        }
        rd->pos += take;
        if (n != UINT64_MAX) {
            n -= take;
        }
    }
    return 0;
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

int http_client_request(int fd, const struct http_request *req, usec_t deadline, int *ret_status,
                        char **ret_content_type, http_body_cb cb, void *userdata)
{
    struct reader *rd = NULL;
    struct strbuf line;
    uint64_t content_length = UINT64_MAX;
    bool chunked = false;
    char *content_type = NULL;
    size_t header_bytes = 0;
    int status = 0;
    int r;

    strbuf_init(&line, HTTP_CLIENT_MAX_HEADER);
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

    r = reader_line(rd, &line);
    if (r < 0) {
        goto out;
    }
    if (strncmp(line.buf, "HTTP/1.", 7) != 0 || line.len < 12 || line.buf[8] != ' ') {
        r = -EPROTO;
        goto out;
    }
    char code[4] = { line.buf[9], line.buf[10], line.buf[11], 0 };
    uint32_t st;
    if (parse_u32(code, &st) < 0 || st < 100 || st > 599) {
        r = -EPROTO;
        goto out;
    }
    status = (int)st;

    for (;;) {
        r = reader_line(rd, &line);
        if (r < 0) {
            goto out;
        }
        header_bytes += line.len + 2;
        if (header_bytes > HTTP_CLIENT_MAX_HEADER) {
            r = -EPROTO;
            goto out;
        }
        if (line.len == 0) {
            break;
        }
        char *colon = strchr(line.buf, ':');
        if (!colon) {
            r = -EPROTO;
            goto out;
        }
        *colon = '\0';
        char *value = colon + 1;
        while (*value == ' ' || *value == '\t') {
            value++;
        }
        if (strcasecmp(line.buf, "Content-Length") == 0) {
            if (parse_u64(value, &content_length) < 0) {
                r = -EPROTO;
                goto out;
            }
        } else if (strcasecmp(line.buf, "Transfer-Encoding") == 0) {
            chunked = strcasestr(value, "chunked") != NULL;
        } else if (strcasecmp(line.buf, "Content-Type") == 0 && !content_type) {
            content_type = strdup(value);
            if (!content_type) {
                r = -ENOMEM;
                goto out;
            }
        }
    }

    if (strcmp(req->method, "HEAD") == 0 || status == 204 || status == 304) {
        r = 0;
    } else if (chunked) {
        for (;;) {
            uint64_t size = 0;
            r = reader_line(rd, &line);
            if (r < 0) {
                goto out;
            }
            size_t i = 0;
            for (; i < line.len && i < 16; i++) {
                char c = line.buf[i];
                int d = c >= '0' && c <= '9' ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
                if (d < 0) {
                    break;
                }
                size = size * 16 + (uint64_t)d;
            }
            if (i == 0 || (i < line.len && line.buf[i] != ';' && line.buf[i] != ' ')) {
                r = -EPROTO;
                goto out;
            }
            if (size == 0) {
                break; /* trailers are not read: the connection closes anyway */
            }
            r = reader_body(rd, size, cb, userdata);
            if (r < 0) {
                goto out;
            }
            r = reader_line(rd, &line);
            if (r < 0 || line.len != 0) {
                r = r < 0 ? r : -EPROTO;
                goto out;
            }
        }
        r = 0;
    } else {
        r = reader_body(rd, content_length, cb, userdata);
        if (r < 0) {
            goto out;
        }
    }

    *ret_status = status;
    if (ret_content_type) {
        *ret_content_type = TAKE_PTR(content_type);
    }
out:
    free(content_type);
    free(rd);
    strbuf_release(&line);
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
    struct http_request req = { .method = method, .path = path, .headers = headers, .body = text,
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
