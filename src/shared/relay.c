/*
 * The byte relay (relay.h has the contract).
 *
 * Two directions, each named by the side it delivers to: dir[RELAY_A]
 * reads fd[B] and writes fd[A]. A direction holds its bytes in a pipe
 * (splice mode) or in a heap buffer (copy mode), at most RELAY_BUFFER
 * either way, plus the bytes pushed before the start, which go first.
 *
 * pump() moves bytes until both its read and its write would block (or a
 * bound on rounds, so one fast pair cannot starve the loop); then the
 * events are set from the state alone: read interest while the source is
 * open and there is room, write interest while bytes wait. Since pump()
 * only stops when blocked, a level-triggered event firing always means
 * progress: no busy loop.
 *
 * A direction ends when its source sent EOF and everything is delivered:
 * then the destination gets shutdown(SHUT_WR). The relay ends when both
 * have; done() is the last thing any callback does.
 */
#include "shared/relay.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/macro.h"
#include "basic/time-util.h"

#define PUMP_ROUNDS 16

struct direction {
    char *pre; /* pushed bytes, first */
    size_t pre_len, pre_off;
    int pipe[2];
    size_t in_pipe, cap; /* cap: what one splice into the pipe asks for */
    bool grown;
    char *buf; /* copy mode */
    size_t buf_off, buf_len;
    bool splice, src_eof, shut;
    uint64_t bytes;
};

struct relay {
    struct event_base *base;
    int fd[2];
    struct event *rd[2], *wr[2], *idle;
    bool rd_on[2], wr_on[2];
    struct direction dir[2];
    unsigned idle_sec;
    usec_t last_active;
    bool started, ended;
    relay_done_fn done;
    void *userdata;
};

static size_t pending(const struct direction *d)
{
    return d->pre_len - d->pre_off + d->in_pipe + (d->buf_len - d->buf_off);
}

static bool dir_finished(const struct direction *d)
{
    return d->src_eof && d->shut;
}

static void set_event(struct event *ev, bool *on, bool want)
{
    if (want != *on) {
        if (want) {
            event_add(ev, NULL);
        } else {
            event_del(ev);
        }
        *on = want;
    }
}

static void finish(struct relay *r, int error)
{
    if (r->ended) {
        return;
    }
    r->ended = true;
    /* Unconditionally: event_del() also takes an event off the active queue (relay_start()). */
    for (size_t s = 0; s < 2; s++) {
        event_del(r->rd[s]);
        event_del(r->wr[s]);
        r->rd_on[s] = r->wr_on[s] = false;
    }
    if (r->idle) {
        event_del(r->idle);
    }
    r->done(r, error, r->userdata); /* may free r */
}

/* A pipe per direction, or copy mode when none can be had (EMFILE). */
static void dir_setup(struct direction *d)
{
    d->pipe[0] = d->pipe[1] = -EBADF;
    d->cap = RELAY_BUFFER;
    if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) == 0) {
        d->splice = true;
        return;
    }
    d->pipe[0] = d->pipe[1] = -EBADF;
    d->splice = false;
}

/* Falls back from splice to copying (a socket type splice does not handle). */
static int dir_copy_mode(struct direction *d)
{
    d->splice = false;
    d->pipe[0] = close_safe(d->pipe[0]);
    d->pipe[1] = close_safe(d->pipe[1]);
    return 0;
}

/* Writes what waits in d to dst. Returns >0 progress, 0 blocked or nothing to do, <0 error. */
static ssize_t dir_write(struct direction *d, int dst)
{
    ssize_t n;

    if (d->pre_off < d->pre_len) {
        n = send(dst, d->pre + d->pre_off, d->pre_len - d->pre_off, MSG_NOSIGNAL);
        if (n < 0) {
            return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        }
        d->pre_off += (size_t)n;
        if (d->pre_off == d->pre_len) {
            free(d->pre);
            d->pre = NULL;
            d->pre_len = d->pre_off = 0;
        }
        return n;
    }
    if (d->in_pipe > 0) {
        n = splice(d->pipe[0], NULL, dst, NULL, d->in_pipe, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
        if (n < 0) {
            return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        }
        d->in_pipe -= (size_t)n;
        return n;
    }
    if (d->buf_off < d->buf_len) {
        n = send(dst, d->buf + d->buf_off, d->buf_len - d->buf_off, MSG_NOSIGNAL);
        if (n < 0) {
            return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        }
        d->buf_off += (size_t)n;
        if (d->buf_off == d->buf_len) {
            d->buf_off = d->buf_len = 0;
        }
        return n;
    }
    return 0;
}

/* Reads from src into d while there is room. Same returns as dir_write(); EOF counts as progress.
 */
static ssize_t dir_read(struct direction *d, int src)
{
    ssize_t n;

    if (d->src_eof) {
        return 0;
    }
    if (d->splice) {
        /*
         * Only into an empty pipe: a pipe fills by page slots, not bytes, so
         * "full" cannot be told from "the socket is empty" by EAGAIN alone,
         * and a readable socket with a full pipe would spin the loop.
         */
        if (d->in_pipe > 0) {
            return 0;
        }
        if (!d->grown && d->bytes >= RELAY_BULK_AFTER) {
            /*
             * A bulk transfer: a bigger pipe, fewer splices and wakeups per MiB.
             * Only then, since pipe pages count against the user's limit
             * (pipe-user-pages-soft) for as long as the relay lives; refused
             * past it, and the default pipe simply stays.
             */
            d->grown = true;
            if (fcntl(d->pipe[1], F_SETPIPE_SZ, (int)RELAY_BULK_BUFFER) > 0) {
                int cap = fcntl(d->pipe[1], F_GETPIPE_SZ);
                d->cap = cap > 0 ? (size_t)cap : d->cap;
            }
        }
        n = splice(src, NULL, d->pipe[1], NULL, d->cap, SPLICE_F_NONBLOCK);
        if (n < 0 && errno == EINVAL && d->in_pipe == 0) {
            dir_copy_mode(d); /* not spliceable: copy from now on */
            return dir_read(d, src);
        }
        if (n < 0) {
            return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        }
        if (n == 0) {
            d->src_eof = true;
            return 1;
        }
        d->in_pipe += (size_t)n;
        return n;
    }
    if (d->buf_len > 0) {
        return 0; /* one buffer at a time: bounded, and order kept */
    }
    if (!d->buf) {
        d->buf = malloc(RELAY_BUFFER);
        if (!d->buf) {
            return -ENOMEM;
        }
    }
    n = read(src, d->buf, RELAY_BUFFER);
    if (n < 0) {
        return errno == EAGAIN || errno == EINTR ? 0 : -errno;
    }
    if (n == 0) {
        d->src_eof = true;
        return 1;
    }
    d->buf_off = 0;
    d->buf_len = (size_t)n;
    return n;
}

static size_t room(const struct direction *d)
{
    if (d->src_eof) {
        return 0;
    }
    return d->splice ? (d->in_pipe == 0 ? RELAY_BUFFER : 0) : (d->buf_len == 0 ? RELAY_BUFFER : 0);
}

/* Moves bytes toward side `to`. Returns 0, or <0 when the relay failed. */
static int pump(struct relay *r, int to)
{
    struct direction *d = &r->dir[to];
    int src = r->fd[!to], dst = r->fd[to];

    for (unsigned round = 0; round < PUMP_ROUNDS; round++) {
        size_t before = pending(d);
        ssize_t w = dir_write(d, dst);
        if (w < 0) {
            return (int)w;
        }
        d->bytes += before - pending(d);
        ssize_t rd = dir_read(d, src);
        if (rd < 0) {
            return (int)rd;
        }
        if (w > 0 || rd > 0) {
            r->last_active = now_monotonic();
        } else {
            break;
        }
    }
    if (d->src_eof && pending(d) == 0 && !d->shut) {
        d->shut = true;
        (void)shutdown(dst, SHUT_WR);
    }
    set_event(r->rd[!to], &r->rd_on[!to], room(d) > 0);
    set_event(r->wr[to], &r->wr_on[to], pending(d) > 0);
    return 0;
}

static void after_pump(struct relay *r, int error)
{
    if (error < 0) {
        finish(r, error);
    } else if (dir_finished(&r->dir[RELAY_A]) && dir_finished(&r->dir[RELAY_B])) {
        finish(r, 0);
    }
}

static void read_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct relay *r = userdata;
    int side = fd == r->fd[RELAY_A] ? RELAY_A : RELAY_B;

    after_pump(r, pump(r, !side)); /* what side sends goes to the other */
}

static void write_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct relay *r = userdata;
    int side = fd == r->fd[RELAY_A] ? RELAY_A : RELAY_B;

    after_pump(r, pump(r, side));
}

static void idle_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct relay *r = userdata;
    usec_t idle = now_monotonic() - r->last_active;

    if (idle >= r->idle_sec * USEC_PER_SEC) {
        finish(r, -ETIMEDOUT);
        return;
    }
    struct timeval tv = { (time_t)((r->idle_sec * USEC_PER_SEC - idle) / USEC_PER_SEC) + 1, 0 };
    event_add(r->idle, &tv);
}

int relay_new(struct event_base *base, int a, int b, unsigned idle_sec, relay_done_fn done,
              void *userdata, struct relay **ret)
{
    struct relay *r;

    assert(base && done && ret && a >= 0 && b >= 0);
    r = calloc(1, sizeof(*r));
    if (!r) {
        return -ENOMEM;
    }
    *r = (struct relay){
        .base = base, .fd = { a, b }, .idle_sec = idle_sec, .done = done, .userdata = userdata
    };
    for (size_t s = 0; s < 2; s++) {
        r->dir[s].pipe[0] = r->dir[s].pipe[1] = -EBADF;
        if (fd_set_nonblock(r->fd[s], 1) < 0) {
            goto fail;
        }
        r->rd[s] = event_new(base, r->fd[s], EV_READ | EV_PERSIST, read_cb, r);
        r->wr[s] = event_new(base, r->fd[s], EV_WRITE | EV_PERSIST, write_cb, r);
        if (!r->rd[s] || !r->wr[s]) {
            goto fail;
        }
    }
    if (idle_sec > 0) {
        r->idle = evtimer_new(base, idle_cb, r);
        if (!r->idle) {
            goto fail;
        }
    }
    *ret = r;
    return 0;
fail:
    r->fd[0] = r->fd[1] = -EBADF; /* still the caller's */
    relay_free(r);
    return -ENOMEM;
}

int relay_push(struct relay *r, int to, const void *data, size_t len)
{
    struct direction *d = &r->dir[to];
    char *p;

    assert(!r->started && (to == RELAY_A || to == RELAY_B));
    if (len == 0) {
        return 0;
    }
    p = realloc(d->pre, d->pre_len + len);
    if (!p) {
        return -ENOMEM;
    }
    memcpy(p + d->pre_len, data, len);
    d->pre = p;
    d->pre_len += len;
    return 0;
}

void relay_set_eof(struct relay *r, int from)
{
    assert(!r->started);
    r->dir[!from].src_eof = true;
}

int relay_start(struct relay *r)
{
    assert(!r->started);
    r->started = true;
    r->last_active = now_monotonic();
    for (size_t s = 0; s < 2; s++) {
        dir_setup(&r->dir[s]);
    }
    if (r->idle) {
        struct timeval tv = { r->idle_sec, 0 };
        event_add(r->idle, &tv);
    }
    /*
     * Each direction pumps once from the loop (write_cb): pushed bytes go
     * out and the events get set. Never here, so done() never runs inside
     * relay_start().
     */
    event_active(r->wr[RELAY_A], EV_WRITE, 1);
    event_active(r->wr[RELAY_B], EV_WRITE, 1);
    return 0;
}

uint64_t relay_bytes(const struct relay *r, int to)
{
    return r->dir[to].bytes;
}

bool relay_spliced(const struct relay *r, int to)
{
    return r->dir[to].splice;
}

struct relay *relay_free(struct relay *r)
{
    if (!r) {
        return NULL;
    }
    for (size_t s = 0; s < 2; s++) {
        if (r->rd[s]) {
            event_free(r->rd[s]);
        }
        if (r->wr[s]) {
            event_free(r->wr[s]);
        }
        close_safe(r->fd[s]);
        close_safe(r->dir[s].pipe[0]);
        close_safe(r->dir[s].pipe[1]);
        free(r->dir[s].pre);
        free(r->dir[s].buf);
    }
    if (r->idle) {
        event_free(r->idle);
    }
    free(r);
    return NULL;
}
