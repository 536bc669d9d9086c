#pragma once
/*
 * The codec of space-gw's control channel (gw-proto.h is the protocol):
 * parses one datagram from space-node into a request, builds the replies.
 * Pure, no I/O, so the unit test and the fuzzer drive it directly.
 *
 * Strict (everything on the socket is treated as hostile, even though only
 * root can connect): a datagram is one JSON object of at most
 * GW_PROTO_MSG_MAX bytes, "type" one of hello/attach/policy/detach/
 * ca-rotate, only
 * the fields that type has, "instance" [a-z0-9]{1,32}, "sandbox" a sandbox
 * id, "policy" what policy_parse_native() accepts (absent or null = deny
 * everything), "step" stage|switch|finish, and exactly the descriptors the type carries (attach: 2,
 * every other: 0).
 */
#include <stddef.h>

#include "basic/strbuf.h"
#include "shared/sandbox-id.h"

struct policy;

enum control_type {
    CONTROL_UNKNOWN,
    CONTROL_HELLO,
    CONTROL_ATTACH,
    CONTROL_POLICY,
    CONTROL_DETACH,
    CONTROL_CA_ROTATE,
};

#define CONTROL_INSTANCE_MAX 32
#define CONTROL_NODE_MAX 64
#define CONTROL_ERROR_MAX 512

struct control_request {
    enum control_type type; /* CONTROL_UNKNOWN when it could not be read */
    char node[CONTROL_NODE_MAX + 1];
    char instance[CONTROL_INSTANCE_MAX + 1]; /* "" when absent or invalid */
    char sandbox[SANDBOX_ID_LEN + 1];
    struct policy *policy; /* attach and policy; owned, control_request_done() frees it */
    char step[8];          /* ca-rotate: "stage", "switch" or "finish" */
};

/* The egress CA as replies report it (ca-set.h). */
struct control_ca {
    const char *bundle;  /* PEM: current [+ next] */
    const char *phase;   /* "stable" | "staged" | "switched" */
    const char *current; /* fingerprints (sha256 hex); next "" when none */
    const char *next;
};

const char *control_type_str(enum control_type t);

/*
 * Parses msg (len bytes) that arrived with n_fds descriptors. Returns 0, or
 * -EINVAL (-ENOMEM) with err (CONTROL_ERROR_MAX bytes) saying what was
 * wrong; then req->type and req->instance hold what could be read, for the
 * error reply.
 */
int control_msg_parse(const void *msg, size_t len, size_t n_fds, struct control_request *req,
                      char *err);

void control_request_done(struct control_request *req);

/*
 * The reply to req: {"type":..., "instance":... (when it had one), "ok":
 * error == NULL, "error": error}, and for an ok hello or ca-rotate (ca not
 * NULL) "caCert": the bundle, "caPhase", "caCurrent", "caNext" (when there
 * is one). Appended to out. Returns 0 or -ENOMEM.
 */
int control_msg_reply(const struct control_request *req, const char *error,
                      const struct control_ca *ca, struct strbuf *out);
