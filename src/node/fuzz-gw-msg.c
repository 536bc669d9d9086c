/*
 * libFuzzer target for what space-node reads from space-gw's control socket
 * (gw-msg.h): the gateway is unprivileged and faces the guests, so its
 * datagrams are hostile input to the root node. One input = one datagram.
 * Checked: every accepted message has a known type; replies name a valid
 * instance or none; an ok hello carries PEM; every audit record that is kept
 * has only known fields and goes through the node's ring. Build with
 * -Dfuzzers=true and clang.
 */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "node/egress-audit.h"
#include "node/gw-msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct egress_audit *ring;
    struct gw_msg m;
    const char *why = NULL;

    if (!ring && egress_audit_new(64, 1 << 16, &ring) < 0) {
        return 0;
    }
    if (gw_msg_parse(data, size, &m, &why) < 0) {
        assert(why);
        return 0;
    }
    assert(m.type < _GW_MSG_TYPE_MAX);
    assert(m.instance[0] == '\0' || instance_id_is_valid(m.instance));
    if (m.type == GW_MSG_HELLO && m.ok) {
        assert(m.ca_cert && strncmp(m.ca_cert, "-----BEGIN CERTIFICATE-----", 27) == 0);
    }
    if (m.type == GW_MSG_AUDIT) {
        size_t i;
        json_t *rec;
        json_array_foreach (m.records, i, rec) {
            assert(json_is_object(rec) && !json_object_get(rec, "seq"));
            (void)egress_audit_push(ring, rec);
        }
        json_decref(egress_audit_read(ring, 0, 100));
    }
    gw_msg_release(&m);
    return 0;
}
