#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fresh-fds.h"

#define HELD 1200 /* past FD_SETSIZE, as a node holding ~1,200 tunnels does */

struct probe {
    int fd;                /* what socket() gave inside */
    bool select_ok;        /* select() on it worked (FD_SET with fortify would abort otherwise) */
    bool sees_outer;       /* a descriptor of the caller was still open inside */
    int outer;             /* that descriptor */
    ino_t netns, netns_in; /* the caller's netns and the one seen inside */
};

static ino_t netns_ino(void)
{
    struct stat st;
    return stat("/proc/thread-self/ns/net", &st) == 0 ? st.st_ino : 0;
}

static int probe_fn(void *userdata)
{
    struct probe *p = userdata;
    struct timeval zero = { 0, 0 };
    fd_set set;

    p->sees_outer = fcntl(p->outer, F_GETFD) >= 0;
    p->netns_in = netns_ino();
    p->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (p->fd < 0) {
        return -errno;
    }
    if (p->fd < FD_SETSIZE) {
        FD_ZERO(&set);
        FD_SET(p->fd, &set);
        p->select_ok = select(p->fd + 1, &set, NULL, NULL, &zero) >= 0;
    }
    return 42; /* the socket is left open on purpose: the thread's exit closes it */
}

static unsigned open_fds(void)
{
    unsigned n = 0;
    for (int fd = 0; fd < HELD + 64; fd++) {
        n += fcntl(fd, F_GETFD) >= 0;
    }
    return n;
}

static void test_low_fd_whatever_the_process_holds(void **state)
{
    struct rlimit rl;
    int held[HELD];
    size_t n = 0;

    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < HELD + 64) {
        skip();
    }
    rl.rlim_cur = rl.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    while (n < HELD) {
        held[n] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(held[n] >= 0);
        n++;
    }
    /* Every low number is taken: a plain socket() here would be >= FD_SETSIZE. */
    int probe_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(probe_fd >= FD_SETSIZE);
    close(probe_fd);
    unsigned before = open_fds();

    struct probe p = { .fd = -1, .outer = held[HELD - 1], .netns = netns_ino() };
    assert_int_equal(fresh_fds_run(probe_fn, &p), 42);
    assert_true(p.fd >= 0 && p.fd < 16);
    assert_true(p.select_ok);
    assert_false(p.sees_outer);
    assert_true(p.netns == p.netns_in); /* the caller's namespaces come along */

    /* The caller's descriptors are all still open, and fn's socket did not leak. */
    for (size_t i = 0; i < n; i++) {
        assert_true(fcntl(held[i], F_GETFD) >= 0);
    }
    assert_int_equal(open_fds(), before);
    for (size_t i = 0; i < n; i++) {
        close(held[i]);
    }
}

static int fails(void *userdata)
{
    return -ENOTCONN;
}

static void test_returns_what_fn_returns(void **state)
{
    assert_int_equal(fresh_fds_run(fails, NULL), -ENOTCONN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_low_fd_whatever_the_process_holds),
        cmocka_unit_test(test_returns_what_fn_returns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
