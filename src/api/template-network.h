#pragma once
/*
 * A template's default egress policy (docs/architecture.md "Credentials",
 * issue 10 "per template as a default"): native PUT/GET/DELETE
 * /v1/templates/{name}/network, and the lookup a create makes when its
 * request gives no policy of its own.
 *
 * The body and the stored text are exactly a sandbox's (egress.h): the same
 * parser (gw/policy.c) checks it, and the secrets its inject rules name must
 * exist when it is set (user secrets only: a sandbox's literals cannot be a
 * template's). A create that gives a policy gets that one: the request's
 * replaces the template's whole, nothing is merged. The default is copied
 * into the sandbox's row at create, so changing it later changes only
 * sandboxes created afterwards; a secret rotated later reaches both (the
 * copy names it, secrets_resend()).
 */
#include "api/manager.h"
#include "api/routes.h"

void http_template_network_put(struct request_ctx *c);
void http_template_network_get(struct request_ctx *c);
void http_template_network_delete(struct request_ctx *c);

/*
 * The stored text of template_id's default policy in *ret (the caller frees it), or NULL
 * when it has none. 0, or -EIO/-ENOMEM.
 */
int template_network_default(struct manager *m, const char *template_id, char **ret);
