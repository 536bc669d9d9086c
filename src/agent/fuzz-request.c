/*
 * libFuzzer target for everything the agent decodes from a client before
 * acting on it (style.md R18). The first input byte picks the decoder:
 *   0  StartRequest JSON (process_rpc_parse_start)
 *   1  binary protobuf for every request type (proto_codec_decode), and
 *      the JSON it yields must encode back (proto_codec_encode)
 *   2  a multipart body; the first line is the Content-Type
 *   3  an Authorization header, then path resolution for a user
 *   4  an RFC 3339 timestamp (/init)
 *   5  a caBundle (/init: PEM certificates only)
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "agent/multipart.h"
#include "agent/process-rpc.h"
#include "agent/proto-codec.h"
#include "agent/state.h"
#include "agent/trust.h"
#include "agent/user.h"
#include "filesystem.pb-c.h"
#include "process.pb-c.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A fixed jansson hash seed, so one -seed gives one run (see fuzz-qmp.c). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    json_object_seed(1);
    return 0;
}

static const void *const requests[] = {
    &process__start_request__descriptor,        &process__connect_request__descriptor,
    &process__send_input_request__descriptor,   &process__send_signal_request__descriptor,
    &process__update_request__descriptor,       &process__stream_input_request__descriptor,
    &filesystem__list_dir_request__descriptor,  &filesystem__move_request__descriptor,
    &filesystem__watch_dir_request__descriptor, &filesystem__get_watcher_events_request__descriptor,
    &filesystem__stat_response__descriptor,
};

static char *cstring(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);

    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

static void fuzz_start_json(const uint8_t *p, size_t n)
{
    json_t *j = json_loadb((const char *)p, n, JSON_REJECT_DUPLICATES, NULL);
    struct start_request sr;
    const char *err;

    if (j && process_rpc_parse_start(j, &sr, &err) == 0) {
        assert(sr.cmd && *sr.cmd);
        assert(!sr.args || json_array_size(sr.args) == sr.n_args);
    }
    json_decref(j);
}

static void fuzz_proto(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
        json_t *j = NULL;
        if (proto_codec_decode(requests[i], p, n, &j) == 0) {
            struct evbuffer *b = evbuffer_new();
            int r = proto_codec_encode(requests[i], j, b);
            assert(r == 0 || r == -ENOMEM);
            evbuffer_free(b);
            json_decref(j);
        }
    }
}

static void fuzz_multipart(const uint8_t *p, size_t n)
{
    const uint8_t *nl = memchr(p, '\n', n);
    struct evbuffer *b;
    struct multipart mp;
    struct multipart_part part;
    char *ct;

    if (!nl) {
        return;
    }
    ct = cstring(p, (size_t)(nl - p));
    b = evbuffer_new();
    evbuffer_add(b, nl + 1, n - (size_t)(nl - p) - 1);
    if (ct && multipart_init(&mp, b, ct) == 0) {
        for (int i = 0; i < 64 && multipart_next(&mp, &part) == 1; i++) {
            assert(part.len <= evbuffer_get_length(b));
            evbuffer_drain(b, part.len);
            multipart_part_release(&part);
        }
    }
    evbuffer_free(b);
    free(ct);
}

static void fuzz_user_paths(const uint8_t *p, size_t n)
{
    struct user u = { .name = "user", .home = "/home/user" };
    char *s = cstring(p, n), *name = NULL, *path = NULL;

    if (!s) {
        return;
    }
    if (user_from_basic_auth(s, &name) == 0) {
        free(name);
    }
    if (user_resolve_path(&u, s, "/work", &path) == 0) {
        assert(path[0] == '/');
        assert(!strstr(path, "/../") && !strstr(path, "//"));
        free(path);
    }
    free(s);
}

static void fuzz_timestamp(const uint8_t *p, size_t n)
{
    char *s = cstring(p, n);
    struct timespec ts;

    if (s && state_parse_rfc3339(s, &ts) == 0) {
        assert(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000);
    }
    free(s);
}

static void fuzz_ca_bundle(const uint8_t *p, size_t n)
{
    const char *why = NULL;
    int r = trust_check_bundle((const char *)p, n, &why);

    assert(r == 0 || r == -EBADMSG || r == -E2BIG || r == -ENOMEM);
    assert(r == 0 || r == -ENOMEM || why);
    assert(r != 0 || memmem(p, n, "-----BEGIN CERTIFICATE-----", 27));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    switch (data[0] % 6) {
    case 0:
        fuzz_start_json(data + 1, size - 1);
        break;
    case 1:
        fuzz_proto(data + 1, size - 1);
        break;
    case 2:
        fuzz_multipart(data + 1, size - 1);
        break;
    case 3:
        fuzz_user_paths(data + 1, size - 1);
        break;
    case 4:
        fuzz_timestamp(data + 1, size - 1);
        break;
    default:
        fuzz_ca_bundle(data + 1, size - 1);
        break;
    }
    return 0;
}
