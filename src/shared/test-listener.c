/*
 * Unit tests for the bounded listener (listener.h), over loopback only:
 * the total and per-peer caps (127.0.0.1 and 127.0.0.2 as two peers), the
 * counts after release, and no busy loop when accept() fails with EMFILE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "shared/listener.h"

struct accepted {
    int fds[64];
    struct sockaddr_storage peers[64];
    bool has_peer[64];
    size_t n;
};

static void accept_fn(struct listener *l, int fd, const struct sockaddr *peer, socklen_t len,
                      void *userdata)
{
    struct accepted *a = userdata;
    assert_true(a->n < 64);
    a->fds[a->n] = fd;
    a->has_peer[a->n] = peer != NULL;
    if (peer) {
        memcpy(&a->peers[a->n], peer, len);
    }
    a->n++;
}

static int connect_from(const char *src, uint16_t port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    struct sockaddr_in me = { .sin_family = AF_INET };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    inet_pton(AF_INET, src, &me.sin_addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static void spin(struct event_base *base, int ms)
{
    struct timeval tv = { 0, ms * 1000 };
    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
}

/* True when the server side closed fd (EOF or reset) within a moment. */
static bool closed_by_server(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    char c;
    if (poll(&p, 1, 200) <= 0) {
        return false;
    }
    return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

static void test_listener_caps(void **state)
{
    struct event_base *base = event_base_new();
    struct listener_limits limits = { .max_conns = 4, .max_per_peer = 2 };
    struct accepted a = { 0 };
    struct listener *l;
    int c[6];

    assert_int_equal(listener_new_tcp(base, "127.0.0.1", 0, &limits, accept_fn, &a, &l), 0);
    uint16_t port = listener_port(l);
    assert_true(port > 0);
    assert_int_equal(listener_max_conns(l), 4);

    c[0] = connect_from("127.0.0.1", port);
    c[1] = connect_from("127.0.0.1", port);
    c[2] = connect_from("127.0.0.1", port); /* over the per-peer cap */
    spin(base, 100);
    assert_int_equal(a.n, 2);
    assert_true(closed_by_server(c[2]));
    assert_int_equal(listener_refused(l), 1);

    c[3] = connect_from("127.0.0.2", port); /* another peer still gets in */
    c[4] = connect_from("127.0.0.2", port);
    c[5] = connect_from("127.0.0.3", port); /* over the total cap */
    spin(base, 100);
    assert_int_equal(a.n, 4);
    assert_int_equal(listener_count(l), 4);
    assert_true(closed_by_server(c[5]));

    /* Released slots are free again, per peer too. */
    listener_release(l, (struct sockaddr *)&a.peers[0]);
    close(a.fds[0]);
    close(c[2]);
    c[2] = connect_from("127.0.0.1", port);
    spin(base, 100);
    assert_int_equal(a.n, 5);
    assert_int_equal(listener_count(l), 4);

    for (size_t i = 0; i < 6; i++) {
        close(c[i]);
    }
    for (size_t i = 1; i < a.n; i++) {
        close(a.fds[i]);
    }
    listener_free(l);
    event_base_free(base);
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Out of descriptors: accept() fails, and the loop must sleep, not spin. */
static void test_listener_emfile(void **state)
{
    struct event_base *base = event_base_new();
    struct listener_limits limits = { .max_conns = 1000 };
    struct accepted a = { 0 };
    struct listener *l;
    struct rlimit old, low;
    int c[8], spare[256];
    size_t n_spare = 0;

    assert_int_equal(listener_new_tcp(base, "127.0.0.1", 0, &limits, accept_fn, &a, &l), 0);
    uint16_t port = listener_port(l);
    for (size_t i = 0; i < 8; i++) {
        c[i] = connect_from("127.0.0.1", port);
    }
    /* Use up every descriptor under a low soft limit. */
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = 64;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    for (;;) {
        int fd = dup(0);
        if (fd < 0) {
            break;
        }
        assert_true(n_spare < 256);
        spare[n_spare++] = fd;
    }
    double t0 = cpu_seconds();
    spin(base, 1000);
    double used = cpu_seconds() - t0;
    assert_int_equal(a.n, 0);
    assert_true(used < 0.3); /* a spin would use the whole second */

    /* Descriptors back: accepting resumes by itself. */
    for (size_t i = 0; i < n_spare; i++) {
        close(spare[i]);
    }
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    spin(base, 300);
    assert_int_equal(a.n, 8);

    for (size_t i = 0; i < 8; i++) {
        close(c[i]);
        close(a.fds[i]);
    }
    listener_free(l);
    event_base_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listener_caps),
        cmocka_unit_test(test_listener_emfile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
