/* Control messages to and from space-gw; see gw-msg.h for the rules. */
#include "node/gw-msg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "shared/gw-proto.h"
#include "shared/sandbox-id.h"

static const char *const type_names[_GW_MSG_TYPE_MAX] = {
    [GW_MSG_HELLO] = "hello",   [GW_MSG_ATTACH] = "attach", [GW_MSG_POLICY] = "policy",
    [GW_MSG_DETACH] = "detach", [GW_MSG_AUDIT] = "audit",   [GW_MSG_CA_ROTATE] = "ca-rotate",
};

const char *gw_msg_type_to_string(enum gw_msg_type t)
{
    return t < _GW_MSG_TYPE_MAX ? type_names[t] : "?";
}

static char *dump(json_t *j)
{
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (text && strlen(text) > GW_PROTO_MSG_MAX) {
        free(text); /* one datagram is all a message may be */
        return NULL;
    }
    return text;
}

/* The stored policy as an object; NULL text = {} (deny everything). */
static json_t *policy_object(const char *policy_json)
{
    json_error_t jerr;
    json_t *p = policy_json ? json_loads(policy_json, 0, &jerr) : json_object();
    if (!json_is_object(p)) {
        json_decref(p);
        return NULL;
    }
    return p;
}

char *gw_msg_hello(const char *node)
{
    if (!node || !*node) {
        return NULL;
    }
    return dump(json_pack("{s:s, s:s}", "type", "hello", "node", node));
}

char *gw_msg_attach(const char *iid, const char *sandbox_id, const char *policy_json)
{
    json_t *p;

    if (!instance_id_is_valid(iid) || !sandbox_id_is_valid(sandbox_id)) {
        return NULL;
    }
    p = policy_object(policy_json);
    if (!p) {
        return NULL;
    }
    return dump(json_pack("{s:s, s:s, s:s, s:o}", "type", "attach", "instance", iid, "sandbox",
                          sandbox_id, "policy", p));
}

char *gw_msg_policy(const char *iid, const char *policy_json)
{
    json_t *p;

    if (!instance_id_is_valid(iid)) {
        return NULL;
    }
    p = policy_object(policy_json);
    if (!p) {
        return NULL;
    }
    return dump(json_pack("{s:s, s:s, s:o}", "type", "policy", "instance", iid, "policy", p));
}

char *gw_msg_detach(const char *iid)
{
    if (!instance_id_is_valid(iid)) {
        return NULL;
    }
    return dump(json_pack("{s:s, s:s}", "type", "detach", "instance", iid));
}

char *gw_msg_ca_rotate(const char *step)
{
    if (!step || (strcmp(step, "stage") != 0 && strcmp(step, "switch") != 0 &&
                  strcmp(step, "finish") != 0)) {
        return NULL;
    }
    return dump(json_pack("{s:s, s:s}", "type", "ca-rotate", "step", step));
}

void gw_msg_release(struct gw_msg *m)
{
    free(m->ca_cert);
    json_decref(m->records);
    *m = (struct gw_msg){ 0 };
}

/* ---- audit records ---- */

static const char *const record_strings[] = { "name", "sni", "host", "method", "dst", "reason" };
static const char *const record_integers[] = { "time",    "port",       "bytesOut",
                                               "bytesIn", "durationMs", "count" };

static bool one_of(const char *s, const char *const *set, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(s, set[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* A string field: absent is fine; otherwise it must pass and is copied. */
static int copy_string_field(json_t *out, const json_t *rec, const char *key,
                             bool (*check)(const char *s))
{
    json_t *v = json_object_get(rec, key);
    if (!v) {
        return 0;
    }
    if (!json_is_string(v) || json_string_length(v) > GW_MSG_FIELD_MAX ||
        strlen(json_string_value(v)) != json_string_length(v) ||
        (check && !check(json_string_value(v)))) {
        return -EBADMSG;
    }
    return json_object_set_new(out, key, json_string(json_string_value(v))) < 0 ? -ENOMEM : 0;
}

static bool proto_ok(const char *s)
{
    static const char *const set[] = { "dns", "http", "tls", "tcp" };
    return one_of(s, set, ARRAY_SIZE(set));
}

static bool verdict_ok(const char *s)
{
    return strcmp(s, "allow") == 0 || strcmp(s, "deny") == 0;
}

/* "secret": the names of the secrets a request carried, "gh" or "gh,npm" (policy.h NAME);
 * never a value, and nothing that could pass for one. */
static bool secret_names_ok(const char *s)
{
    size_t label = 0;

    for (; *s; s++) {
        if (*s == ',') {
            if (label == 0) {
                return false;
            }
            label = 0;
        } else if (((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                    (*s >= '0' && *s <= '9') || *s == '_' || *s == '-') &&
                   ++label <= 64) {
            continue;
        } else {
            return false;
        }
    }
    return label > 0;
}

json_t *gw_msg_clean_record(const json_t *rec)
{
    json_t *out;
    int r = 0;

    if (!json_is_object(rec)) {
        return NULL;
    }
    out = json_object();
    if (!out) {
        return NULL;
    }
    r = copy_string_field(out, rec, "sandbox", sandbox_id_is_valid);
    if (r >= 0) {
        r = copy_string_field(out, rec, "proto", proto_ok);
    }
    if (r >= 0) {
        r = copy_string_field(out, rec, "verdict", verdict_ok);
    }
    if (r >= 0) {
        r = copy_string_field(out, rec, "secret", secret_names_ok);
    }
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(record_strings); i++) {
        r = copy_string_field(out, rec, record_strings[i], NULL);
    }
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(record_integers); i++) {
        json_t *v = json_object_get(rec, record_integers[i]);
        if (!v) {
            continue;
        }
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (strcmp(record_integers[i], "port") == 0 && json_integer_value(v) > 65535)) {
            r = -EBADMSG;
            break;
        }
        r = json_object_set_new(out, record_integers[i], json_integer(json_integer_value(v))) < 0
                ? -ENOMEM
                : 0;
    }
    if (r < 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* ---- replies ---- */

/*
 * One to GW_MSG_CA_CERTS_MAX PEM certificates and nothing else: the
 * markers, base64 lines between them, newlines around them. Their DER is
 * not parsed here, in the root process: the guest's agent, which installs
 * them, does that.
 */
static bool pem_ok(const char *s, size_t len)
{
    static const char begin[] = "-----BEGIN CERTIFICATE-----", end[] = "-----END CERTIFICATE-----";
    const char *p = s;
    size_t n = 0;

    if (len > GW_MSG_CA_MAX) {
        return false;
    }
    for (;;) {
        const char *e;
        size_t body = 0;

        if (strncmp(p, begin, strlen(begin)) != 0 || ++n > GW_MSG_CA_CERTS_MAX) {
            return false;
        }
        p += strlen(begin);
        e = strstr(p, end);
        if (!e) {
            return false;
        }
        for (; p < e; p++) {
            if (*p == '\n' || *p == '\r') {
                continue;
            }
            if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                  (*p >= '0' && *p <= '9') || *p == '+' || *p == '/' || *p == '=')) {
                return false;
            }
            body++;
        }
        if (body == 0) {
            return false;
        }
        for (p = e + strlen(end); *p == '\n' || *p == '\r'; p++) {
        }
        if (!*p) {
            return true;
        }
    }
}

static int fail(const char **why, const char *reason)
{
    if (why) {
        *why = reason;
    }
    return -EBADMSG;
}

static bool fingerprint_ok(const char *s)
{
    if (strlen(s) != GW_MSG_FP_LEN) {
        return false;
    }
    for (; *s; s++) {
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) {
            return false;
        }
    }
    return true;
}

/* caCert (required), caPhase, caCurrent, caNext (a gateway before rotation sent none). */
static int parse_ca(json_t *j, struct gw_msg *m, const char **why)
{
    json_t *ca = json_object_get(j, "caCert"), *phase = json_object_get(j, "caPhase");
    json_t *cur = json_object_get(j, "caCurrent"), *next = json_object_get(j, "caNext");

    if (!json_is_string(ca) || !pem_ok(json_string_value(ca), json_string_length(ca))) {
        return fail(why, "reply without a PEM caCert");
    }
    snprintf(m->ca_phase, sizeof(m->ca_phase), "stable");
    if (phase) {
        const char *p = json_string_value(phase);
        if (!p ||
            (strcmp(p, "stable") != 0 && strcmp(p, "staged") != 0 && strcmp(p, "switched") != 0)) {
            return fail(why, "reply with an invalid caPhase");
        }
        snprintf(m->ca_phase, sizeof(m->ca_phase), "%s", p);
    }
    if (cur) {
        if (!json_is_string(cur) || !fingerprint_ok(json_string_value(cur))) {
            return fail(why, "reply with an invalid caCurrent");
        }
        memcpy(m->ca_current, json_string_value(cur), GW_MSG_FP_LEN + 1);
    }
    if (next) {
        if (!json_is_string(next) || !fingerprint_ok(json_string_value(next))) {
            return fail(why, "reply with an invalid caNext");
        }
        memcpy(m->ca_next, json_string_value(next), GW_MSG_FP_LEN + 1);
    }
    if ((strcmp(m->ca_phase, "stable") == 0) != !m->ca_next[0]) {
        return fail(why, "reply whose caNext does not match its caPhase");
    }
    m->ca_cert = strdup(json_string_value(ca));
    return m->ca_cert ? 0 : -ENOMEM;
}

/* The error text for the log: printable ASCII only, truncated. */
static void copy_error(char *dst, const char *src)
{
    size_t i = 0;
    for (; src && src[i] && i < GW_MSG_ERROR_MAX - 1; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    dst[i] = '\0';
}

static int parse_audit(json_t *j, struct gw_msg *m, const char **why)
{
    json_t *list = json_object_get(j, "records"), *v;
    size_t i;

    if (!json_is_array(list)) {
        return fail(why, "audit without a records array");
    }
    if (json_array_size(list) > GW_PROTO_AUDIT_BATCH) {
        return fail(why, "audit batch larger than GW_PROTO_AUDIT_BATCH");
    }
    m->records = json_array();
    if (!m->records) {
        return -ENOMEM;
    }
    json_array_foreach (list, i, v) {
        json_t *clean = gw_msg_clean_record(v);
        if (!clean) {
            m->bad_records++;
        } else if (json_array_append_new(m->records, clean) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

static int parse_reply(json_t *j, struct gw_msg *m, const char **why)
{
    json_t *ok = json_object_get(j, "ok"), *inst = json_object_get(j, "instance");

    if (!json_is_boolean(ok)) {
        return fail(why, "reply without a boolean ok");
    }
    m->ok = json_is_true(ok);
    if (inst) {
        if (!json_is_string(inst) || !instance_id_is_valid(json_string_value(inst))) {
            return fail(why, "reply with an invalid instance");
        }
        memcpy(m->instance, json_string_value(inst), INSTANCE_ID_LEN + 1);
    } else if (m->type != GW_MSG_HELLO && m->type != GW_MSG_CA_ROTATE) {
        return fail(why, "reply without its instance");
    }
    if (!m->ok) {
        json_t *e = json_object_get(j, "error");
        if (e && !json_is_string(e)) {
            return fail(why, "reply with a non-string error");
        }
        copy_error(m->error, e ? json_string_value(e) : "no reason given");
        return 0;
    }
    if (m->type == GW_MSG_HELLO || m->type == GW_MSG_CA_ROTATE) {
        return parse_ca(j, m, why);
    }
    return 0;
}

int gw_msg_parse(const void *buf, size_t len, struct gw_msg *ret, const char **why)
{
    struct gw_msg m = { 0 };
    json_error_t jerr;
    json_t *j, *type;
    int r;

    if (len == 0 || len > GW_PROTO_MSG_MAX) {
        return fail(why, len == 0 ? "empty message" : "message larger than GW_PROTO_MSG_MAX");
    }
    /* No NULs inside strings (the default), no duplicate keys: one meaning per message. */
    j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(j)) {
        json_decref(j);
        return fail(why, "not a JSON object");
    }
    type = json_object_get(j, "type");
    m.type = _GW_MSG_TYPE_MAX;
    for (size_t i = 0; json_is_string(type) && i < _GW_MSG_TYPE_MAX; i++) {
        if (strcmp(json_string_value(type), type_names[i]) == 0) {
            m.type = (enum gw_msg_type)i;
        }
    }
    if (m.type == _GW_MSG_TYPE_MAX) {
        r = fail(why, "unknown message type");
    } else if (m.type == GW_MSG_AUDIT) {
        r = parse_audit(j, &m, why);
    } else {
        r = parse_reply(j, &m, why);
    }
    json_decref(j);
    if (r < 0) {
        if (r == -ENOMEM && why) {
            *why = "out of memory";
        }
        gw_msg_release(&m);
        return r == -ENOMEM ? -EBADMSG : r;
    }
    *ret = m;
    return 0;
}
