#pragma once
/*
 * A sandbox's egress policy as the api keeps it (docs/architecture.md
 * "Network"): parsed and checked with src/gw's policy model (gw/policy.h),
 * stored in sandboxes.network (store.h network_json) as
 *
 *   {"native": {"internet": bool, "allow": [...], "deny": [...]},
 *    "e2b": {"network": {"allowOut"?: [...], "denyOut"?: [...]},
 *            "allowInternetAccess": true | false | null}}
 *
 * "native" is the canonical form (policy_to_native()): what the node and
 * space-gw enforce, and what the native API shows. Its "inject" rules name
 * secrets ({{secret:NAME}}), never hold one; the sealed values are added
 * only on the way to the node (secrets_wire_policy()). "e2b" exists only for a
 * policy an E2B call set: what getInfo must echo back as it was given. A
 * NULL column (a row an older release wrote) reads as the native default,
 * deny everything, which is what such a sandbox had.
 */
#include <jansson.h>
#include <stdbool.h>

#include "gw/policy.h"

/*
 * The stored text for a native policy (json NULL = {} = deny everything).
 * 0, or -EINVAL with err naming the bad entry, -ENOMEM.
 */
int egress_from_native(const json_t *json, char **ret_text, struct policy_error *err);
/*
 * The stored text for an E2B policy: the create body's "network" and
 * "allow_internet_access" (put = false), or a PUT /sandboxes/{id}/network
 * body (put = true, allow_internet NULL). network.rules header transforms
 * become native inject rules; a literal header value (no ${e2b.secrets.NAME}
 * in it) becomes a secret of sandbox_id: literals (an object, may be NULL,
 * then literals are refused) gets name -> value for the caller to create
 * (secrets_create_literal()), and the policy and its echo name it instead.
 * -EOPNOTSUPP for egressProxy and iam tokens (501), -EINVAL (400), with err
 * saying which.
 */
int egress_from_e2b(const json_t *network, const json_t *allow_internet, bool put,
                    const char *sandbox_id, json_t *literals, char **ret_text,
                    struct policy_error *err);
/*
 * Whether the secrets the stored text's inject rules name exist and are sandbox_id's to
 * use (NULL: a sandbox not created yet), the names in pending aside (literals about to be
 * created). 0, or -EINVAL with err naming the rule, -EIO, -ENOMEM.
 */
struct manager;
int egress_check_secrets(struct manager *m, const char *sandbox_id, const char *text,
                         const json_t *pending, struct policy_error *err);

/* The canonical native policy of a stored text (NULL: deny everything). New reference. */
json_t *egress_native(const char *text);
/*
 * What E2B getInfo shows: the "network" egress fields (allowOut/denyOut as
 * given; an object, maybe empty) and allowInternetAccess (bool or null).
 * For a policy the native API set, they are derived from the native form.
 * New references.
 */
json_t *egress_e2b_network(const char *text);
json_t *egress_e2b_allow_internet(const char *text);
