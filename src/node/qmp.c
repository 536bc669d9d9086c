/*
 * QMP client. The protocol is line-delimited JSON: a greeting, then one
 * reply per command, with events interleaved at any time. Every read has a
 * deadline so a wedged QEMU cannot hang a worker forever.
 */
#include "node/qmp.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/strbuf.h"
#include "shared/http-client.h"

struct qmp {
    int fd;
    usec_t timeout;
    struct strbuf in;
};

int qmp_take_message(struct strbuf *in, json_t **ret)
{
    char *nl = in->len ? memchr(in->buf, '\n', in->len) : NULL;
    json_error_t err;
    json_t *j;
    size_t n;

    if (!nl) {
        return 0;
    }
    n = (size_t)(nl - in->buf) + 1;
    j = json_loadb(in->buf, n, 0, &err);
    strbuf_consume(in, n);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        return -EPROTO;
    }
    *ret = j;
    return 1;
}

int qmp_reply_parse(json_t *msg, json_t **ret_return)
{
    if (json_object_get(msg, "event")) {
        return 1;
    }
    if (json_object_get(msg, "error")) {
        return -EIO;
    }
    if (ret_return) {
        json_t *ret = json_object_get(msg, "return");
        *ret_return = json_incref(ret ? ret : json_null());
    }
    return 0;
}

/* Reads one line into a new json object. */
static int qmp_read(struct qmp *q, json_t **ret)
{
    usec_t deadline = now_monotonic() + q->timeout;

    for (;;) {
        int r = qmp_take_message(&q->in, ret);
        if (r != 0) {
            return r < 0 ? r : 0;
        }
        usec_t now = now_monotonic();
        if (now >= deadline) {
            return -ETIMEDOUT;
        }
        struct pollfd p = { .fd = q->fd, .events = POLLIN };
        int k = poll(&p, 1, (int)((deadline - now) / 1000 + 1));
        if (k < 0 && errno != EINTR) {
            return -errno;
        }
        if (k <= 0) {
            continue;
        }
        char buf[4096];
        ssize_t n = read(q->fd, buf, sizeof(buf));
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            return -errno;
        }
        if (n == 0) {
            return -ECONNRESET;
        }
        if (strbuf_append(&q->in, buf, (size_t)n) < 0) {
            return -EPROTO;
        }
    }
}

/* Writes the whole of text; with fd >= 0 the first chunk carries it as SCM_RIGHTS. */
static int qmp_send(struct qmp *q, const char *text, size_t len, int fd)
{
    if (fd < 0) {
        return write_all(q->fd, text, len);
    }
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control = { .buf = { 0 } };
    struct iovec iov = { .iov_base = (void *)text, .iov_len = len };
    struct msghdr msg = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
        .msg_control = control.buf,
        .msg_controllen = sizeof(control.buf),
    };
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    ssize_t n;
    do {
        n = sendmsg(q->fd, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        return -errno;
    }
    return (size_t)n < len ? write_all(q->fd, text + n, len - (size_t)n) : 0;
}

int qmp_execute(struct qmp *q, const char *command, json_t *args, json_t **ret_return)
{
    return qmp_execute_fd(q, command, args, -1, ret_return);
}

int qmp_execute_fd(struct qmp *q, const char *command, json_t *args, int fd, json_t **ret_return)
{
    json_t *req = NULL, *reply = NULL;
    char *text = NULL;
    int r;

    req = json_pack("{s:s}", "execute", command);
    if (!req) {
        json_decref(args);
        return -ENOMEM;
    }
    if (args) {
        json_object_set_new(req, "arguments", args);
    }
    text = json_dumps(req, JSON_COMPACT);
    if (!text) {
        r = -ENOMEM;
        goto out;
    }
    r = qmp_send(q, text, strlen(text), fd);
    if (r >= 0) {
        r = write_all(q->fd, "\n", 1);
    }
    if (r < 0) {
        goto out;
    }
    for (;;) {
        r = qmp_read(q, &reply);
        if (r < 0) {
            goto out;
        }
        r = qmp_reply_parse(reply, ret_return);
        if (r == -EIO) {
            /* QEMU's own words, for the log: which command failed and why. */
            const char *desc =
                json_string_value(json_object_get(json_object_get(reply, "error"), "desc"));
            log_info("qmp %s: %.200s", command, desc ? desc : "error");
        }
        if (r != 1) {
            break;
        }
        reply = (json_decref(reply), NULL);
    }
out:
    free(text);
    json_decref(req);
    json_decref(reply);
    return r;
}

int qmp_open(const char *socket_path, usec_t timeout, struct qmp **ret)
{
    struct qmp *q = NULL;
    json_t *greeting = NULL;
    int r;

    q = calloc(1, sizeof(*q));
    if (!q) {
        return -ENOMEM;
    }
    q->fd = -EBADF;
    q->timeout = timeout;
    strbuf_init(&q->in, QMP_MAX_LINE);
    r = http_connect_unix(socket_path, &q->fd);
    if (r < 0) {
        goto fail;
    }
    r = qmp_read(q, &greeting);
    if (r < 0) {
        goto fail;
    }
    if (!json_object_get(greeting, "QMP")) {
        r = -EPROTO;
        goto fail;
    }
    r = qmp_execute(q, "qmp_capabilities", NULL, NULL);
    if (r < 0) {
        goto fail;
    }
    json_decref(greeting);
    *ret = q;
    return 0;
fail:
    json_decref(greeting);
    qmp_close(q);
    return r;
}

struct qmp *qmp_close(struct qmp *q)
{
    if (q) {
        close_safe(q->fd);
        strbuf_release(&q->in);
        free(q);
    }
    return NULL;
}
