/*
 * The space-gw client against a real SOCK_SEQPACKET socket in this process:
 * hello, resync with descriptors, audit into the ring, replies in order,
 * the queue bound and reconnecting after the gateway goes away.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "node/gw-client.h"

#define IID "abcdefgh0123"
#define SB "sb00000000000000000a"

struct fixture {
    char dir[64], path[128];
    int listener, conn;
    struct event_base *base;
    struct egress_audit *audit;
    struct gw_client *gw;
    int resyncs;
    int pipe_fds[2];
};

static void resync(struct gw_client *gw, void *userdata)
{
    struct fixture *f = userdata;
    f->resyncs++;
    assert_int_equal(
        gw_client_attach(gw, IID, SB, "{\"internet\":true}", f->pipe_fds[0], f->pipe_fds[1]), 0);
}

/* Runs the loop until fd is readable (or the deadline in ms passes). */
static bool loop_until_readable(struct fixture *f, int fd, int ms)
{
    for (int i = 0; i < ms / 10; i++) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        event_base_loop(f->base, EVLOOP_NONBLOCK);
        if (poll(&p, 1, 10) == 1) {
            return true;
        }
    }
    return false;
}

static void accept_session(struct fixture *f)
{
    assert_true(loop_until_readable(f, f->listener, 5000));
    f->conn = accept4(f->listener, NULL, NULL, SOCK_CLOEXEC);
    assert_true(f->conn >= 0);
}

/* One datagram from the node, with its descriptors (closed here, counted). */
static json_t *receive(struct fixture *f, int *n_fds)
{
    char buf[70000];
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int) * 4)];
    } ctl;
    struct iovec iov = { buf, sizeof(buf) };
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b)
    };
    json_error_t jerr;

    assert_true(loop_until_readable(f, f->conn, 5000));
    ssize_t n = recvmsg(f->conn, &mh, MSG_CMSG_CLOEXEC);
    assert_true(n > 0);
    *n_fds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        int fds[4];
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        memcpy(fds, CMSG_DATA(c), k * sizeof(int));
        for (size_t i = 0; i < k; i++) {
            close(fds[i]);
        }
        *n_fds += (int)k;
    }
    return json_loadb(buf, (size_t)n, 0, &jerr);
}

static void reply(struct fixture *f, const char *text)
{
    assert_int_equal(send(f->conn, text, strlen(text), 0), (ssize_t)strlen(text));
}

static void hello(struct fixture *f)
{
    int n_fds;
    json_t *m = receive(f, &n_fds);
    assert_string_equal(json_string_value(json_object_get(m, "type")), "hello");
    assert_string_equal(json_string_value(json_object_get(m, "node")), "test-node");
    json_decref(m);
    reply(f, "{\"type\":\"hello\",\"ok\":true,\"caCert\":\"-----BEGIN CERTIFICATE-----\\nAA\\n"
             "-----END CERTIFICATE-----\\n\"}");
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct sockaddr_un sa = { .sun_family = AF_UNIX };

    snprintf(f->dir, sizeof(f->dir), "/tmp/test-gw-client-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/gw.sock", f->dir);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
    f->listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    assert_int_equal(bind(f->listener, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(f->listener, 4), 0);
    f->conn = -1;
    assert_int_equal(pipe2(f->pipe_fds, O_CLOEXEC), 0);
    f->base = event_base_new();
    assert_int_equal(egress_audit_new(64, 1 << 20, &f->audit), 0);
    assert_int_equal(gw_client_new(f->base, f->path, "test-node", f->audit, resync, f, &f->gw), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    gw_client_free(f->gw);
    egress_audit_free(f->audit);
    event_base_free(f->base);
    if (f->conn >= 0) {
        close(f->conn);
    }
    close(f->listener);
    close(f->pipe_fds[0]);
    close(f->pipe_fds[1]);
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void test_session(void **state)
{
    struct fixture *f = *state;
    json_t *m;
    int n_fds;

    accept_session(f);
    assert_false(gw_client_ready(f->gw));
    assert_null(gw_client_ca_pem(f->gw));
    /* Nothing is sent before hello is answered; resync covers it afterwards. */
    assert_int_equal(gw_client_detach(f->gw, IID), 0);
    hello(f);
    m = receive(f, &n_fds);
    assert_true(gw_client_ready(f->gw));
    assert_non_null(strstr(gw_client_ca_pem(f->gw), "BEGIN CERTIFICATE"));
    assert_int_equal(f->resyncs, 1);
    assert_string_equal(json_string_value(json_object_get(m, "type")), "attach");
    assert_string_equal(json_string_value(json_object_get(m, "instance")), IID);
    assert_string_equal(json_string_value(json_object_get(m, "sandbox")), SB);
    assert_true(json_is_true(json_object_get(json_object_get(m, "policy"), "internet")));
    assert_int_equal(n_fds, 2);
    json_decref(m);
    reply(f, "{\"type\":\"attach\",\"instance\":\"" IID "\",\"ok\":true}");

    /* Audit batches land in the ring. */
    reply(f, "{\"type\":\"audit\",\"records\":[{\"proto\":\"dns\",\"name\":\"a.test\"},"
             "{\"proto\":\"bogus\"}]}");
    assert_int_equal(gw_client_policy(f->gw, IID, NULL), 0);
    m = receive(f, &n_fds);
    assert_string_equal(json_string_value(json_object_get(m, "type")), "policy");
    assert_int_equal(json_object_size(json_object_get(m, "policy")), 0);
    assert_int_equal(n_fds, 0);
    json_decref(m);
    assert_int_equal(egress_audit_last_seq(f->audit), 1);
    /* A refusal is logged, the session goes on. */
    reply(f, "{\"type\":\"policy\",\"instance\":\"" IID "\",\"ok\":false,\"error\":\"no\"}");
    assert_int_equal(gw_client_detach(f->gw, IID), 0);
    m = receive(f, &n_fds);
    assert_string_equal(json_string_value(json_object_get(m, "type")), "detach");
    json_decref(m);
    assert_true(gw_client_ready(f->gw));

    /* A reply that answers nothing (detach was answered as attach): new session. */
    reply(f, "{\"type\":\"attach\",\"instance\":\"" IID "\",\"ok\":true}");
    for (int i = 0; i < 20 && gw_client_ready(f->gw); i++) {
        event_base_loop(f->base, EVLOOP_NONBLOCK);
        usleep(10000);
    }
    assert_false(gw_client_ready(f->gw));
    close(f->conn);
    accept_session(f); /* after GW_CLIENT_RETRY */
    hello(f);
    m = receive(f, &n_fds);
    assert_int_equal(f->resyncs, 2);
    assert_string_equal(json_string_value(json_object_get(m, "type")), "attach");
    assert_int_equal(n_fds, 2);
    json_decref(m);
}

static void test_queue_is_bounded(void **state)
{
    struct fixture *f = *state;
    json_t *m;
    int n_fds;

    accept_session(f);
    hello(f);
    m = receive(f, &n_fds); /* the resync's attach, never answered */
    json_decref(m);
    /* A gateway that reads nothing: the requests pile up to the bound, then the session
     * is renewed rather than requests dropped. */
    for (unsigned i = 0; i < GW_CLIENT_QUEUE_MAX + 10 && gw_client_ready(f->gw); i++) {
        assert_int_equal(gw_client_detach(f->gw, IID), 0);
    }
    assert_false(gw_client_ready(f->gw));
}

#define FP_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define FP_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define PEM_JSON "-----BEGIN CERTIFICATE-----\\nAA\\n-----END CERTIFICATE-----\\n"

struct rotate_result {
    int calls, r;
    char error[128];
};

static void rotate_cb(void *userdata, int r, const char *error)
{
    struct rotate_result *res = userdata;
    res->calls++;
    res->r = r;
    snprintf(res->error, sizeof(res->error), "%s", error ? error : "");
}

static void run_until_called(struct fixture *f, struct rotate_result *res)
{
    for (int i = 0; i < 200 && !res->calls; i++) {
        event_base_loop(f->base, EVLOOP_NONBLOCK);
        usleep(10000);
    }
}

static void test_ca_rotate(void **state)
{
    struct fixture *f = *state;
    struct rotate_result res = { 0 };
    json_t *m;
    int n_fds;

    /* No session: refused at once, the callback never runs. */
    assert_int_equal(gw_client_ca_rotate(f->gw, "stage", rotate_cb, &res), -ENOTCONN);
    assert_null(gw_client_ca(f->gw));
    accept_session(f);
    hello(f);
    m = receive(f, &n_fds); /* the resync's attach */
    json_decref(m);
    reply(f, "{\"type\":\"attach\",\"instance\":\"" IID "\",\"ok\":true}");
    /* A gateway from before rotation: stable, no fingerprints. */
    assert_string_equal(gw_client_ca(f->gw)->phase, "stable");
    assert_string_equal(gw_client_ca(f->gw)->current, "");
    assert_int_equal(gw_client_ca_rotate(f->gw, "rollback", rotate_cb, &res), -EINVAL);

    /* stage: the reply's bundle and state are kept before the callback runs. */
    assert_int_equal(gw_client_ca_rotate(f->gw, "stage", rotate_cb, &res), 0);
    m = receive(f, &n_fds);
    assert_string_equal(json_string_value(json_object_get(m, "type")), "ca-rotate");
    assert_string_equal(json_string_value(json_object_get(m, "step")), "stage");
    json_decref(m);
    reply(f, "{\"type\":\"ca-rotate\",\"ok\":true,\"caCert\":\"" PEM_JSON PEM_JSON
             "\",\"caPhase\":\"staged\",\"caCurrent\":\"" FP_A "\",\"caNext\":\"" FP_B "\"}");
    run_until_called(f, &res);
    assert_int_equal(res.calls, 1);
    assert_int_equal(res.r, 0);
    assert_string_equal(gw_client_ca(f->gw)->phase, "staged");
    assert_string_equal(gw_client_ca(f->gw)->current, FP_A);
    assert_string_equal(gw_client_ca(f->gw)->next, FP_B);
    const char *pem = gw_client_ca_pem(f->gw);
    assert_non_null(strstr(strstr(pem, "END CERTIFICATE") + 1, "BEGIN CERTIFICATE"));

    /* A refusal: -EBUSY with the gateway's words; the state stays. */
    res = (struct rotate_result){ 0 };
    assert_int_equal(gw_client_ca_rotate(f->gw, "finish", rotate_cb, &res), 0);
    json_decref(receive(f, &n_fds));
    reply(f, "{\"type\":\"ca-rotate\",\"ok\":false,\"error\":\"cannot finish: staged\"}");
    run_until_called(f, &res);
    assert_int_equal(res.r, -EBUSY);
    assert_string_equal(res.error, "cannot finish: staged");
    assert_string_equal(gw_client_ca(f->gw)->phase, "staged");
    assert_true(gw_client_ready(f->gw));

    /* The session ends before the reply: told once, -ECONNRESET. */
    res = (struct rotate_result){ 0 };
    assert_int_equal(gw_client_ca_rotate(f->gw, "switch", rotate_cb, &res), 0);
    json_decref(receive(f, &n_fds));
    close(f->conn);
    f->conn = -1;
    run_until_called(f, &res);
    assert_int_equal(res.calls, 1);
    assert_int_equal(res.r, -ECONNRESET);
    assert_false(gw_client_ready(f->gw));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_is_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ca_rotate, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
