/* Unit tests for the control channel codec: each type, each refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>

#include "basic/macro.h"
#include "gw/control-msg.h"
#include "gw/policy.h"
#include "shared/gw-proto.h"

#define SBX "abcdefghij0123456789"

static int parse(const char *s, size_t n_fds, struct control_request *req, char *err)
{
    return control_msg_parse(s, strlen(s), n_fds, req, err);
}

static void test_ok(void **state)
{
    struct control_request req;
    char err[CONTROL_ERROR_MAX];

    assert_int_equal(parse("{\"type\":\"hello\",\"node\":\"n1\"}", 0, &req, err), 0);
    assert_int_equal(req.type, CONTROL_HELLO);
    assert_string_equal(req.node, "n1");
    control_request_done(&req);

    assert_int_equal(parse("{\"type\":\"attach\",\"instance\":\"abc123\",\"sandbox\":\"" SBX
                           "\",\"policy\":{\"allow\":[\"a.test\"]}}",
                           2, &req, err),
                     0);
    assert_int_equal(req.type, CONTROL_ATTACH);
    assert_string_equal(req.instance, "abc123");
    assert_string_equal(req.sandbox, SBX);
    assert_non_null(req.policy);
    control_request_done(&req);
    assert_null(req.policy);

    /* No policy = deny everything, never "no checks". */
    assert_int_equal(
        parse("{\"type\":\"attach\",\"instance\":\"abc\",\"sandbox\":\"" SBX "\"}", 2, &req, err),
        0);
    assert_non_null(req.policy);
    control_request_done(&req);

    assert_int_equal(
        parse("{\"type\":\"policy\",\"instance\":\"abc\",\"policy\":{}}", 0, &req, err), 0);
    control_request_done(&req);
    assert_int_equal(parse("{\"type\":\"detach\",\"instance\":\"abc\"}", 0, &req, err), 0);
    assert_int_equal(req.type, CONTROL_DETACH);
    control_request_done(&req);
}

static void test_refused(void **state)
{
    static const struct {
        const char *msg;
        size_t fds;
        const char *error;
    } cases[] = {
        { "", 0, "malformed" },
        { "[]", 0, "not a JSON object" },
        { "{\"type\":\"hello\",\"node\":\"n\",\"node\":\"m\"}", 0, "malformed" },
        { "{\"node\":\"n\"}", 0, "type" },
        { "{\"type\":7}", 0, "type" },
        { "{\"type\":\"reboot\"}", 0, "unknown type" },
        { "{\"type\":\"hello\",\"node\":\"n\",\"x\":1}", 0, "unknown field \"x\"" },
        { "{\"type\":\"hello\",\"node\":\"n\"}", 1, "descriptors" },
        { "{\"type\":\"hello\",\"node\":\"has space\"}", 0, "node" },
        { "{\"type\":\"hello\"}", 0, "node" },
        { "{\"type\":\"attach\",\"instance\":\"abc\",\"sandbox\":\"" SBX "\"}", 1, "descriptors" },
        { "{\"type\":\"attach\",\"instance\":\"abc\",\"sandbox\":\"" SBX "\"}", 3, "descriptors" },
        { "{\"type\":\"attach\",\"instance\":\"abc\",\"sandbox\":\"short\"}", 2, "sandbox" },
        { "{\"type\":\"attach\",\"instance\":\"ABC\",\"sandbox\":\"" SBX "\"}", 2, "instance" },
        { "{\"type\":\"attach\",\"instance\":\"abc\",\"sandbox\":\"" SBX "\",\"policy\":[]}", 2,
          "not an object" },
        { "{\"type\":\"policy\",\"instance\":\"abc\"}", 0, "policy" },
        { "{\"type\":\"policy\",\"instance\":\"abc\",\"policy\":{\"allow\":[\"*\"]}}", 0,
          "invalid policy" },
        { "{\"type\":\"policy\",\"instance\":\"abc\",\"policy\":{\"internet\":1}}", 0,
          "invalid policy" },
        { "{\"type\":\"detach\"}", 0, "instance" },
        { "{\"type\":\"detach\",\"instance\":\"a\\u0000b\"}", 0, "malformed" },
        { "{\"type\":\"detach\",\"instance\":\"abc\"}", SIZE_MAX, "descriptors" },
    };
    struct control_request req;
    char err[CONTROL_ERROR_MAX];

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        int r = parse(cases[i].msg, cases[i].fds, &req, err);
        if (r != -EINVAL || !strstr(err, cases[i].error)) {
            fail_msg("case %zu (%s): r=%d err=%s", i, cases[i].msg, r, err);
        }
        assert_null(req.policy);
        control_request_done(&req);
    }
    /* Oversize. */
    char *big = calloc(1, GW_PROTO_MSG_MAX + 2);
    memset(big, ' ', GW_PROTO_MSG_MAX + 1);
    assert_int_equal(control_msg_parse(big, GW_PROTO_MSG_MAX + 1, 0, &req, err), -EINVAL);
    assert_non_null(strstr(err, "larger"));
    free(big);
}

static void test_reply(void **state)
{
    struct control_request req;
    char err[CONTROL_ERROR_MAX];
    struct strbuf sb = STRBUF_INIT;

    assert_int_equal(parse("{\"type\":\"hello\",\"node\":\"n\"}", 0, &req, err), 0);
    struct control_ca ca = { .bundle = "PEM", .phase = "stable", .current = "aa", .next = "" };
    assert_int_equal(control_msg_reply(&req, NULL, &ca, &sb), 0);
    assert_string_equal(sb.buf, "{\"type\":\"hello\",\"ok\":true,\"caCert\":\"PEM\","
                                "\"caPhase\":\"stable\",\"caCurrent\":\"aa\"}");
    strbuf_release(&sb);
    /* ca-rotate: the step checked, the reply with the CA (next included when there is one). */
    assert_int_equal(parse("{\"type\":\"ca-rotate\",\"step\":\"stage\"}", 0, &req, err), 0);
    assert_int_equal(req.type, CONTROL_CA_ROTATE);
    assert_string_equal(req.step, "stage");
    ca = (struct control_ca){ .bundle = "P2", .phase = "staged", .current = "aa", .next = "bb" };
    assert_int_equal(control_msg_reply(&req, NULL, &ca, &sb), 0);
    assert_string_equal(sb.buf, "{\"type\":\"ca-rotate\",\"ok\":true,\"caCert\":\"P2\","
                                "\"caPhase\":\"staged\",\"caCurrent\":\"aa\",\"caNext\":\"bb\"}");
    strbuf_release(&sb);
    assert_int_equal(parse("{\"type\":\"ca-rotate\",\"step\":\"rollback\"}", 0, &req, err),
                     -EINVAL);
    assert_non_null(strstr(err, "step"));
    assert_int_equal(parse("{\"type\":\"ca-rotate\"}", 0, &req, err), -EINVAL);
    assert_int_equal(
        parse("{\"type\":\"ca-rotate\",\"step\":\"stage\",\"instance\":\"a\"}", 0, &req, err),
        -EINVAL);
    assert_non_null(strstr(err, "unknown field"));
    assert_int_equal(parse("{\"type\":\"ca-rotate\",\"step\":\"switch\"}", 1, &req, err), -EINVAL);
    assert_int_equal(parse("{\"type\":\"detach\",\"instance\":\"abc\",\"zz\":1}", 0, &req, err),
                     -EINVAL);
    /* The refusal names the instance it could read, and says why (lossy for bad UTF-8). */
    assert_int_equal(control_msg_reply(&req, "bad \xff", NULL, &sb), 0);
    json_t *o = json_loads(sb.buf, 0, NULL);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "type")), "detach");
    assert_string_equal(json_string_value(json_object_get(o, "instance")), "abc");
    assert_true(json_is_false(json_object_get(o, "ok")));
    assert_non_null(json_object_get(o, "error"));
    json_decref(o);
    strbuf_release(&sb);
    control_request_done(&req);
    /* Unreadable type: "error". */
    assert_int_equal(parse("{}", 0, &req, err), -EINVAL);
    assert_int_equal(control_msg_reply(&req, err, NULL, &sb), 0);
    assert_non_null(strstr(sb.buf, "\"type\":\"error\""));
    strbuf_release(&sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ok),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_reply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
