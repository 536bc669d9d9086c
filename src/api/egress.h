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
 * space-gw enforce, and what the native API shows. "e2b" exists only for a
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
 * body (put = true, allow_internet NULL). -EOPNOTSUPP for egressProxy and
 * rules (501), -EINVAL (400), with err saying which.
 */
int egress_from_e2b(const json_t *network, const json_t *allow_internet, bool put, char **ret_text,
                    struct policy_error *err);

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
