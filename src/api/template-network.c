/* Per-template default egress policy: see template-network.h. */
#include "api/template-network.h"

#include <errno.h>
#include <string.h>

#include "api/egress.h"
#include "api/secrets.h"
#include "basic/log.h"
#include "basic/time-util.h"
#include "shared/http-util.h"

static json_t *to_json(const char *template_id, const char *text)
{
    return json_pack("{s:s, s:o}", "template", template_id, "network", egress_native(text));
}

void http_template_network_put(struct request_ctx *c)
{
    struct policy_error perr = { { 0 } };
    json_t *body = http_util_body_json(c->req);
    char *network = NULL;
    int r;

    if (!body) {
        return;
    }
    r = egress_from_native(body, &network, &perr);
    json_decref(body);
    if (r >= 0) {
        /* No sandbox yet: only the owner's own secrets may be named. */
        r = egress_check_secrets(c->m, NULL, network, NULL, &perr);
    }
    if (r < 0) {
        http_util_reply_error(c->req, routes_status_from_errno(r), "invalid network policy: %s",
                              r == -ENOMEM ? strerror(ENOMEM) : perr.message);
        goto out;
    }
    r = store_template_network_put(c->m->store, secrets_owner(), c->id, network,
                                   (int64_t)now_realtime());
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot store the network policy of template '%s': %s",
                              c->id, strerror(-r));
        goto out;
    }
    log_info("template '%s': default network policy set", c->id);
    http_util_reply_json(c->req, 200, to_json(c->id, network));
out:
    free(network);
}

void http_template_network_get(struct request_ctx *c)
{
    char *network = NULL;
    int r = store_template_network_get(c->m->store, secrets_owner(), c->id, &network);

    if (r == -ENOENT) {
        http_util_reply_error(c->req, 404, "template '%s' has no default network policy", c->id);
        return;
    }
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot read the network policy of template '%s': %s",
                              c->id, strerror(-r));
        return;
    }
    http_util_reply_json(c->req, 200, to_json(c->id, network));
    free(network);
}

void http_template_network_delete(struct request_ctx *c)
{
    int r = store_template_network_delete(c->m->store, secrets_owner(), c->id);

    if (r == -ENOENT) {
        http_util_reply_error(c->req, 404, "template '%s' has no default network policy", c->id);
        return;
    }
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot delete the network policy of template '%s': %s",
                              c->id, strerror(-r));
        return;
    }
    log_info("template '%s': default network policy removed", c->id);
    evhttp_send_reply(c->req, 204, "No Content", NULL);
}

int template_network_default(struct manager *m, const char *template_id, char **ret)
{
    int r = store_template_network_get(m->store, secrets_owner(), template_id, ret);

    if (r == -ENOENT) {
        *ret = NULL;
        return 0;
    }
    return r;
}
