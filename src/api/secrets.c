/* Secrets: the routes and what the egress policy needs of them; see secrets.h. */
#include "api/secrets.h"

#include <errno.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/controller.h"
#include "api/egress.h"
#include "api/lifecycle.h"
#include "api/sandbox.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/random-util.h"
#include "shared/gw-proto.h"
#include "shared/http-util.h"
#include "shared/sandbox-id.h"
#include "shared/sealed-secret.h"

#define LIST_DEFAULT 100
#define LIST_MAX 1000
/* How often the tick sweeps, and how old a literal must be to be swept (a create writes its
 * literals just before its sandbox row). */
#define SWEEP_EVERY_USEC (5 * USEC_PER_SEC)
#define SWEEP_GRACE_USEC (60 * USEC_PER_SEC)
#define FIELDS_CREATE "name value metadata"
/* What the node takes as a policy (src/node/http-api.c HTTP_MAX_POLICY): one attach message. */
#define SECRETS_WIRE_MAX (GW_PROTO_MSG_MAX - 1024)
#define FIELDS_ROTATE "value metadata"

static const char placeholder_native[] = "{{secret:";
static const char placeholder_e2b[] = "${e2b.secrets.";

static int64_t now_us(void)
{
    return (int64_t)now_realtime();
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

bool secret_name_is_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;

    if (n == 0 || n > SECRET_NAME_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!name_char(name[i])) {
            return false;
        }
    }
    return true;
}

bool secret_name_is_users(const char *name)
{
    return secret_name_is_valid(name) && name[0] != '_';
}

const char *secrets_owner(void)
{
    return SANDBOX_CLIENT_ID;
}

static bool is_hex32(const char *s)
{
    if (strlen(s) != 32) {
        return false;
    }
    for (; *s; s++) {
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) {
            return false;
        }
    }
    return true;
}

int secrets_for_each_ref(const char *value, int (*fn)(const char *name, void *userdata),
                         void *userdata)
{
    const char *p = value;

    while (p && *p) {
        const char *a = strstr(p, placeholder_native), *b = strstr(p, placeholder_e2b);
        const char *start, *close;
        size_t skip;

        if (!a && !b) {
            break;
        }
        if (a && (!b || a < b)) {
            start = a;
            skip = sizeof(placeholder_native) - 1;
            close = "}}";
        } else {
            start = b;
            skip = sizeof(placeholder_e2b) - 1;
            close = "}";
        }
        const char *name = start + skip;
        size_t n = 0;
        while (name_char(name[n])) {
            n++;
        }
        if (n > 0 && n <= SECRET_NAME_MAX && strncmp(name + n, close, strlen(close)) == 0) {
            char buf[SECRET_NAME_MAX + 1];
            int r;

            memcpy(buf, name, n);
            buf[n] = '\0';
            r = fn(buf, userdata);
            if (r < 0) {
                return r;
            }
            p = name + n + strlen(close);
        } else {
            p = start + 1;
        }
    }
    return 0;
}

/* ---- the wire: replies, bodies ---- */

static json_t *secret_to_native(const struct store_secret *sec)
{
    char created[40], updated[40];
    json_error_t err;
    json_t *md = json_loads(sec->metadata_json ? sec->metadata_json : "{}", 0, &err);

    sandbox_format_time(sec->created_at, created);
    sandbox_format_time(sec->updated_at, updated);
    return json_pack("{s:s, s:s, s:I, s:o, s:s, s:s}", "id", sec->id, "name", sec->name, "version",
                     (json_int_t)sec->version, "metadata", md ? md : json_object(), "created_at",
                     created, "updated_at", updated);
}

static json_t *secret_to_e2b(const struct store_secret *sec)
{
    char created[40], updated[40];
    json_error_t err;
    json_t *md = json_loads(sec->metadata_json ? sec->metadata_json : "{}", 0, &err);

    sandbox_format_time(sec->created_at, created);
    sandbox_format_time(sec->updated_at, updated);
    return json_pack("{s:s, s:s, s:I, s:o, s:s, s:s}", "secretID", sec->id, "name", sec->name,
                     "currentVersion", (json_int_t)sec->version, "metadata",
                     md ? md : json_object(), "createdAt", created, "updatedAt", updated);
}

static json_t *secret_to(const struct store_secret *sec, bool e2b)
{
    return e2b ? secret_to_e2b(sec) : secret_to_native(sec);
}

/* Without space-gw's public key there is nothing to seal to. */
bool secrets_available(struct request_ctx *c, bool e2b)
{
    static const char msg[] = "secrets are unavailable: space-api runs without --secrets-key "
                              "(space-gw's public key, DATA/gw/secrets.pub)";

    if (c->m->secrets_key) {
        return true;
    }
    if (e2b) {
        /* E2B clients read the numeric code (http-util.h). */
        http_util_reply_error(c->req, 503, "secrets_unavailable: %s", msg);
    } else {
        http_util_reply_json(
            c->req, 503, json_pack("{s:s, s:s}", "code", "secrets_unavailable", "message", msg));
    }
    return false;
}

/*
 * The request body as a JSON object, and the bytes it came in wiped: a value must not
 * outlive its sealing in space-api's memory longer than it has to. NULL after a 400.
 */
static json_t *body_json_wiped(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    unsigned char *data = len ? evbuffer_pullup(in, -1) : NULL;
    json_error_t err;
    json_t *j;

    if (len == 0) {
        return json_object();
    }
    j = data ? json_loadb((const char *)data, len, 0, &err) : NULL;
    if (data) {
        explicit_bzero(data, len);
    }
    if (!j || !json_is_object(j)) {
        json_decref(j);
        http_util_reply_error(req, 400, "request body is not a JSON object");
        return NULL;
    }
    return j;
}

void secrets_wipe_request(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    unsigned char *data = len ? evbuffer_pullup(in, -1) : NULL;

    if (data) {
        explicit_bzero(data, len);
    }
}

void secrets_wipe_values(json_t *literals)
{
    const char *name;
    json_t *v;

    json_object_foreach (literals, name, v) {
        if (json_is_string(v)) {
            explicit_bzero((char *)json_string_value(v), json_string_length(v));
        }
    }
}

/* Wipes the value string inside a parsed body (jansson owns the bytes; they are mutable). */
static void wipe_value(json_t *body)
{
    json_t *v = json_object_get(body, "value");

    if (json_is_string(v)) {
        explicit_bzero((char *)json_string_value(v), json_string_length(v));
    }
}

/*
 * Checks a value: a non-empty string of at most SEALED_SECRET_MAX_VALUE bytes without CR,
 * LF or NUL (it ends up in an HTTP header). Replies and returns false otherwise.
 */
static bool check_value(struct evhttp_request *req, json_t *v)
{
    size_t n;
    const char *s;

    if (!json_is_string(v)) {
        http_util_reply_error(req, 400, "'value' must be a string (the secret's value)");
        return false;
    }
    s = json_string_value(v);
    n = json_string_length(v);
    if (n == 0) {
        http_util_reply_error(req, 400, "'value' must not be empty");
        return false;
    }
    if (n > SEALED_SECRET_MAX_VALUE) {
        http_util_reply_error(req, 413, "'value' is %zu bytes; a secret is at most %d bytes", n,
                              SEALED_SECRET_MAX_VALUE);
        return false;
    }
    if (memchr(s, '\r', n) || memchr(s, '\n', n) || memchr(s, '\0', n)) {
        http_util_reply_error(req, 400,
                              "'value' must not contain CR, LF or NUL: it is sent in an HTTP "
                              "header");
        return false;
    }
    return true;
}

/* metadata: absent/null (NULL text), or an object of strings as JSON text. */
static bool metadata_text(struct evhttp_request *req, json_t *body, char **ret)
{
    json_t *md = json_object_get(body, "metadata");

    *ret = NULL;
    if (!md || json_is_null(md)) {
        return true;
    }
    if (lifecycle_check_string_map(md, "metadata")) {
        http_util_reply_error(req, 400, "'metadata' must be an object of strings");
        return false;
    }
    *ret = json_dumps(md, JSON_COMPACT | JSON_SORT_KEYS);
    if (!*ret) {
        http_util_reply_error(req, 500, "out of memory");
        return false;
    }
    return true;
}

static int seal(struct manager *m, const char *name, json_t *value, char **ret)
{
    return sealed_secret_seal(m->secrets_key, name, json_string_value(value),
                              json_string_length(value), ret);
}

static void reply_store_error(struct evhttp_request *req, int r, const char *what, const char *name)
{
    if (r == -ENOENT) {
        http_util_reply_error(req, 404, "secret '%.80s' not found", name);
    } else if (r == -EEXIST) {
        http_util_reply_error(req, 409, "a secret named '%.80s' exists already", name);
    } else {
        http_util_reply_error(req, routes_status_from_errno(r), "cannot %s secret '%.80s': %s",
                              what, name, strerror(-r));
    }
}

/* ---- the verbs, shared by both APIs ---- */

static void create(struct request_ctx *c, bool e2b)
{
    char id[33], *metadata = NULL, *sealed = NULL;
    json_t *body, *name_j;
    const char *name;
    int r;

    if (!secrets_available(c, e2b)) {
        return;
    }
    body = body_json_wiped(c->req);
    if (!body) {
        return;
    }
    if (!routes_check_fields(c->req, body, "a secret", FIELDS_CREATE)) {
        goto out;
    }
    name_j = json_object_get(body, "name");
    name = json_string_value(name_j);
    if (!name) {
        http_util_reply_error(c->req, 400, "'name' must be a string (the secret's name)");
        goto out;
    }
    if (!secret_name_is_users(name)) {
        http_util_reply_error(c->req, 400,
                              "invalid secret name '%.80s': 1 to %d of A-Z a-z 0-9 _ -, not "
                              "starting with _",
                              name, SECRET_NAME_MAX);
        goto out;
    }
    if (!check_value(c->req, json_object_get(body, "value")) ||
        !metadata_text(c->req, body, &metadata)) {
        goto out;
    }
    r = random_hex(id, 16);
    if (r >= 0) {
        r = seal(c->m, name, json_object_get(body, "value"), &sealed);
    }
    wipe_value(body);
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot seal the secret: %s", strerror(-r));
        goto out;
    }
    int64_t now = now_us();
    struct store_secret sec = {
        .id = id,
        .owner = (char *)secrets_owner(),
        .name = (char *)name,
        .sealed = sealed,
        .metadata_json = metadata ? metadata : "{}",
        .version = 1,
        .created_at = now,
        .updated_at = now,
    };
    r = store_secret_insert(c->m->store, &sec);
    if (r < 0) {
        reply_store_error(c->req, r, "create", name);
        goto out;
    }
    log_info("secret '%s' created", name);
    http_util_reply_json(c->req, 201, secret_to(&sec, e2b));
out:
    wipe_value(body);
    json_decref(body);
    free(metadata);
    free(sealed);
}

/* The owner's secret that key names: by name, or (E2B) by secretID too. Never a literal. */
static int lookup(struct request_ctx *c, bool e2b, struct store_secret *ret)
{
    const char *key = c->id;
    int r = -ENOENT;

    if (e2b && is_hex32(key)) {
        r = store_secret_get_by_id(c->m->store, secrets_owner(), key, ret);
    }
    if (r == -ENOENT && secret_name_is_users(key)) {
        r = store_secret_get(c->m->store, secrets_owner(), key, ret);
    }
    if (r >= 0 && ret->sandbox_id) {
        store_secret_release(ret);
        r = -ENOENT;
    }
    return r;
}

/* Native paths name a secret: anything else is a 400 naming it. */
static bool check_path_name(struct request_ctx *c)
{
    if (secret_name_is_users(c->id)) {
        return true;
    }
    http_util_reply_error(c->req, 400, "invalid secret name '%.80s': 1 to %d of A-Z a-z 0-9 _ -",
                          c->id, SECRET_NAME_MAX);
    return false;
}

static void get(struct request_ctx *c, bool e2b)
{
    struct store_secret sec = { 0 };
    int r;

    if (!secrets_available(c, e2b) || (!e2b && !check_path_name(c))) {
        return;
    }
    r = lookup(c, e2b, &sec);
    if (r < 0) {
        reply_store_error(c->req, r, "read", c->id);
        return;
    }
    http_util_reply_json(c->req, 200, secret_to(&sec, e2b));
    store_secret_release(&sec);
}

static void rotate(struct request_ctx *c, bool e2b)
{
    struct store_secret sec = { 0 }, now = { 0 };
    char *metadata = NULL, *sealed = NULL;
    json_t *body = NULL;
    int r;

    if (!secrets_available(c, e2b) || (!e2b && !check_path_name(c))) {
        return;
    }
    body = body_json_wiped(c->req);
    if (!body) {
        return;
    }
    if (!routes_check_fields(c->req, body, "a secret rotation", FIELDS_ROTATE) ||
        !check_value(c->req, json_object_get(body, "value")) ||
        !metadata_text(c->req, body, &metadata)) {
        goto out;
    }
    r = lookup(c, e2b, &sec);
    if (r < 0) {
        reply_store_error(c->req, r, "rotate", c->id);
        goto out;
    }
    r = seal(c->m, sec.name, json_object_get(body, "value"), &sealed);
    wipe_value(body);
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot seal the secret: %s", strerror(-r));
        goto out;
    }
    r = store_secret_rotate(c->m->store, secrets_owner(), sec.name, sealed, metadata, now_us(),
                            &now);
    if (r < 0) {
        reply_store_error(c->req, r, "rotate", sec.name);
        goto out;
    }
    log_info("secret '%s' rotated (version %lld)", sec.name, (long long)now.version);
    /* New requests use the new value as soon as each node has the policy again. */
    secrets_resend(c->m, sec.name);
    http_util_reply_json(c->req, 200, secret_to(&now, e2b));
out:
    wipe_value(body);
    json_decref(body);
    store_secret_release(&sec);
    store_secret_release(&now);
    free(metadata);
    free(sealed);
}

static void delete (struct request_ctx *c, bool e2b)
{
    struct store_secret sec = { 0 };
    int r;

    if (!secrets_available(c, e2b) || (!e2b && !check_path_name(c))) {
        return;
    }
    r = lookup(c, e2b, &sec);
    if (r >= 0) {
        r = store_secret_delete(c->m->store, secrets_owner(), sec.name);
    }
    if (r < 0) {
        reply_store_error(c->req, r, "delete", c->id);
        store_secret_release(&sec);
        return;
    }
    log_info("secret '%s' deleted", sec.name);
    /* The rules naming it stop applying: the policies go out again without them. */
    secrets_resend(c->m, sec.name);
    store_secret_release(&sec);
    evhttp_send_reply(c->req, 204, "No Content", NULL);
}

static void list(struct request_ctx *c, bool e2b)
{
    char *limit_s = routes_query(c->req, "limit");
    char *after = routes_query(c->req, e2b ? "nextToken" : "after");
    struct store_secret *rows = NULL;
    uint32_t limit = LIST_DEFAULT;
    size_t n = 0;
    int r;

    if (!secrets_available(c, e2b)) {
        goto out;
    }
    if (limit_s && (parse_u32(limit_s, &limit) < 0 || limit == 0 || limit > LIST_MAX)) {
        http_util_reply_error(c->req, 400, "'limit' must be between 1 and %d", LIST_MAX);
        goto out;
    }
    if (after && !secret_name_is_users(after)) {
        http_util_reply_error(c->req, 400, "'%s' must be the cursor of a previous page",
                              e2b ? "nextToken" : "after");
        goto out;
    }
    r = store_secret_list(c->m->store, secrets_owner(), after, (size_t)limit + 1, &rows, &n);
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot list secrets: %s", strerror(-r));
        goto out;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n && i < limit; i++) {
        json_array_append_new(arr, secret_to(&rows[i], e2b));
    }
    const char *next = n > limit ? rows[limit - 1].name : NULL;
    if (e2b) {
        if (next) {
            evhttp_add_header(evhttp_request_get_output_headers(c->req), "X-Next-Token", next);
        }
        http_util_reply_json(c->req, 200, arr);
    } else {
        http_util_reply_json(c->req, 200, json_pack("{s:o, s:s?}", "secrets", arr, "next", next));
    }
out:
    store_secret_list_free(rows, n);
    free(limit_s);
    free(after);
}

void http_secret_create(struct request_ctx *c)
{
    create(c, false);
}

void http_secret_list(struct request_ctx *c)
{
    list(c, false);
}

void http_secret_get(struct request_ctx *c)
{
    get(c, false);
}

void http_secret_rotate(struct request_ctx *c)
{
    rotate(c, false);
}

void http_secret_delete(struct request_ctx *c)
{
    delete (c, false);
}

void e2b_secret_create(struct request_ctx *c)
{
    create(c, true);
}

void e2b_secret_list(struct request_ctx *c)
{
    list(c, true);
}

void e2b_secret_get(struct request_ctx *c)
{
    get(c, true);
}

void e2b_secret_update(struct request_ctx *c)
{
    rotate(c, true);
}

void e2b_secret_delete(struct request_ctx *c)
{
    delete (c, true);
}

/* ---- the policy's side ---- */

/* A literal's name: _<sandbox id>_<8 hex>; only that sandbox's policy may name it. */
static bool literal_of(const char *name, const char *sandbox_id)
{
    size_t n = sandbox_id ? strlen(sandbox_id) : 0;

    return n > 0 && name[0] == '_' && strncmp(name + 1, sandbox_id, n) == 0 && name[1 + n] == '_';
}

struct check_ctx {
    struct manager *m;
    const char *sandbox_id;
    const json_t *pending;
    size_t rule;
    char *msg;
    size_t msg_size;
    json_t *seen;      /* names counted in wire_bytes */
    size_t wire_bytes; /* what "secrets" adds to the policy on the wire */
};

/* The length of sealed_secret_seal()'s output for n bytes: "s1." + base64(60 + n). */
static size_t sealed_len(size_t n)
{
    return 3 + (60 + n + 2) / 3 * 4;
}

static int check_ref(const char *name, void *userdata)
{
    struct check_ctx *k = userdata;
    struct store_secret sec = { 0 };
    int r;

    if (json_object_get(k->seen, name)) {
        return 0;
    }
    if (json_object_set_new(k->seen, name, json_true()) < 0) {
        return -ENOMEM;
    }
    k->wire_bytes += strlen(name) + 6; /* "name":"...", */
    if (k->pending && json_object_get(k->pending, name)) {
        k->wire_bytes += sealed_len(json_string_length(json_object_get(k->pending, name)));
        return 0;
    }
    if (name[0] == '_' && !literal_of(name, k->sandbox_id)) {
        snprintf(k->msg, k->msg_size, "inject[%zu]: secret '%s' is not this sandbox's", k->rule,
                 name);
        return -EINVAL;
    }
    r = store_secret_get(k->m->store, secrets_owner(), name, &sec);
    if (r == -ENOENT) {
        snprintf(k->msg, k->msg_size,
                 "inject[%zu]: no secret named '%s' (create it first: POST /v1/secrets)", k->rule,
                 name);
        return -EINVAL;
    }
    if (r < 0) {
        snprintf(k->msg, k->msg_size, "cannot read secret '%s': %s", name, strerror(-r));
        return -EIO;
    }
    k->wire_bytes += strlen(sec.sealed);
    store_secret_release(&sec);
    return 0;
}

int secrets_check_policy(struct manager *m, const char *sandbox_id, const json_t *native,
                         const json_t *pending, char *msg, size_t msg_size)
{
    struct check_ctx k = { .m = m,
                           .sandbox_id = sandbox_id,
                           .pending = pending,
                           .msg = msg,
                           .msg_size = msg_size,
                           .seen = json_object() };
    char *text = json_dumps(native, JSON_COMPACT);
    size_t policy_bytes = text ? strlen(text) : 0;
    json_t *rule;
    size_t i;
    int r = k.seen && text ? 0 : -ENOMEM;

    free(text);
    json_array_foreach (json_object_get(native, "inject"), i, rule) {
        if (r < 0) {
            break;
        }
        k.rule = i;
        r = secrets_for_each_ref(json_string_value(json_object_get(rule, "value")), check_ref, &k);
    }
    /* The policy and its sealed values travel to space-gw in one message (gw-proto.h). */
    if (r >= 0 && policy_bytes + k.wire_bytes + 16 > SECRETS_WIRE_MAX) {
        snprintf(msg, msg_size,
                 "the policy and the secrets its rules name are %zu bytes sealed, more than the "
                 "%d a policy may carry: use fewer or smaller secrets",
                 policy_bytes + k.wire_bytes, (int)SECRETS_WIRE_MAX);
        r = -EINVAL;
    }
    json_decref(k.seen);
    return r;
}

struct wire_ctx {
    struct manager *m;
    const char *sandbox_id;
    json_t *secrets; /* name -> sealed, what the kept rules need */
    json_t *rule_secrets;
};

static int wire_ref(const char *name, void *userdata)
{
    struct wire_ctx *w = userdata;
    struct store_secret sec = { 0 };
    int r;

    if (json_object_get(w->rule_secrets, name)) {
        return 0;
    }
    r = store_secret_get(w->m->store, secrets_owner(), name, &sec);
    if (r < 0) {
        return r; /* -ENOENT: deleted since; the rule is left out */
    }
    if (sec.sandbox_id && strcmp(sec.sandbox_id, w->sandbox_id) != 0) {
        store_secret_release(&sec);
        return -EPERM;
    }
    r = json_object_set_new(w->rule_secrets, name, json_string(sec.sealed)) < 0 ? -ENOMEM : 0;
    store_secret_release(&sec);
    return r;
}

json_t *secrets_wire_policy(struct manager *m, const struct store_sandbox *sb)
{
    json_t *native = egress_native(sb->network_json), *rules, *kept = NULL, *rule;
    struct wire_ctx w = { .m = m, .sandbox_id = sb->id };
    size_t i;

    if (!native) {
        return NULL;
    }
    rules = json_object_get(native, "inject");
    if (!json_is_array(rules) || json_array_size(rules) == 0) {
        return native;
    }
    kept = json_array();
    w.secrets = json_object();
    if (!kept || !w.secrets) {
        goto oom;
    }
    json_array_foreach (rules, i, rule) {
        int r;

        w.rule_secrets = json_object();
        if (!w.rule_secrets) {
            goto oom;
        }
        r = secrets_for_each_ref(json_string_value(json_object_get(rule, "value")), wire_ref, &w);
        if (r == -ENOMEM) {
            json_decref(w.rule_secrets);
            goto oom;
        }
        if (r < 0) {
            log_sandbox_warning(sb->id,
                                "inject[%zu] names a secret that is gone or not this sandbox's: "
                                "the rule does not apply",
                                i);
        } else {
            json_object_update(w.secrets, w.rule_secrets);
            json_array_append(kept, rule);
        }
        json_decref(w.rule_secrets);
    }
    if (json_array_size(kept) > 0) {
        json_object_set_new(native, "inject", kept);
    } else {
        json_object_del(native, "inject");
        json_decref(kept);
    }
    if (json_object_size(w.secrets) > 0) {
        json_object_set_new(native, "secrets", w.secrets);
    } else {
        json_decref(w.secrets);
    }
    return native;
oom:
    json_decref(kept);
    json_decref(w.secrets);
    json_decref(native);
    return NULL;
}

int secrets_literal_name(const char *sandbox_id, char name[SECRET_NAME_MAX + 1])
{
    char hex[9];
    int r = random_hex(hex, 4);

    if (r < 0) {
        return r;
    }
    snprintf(name, SECRET_NAME_MAX + 1, "_%s_%s", sandbox_id, hex);
    return 0;
}

int secrets_create_literal(struct manager *m, const char *sandbox_id, const char *name,
                           const char *value)
{
    char id[33], *sealed = NULL;
    int r;

    if (!m->secrets_key) {
        return -EAGAIN;
    }
    r = random_hex(id, 16);
    if (r >= 0) {
        r = sealed_secret_seal(m->secrets_key, name, value, strlen(value), &sealed);
    }
    if (r < 0) {
        return r;
    }
    int64_t now = now_us();
    struct store_secret sec = {
        .id = id,
        .owner = (char *)secrets_owner(),
        .name = (char *)name,
        .sandbox_id = (char *)sandbox_id,
        .sealed = sealed,
        .metadata_json = "{}",
        .version = 1,
        .created_at = now,
        .updated_at = now,
    };
    r = store_secret_insert(m->store, &sec);
    free(sealed);
    return r;
}

void secrets_drop_literals(struct manager *m, const json_t *names)
{
    const char *name;
    json_t *v;

    json_object_foreach ((json_t *)names, name, v) {
        (void)store_secret_delete(m->store, secrets_owner(), name);
    }
}

static int ref_is(const char *name, void *userdata)
{
    return strcmp(name, userdata) == 0 ? -EEXIST : 0;
}

static bool policy_references(const char *network_json, const char *name)
{
    json_t *native = egress_native(network_json), *rule;
    bool found = false;
    size_t i;

    json_array_foreach (json_object_get(native, "inject"), i, rule) {
        found = found || secrets_for_each_ref(json_string_value(json_object_get(rule, "value")),
                                              ref_is, (void *)name) == -EEXIST;
    }
    json_decref(native);
    return found;
}

void secrets_resend(struct manager *m, const char *name)
{
    static const char *const live[] = { SANDBOX_STATE_CREATING, SANDBOX_STATE_RUNNING, NULL };
    struct store_sandbox_filter f = { .states = live, .hide_dying = true };
    struct store_sandbox *list = NULL;
    size_t n = 0;
    int r;

    r = store_sandbox_list(m->store, &f, &list, &n);
    if (r < 0) {
        log_warning_errno(r, "cannot list sandboxes to re-send secret '%s': %m", name);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char op[33];

        if (!policy_references(list[i].network_json, name)) {
            continue;
        }
        /* The same policy, stored again: its operation hands the node the secrets as they
         * are when it runs (controller.c), so a create in flight gets them too. */
        r = controller_request_network(m, list[i].id, list[i].network_json, op, NULL);
        if (r < 0) {
            log_sandbox_warning(list[i].id,
                                "cannot re-send the policy after secret '%s' "
                                "changed: %s",
                                name, strerror(-r));
        }
    }
    store_sandbox_list_free(list, n);
}

void secrets_tick(struct manager *m)
{
    uint64_t deleted = 0;
    usec_t now = now_monotonic();
    int r;

    if (m->last_secret_sweep && now - m->last_secret_sweep < SWEEP_EVERY_USEC) {
        return;
    }
    m->last_secret_sweep = now;
    r = store_secret_sweep(m->store, now_us() - (int64_t)SWEEP_GRACE_USEC, &deleted);
    if (r < 0) {
        log_warning_errno(r, "cannot sweep the secrets of ended sandboxes: %m");
    } else if (deleted > 0) {
        log_info("deleted %llu secret(s) of ended sandboxes", (unsigned long long)deleted);
    }
}
