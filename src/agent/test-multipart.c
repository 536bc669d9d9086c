#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "agent/multipart.h"

static struct evbuffer *buffer_of(const char *s)
{
    struct evbuffer *b = evbuffer_new();

    evbuffer_add(b, s, strlen(s));
    return b;
}

static void take_body(struct evbuffer *b, size_t len, char *out)
{
    evbuffer_remove(b, out, len);
    out[len] = '\0';
}

static void test_multipart_two_files_with_paths(void **state)
{
    struct evbuffer *b = buffer_of(
        "------formdata-undici-0\r\n"
        "Content-Disposition: form-data; name=\"file\"; filename=\"/home/user/a/b.txt\"\r\n"
        "Content-Type: application/octet-stream\r\n"
        "\r\n"
        "hello\r\nworld\r\n"
        "------formdata-undici-0\r\n"
        "Content-Disposition: form-data; name=\"other\"\r\n"
        "\r\n"
        "ignored\r\n"
        "------formdata-undici-0\r\n"
        "Content-Disposition: form-data; name=\"file\"; filename=\"rel/c \\\"q\\\".bin\"\r\n"
        "\r\n"
        "\r\n"
        "------formdata-undici-0--\r\n");
    struct multipart mp;
    struct multipart_part part;
    char body[64];

    assert_int_equal(multipart_init(&mp, b, "multipart/form-data; boundary=----formdata-undici-0"),
                     0);
    assert_int_equal(multipart_next(&mp, &part), 1);
    assert_string_equal(part.name, "file");
    assert_string_equal(part.filename, "/home/user/a/b.txt");
    assert_int_equal(part.len, 12);
    take_body(b, part.len, body);
    assert_string_equal(body, "hello\r\nworld");
    multipart_part_release(&part);

    assert_int_equal(multipart_next(&mp, &part), 1);
    assert_string_equal(part.name, "other");
    assert_null(part.filename);
    evbuffer_drain(b, part.len);
    multipart_part_release(&part);

    assert_int_equal(multipart_next(&mp, &part), 1);
    assert_string_equal(part.filename, "rel/c \"q\".bin");
    assert_int_equal(part.len, 0);
    multipart_part_release(&part);

    assert_int_equal(multipart_next(&mp, &part), 0);
    assert_int_equal(multipart_next(&mp, &part), 0);
    evbuffer_free(b);
}

static void test_multipart_rejects_malformed(void **state)
{
    struct multipart mp;
    struct multipart_part part;
    struct evbuffer *b;

    b = buffer_of("--x\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nno end");
    assert_int_equal(multipart_init(&mp, b, "multipart/form-data; boundary=x"), 0);
    assert_int_equal(multipart_next(&mp, &part), -EBADMSG);
    evbuffer_free(b);

    b = buffer_of("garbage without any delimiter");
    assert_int_equal(multipart_init(&mp, b, "multipart/form-data; boundary=\"x\""), 0);
    assert_int_equal(multipart_next(&mp, &part), -EBADMSG);
    evbuffer_free(b);

    b = buffer_of("--x\r\nContent-Disposition: form-data; name=\"file\"");
    assert_int_equal(multipart_init(&mp, b, "multipart/form-data; boundary=x"), 0);
    assert_int_equal(multipart_next(&mp, &part), -EBADMSG);
    evbuffer_free(b);

    assert_int_equal(multipart_init(&mp, NULL, "multipart/form-data"), -EINVAL);
    assert_int_equal(multipart_init(&mp, NULL, "text/plain; boundary=x"), -EINVAL);
}

static void test_multipart_header_param(void **state)
{
    char *v;

    v = multipart_header_param(" form-data; name=\"file\"; filename=\"a.txt\"", "name");
    assert_string_equal(v, "file");
    free(v);
    v = multipart_header_param(" form-data; name=file; filename*=UTF-8''%C3%A9t%C3%A9.txt; "
                               "filename=\"fallback\"",
                               "filename");
    assert_string_equal(v, "\xc3\xa9t\xc3\xa9.txt");
    free(v);
    assert_null(multipart_header_param(" form-data; name=\"x\"", "filename"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multipart_two_files_with_paths),
        cmocka_unit_test(test_multipart_rejects_malformed),
        cmocka_unit_test(test_multipart_header_param),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
