/* Egress policies at the api: parse, store, render; see egress.h. */
#include "api/egress.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/secrets.h"

/* The longest header value a rule may carry (CONTRACTS.md "Injection rules"). */
#define RULE_VALUE_MAX 4096

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

static int e2b_error(struct policy_error *err, int r, const char *fmt, const char *host, size_t i,
                     const char *header)
{
    char where[POLICY_ENTRY_TEXT_MAX];

    if (header) {
        snprintf(where, sizeof(where), "rules[\"%.200s\"][%zu].transform.headers[\"%.64s\"]", host,
                 i, header);
    } else {
        snprintf(where, sizeof(where), "rules[\"%.200s\"][%zu]", host, i);
    }
    snprintf(err->message, sizeof(err->message), "%s: %s", where, fmt);
    return r;
}

static int count_ref(const char *name, void *userdata)
{
    (*(size_t *)userdata)++;
    return 0;
}

/*
 * One header of an E2B transform as a native inject rule's value: a value with
 * ${e2b.secrets.NAME} placeholders is kept (the native rules take them as they are); a
 * literal becomes a secret of the sandbox (*literals: name -> value), named in the rule
 * and in the echo getInfo shows, so the value itself is in neither.
 */
static int map_header(const char *host, size_t i, const char *header, json_t *v,
                      const char *sandbox_id, json_t *literals, json_t **ret_value,
                      json_t **ret_echo, struct policy_error *err)
{
    const char *s = json_string_value(v);
    char name[SECRET_NAME_MAX + 1], text[SECRET_NAME_MAX + 32];
    size_t refs = 0, n;
    int r;

    if (!s) {
        return e2b_error(err, -EINVAL, "must be a string", host, i, header);
    }
    n = json_string_length(v);
    if (memchr(s, '\r', n) || memchr(s, '\n', n) || memchr(s, '\0', n)) {
        return e2b_error(err, -EINVAL, "must not contain CR, LF or NUL", host, i, header);
    }
    if (n > RULE_VALUE_MAX) {
        return e2b_error(err, -EINVAL, "is longer than 4096 bytes", host, i, header);
    }
    if (strstr(s, "${e2b.identity.")) {
        return e2b_error(err, -EOPNOTSUPP, "workload identity tokens (iam) are not implemented",
                         host, i, header);
    }
    (void)secrets_for_each_ref(s, count_ref, &refs);
    if (refs > 0) {
        *ret_value = json_incref(v);
        *ret_echo = json_incref(v);
        return 0;
    }
    if (n == 0) {
        return e2b_error(err, -EINVAL, "must not be empty", host, i, header);
    }
    if (!sandbox_id || !literals) {
        return e2b_error(err, -EINVAL, "a literal value needs a sandbox", host, i, header);
    }
    r = secrets_literal_name(sandbox_id, name);
    if (r < 0) {
        return r;
    }
    if (json_object_set(literals, name, v) < 0) {
        return -ENOMEM;
    }
    snprintf(text, sizeof(text), "{{secret:%s}}", name);
    *ret_value = json_string(text);
    snprintf(text, sizeof(text), "${e2b.secrets.%s}", name);
    *ret_echo = json_string(text);
    return *ret_value && *ret_echo ? 0 : -ENOMEM;
}

/*
 * E2B network.rules ({host: [{transform: {headers: {name: value}}}]}) as native inject
 * rules (appended to inject) and the echo getInfo shows (placeholders, never a literal).
 */
static int map_rules(const json_t *rules, const char *sandbox_id, json_t *literals, json_t *inject,
                     json_t *echo, struct policy_error *err)
{
    const char *host, *header;
    json_t *list, *rule, *v;
    size_t i;
    int r;

    if (!json_is_object(rules)) {
        snprintf(err->message, sizeof(err->message),
                 "rules must be an object {host: [{transform: {headers: {...}}}]}");
        return -EINVAL;
    }
    json_object_foreach ((json_t *)rules, host, list) {
        json_t *echo_list = json_array();

        if (!echo_list || json_object_set_new(echo, host, echo_list) < 0) {
            return -ENOMEM;
        }
        if (!json_is_array(list)) {
            return e2b_error(err, -EINVAL, "must be a list of rules", host, 0, NULL);
        }
        json_array_foreach (list, i, rule) {
            json_t *transform = json_object_get(rule, "transform"), *headers;
            json_t *echo_rule = json_object(), *echo_headers = NULL;

            /* The echo has the rule's shape: {} for a rule without a transform. */
            if (!echo_rule || json_array_append_new(echo_list, echo_rule) < 0) {
                return -ENOMEM;
            }
            if (!json_is_object(rule) || (json_object_size(rule) > 0 && !transform) ||
                json_object_size(rule) > 1) {
                return e2b_error(err, -EINVAL, "a rule takes only 'transform'", host, i, NULL);
            }
            if (!transform || json_is_null(transform)) {
                continue;
            }
            headers = json_object_get(transform, "headers");
            if (!json_is_object(transform) || json_object_size(transform) != 1 ||
                !json_is_object(headers)) {
                return e2b_error(err, -EINVAL, "a transform takes only 'headers', an object", host,
                                 i, NULL);
            }
            echo_headers = json_object();
            if (!echo_headers ||
                json_object_set_new(echo_rule, "transform",
                                    json_pack("{s:o}", "headers", echo_headers)) < 0) {
                return -ENOMEM;
            }
            json_object_foreach (headers, header, v) {
                json_t *value = NULL, *shown = NULL;

                r = map_header(host, i, header, v, sandbox_id, literals, &value, &shown, err);
                if (r < 0) {
                    json_decref(value);
                    json_decref(shown);
                    return r;
                }
                json_object_set_new(echo_headers, header, shown);
                if (json_array_append_new(inject, json_pack("{s:s, s:s, s:o}", "host", host,
                                                            "header", header, "value", value)) <
                    0) {
                    return -ENOMEM;
                }
            }
        }
    }
    return 0;
}

int egress_from_e2b(const json_t *network, const json_t *allow_internet, bool put,
                    const char *sandbox_id, json_t *literals, char **ret_text,
                    struct policy_error *err)
{
    struct policy *p = NULL, *full = NULL;
    json_t *copy = NULL, *rules = json_object_get(network, "rules"), *inject = NULL,
           *echo_rules = NULL, *native = NULL, *echo = NULL, *internet = NULL;
    int r;

    if (rules && !json_is_null(rules)) {
        /* policy_parse_e2b() refuses rules: they are mapped here, onto native inject rules. */
        copy = json_copy((json_t *)network);
        inject = json_array();
        echo_rules = json_object();
        if (!copy || !inject || !echo_rules) {
            r = -ENOMEM;
            goto out;
        }
        json_object_del(copy, "rules");
        r = map_rules(rules, sandbox_id, literals, inject, echo_rules, err);
        if (r < 0) {
            goto out;
        }
        network = copy;
    }
    r = policy_parse_e2b(json_is_null(network) ? NULL : network, allow_internet, put, &p, err);
    if (r < 0) {
        goto out;
    }
    native = policy_to_native(p);
    echo = policy_to_e2b_network(p);
    internet = policy_e2b_allow_internet(p);
    if (!native || !echo || !internet) {
        r = -ENOMEM;
        goto out;
    }
    if (inject && json_array_size(inject) > 0) {
        /* The whole policy again, natively: the rules are checked as the gateway will. */
        json_object_set(native, "inject", inject);
        r = policy_parse_native(native, false, &full, err);
        if (r < 0) {
            goto out;
        }
        json_decref(native);
        native = policy_to_native(full);
        if (!native) {
            r = -ENOMEM;
            goto out;
        }
    }
    if (echo_rules) {
        json_object_set(echo, "rules", echo_rules);
    }
    r = dump(json_pack("{s:O, s:{s:O, s:O}}", "native", native, "e2b", "network", echo,
                       "allowInternetAccess", internet),
             ret_text);
out:
    policy_free(p);
    policy_free(full);
    json_decref(copy);
    json_decref(inject);
    json_decref(echo_rules);
    json_decref(native);
    json_decref(echo);
    json_decref(internet);
    return r;
}

int egress_check_secrets(struct manager *m, const char *sandbox_id, const char *text,
                         const json_t *pending, struct policy_error *err)
{
    json_t *native = egress_native(text);
    int r;

    if (!native) {
        return -ENOMEM;
    }
    r = secrets_check_policy(m, sandbox_id, native, pending, err->message, sizeof(err->message));
    json_decref(native);
    return r;
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
