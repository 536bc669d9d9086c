/*
 * The control channel codec (control-msg.h has the contract).
 */
#include "gw/control-msg.h"

#include <errno.h>
#include <stdarg.h>
#include <jansson.h>

#include "basic/macro.h"
#include "gw/policy.h"
#include "shared/gw-proto.h"
#include "shared/json-util.h"

static const char *const type_names[] = {
    [CONTROL_UNKNOWN] = "error", [CONTROL_HELLO] = "hello",   [CONTROL_ATTACH] = "attach",
    [CONTROL_POLICY] = "policy", [CONTROL_DETACH] = "detach", [CONTROL_CA_ROTATE] = "ca-rotate",
};

const char *control_type_str(enum control_type t)
{
    return (size_t)t < ARRAY_SIZE(type_names) ? type_names[t] : "error";
}

static bool instance_is_valid(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > CONTROL_INSTANCE_MAX) {
        return false;
    }
    for (; *s; s++) {
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9'))) {
            return false;
        }
    }
    return true;
}

static bool node_name_is_valid(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > CONTROL_NODE_MAX) {
        return false;
    }
    for (; *s; s++) {
        if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7e) {
            return false;
        }
    }
    return true;
}

static _printf_(2, 3) int fail(char *err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, CONTROL_ERROR_MAX, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* A string field of at most max bytes (no NUL inside); NULL when absent or not a string. */
static const char *get_string(json_t *obj, const char *key, size_t max)
{
    json_t *v = json_object_get(obj, key);

    if (!json_is_string(v) || json_string_length(v) > max ||
        strlen(json_string_value(v)) != json_string_length(v)) {
        return NULL;
    }
    return json_string_value(v);
}

int control_msg_parse(const void *msg, size_t len, size_t n_fds, struct control_request *req,
                      char *err)
{
    static const char *const allowed[][4] = {
        [CONTROL_HELLO] = { "node" },
        [CONTROL_ATTACH] = { "instance", "sandbox", "policy" },
        [CONTROL_POLICY] = { "instance", "policy" },
        [CONTROL_DETACH] = { "instance" },
        [CONTROL_CA_ROTATE] = { "step" },
    };
    json_error_t jerr;
    json_t *root = NULL, *v;
    const char *key, *s;
    int r = -EINVAL;

    *req = (struct control_request){ 0 };
    err[0] = '\0';
    if (len > GW_PROTO_MSG_MAX) {
        return fail(err, "message larger than %u bytes", GW_PROTO_MSG_MAX);
    }
    root = json_loadb(msg, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root || !json_is_object(root)) {
        r = fail(err, "not a JSON object%s", root ? "" : ": malformed JSON");
        goto out;
    }
    s = get_string(root, "type", 16);
    if (!s) {
        r = fail(err, "missing or invalid %s", "\"type\"");
        goto out;
    }
    for (size_t t = CONTROL_HELLO; t < ARRAY_SIZE(type_names); t++) {
        if (strcmp(s, type_names[t]) == 0) {
            req->type = (enum control_type)t;
        }
    }
    if (req->type == CONTROL_UNKNOWN) {
        r = fail(err, "unknown type \"%.32s\"", s);
        goto out;
    }
    /* The instance first, so even a refused request's reply names it. */
    s = get_string(root, "instance", CONTROL_INSTANCE_MAX);
    if (s && instance_is_valid(s)) {
        snprintf(req->instance, sizeof(req->instance), "%s", s);
    }
    json_object_foreach (root, key, v) {
        bool known = strcmp(key, "type") == 0;
        for (size_t i = 0; i < 4 && allowed[req->type][i]; i++) {
            known = known || strcmp(key, allowed[req->type][i]) == 0;
        }
        if (!known) {
            char k[64];
            snprintf(k, sizeof(k), "%.60s", key);
            r = fail(err, "unknown field \"%s\"", k);
            goto out;
        }
    }
    if (n_fds != (req->type == CONTROL_ATTACH ? 2u : 0u)) {
        r = fail(err, "%s with the wrong number of descriptors", control_type_str(req->type));
        goto out;
    }
    switch (req->type) {
    case CONTROL_HELLO:
        s = get_string(root, "node", CONTROL_NODE_MAX);
        if (!s || !node_name_is_valid(s)) {
            r = fail(err, "missing or invalid %s", "\"node\"");
            goto out;
        }
        snprintf(req->node, sizeof(req->node), "%s", s);
        break;
    case CONTROL_ATTACH:
        s = get_string(root, "sandbox", SANDBOX_ID_LEN);
        if (!s || !sandbox_id_is_valid(s)) {
            r = fail(err, "missing or invalid %s", "\"sandbox\"");
            goto out;
        }
        snprintf(req->sandbox, sizeof(req->sandbox), "%s", s);
        __attribute__((fallthrough));
    case CONTROL_POLICY:
    case CONTROL_DETACH:
        if (!req->instance[0]) {
            r = fail(err, "missing or invalid %s", "\"instance\"");
            goto out;
        }
        if (req->type == CONTROL_DETACH) {
            break;
        }
        v = json_object_get(root, "policy");
        if (req->type == CONTROL_POLICY && !v) {
            r = fail(err, "missing %s", "\"policy\"");
            goto out;
        }
        if (v && !json_is_object(v) && !json_is_null(v)) {
            r = fail(err, "%s is not an object", "\"policy\"");
            goto out;
        }
        struct policy_error perr = { { 0 } };
        r = policy_parse_native(json_is_null(v) ? NULL : v, true, &req->policy, &perr);
        if (r < 0) {
            if (r == -ENOMEM) {
                snprintf(err, CONTROL_ERROR_MAX, "out of memory");
            } else {
                snprintf(err, CONTROL_ERROR_MAX, "invalid policy: %.400s", perr.message);
            }
            goto out;
        }
        break;
    case CONTROL_CA_ROTATE:
        s = get_string(root, "step", sizeof(req->step) - 1);
        if (!s ||
            (strcmp(s, "stage") != 0 && strcmp(s, "switch") != 0 && strcmp(s, "finish") != 0)) {
            r = fail(err, "missing or invalid %s (stage, switch or finish)", "\"step\"");
            goto out;
        }
        snprintf(req->step, sizeof(req->step), "%s", s);
        break;
    case CONTROL_UNKNOWN:
        assert_not_reached();
    }
    r = 0;
out:
    json_decref(root);
    return r;
}

void control_request_done(struct control_request *req)
{
    req->policy = policy_free(req->policy);
}

int control_msg_reply(const struct control_request *req, const char *error,
                      const struct control_ca *ca, struct strbuf *out)
{
    bool with_ca = !error && ca && (req->type == CONTROL_HELLO || req->type == CONTROL_CA_ROTATE);
    json_t *o = json_object();
    char *s = NULL;
    int r = -ENOMEM;

    if (!o || json_object_set_new(o, "type", json_string(control_type_str(req->type))) < 0 ||
        (req->instance[0] && json_object_set_new(o, "instance", json_string(req->instance)) < 0) ||
        json_object_set_new(o, "ok", json_boolean(!error)) < 0 ||
        (error &&
         json_object_set_new(o, "error", json_util_string_lossy(error, strlen(error))) < 0)) {
        goto out;
    }
    if (with_ca && (json_object_set_new(o, "caCert", json_string(ca->bundle)) < 0 ||
                    json_object_set_new(o, "caPhase", json_string(ca->phase)) < 0 ||
                    json_object_set_new(o, "caCurrent", json_string(ca->current)) < 0 ||
                    (ca->next && ca->next[0] &&
                     json_object_set_new(o, "caNext", json_string(ca->next)) < 0))) {
        goto out;
    }
    s = json_dumps(o, JSON_COMPACT);
    if (s) {
        r = strbuf_appends(out, s);
    }
out:
    free(s);
    json_decref(o);
    return r;
}
