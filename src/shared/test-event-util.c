/*
 * Unit tests for the bufferevent helpers of event-util.h: the topped-up
 * reads (exactly up to the limit, in order, EOF left to the bufferevent,
 * the input frozen again), and the stop / close-later pair.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shared/event-util.h"

#define BIG (300u * 1024)

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        assert_true(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

static void test_fill(void **state)
{
    struct event_base *base = event_base_new();
    int sv[2], big = 4 << 20;
    char *data = malloc(BIG), *got = malloc(BIG);

    assert_non_null(base);
    assert_non_null(data);
    assert_non_null(got);
    for (size_t i = 0; i < BIG; i++) {
        data[i] = (char)(i * 7 + 3);
    }
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    (void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    (void)setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    struct bufferevent *bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    assert_non_null(bev);
    struct evbuffer *in = bufferevent_get_input(bev);

    /* Nothing there: nothing read, no error. */
    assert_int_equal(event_util_bev_fill(bev, BIG), 0);

    write_all(sv[1], data, BIG);
    /* Exactly up to the limit, never past it. */
    assert_int_equal(event_util_bev_fill(bev, 100000), 100000);
    assert_int_equal(evbuffer_get_length(in), 100000);
    assert_int_equal(event_util_bev_fill(bev, 100000), 0);
    /* The rest, though more is allowed; in order. */
    assert_int_equal(event_util_bev_fill(bev, 2 * BIG), BIG - 100000);
    assert_int_equal(evbuffer_get_length(in), BIG);
    assert_int_equal(evbuffer_remove(in, got, BIG), (int)BIG);
    assert_memory_equal(got, data, BIG);

    /* The input is frozen again for anyone but the bufferevent (as before the call). */
    assert_int_equal(evbuffer_add(in, "x", 1), -1);

    /* EOF: left for the bufferevent to read and report. */
    close(sv[1]);
    assert_int_equal(event_util_bev_fill(bev, BIG), 0);
    bufferevent_free(bev);

    free(data);
    free(got);
    event_base_free(base);
}

static int reaped;

static void reap_cb(evutil_socket_t fd, short what, void *userdata)
{
    reaped++;
    bufferevent_free(userdata);
}

static void never_cb(struct bufferevent *bev, void *userdata)
{
    fail_msg("a stopped bufferevent's callback ran");
}

static void test_close_later(void **state)
{
    struct event_base *base = event_base_new();
    int sv[2];

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    struct bufferevent *bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    assert_non_null(bev);
    bufferevent_setcb(bev, never_cb, NULL, NULL, NULL);
    bufferevent_enable(bev, EV_READ);
    write_all(sv[1], "hello", 5);
    struct event *reaper = event_new(base, -1, 0, reap_cb, bev);
    assert_non_null(reaper);

    event_util_bev_stop(NULL); /* NULL-safe */
    event_util_close_later(bev, NULL, reaper);
    assert_int_equal(reaped, 0); /* not inside the caller */
    assert_int_equal(event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), 0);
    assert_int_equal(reaped, 1);

    event_free(reaper);
    close(sv[1]);
    event_base_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill),
        cmocka_unit_test(test_close_later),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
