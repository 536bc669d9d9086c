/* The route cache (route-cache.h): the table alone, and load/sync/poll over real SQLite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/route-cache.h"
#include "api/secretbox.h"
#include "api/store.h"

static const char ID_A[] = "aaaaaaaaaaaaaaaaaaaa";
static const char ID_B[] = "bbbbbbbbbbbbbbbbbbbb";

static struct store_sandbox row(const char *id, const char *state, const char *desired,
                                const char *token, int64_t updated_at)
{
    return (struct store_sandbox){
        .id = (char *)id,
        .template_id = "base",
        .client_id = "local",
        .state = (char *)state,
        .desired_state = (char *)desired,
        .node_id = "local",
        .envd_access_token = (char *)token,
        .created_at = updated_at,
        .updated_at = updated_at,
    };
}

static void test_apply_lookup_remove(void **state)
{
    struct route_cache *rc = NULL;
    struct route_entry e;
    struct store_sandbox sb;

    assert_int_equal(route_cache_new(&rc), 0);
    assert_int_equal(route_cache_lookup(rc, ID_A, &e), -ENOENT);

    sb = row(ID_A, "creating", "running", "tok", 1);
    assert_int_equal(route_cache_apply(rc, &sb), 0);
    assert_int_equal(route_cache_lookup(rc, ID_A, &e), -EAGAIN);

    /* Paused and suspended (and the moves between) are E2B's paused, not "not running". */
    static const char *const paused[] = { "pausing",    "paused",    "resuming",
                                          "suspending", "suspended", "restoring" };
    for (size_t i = 0; i < sizeof(paused) / sizeof(paused[0]); i++) {
        sb = row(ID_A, paused[i], "running", "tok", 2);
        assert_int_equal(route_cache_apply(rc, &sb), 0);
        assert_int_equal(route_cache_lookup(rc, ID_A, &e), -EHOSTDOWN);
        assert_true(e.paused);
    }

    sb = row(ID_A, "running", "running", "tok", 3);
    assert_int_equal(route_cache_apply(rc, &sb), 0);
    assert_int_equal(route_cache_lookup(rc, ID_A, &e), 0);
    assert_false(e.paused);
    assert_string_equal(e.id, ID_A);
    assert_true(e.has_token);
    assert_string_equal(e.access_token, "tok");
    assert_int_equal(route_cache_size(rc), 1);

    /* Being killed is gone for the ingress, as killed is. */
    sb = row(ID_A, "running", "killed", "tok", 3);
    assert_int_equal(route_cache_apply(rc, &sb), 0);
    assert_int_equal(route_cache_lookup(rc, ID_A, &e), -ENOENT);
    assert_int_equal(route_cache_size(rc), 0);

    /* No token: routed without one. */
    sb = row(ID_B, "running", "running", NULL, 4);
    assert_int_equal(route_cache_apply(rc, &sb), 0);
    assert_int_equal(route_cache_lookup(rc, ID_B, &e), 0);
    assert_false(e.has_token);
    route_cache_remove(rc, ID_B);
    route_cache_remove(rc, ID_B);
    assert_int_equal(route_cache_lookup(rc, ID_B, NULL), -ENOENT);
    route_cache_free(rc);
}

static void test_bad_rows_fail_closed(void **state)
{
    struct route_cache *rc = NULL;
    char big[ROUTE_CACHE_TOKEN_MAX + 2];
    struct store_sandbox sb;

    assert_int_equal(route_cache_new(&rc), 0);
    sb = row("not-an-id", "running", "running", "tok", 1);
    assert_int_equal(route_cache_apply(rc, &sb), -EINVAL);
    sb = row(ID_A, "running", "running", "tok", 1);
    assert_int_equal(route_cache_apply(rc, &sb), 0);
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    sb = row(ID_A, "running", "running", big, 2);
    assert_int_equal(route_cache_apply(rc, &sb), -EINVAL);
    /* The old entry does not survive a row it cannot hold. */
    assert_int_equal(route_cache_lookup(rc, ID_A, NULL), -ENOENT);
    route_cache_free(rc);
}

/* Many entries: the table grows and every one stays findable. */
static void test_many(void **state)
{
    struct route_cache *rc = NULL;
    enum { N = 5000 };
    char id[SANDBOX_ID_LEN + 1];

    assert_int_equal(route_cache_new(&rc), 0);
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof(id), "s%019d", i);
        struct store_sandbox sb = row(id, i % 2 ? "running" : "creating", "running", "t", i);
        assert_int_equal(route_cache_apply(rc, &sb), 0);
    }
    assert_int_equal(route_cache_size(rc), N);
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof(id), "s%019d", i);
        assert_int_equal(route_cache_lookup(rc, id, NULL), i % 2 ? 0 : -EAGAIN);
    }
    for (int i = 0; i < N; i += 2) {
        snprintf(id, sizeof(id), "s%019d", i);
        route_cache_remove(rc, id);
    }
    assert_int_equal(route_cache_size(rc), N / 2);
    route_cache_free(rc);
}

struct fixture {
    char dir[64];
    char url[128];
    struct store *s, *other; /* two connections: "another replica" writes through other */
};

/* Both connections seal tokens under one key, as every replica of a deployment does. */
static void set_test_key(struct store *s)
{
    uint8_t bytes[SECRETBOX_KEY_LEN];
    struct secretbox_key key;

    memset(bytes, 0x5a, sizeof(bytes));
    secretbox_key_from_bytes(bytes, &key);
    assert_int_equal(store_set_token_key(s, &key), 0);
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));

    assert_non_null(fx);
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/test-route-cache-XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->url, sizeof(fx->url), "sqlite:%s/space.db", fx->dir);
    assert_int_equal(store_open(fx->url, &fx->s), 0);
    set_test_key(fx->s);
    assert_int_equal(store_migrate(fx->s), 0);
    assert_int_equal(store_open(fx->url, &fx->other), 0);
    set_test_key(fx->other);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    char path[128];

    store_close(fx->s);
    store_close(fx->other);
    static const char *const suffixes[] = { "", "-wal", "-shm" };

    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        snprintf(path, sizeof(path), "%s/space.db%s", fx->dir, suffixes[i]);
        (void)unlink(path);
    }
    (void)rmdir(fx->dir);
    free(fx);
    return 0;
}

static void test_load_sync_poll(void **state)
{
    struct fixture *fx = *state;
    struct route_cache *rc = NULL;
    struct route_entry e;
    struct store_sandbox sb;
    int64_t t0 = 1000 * USEC_PER_SEC;

    sb = row(ID_A, "running", "running", "tok-a", t0);
    assert_int_equal(store_sandbox_insert(fx->s, &sb), 0);
    sb = row(ID_B, "killed", "killed", "tok-b", t0);
    assert_int_equal(store_sandbox_insert(fx->s, &sb), 0);

    assert_int_equal(route_cache_new(&rc), 0);
    assert_int_equal(route_cache_load(rc, fx->s, t0 + 1), 0);
    assert_int_equal(route_cache_size(rc), 1);
    assert_int_equal(route_cache_lookup(rc, ID_A, &e), 0);
    assert_string_equal(e.access_token, "tok-a");
    assert_int_equal(route_cache_lookup(rc, ID_B, NULL), -ENOENT);

    /* This process's own write: synced right after its commit. */
    assert_int_equal(store_sandbox_set_desired_state(fx->s, ID_A, "killed", t0 + 2), 0);
    assert_int_equal(route_cache_lookup(rc, ID_A, NULL), 0); /* not yet */
    route_cache_sync(rc, fx->s, ID_A);
    assert_int_equal(route_cache_lookup(rc, ID_A, NULL), -ENOENT);
    /* A row that is not there (deleted) syncs to nothing. */
    route_cache_sync(rc, fx->s, "cccccccccccccccccccc");
    assert_int_equal(route_cache_size(rc), 0);

    /* Another replica creates a sandbox and later kills it: the poll sees both. */
    sb = row("dddddddddddddddddddd", "running", "running", "tok-d", t0 + 3 * USEC_PER_SEC);
    assert_int_equal(store_sandbox_insert(fx->other, &sb), 0);
    assert_int_equal(route_cache_poll(rc, fx->s, t0 + 4 * USEC_PER_SEC), 0);
    assert_int_equal(route_cache_lookup(rc, "dddddddddddddddddddd", &e), 0);
    assert_string_equal(e.access_token, "tok-d");
    assert_int_equal(store_sandbox_set_state(fx->other, "dddddddddddddddddddd", "killed", NULL,
                                             t0 + 5 * USEC_PER_SEC),
                     0);
    assert_int_equal(route_cache_poll(rc, fx->s, t0 + 6 * USEC_PER_SEC), 0);
    assert_int_equal(route_cache_lookup(rc, "dddddddddddddddddddd", NULL), -ENOENT);

    /* A commit stamped before the previous poll (within the overlap) is still seen. */
    sb = row("eeeeeeeeeeeeeeeeeeee", "running", "running", NULL, t0 + 5 * USEC_PER_SEC);
    assert_int_equal(store_sandbox_insert(fx->other, &sb), 0);
    assert_int_equal(route_cache_poll(rc, fx->s, t0 + 7 * USEC_PER_SEC), 0);
    assert_int_equal(route_cache_lookup(rc, "eeeeeeeeeeeeeeeeeeee", NULL), 0);

    /* The backstop reload replaces everything, including entries a sync got wrong. */
    route_cache_remove(rc, "eeeeeeeeeeeeeeeeeeee");
    assert_int_equal(route_cache_load(rc, fx->s, t0 + 8 * USEC_PER_SEC), 0);
    assert_int_equal(route_cache_lookup(rc, "eeeeeeeeeeeeeeeeeeee", NULL), 0);
    assert_int_equal(route_cache_size(rc), 1);
    route_cache_free(rc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apply_lookup_remove),
        cmocka_unit_test(test_bad_rows_fail_closed),
        cmocka_unit_test(test_many),
        cmocka_unit_test_setup_teardown(test_load_sync_poll, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
