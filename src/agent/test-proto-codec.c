#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "agent/proto-codec.h"
#include "filesystem.pb-c.h"
#include "process.pb-c.h"

static json_t *roundtrip(const void *desc, const char *text)
{
    json_t *in = json_loads(text, 0, NULL), *out = NULL;
    struct evbuffer *b = evbuffer_new();
    size_t n;

    assert_non_null(in);
    assert_int_equal(proto_codec_encode(desc, in, b), 0);
    n = evbuffer_get_length(b);
    assert_int_equal(proto_codec_decode(desc, evbuffer_pullup(b, -1), n, &out), 0);
    evbuffer_free(b);
    json_decref(in);
    return out;
}

static void check_roundtrip(const void *desc, const char *text, const char *want)
{
    json_t *out = roundtrip(desc, text);
    json_t *w = json_loads(want ? want : text, 0, NULL);

    assert_non_null(w);
    if (!json_equal(out, w)) {
        char *s = json_dumps(out, JSON_SORT_KEYS);
        print_error("got %s\n", s);
        free(s);
        fail();
    }
    json_decref(out);
    json_decref(w);
}

static void test_proto_codec_start_request(void **state)
{
    check_roundtrip(&process__start_request__descriptor,
                    "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"echo hi\"],"
                    "\"envs\":{\"A\":\"1\",\"B\":\"2\"},\"cwd\":\"/tmp\"},\"stdin\":false,"
                    "\"pty\":{\"size\":{\"cols\":80,\"rows\":24}},\"tag\":\"t\"}",
                    NULL);
    /* snake_case input is accepted; unknown fields are ignored */
    check_roundtrip(&process__start_request__descriptor, "{\"process\":{\"cmd\":\"x\"},\"nope\":1}",
                    "{\"process\":{\"cmd\":\"x\"}}");
}

static void test_proto_codec_events(void **state)
{
    check_roundtrip(&process__start_response__descriptor,
                    "{\"event\":{\"end\":{\"exitCode\":-1,\"status\":\"signal: killed\","
                    "\"error\":\"signal: killed\"}}}",
                    NULL);
    check_roundtrip(&process__start_response__descriptor,
                    "{\"event\":{\"data\":{\"stdout\":\"AAH/\"}}}", NULL);
    check_roundtrip(&process__start_response__descriptor, "{\"event\":{\"keepalive\":{}}}", NULL);
    check_roundtrip(&process__send_signal_request__descriptor,
                    "{\"process\":{\"pid\":\"42\"},\"signal\":9}",
                    "{\"process\":{\"pid\":42},\"signal\":\"SIGNAL_SIGKILL\"}");
}

static void test_proto_codec_entry_info(void **state)
{
    check_roundtrip(&filesystem__stat_response__descriptor,
                    "{\"entry\":{\"name\":\"a\",\"type\":\"FILE_TYPE_FILE\",\"path\":\"/a\","
                    "\"size\":\"1048576\",\"mode\":420,\"permissions\":\"-rw-r--r--\","
                    "\"owner\":\"root\",\"group\":\"root\","
                    "\"modifiedTime\":\"2023-11-14T22:13:20.500Z\",\"symlinkTarget\":\"/b\"}}",
                    NULL);
}

static void test_proto_codec_rejects(void **state)
{
    const uint8_t junk[] = { 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f };
    const uint8_t bad_utf8[] = { 0x0a, 0x03, 0x0a, 0x01, 0xff }; /* process.cmd = "\xff" */
    struct evbuffer *b = evbuffer_new();
    json_t *out = NULL, *in;

    assert_int_equal(
        proto_codec_decode(&process__start_request__descriptor, junk, sizeof(junk), &out), -EINVAL);
    assert_int_equal(
        proto_codec_decode(&process__start_request__descriptor, bad_utf8, sizeof(bad_utf8), &out),
        -EINVAL);
    in = json_loads("{\"process\":{\"cmd\":5}}", 0, NULL);
    assert_int_equal(proto_codec_encode(&process__start_request__descriptor, in, b), -EINVAL);
    json_decref(in);
    in = json_loads("{\"signal\":\"SIGNAL_NOPE\"}", 0, NULL);
    assert_int_equal(proto_codec_encode(&process__send_signal_request__descriptor, in, b), -EINVAL);
    json_decref(in);
    evbuffer_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proto_codec_start_request),
        cmocka_unit_test(test_proto_codec_events),
        cmocka_unit_test(test_proto_codec_entry_info),
        cmocka_unit_test(test_proto_codec_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
