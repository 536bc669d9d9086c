#pragma once
/*
 * The node's side of the space-gw control messages (src/shared/gw-proto.h):
 * building requests and checking what comes back. Pure (no I/O), so every
 * rule is unit-tested and fuzzed (fuzz-gw-msg.c).
 *
 * Everything received is treated as hostile: space-gw is unprivileged and
 * talks to the guests all day, so a compromised gateway must not be able to
 * crash the root node or smuggle data into what the node serves. A datagram
 * is refused whole when it is empty, oversize, not one JSON object, of an
 * unknown type, or when a field the node uses has the wrong type or shape.
 * Audit records are rebuilt from the known fields only, each checked
 * (gw_msg_clean_record()); a bad record is dropped and counted, not the
 * batch.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "node/instance.h"

#define GW_MSG_FIELD_MAX 1024 /* longest string kept in an audit record */
#define GW_MSG_ERROR_MAX 256  /* of an error reply's text, as logged */
#define GW_MSG_CA_MAX 32768   /* of the egress CA bundle's PEM */
#define GW_MSG_CA_CERTS_MAX 4 /* certificates in it (current + next during a rotation) */
#define GW_MSG_FP_LEN 64      /* a CA fingerprint: sha256, lowercase hex */

/* Requests (node -> gw) as compact JSON text, caller frees; NULL on invalid input or OOM.
 * policy_json: the native policy (instance_record.network); NULL = {} (deny everything). */
char *gw_msg_hello(const char *node);
char *gw_msg_attach(const char *iid, const char *sandbox_id, const char *policy_json);
char *gw_msg_policy(const char *iid, const char *policy_json);
char *gw_msg_detach(const char *iid);
/* step: "stage", "switch" or "finish" (anything else: NULL). */
char *gw_msg_ca_rotate(const char *step);

enum gw_msg_type {
    GW_MSG_HELLO,
    GW_MSG_ATTACH,
    GW_MSG_POLICY,
    GW_MSG_DETACH,
    GW_MSG_AUDIT,
    GW_MSG_CA_ROTATE,
    _GW_MSG_TYPE_MAX,
};
const char *gw_msg_type_to_string(enum gw_msg_type t);

/* One message from space-gw. */
struct gw_msg {
    enum gw_msg_type type;
    /* Replies (every type but audit). */
    bool ok;
    char instance[INSTANCE_ID_LEN + 1]; /* "" when the reply names none */
    char error[GW_MSG_ERROR_MAX];       /* ok == false: printable ASCII, truncated */
    /* hello and ca-rotate, ok: the egress CA (src/gw/ca-set.h) */
    char *ca_cert;                      /* the bundle (PEM, 1..GW_MSG_CA_CERTS_MAX) */
    char ca_phase[16];                  /* "stable" | "staged" | "switched" */
    char ca_current[GW_MSG_FP_LEN + 1]; /* "" when the gateway did not say */
    char ca_next[GW_MSG_FP_LEN + 1];    /* "" when none */
    /* Audit. */
    json_t *records;    /* array of cleaned records, oldest first */
    size_t bad_records; /* records refused by gw_msg_clean_record() */
};

/*
 * Parses one datagram. 0 and *ret filled (release it), or -EBADMSG with a
 * static reason in *why (may be NULL).
 */
int gw_msg_parse(const void *buf, size_t len, struct gw_msg *ret, const char **why);
void gw_msg_release(struct gw_msg *m);

/*
 * A new record of the known fields of rec (gw-proto.h), or NULL when rec is
 * not an object or a known field is malformed: strings (sandbox must be a
 * sandbox id; proto dns|http|tls|tcp; verdict allow|deny; others at most
 * GW_MSG_FIELD_MAX bytes) and non-negative integers (port at most 65535).
 * Other fields are left out.
 */
json_t *gw_msg_clean_record(const json_t *rec);
