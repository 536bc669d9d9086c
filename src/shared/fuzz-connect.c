/*
 * libFuzzer target for Connect framing (style.md R18): walks the input as
 * a sequence of envelopes and checks connect_envelope_parse()'s contract,
 * then pushes each payload through the JSON getters the agent decodes
 * requests with. Build with -Dfuzzers=true and clang.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "shared/connect.h"
#include "shared/json-util.h"

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

static void poke_json(const uint8_t *p, size_t n)
{
    static const struct json_util_enum names[] = { { "SIGNAL_SIGKILL", 9 },
                                                   { "SIGNAL_SIGTERM", 15 } };
    json_t *j = json_loadb((const char *)p, n, JSON_REJECT_DUPLICATES, NULL);
    const char *s;
    uint32_t u;
    int64_t i;
    bool b;
    int e;
    void *bytes = NULL;
    size_t len;
    json_t *o;

    if (!j) {
        return;
    }
    (void)json_util_get_string(j, "path", "path", &s);
    (void)json_util_get_u32(j, "pid", NULL, &u);
    (void)json_util_get_i64(j, "size", NULL, &i);
    (void)json_util_get_bool(j, "stdin", NULL, &b);
    (void)json_util_get_enum(j, "signal", NULL, names, 2, &e);
    (void)json_util_get_object(j, "process", NULL, &o);
    if (json_util_get_bytes(j, "stdin", NULL, 1 << 20, &bytes, &len) == 0) {
        assert(len <= 1 << 20);
        free(bytes);
    }
    if (json_is_string(j)) {
        json_t *l = json_util_string_lossy(json_string_value(j), json_string_length(j));
        json_decref(l);
    }
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;

    while (off < size) {
        const uint8_t *payload;
        uint32_t n;
        size_t used;
        uint8_t flags;
        int r =
            connect_envelope_parse(data + off, size - off, 1 << 20, &flags, &payload, &n, &used);
        if (r <= 0) {
            assert(r == 0 || r == -EMSGSIZE || r == -EPROTO);
            break;
        }
        assert(used == CONNECT_ENVELOPE_HEADER + (size_t)n);
        assert(used <= size - off);
        assert(payload == data + off + CONNECT_ENVELOPE_HEADER);
        assert(!(flags & CONNECT_FLAG_COMPRESSED));
        poke_json(payload, n);
        off += used;
    }
    if (size > 0 && size < 64) {
        char name[64];
        memcpy(name, data, size);
        name[size] = '\0';
        (void)connect_code_from_string(name);
    }
    return 0;
}
