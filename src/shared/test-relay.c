/*
 * Unit tests for the byte relay (relay.h): two socket pairs (Unix and TCP
 * over loopback), the relay between their inner ends, the test driving the
 * outer ends from a thread. Checks ordering with pushed bytes, half-close
 * in each direction, back-pressure (a reader that stops) and the idle
 * timeout; prints the throughput it measured.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/time-util.h"
#include "shared/relay.h"

struct result {
    struct event_base *base;
    int error;
    bool done;
};

static void done_cb(struct relay *r, int error, void *userdata)
{
    struct result *res = userdata;
    res->error = error;
    res->done = true;
    event_base_loopbreak(res->base);
}

/* A connected TCP pair over 127.0.0.1. */
static void tcp_pair(int sv[2])
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(sa);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(l >= 0);
    assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &len), 0);
    sv[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(sv[0], (struct sockaddr *)&sa, sizeof(sa)), 0);
    sv[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    assert_true(sv[1] >= 0);
    close(l);
}

static void make_pair(bool tcp, int sv[2])
{
    if (tcp) {
        tcp_pair(sv);
    } else {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    }
}

struct writer {
    int fd;
    size_t n;
};

/* Writes n bytes of a counting pattern, then half-closes. */
static void *writer_main(void *userdata)
{
    struct writer *w = userdata;
    static char chunk[65536];
    size_t sent = 0;

    while (sent < w->n) {
        size_t take = w->n - sent < sizeof(chunk) ? w->n - sent : sizeof(chunk);
        for (size_t i = 0; i < take; i++) {
            chunk[i] = (char)((sent + i) % 251);
        }
        ssize_t k = write(w->fd, chunk, take);
        if (k <= 0) {
            break;
        }
        sent += (size_t)k;
    }
    shutdown(w->fd, SHUT_WR);
    return NULL;
}

struct reader {
    int fd;
    size_t got;
    bool ok;
};

static void *reader_main(void *userdata)
{
    struct reader *rd = userdata;
    static char buf[65536];

    rd->ok = true;
    for (;;) {
        ssize_t k = read(rd->fd, buf, sizeof(buf));
        if (k <= 0) {
            break;
        }
        for (ssize_t i = 0; i < k; i++) {
            if (buf[i] != (char)((rd->got + (size_t)i) % 251)) {
                rd->ok = false;
            }
        }
        rd->got += (size_t)k;
    }
    return NULL;
}

/* n bytes A->B through the relay, pattern checked, both half-closes passed on. */
static void run_transfer(bool tcp, size_t n, bool *spliced)
{
    struct event_base *base = event_base_new();
    int left[2], right[2];
    struct relay *r;
    struct result res = { .base = base };

    make_pair(tcp, left);
    make_pair(tcp, right);
    assert_int_equal(relay_new(base, left[1], right[1], 30, done_cb, &res, &r), 0);
    assert_int_equal(relay_start(r), 0);

    struct writer w = { left[0], n };
    struct reader rd = { right[0] };
    pthread_t tw, tr;
    usec_t t0 = now_monotonic();
    pthread_create(&tw, NULL, writer_main, &w);
    pthread_create(&tr, NULL, reader_main, &rd);
    /* The other direction: right's writer closes at once. */
    shutdown(right[0], SHUT_WR);
    event_base_dispatch(base);
    pthread_join(tw, NULL);
    pthread_join(tr, NULL);
    usec_t dt = now_monotonic() - t0;

    assert_true(res.done);
    assert_int_equal(res.error, 0);
    assert_true(rd.ok);
    assert_int_equal(rd.got, n);
    assert_int_equal(relay_bytes(r, RELAY_B), n);
    *spliced = relay_spliced(r, RELAY_B);
    printf("relay %s: %zu MiB in %.3f s = %.0f MiB/s (%s)\n", tcp ? "tcp" : "unix", n >> 20,
           (double)dt / 1e6, (double)n / (1 << 20) / ((double)dt / 1e6),
           *spliced ? "splice" : "copy");
    relay_free(r);
    close(left[0]);
    close(right[0]);
    event_base_free(base);
}

static void test_relay_transfer(void **state)
{
    bool spliced;

    run_transfer(false, 64u << 20, &spliced);
    run_transfer(true, 256u << 20, &spliced);
    assert_true(spliced); /* TCP always splices */
}

/* Pushed bytes go before relayed ones; an EOF seen before the start is passed on. */
static void test_relay_push_and_eof(void **state)
{
    struct event_base *base = event_base_new();
    int left[2], right[2];
    struct relay *r;
    struct result res = { .base = base };
    char buf[64] = { 0 };

    make_pair(false, left);
    make_pair(false, right);
    assert_int_equal(write(left[0], "world", 5), 5);
    assert_int_equal(relay_new(base, left[1], right[1], 30, done_cb, &res, &r), 0);
    assert_int_equal(relay_push(r, RELAY_B, "hello ", 6), 0);
    assert_int_equal(relay_push(r, RELAY_A, "early", 5), 0);
    relay_set_eof(r, RELAY_B); /* right already closed its side */
    assert_int_equal(relay_start(r), 0);
    shutdown(left[0], SHUT_WR);
    event_base_dispatch(base);
    assert_true(res.done);
    assert_int_equal(res.error, 0);
    assert_int_equal(read(right[0], buf, sizeof(buf)), 11);
    assert_memory_equal(buf, "hello world", 11);
    assert_int_equal(read(right[0], buf, sizeof(buf)), 0);
    assert_int_equal(read(left[0], buf, sizeof(buf)), 5);
    assert_memory_equal(buf, "early", 5);
    assert_int_equal(read(left[0], buf, sizeof(buf)), 0);
    relay_free(r);
    close(left[0]);
    close(right[0]);
    event_base_free(base);
}

static void timeout_cb(evutil_socket_t fd, short what, void *userdata)
{
    event_base_loopbreak(userdata);
}

/* A reader that stops: the relay holds a bounded amount and stops reading; idle ends it. */
static void test_relay_backpressure_idle(void **state)
{
    struct event_base *base = event_base_new();
    int left[2], right[2];
    struct relay *r;
    struct result res = { .base = base };
    static char chunk[1 << 20];
    size_t sent = 0;

    /* Unix pairs: loopback TCP autotunes its buffers to tens of MiB. */
    make_pair(false, left);
    make_pair(false, right);
    fcntl(left[0], F_SETFL, O_NONBLOCK);
    assert_int_equal(relay_new(base, left[1], right[1], 3, done_cb, &res, &r), 0);
    assert_int_equal(relay_start(r), 0);
    struct timeval tv = { 0, 200000 };
    struct event *t = evtimer_new(base, timeout_cb, base);
    for (int i = 0; i < 5; i++) { /* 1 s: within the 3 s idle timeout */
        ssize_t k = write(left[0], chunk, sizeof(chunk));
        if (k > 0) {
            sent += (size_t)k;
        }
        evtimer_add(t, &tv);
        event_base_dispatch(base);
    }
    /* Kernel buffers plus at most one RELAY_BUFFER: far less than 10 MiB went in. */
    assert_true(sent < (4u << 20));
    printf("stalled reader: %zu KiB accepted of 5 MiB offered\n", sent >> 10);
    assert_false(res.done);
    event_base_dispatch(base); /* until the idle timeout */
    assert_true(res.done);
    assert_int_equal(res.error, -ETIMEDOUT);
    event_free(t);
    relay_free(r);
    close(left[0]);
    close(right[0]);
    event_base_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relay_transfer),
        cmocka_unit_test(test_relay_push_and_eof),
        cmocka_unit_test(test_relay_backpressure_idle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
