#pragma once
/*
 * Secrets at the api (docs/architecture.md "Credentials", issue 10): the
 * native /v1/secrets and E2B /secrets routes, and what the egress policy
 * needs of them.
 *
 * A value is sealed at once to space-gw's public key (--secrets-key,
 * sealed-secret.h) with its name as associated data, stored sealed
 * (store.h struct store_secret), handed to the node inside the policy it
 * sends ("secrets": {name: sealed}, only for names the policy's inject
 * rules reference) and opened only by space-gw. space-api holds no key that
 * opens it: no route returns a value, none is logged, and the request body
 * that carried it is wiped once sealed.
 *
 * Names: [A-Za-z0-9_-]{1,64}, unique per owner. A name starting with '_' is
 * the platform's: the literal header values of an E2B network.rules
 * transform become secrets named _<sandbox id>_<8 hex>, scoped to that
 * sandbox (only its own policy may name them; deleted once it is killed).
 *
 * Owner: every API key of a deployment acts for one owner today, the one
 * sandboxes are scoped by (sandboxes.client_id, SANDBOX_CLIENT_ID); the
 * store keys secrets by it so that per-key owners need no migration.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api/manager.h"
#include "api/routes.h"

#define SECRET_NAME_MAX 64
/* _ + sandbox id + _ + 8 hex */
#define SECRET_LITERAL_NAME_LEN (1 + 20 + 1 + 8)

/* [A-Za-z0-9_-]{1,64}. */
bool secret_name_is_valid(const char *name);
/* Valid and not the platform's (no leading '_'): what users may create. */
bool secret_name_is_users(const char *name);
/* The owner scope of every request (see above). */
const char *secrets_owner(void);

/* Whether --secrets-key was given; replies 503 secrets_unavailable otherwise (E2B: the
 * numeric code its clients read). */
bool secrets_available(struct request_ctx *c, bool e2b);
/* Wipes the bytes of the request's body (it carried a value, now sealed). */
void secrets_wipe_request(struct evhttp_request *req);
/* Wipes the string values of an object (name -> value) in place. */
void secrets_wipe_values(json_t *literals);

/* Native (openapi.yaml): POST/GET /v1/secrets, GET/PUT/DELETE /v1/secrets/{name}. */
void http_secret_create(struct request_ctx *c);
void http_secret_list(struct request_ctx *c);
void http_secret_get(struct request_ctx *c);
void http_secret_rotate(struct request_ctx *c);
void http_secret_delete(struct request_ctx *c);
/* E2B (e2b-sdk-surface.md "Secrets"): {id} is the secretID or the name. */
void e2b_secret_create(struct request_ctx *c);
void e2b_secret_list(struct request_ctx *c);
void e2b_secret_get(struct request_ctx *c);
void e2b_secret_update(struct request_ctx *c);
void e2b_secret_delete(struct request_ctx *c);

/*
 * Calls fn for every secret name a value template references: {{secret:NAME}} and
 * ${e2b.secrets.NAME} (well-formed names only: the policy parser refuses the rest).
 * Stops at and returns fn's first negative return.
 */
int secrets_for_each_ref(const char *value, int (*fn)(const char *name, void *userdata),
                         void *userdata);
/*
 * Whether every secret a native policy's inject rules name exists and may be used by
 * sandbox_id (NULL: a sandbox being created, which has no literals of its own yet), except
 * the names in pending (a create's literals, written after this check; may be NULL).
 * 0, or -EINVAL with msg naming the rule and the secret, -EIO.
 */
int secrets_check_policy(struct manager *m, const char *sandbox_id, const json_t *native,
                         const json_t *pending, char *msg, size_t msg_size);
/*
 * The policy as the node gets it: the stored native policy of sb plus "secrets" {name:
 * sealed} for every name its rules reference. A rule naming a secret that is gone (deleted
 * since) or not its sandbox's is left out: it stops applying. New reference, NULL on OOM.
 */
json_t *secrets_wire_policy(struct manager *m, const struct store_sandbox *sb);
/*
 * Seals value as a new secret of sandbox_id named name (SECRET_LITERAL_NAME_LEN, made by
 * secrets_literal_name()). -EAGAIN without --secrets-key.
 */
int secrets_create_literal(struct manager *m, const char *sandbox_id, const char *name,
                           const char *value);
int secrets_literal_name(const char *sandbox_id, char name[SECRET_NAME_MAX + 1]);
/* Deletes a create's literals again when the create failed (best effort; swept anyway). */
void secrets_drop_literals(struct manager *m, const json_t *names);
/*
 * Queues a sandbox.network operation for every live sandbox whose policy references name,
 * so the node gets the rotated value, or loses the rule of a deleted secret.
 */
void secrets_resend(struct manager *m, const char *name);
/* The controller's tick: the literals of killed sandboxes go (every few seconds). */
void secrets_tick(struct manager *m);
