#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/gw-msg.h"
#include "shared/gw-proto.h"

#define IID "abcdefgh0123"
#define SB "sb00000000000000000a"
#define PEM "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
/* The same as JSON string text. */
#define PEM2 "-----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n"
#define FP "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static int parse(const char *text, struct gw_msg *m)
{
    const char *why = NULL;
    int r = gw_msg_parse(text, strlen(text), m, &why);
    if (r < 0) {
        assert_non_null(why);
    }
    return r;
}

static void test_requests(void **state)
{
    char *t = gw_msg_hello("node-1");
    assert_string_equal(t, "{\"type\":\"hello\",\"node\":\"node-1\"}");
    free(t);
    t = gw_msg_attach(IID, SB, "{\"internet\":true}");
    assert_string_equal(t, "{\"type\":\"attach\",\"instance\":\"" IID "\",\"sandbox\":\"" SB
                           "\",\"policy\":{\"internet\":true}}");
    free(t);
    /* No policy stored: deny everything. */
    t = gw_msg_policy(IID, NULL);
    assert_string_equal(t, "{\"type\":\"policy\",\"instance\":\"" IID "\",\"policy\":{}}");
    free(t);
    t = gw_msg_detach(IID);
    assert_string_equal(t, "{\"type\":\"detach\",\"instance\":\"" IID "\"}");
    free(t);
    assert_null(gw_msg_attach("bad", SB, NULL));
    assert_null(gw_msg_attach(IID, "x", NULL));
    assert_null(gw_msg_policy(IID, "[1]"));
    assert_null(gw_msg_policy(IID, "{bad"));
    assert_null(gw_msg_hello(""));
}

static void test_replies(void **state)
{
    struct gw_msg m;

    assert_int_equal(parse("{\"type\":\"hello\",\"ok\":true,\"caCert\":\""
                           "-----BEGIN "
                           "CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n\"}",
                           &m),
                     0);
    assert_int_equal(m.type, GW_MSG_HELLO);
    assert_true(m.ok);
    assert_string_equal(m.ca_cert, PEM);
    assert_string_equal(m.instance, "");
    gw_msg_release(&m);

    /* A rotation's reply: the bundle of two, the phase, both fingerprints. */
    assert_int_equal(parse("{\"type\":\"ca-rotate\",\"ok\":true,\"caCert\":\"" PEM2 PEM2
                           "\",\"caPhase\":\"staged\",\"caCurrent\":\"" FP "\",\"caNext\":\"" FP
                           "\"}",
                           &m),
                     0);
    assert_int_equal(m.type, GW_MSG_CA_ROTATE);
    assert_string_equal(m.ca_cert, PEM PEM);
    assert_string_equal(m.ca_phase, "staged");
    assert_string_equal(m.ca_current, FP);
    assert_string_equal(m.ca_next, FP);
    gw_msg_release(&m);
    assert_int_equal(parse("{\"type\":\"ca-rotate\",\"ok\":false,\"error\":\"cannot switch\"}", &m),
                     0);
    assert_false(m.ok);
    gw_msg_release(&m);
    char *t = gw_msg_ca_rotate("switch");
    assert_string_equal(t, "{\"type\":\"ca-rotate\",\"step\":\"switch\"}");
    free(t);
    assert_null(gw_msg_ca_rotate("rollback"));
    assert_null(gw_msg_ca_rotate(NULL));

    assert_int_equal(parse("{\"type\":\"attach\",\"instance\":\"" IID "\",\"ok\":true}", &m), 0);
    assert_int_equal(m.type, GW_MSG_ATTACH);
    assert_string_equal(m.instance, IID);
    gw_msg_release(&m);

    assert_int_equal(parse("{\"type\":\"policy\",\"instance\":\"" IID
                           "\",\"ok\":false,\"error\":\"bad\\u0007 policy\\nx\"}",
                           &m),
                     0);
    assert_false(m.ok);
    assert_string_equal(m.error, "bad? policy?x"); /* logged as printable text */
    gw_msg_release(&m);

    assert_int_equal(parse("{\"type\":\"detach\",\"instance\":\"" IID "\",\"ok\":false}", &m), 0);
    assert_string_equal(m.error, "no reason given");
    gw_msg_release(&m);
}

static void test_hostile_replies(void **state)
{
    static const char *const bad[] = {
        "", "[]", "\"hello\"", "{}", "{\"type\":\"nope\",\"ok\":true}", "{\"type\":7,\"ok\":true}",
        "{\"type\":\"hello\"}",             /* no ok */
        "{\"type\":\"hello\",\"ok\":1}",    /* not a boolean */
        "{\"type\":\"hello\",\"ok\":true}", /* no caCert */
        "{\"type\":\"hello\",\"ok\":true,\"caCert\":\"not pem\"}",
        "{\"type\":\"hello\",\"ok\":true,\"caCert\":\"-----BEGIN CERTIFICATE-----\\u0001"
        "-----END CERTIFICATE-----\"}",
        "{\"type\":\"attach\",\"ok\":true}", /* no instance */
        "{\"type\":\"attach\",\"ok\":true,\"instance\":\"../../etc/x\"}",
        "{\"type\":\"attach\",\"ok\":false,\"instance\":\"" IID "\",\"error\":5}",
        "{\"type\":\"attach\",\"type\":\"hello\",\"ok\":true,\"instance\":\"" IID "\"}",
        "{\"type\":\"audit\"}", "{\"type\":\"audit\",\"records\":{}}",
        "{\"type\":\"hello\",\"ok\":true,\"caCert\":\"a\\u0000b\"}",
        /* Not 1..4 certificates: text around them, five of them, a bad body, empty. */
        "{\"type\":\"hello\",\"ok\":true,\"caCert\":\"-----BEGIN CERTIFICATE-----\\nAA\\n"
        "-----END CERTIFICATE-----\\nrm -rf\"}",
        "{\"type\":\"hello\",\"ok\":true,\"caCert\":\"" PEM2 PEM2 PEM2 PEM2 PEM2 "\"}",
        "{\"type\":\"hello\",\"ok\":true,\"caCert\":\"" PEM2 "x" PEM2 "\"}",
        /* The rotation fields: a phase we do not know, a fingerprint that is not one, a next
         * CA while stable, none while staged, a ca-rotate reply without the bundle. */
        "{\"type\":\"hello\",\"ok\":true,\"caCert\":\"" PEM2 "\",\"caPhase\":\"done\"}",
        "{\"type\":\"hello\",\"ok\":true,\"caCert\":\"" PEM2 "\",\"caCurrent\":\"AB\"}",
        "{\"type\":\"hello\",\"ok\":true,\"caCert\":\"" PEM2 "\",\"caNext\":\"" FP "\"}",
        "{\"type\":\"hello\",\"ok\":true,\"caCert\":\"" PEM2 "\",\"caPhase\":\"staged\"}",
        "{\"type\":\"ca-rotate\",\"ok\":true}",
        "{\"type\":\"hello\",\"ok\":true,\"caCert\":\"-----BEGIN CERTIFICATE-----\\nA A\\n"
        "-----END CERTIFICATE-----\"}",
        "{\"type\":\"hello\",\"ok\":true,\"caCert\":\"-----BEGIN CERTIFICATE-----\\n"
        "-----END CERTIFICATE-----\"}",
        "{\"type\":\"attach\",\"ok\":true,\"instance\":\"" IID "\"",   /* truncated */
        "{\"type\":\"attach\",\"ok\":true,\"instance\":\"" IID "\"}x", /* trailing junk */
    };
    struct gw_msg m;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (parse(bad[i], &m) != -EBADMSG) {
            fail_msg("accepted: %s", bad[i]);
        }
    }
    /* Oversize. */
    size_t n = GW_PROTO_MSG_MAX + 10;
    char *big = malloc(n);
    memset(big, ' ', n);
    memcpy(big, "{\"type\":\"hello\"", 15);
    big[n - 1] = '}';
    assert_int_equal(gw_msg_parse(big, n, &m, NULL), -EBADMSG);
    free(big);
}

static void test_audit(void **state)
{
    struct gw_msg m;
    const char *batch =
        "{\"type\":\"audit\",\"records\":["
        "{\"sandbox\":\"" SB "\",\"time\":1700000000000000,\"proto\":\"tls\",\"sni\":\"a.test\","
        "\"dst\":\"198.18.1.10\",\"port\":443,\"verdict\":\"deny\",\"reason\":\"deny-default\","
        "\"bytesOut\":0,\"bytesIn\":0,\"durationMs\":3,\"extra\":\"dropped\",\"seq\":5},"
        "{\"reason\":\"audit-dropped\",\"count\":12},"
        "{\"sandbox\":\"../x\"},"
        "{\"proto\":\"quic\"},"
        "{\"port\":70000},"
        "{\"bytesIn\":-1},"
        "{\"verdict\":\"maybe\"},"
        "{\"name\":7},"
        "{\"secret\":\"gh,\"},"
        "{\"secret\":\"Bearer ghp_x\"},"
        "{\"sandbox\":\"" SB "\",\"proto\":\"tls\",\"secret\":\"gh,npm_2\"},"
        "42"
        "]}";

    assert_int_equal(parse(batch, &m), 0);
    assert_int_equal(m.type, GW_MSG_AUDIT);
    assert_int_equal(json_array_size(m.records), 3);
    assert_int_equal(m.bad_records, 9);
    assert_string_equal(json_string_value(json_object_get(json_array_get(m.records, 2), "secret")),
                        "gh,npm_2");
    json_t *r0 = json_array_get(m.records, 0);
    assert_string_equal(json_string_value(json_object_get(r0, "sni")), "a.test");
    assert_int_equal(json_integer_value(json_object_get(r0, "port")), 443);
    assert_null(json_object_get(r0, "extra")); /* unknown fields are not passed on */
    assert_null(json_object_get(r0, "seq"));   /* the ring numbers records */
    assert_int_equal(json_object_size(r0), 11);
    gw_msg_release(&m);

    /* A field longer than GW_MSG_FIELD_MAX drops its record. */
    char *name = malloc(GW_MSG_FIELD_MAX + 2);
    memset(name, 'a', GW_MSG_FIELD_MAX + 1);
    name[GW_MSG_FIELD_MAX + 1] = '\0';
    json_t *rec = json_pack("{s:s}", "name", name);
    assert_null(gw_msg_clean_record(rec));
    json_decref(rec);
    free(name);

    /* More than a batch is refused whole. */
    json_t *list = json_array();
    for (int i = 0; i <= GW_PROTO_AUDIT_BATCH; i++) {
        json_array_append_new(list, json_object());
    }
    json_t *msg = json_pack("{s:s, s:o}", "type", "audit", "records", list);
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    assert_int_equal(parse(text, &m), -EBADMSG);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_replies),
        cmocka_unit_test(test_hostile_replies),
        cmocka_unit_test(test_audit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
