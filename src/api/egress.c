/* Egress policies at the api: parse, store, render; see egress.h. */
#include "api/egress.h"

#include <errno.h>
#include <string.h>

static int dump(json_t *doc, char **ret_text)
{
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;

    json_decref(doc);
    if (!text) {
        return -ENOMEM;
    }
    *ret_text = text;
    return 0;
}

int egress_from_native(const json_t *json, char **ret_text, struct policy_error *err)
{
    struct policy *p = NULL;
    int r = policy_parse_native(json_is_null(json) ? NULL : json, false, &p, err);

    if (r < 0) {
        return r;
    }
    json_t *native = policy_to_native(p);
    policy_free(p);
    if (!native) {
        return -ENOMEM;
    }
    return dump(json_pack("{s:o}", "native", native), ret_text);
}

int egress_from_e2b(const json_t *network, const json_t *allow_internet, bool put, char **ret_text,
                    struct policy_error *err)
{
    struct policy *p = NULL;
    int r = policy_parse_e2b(json_is_null(network) ? NULL : network, allow_internet, put, &p, err);

    if (r < 0) {
        return r;
    }
    json_t *native = policy_to_native(p), *echo = policy_to_e2b_network(p),
           *internet = policy_e2b_allow_internet(p);
    policy_free(p);
    if (!native || !echo || !internet) {
        json_decref(native);
        json_decref(echo);
        json_decref(internet);
        return -ENOMEM;
    }
    return dump(json_pack("{s:o, s:{s:o, s:o}}", "native", native, "e2b", "network", echo,
                          "allowInternetAccess", internet),
                ret_text);
}

static json_t *load(const char *text)
{
    json_error_t e;

    return text ? json_loads(text, 0, &e) : NULL;
}

static json_t *deny_all(void)
{
    return json_pack("{s:b, s:[], s:[]}", "internet", 0, "allow", "deny");
}

json_t *egress_native(const char *text)
{
    json_t *doc = load(text), *native = json_object_get(doc, "native");

    native = json_is_object(native) ? json_incref(native) : deny_all();
    json_decref(doc);
    return native;
}

json_t *egress_e2b_network(const char *text)
{
    json_t *doc = load(text), *e2b = json_object_get(doc, "e2b"), *out;

    if (json_is_object(json_object_get(e2b, "network"))) {
        out = json_deep_copy(json_object_get(e2b, "network"));
    } else {
        /* Set natively (or never): the native lists, under E2B's names, when not empty. */
        json_t *native = egress_native(text), *allow = json_object_get(native, "allow"),
               *deny = json_object_get(native, "deny");

        out = json_object();
        if (out && json_array_size(allow) > 0) {
            json_object_set(out, "allowOut", allow);
        }
        if (out && json_array_size(deny) > 0) {
            json_object_set(out, "denyOut", deny);
        }
        json_decref(native);
    }
    json_decref(doc);
    return out;
}

json_t *egress_e2b_allow_internet(const char *text)
{
    json_t *doc = load(text), *e2b = json_object_get(doc, "e2b"), *out;

    if (json_is_object(e2b)) {
        json_t *v = json_object_get(e2b, "allowInternetAccess");
        out = json_is_boolean(v) ? json_incref(v) : json_null();
    } else {
        json_t *native = egress_native(text);
        out = json_boolean(json_is_true(json_object_get(native, "internet")));
        json_decref(native);
    }
    json_decref(doc);
    return out;
}
