#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "node/instance.h"

static struct instance_record running(void)
{
    struct instance_record rec = {
        .iid = "abcdefgh0123",
        .sandbox_id = "sb00000000000000000a",
        .template_name = "base",
        .vcpus = 1,
        .memory_mib = 512,
        .created_at = 1700000000000000ull,
        .state = VM_RUNNING,
        .access_token = "tok",
        .ca_given = "0123456789abcdef",
        .pid = 4242,
        .pid_start_time = 987654,
    };
    return rec;
}

static void test_ids(void **state)
{
    char a[INSTANCE_ID_LEN + 1], b[INSTANCE_ID_LEN + 1];

    assert_int_equal(instance_id_new(a), 0);
    assert_int_equal(instance_id_new(b), 0);
    assert_true(instance_id_is_valid(a));
    assert_string_not_equal(a, b);
    assert_true(instance_id_is_valid("abcdefgh0123"));
    assert_false(instance_id_is_valid("abcdefgh012"));
    assert_false(instance_id_is_valid("abcdefgh01234"));
    assert_false(instance_id_is_valid("ABCDEFGH0123"));
    assert_false(instance_id_is_valid("abcdefgh/123"));
    assert_false(instance_id_is_valid(""));
    assert_false(instance_id_is_valid(NULL));
    /* A sandbox id is not an instance id: the two cannot be mixed up. */
    assert_false(instance_id_is_valid("sb00000000000000000a"));
    /* Host-side interface names from the iid fit IFNAMSIZ - 1. */
    assert_true(strlen("vs-") + INSTANCE_ID_LEN <= 15);
}

static void test_bind(void **state)
{
    struct instance_record rec = running();

    rec.sandbox_id[0] = '\0';
    assert_false(instance_is_bound(&rec));
    assert_int_equal(instance_bind(&rec, "NOT-VALID"), -EINVAL);
    assert_false(instance_is_bound(&rec));
    assert_int_equal(instance_bind(&rec, "sb00000000000000000b"), 0);
    assert_true(instance_is_bound(&rec));
    assert_string_equal(rec.sandbox_id, "sb00000000000000000b");
    assert_int_equal(instance_bind(&rec, "sb00000000000000000b"), 0); /* idempotent */
    assert_int_equal(instance_bind(&rec, "sb00000000000000000c"), -EBUSY);
    assert_string_equal(rec.sandbox_id, "sb00000000000000000b");
}

static void test_record_round_trip(void **state)
{
    struct instance_record rec = running(), back;
    char *text = instance_record_to_json(&rec, "/data/instances/abcdefgh0123",
                                         "/run/netns/space-abcdefgh0123");

    assert_non_null(text);
    assert_non_null(strstr(text, "\"dir\":\"/data/instances/abcdefgh0123\""));
    assert_int_equal(instance_record_from_json(text, &back), 0);
    free(text);
    assert_string_equal(back.iid, rec.iid);
    assert_string_equal(back.sandbox_id, rec.sandbox_id);
    assert_string_equal(back.template_name, "base");
    assert_string_equal(back.access_token, "tok");
    assert_string_equal(back.ca_given, "0123456789abcdef");
    assert_int_equal(back.state, VM_RUNNING);
    assert_int_equal(back.pid, 4242);
    assert_int_equal(back.pid_start_time, 987654);
    assert_int_equal(back.created_at, rec.created_at);

    /* Unbound instances serialise the sandbox id as null. */
    rec.sandbox_id[0] = '\0';
    text = instance_record_to_json(&rec, "/d", "/n");
    assert_non_null(strstr(text, "\"sandbox_id\":null"));
    assert_int_equal(instance_record_from_json(text, &back), 0);
    assert_false(instance_is_bound(&back));
    assert_null(back.network); /* none given: deny everything */
    assert_null(strstr(text, "\"network\""));
    free(text);
}

static void test_record_network_round_trip(void **state)
{
    struct instance_record rec = running(), back;
    const char *policy = "{\"internet\":false,\"allow\":[\"allowed.test\"],\"deny\":[]}";
    char *text;

    assert_int_equal(instance_record_set_network(&rec, policy), 0);
    text = instance_record_to_json(&rec, "/d", "/n");
    assert_non_null(text);
    assert_non_null(strstr(text, "\"network\":{\"internet\":false,\"allow\":[\"allowed.test\"]"));
    assert_int_equal(instance_record_from_json(text, &back), 0);
    free(text);
    assert_string_equal(back.network, policy);
    /* Replacing and clearing. */
    assert_int_equal(instance_record_set_network(&back, "{}"), 0);
    assert_string_equal(back.network, "{}");
    assert_int_equal(instance_record_set_network(&back, NULL), 0);
    assert_null(back.network);
    /* A record whose network is not valid JSON is not written (the policy would be lost). */
    assert_int_equal(instance_record_set_network(&rec, "{not json"), 0);
    assert_null(instance_record_to_json(&rec, "/d", "/n"));
    instance_record_release(&rec);
    assert_null(rec.network);
    /* A non-object network in a file reads as none. */
    assert_int_equal(instance_record_from_json("{\"iid\":\"abcdefgh0123\",\"network\":[1]}", &back),
                     0);
    assert_null(back.network);
    instance_record_release(&back);
}

static void test_record_rejects_bad_input(void **state)
{
    struct instance_record back;

    assert_int_equal(instance_record_from_json("", &back), -EINVAL);
    assert_int_equal(instance_record_from_json("[]", &back), -EINVAL);
    assert_int_equal(instance_record_from_json("{\"iid\":\"../../etc\"}", &back), -EINVAL);
    assert_int_equal(
        instance_record_from_json("{\"iid\":\"abcdefgh0123\",\"sandbox_id\":\"x/y\"}", &back),
        -EINVAL);
    assert_int_equal(
        instance_record_from_json("{\"iid\":\"abcdefgh0123\",\"template\":\"../t\"}", &back),
        -EINVAL);
    /* Unknown state, negative pid: readable, but nothing to re-attach to. */
    assert_int_equal(instance_record_from_json(
                         "{\"iid\":\"abcdefgh0123\",\"state\":\"killing\",\"pid\":-5}", &back),
                     0);
    assert_int_equal(back.state, VM_CREATING);
    assert_int_equal(back.pid, 0);
}

static void test_reattach_verdict(void **state)
{
    struct instance_record rec = running();
    struct instance_probe ok = { .record_ok = true,
                                 .process_exists = true,
                                 .process_start_time = 987654,
                                 .netns_exists = true };
    struct instance_probe p;
    const char *why = NULL;

    assert_int_equal(instance_reattach_verdict(&rec, &ok, &why), INSTANCE_REATTACH);
    assert_non_null(why);

    p = ok;
    p.record_ok = false;
    assert_int_equal(instance_reattach_verdict(&rec, &p, &why), INSTANCE_DESTROY);

    p = ok;
    p.process_exists = false;
    assert_int_equal(instance_reattach_verdict(&rec, &p, &why), INSTANCE_DESTROY);
    assert_string_equal(why, "its VMM is gone");

    /* The pid was recycled: same number, other process. */
    p = ok;
    p.process_start_time = 987655;
    assert_int_equal(instance_reattach_verdict(&rec, &p, &why), INSTANCE_DESTROY);
    assert_string_equal(why, "its pid now belongs to another process");

    p = ok;
    p.netns_exists = false;
    assert_int_equal(instance_reattach_verdict(&rec, &p, NULL), INSTANCE_DESTROY);

    /* A paused VM is settled: a node restarted while it was paused finds it paused. */
    struct instance_record paused = running();
    paused.state = VM_PAUSED;
    assert_int_equal(instance_reattach_verdict(&paused, &ok, NULL), INSTANCE_REATTACH);

    /* Suspended: kept when its snapshot and netns are there, whatever the pid says. */
    struct instance_record susp = running();
    struct instance_probe sp = ok;
    susp.state = VM_SUSPENDED;
    susp.pid = 0;
    sp.process_exists = false;
    sp.snapshot_exists = true;
    assert_int_equal(instance_reattach_verdict(&susp, &sp, &why), INSTANCE_REATTACH);
    sp.snapshot_exists = false;
    assert_int_equal(instance_reattach_verdict(&susp, &sp, &why), INSTANCE_DESTROY);
    assert_string_equal(why, "it was suspended but its snapshot is gone");
    sp.snapshot_exists = true;
    sp.netns_exists = false;
    assert_int_equal(instance_reattach_verdict(&susp, &sp, NULL), INSTANCE_DESTROY);

    const enum vm_state unfinished[] = { VM_CREATING, VM_STOPPING,   VM_STOPPED,  VM_PAUSING,
                                         VM_RESUMING, VM_SUSPENDING, VM_RESTORING };
    for (size_t i = 0; i < sizeof(unfinished) / sizeof(unfinished[0]); i++) {
        struct instance_record r = running();
        r.state = unfinished[i];
        assert_int_equal(instance_reattach_verdict(&r, &ok, NULL), INSTANCE_DESTROY);
    }

    struct instance_record r = running();
    r.pid = 0;
    assert_int_equal(instance_reattach_verdict(&r, &ok, NULL), INSTANCE_DESTROY);
    r = running();
    r.pid_start_time = 0;
    assert_int_equal(instance_reattach_verdict(&r, &ok, NULL), INSTANCE_DESTROY);
    r = running();
    r.sandbox_id[0] = '\0';
    assert_int_equal(instance_reattach_verdict(&r, &ok, &why), INSTANCE_DESTROY);
    assert_string_equal(why, "it is bound to no sandbox");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_bind),
        cmocka_unit_test(test_record_round_trip),
        cmocka_unit_test(test_record_network_round_trip),
        cmocka_unit_test(test_record_rejects_bad_input),
        cmocka_unit_test(test_reattach_verdict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
