/*
 * libFuzzer target for the control channel codec (control-msg.h). The first
 * byte picks the descriptor count the datagram "arrived with" (0..3), the
 * rest is the datagram. Whatever parses must have a valid type and the
 * fields its type needs; every outcome must produce a reply that is one JSON
 * object with "type" and "ok". Build with -Dfuzzers=true and clang.
 */
#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "gw/control-msg.h"
#include "gw/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct control_request req;
    char err[CONTROL_ERROR_MAX];
    struct strbuf out = STRBUF_INIT;
    json_t *o;
    int r;

    if (size < 1) {
        return 0;
    }
    r = control_msg_parse(data + 1, size - 1, data[0] & 3, &req, err);
    if (r == 0) {
        assert(req.type != CONTROL_UNKNOWN);
        assert(req.type == CONTROL_HELLO       ? req.node[0] != '\0'
               : req.type == CONTROL_CA_ROTATE ? req.step[0] != '\0'
                                               : req.instance[0] != '\0');
        assert((req.type == CONTROL_ATTACH || req.type == CONTROL_POLICY) == (req.policy != NULL));
        assert(req.type != CONTROL_ATTACH || (data[0] & 3) == 2);
    } else {
        assert(err[0] != '\0' && req.policy == NULL);
    }
    struct control_ca ca = { .bundle = "PEM", .phase = "stable", .current = "aa", .next = "" };
    assert(control_msg_reply(&req, r == 0 ? NULL : err, &ca, &out) == 0);
    o = json_loadb(out.buf, out.len, 0, NULL);
    assert(o && json_is_string(json_object_get(o, "type")) &&
           json_is_boolean(json_object_get(o, "ok")));
    json_decref(o);
    strbuf_release(&out);
    control_request_done(&req);
    return 0;
}
