/*
 * One test suite for the store seam, run against every implementation
 * (style.md R16): SQLite in a temporary directory always, PostgreSQL at
 * $SPACE_TEST_PG_URL when it is set (tools/pg-test.sh starts one).
 *
 *   test-store sqlite   SQLite only (meson suite 'unit')
 *   test-store pg       PostgreSQL only; exits 77 (skipped) without the URL (suite 'pg')
 *   test-store          both, PostgreSQL skipped with a message without the URL
 *
 * Every test gets a fresh, migrated store: a new SQLite file, or a new
 * PostgreSQL schema selected through PGOPTIONS=-csearch_path=..., dropped
 * afterwards, so runs never see each other's rows and never touch anything
 * else in that database.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/secretbox.h"
#include "api/store-internal.h"
#include "api/store.h"
#include "basic/fileio.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/time-util.h"

enum backend {
    BACKEND_SQLITE,
    BACKEND_PG,
};

static enum backend backend;
static const char *pg_url;
static PGconn *pg_admin;
static char tmpdir[4096];
static unsigned counter;

struct fixture {
    struct store *store;
    char name[64]; /* SQLite file name or PostgreSQL schema */
};

/* ---- fixtures ---- */

/* Every fixture's store seals tokens under this key (secretbox.h). */
static void test_key(uint8_t fill, struct secretbox_key *ret)
{
    uint8_t bytes[SECRETBOX_KEY_LEN];

    memset(bytes, fill, sizeof(bytes));
    secretbox_key_from_bytes(bytes, ret);
}

static void set_test_key(struct store *s, uint8_t fill)
{
    struct secretbox_key key;

    test_key(fill, &key);
    assert_int_equal(store_set_token_key(s, &key), 0);
}

static void pg_admin_exec(const char *sql)
{
    PGresult *res = PQexec(pg_admin, sql);
    ExecStatusType st = PQresultStatus(res);

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        fail_msg("'%s': %s", sql, PQresultErrorMessage(res));
    }
    PQclear(res);
}

static int fixture_open(void **state, bool migrate)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    char url[4200];

    assert_non_null(fx);
    counter++;
    if (backend == BACKEND_SQLITE) {
        snprintf(fx->name, sizeof(fx->name), "store-%u.db", counter);
        snprintf(url, sizeof(url), "sqlite:%s/%s", tmpdir, fx->name);
        assert_int_equal(store_open(url, &fx->store), 0);
        assert_string_equal(store_kind(fx->store), "sqlite");
    } else {
        char sql[128], options[128];

        snprintf(fx->name, sizeof(fx->name), "store_test_%d_%u", (int)getpid(), counter);
        snprintf(sql, sizeof(sql), "CREATE SCHEMA %s", fx->name);
        pg_admin_exec(sql);
        /* libpq reads these when connecting (and again on PQreset). */
        snprintf(options, sizeof(options), "-c search_path=%s", fx->name);
        setenv("PGOPTIONS", options, 1);
        setenv("PGAPPNAME", fx->name, 1);
        assert_int_equal(store_open(pg_url, &fx->store), 0);
        assert_string_equal(store_kind(fx->store), "postgresql");
    }
    set_test_key(fx->store, 0x42);
    if (migrate) {
        assert_int_equal(store_migrate(fx->store), 0);
    }
    *state = fx;
    return 0;
}

static int setup(void **state)
{
    return fixture_open(state, true);
}

static int setup_unmigrated(void **state)
{
    return fixture_open(state, false);
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    fx->store = store_close(fx->store);
    if (backend == BACKEND_PG) {
        char sql[128];

        snprintf(sql, sizeof(sql), "DROP SCHEMA %s CASCADE", fx->name);
        pg_admin_exec(sql);
    }
    free(fx);
    return 0;
}

static struct store *S(void **state)
{
    return ((struct fixture *)*state)->store;
}

/* ---- helpers ---- */

static struct store_sandbox sandbox(const char *id, int64_t created_at, const char *state)
{
    return (struct store_sandbox){
        .id = (char *)id,
        .template_id = "base",
        .alias = "python",
        .client_id = "client-1",
        .state = (char *)state,
        .desired_state = "running",
        .node_id = "node-a",
        .metadata_json = "{\"team\":\"a\"}",
        .env_json = "{\"PATH\":\"/usr/bin\"}",
        .envd_access_token = "token-123",
        .error = NULL,
        .vcpus = 2,
        .memory_mb = 512,
        .disk_mb = 4096,
        .created_at = created_at,
        .updated_at = created_at + 1,
        .end_at = created_at + 300 * 1000000LL,
        .network_json = "{\"native\":{\"internet\":false,\"allow\":[\"a.test\"],\"deny\":[]}}",
        .remaining_us = 42 * 1000000LL,
        .auto_pause = true,
        .net_bps = 1 << 20,
        .disk_bps = 4 << 20,
        .disk_iops = 100,
    };
}

static void assert_str_eq_null(const char *a, const char *b)
{
    if (!a || !b) {
        assert_ptr_equal(a, b);
    } else {
        assert_string_equal(a, b);
    }
}

static void assert_sandbox_equal(const struct store_sandbox *a, const struct store_sandbox *b)
{
    assert_str_eq_null(a->id, b->id);
    assert_str_eq_null(a->template_id, b->template_id);
    assert_str_eq_null(a->alias, b->alias);
    assert_str_eq_null(a->client_id, b->client_id);
    assert_str_eq_null(a->state, b->state);
    assert_str_eq_null(a->desired_state, b->desired_state);
    assert_str_eq_null(a->node_id, b->node_id);
    assert_str_eq_null(a->metadata_json, b->metadata_json);
    assert_str_eq_null(a->env_json, b->env_json);
    assert_str_eq_null(a->envd_access_token, b->envd_access_token);
    assert_str_eq_null(a->error, b->error);
    assert_int_equal(a->vcpus, b->vcpus);
    assert_int_equal(a->memory_mb, b->memory_mb);
    assert_int_equal(a->disk_mb, b->disk_mb);
    assert_int_equal(a->created_at, b->created_at);
    assert_int_equal(a->updated_at, b->updated_at);
    assert_int_equal(a->end_at, b->end_at);
    assert_str_eq_null(a->network_json, b->network_json);
    assert_int_equal(a->remaining_us, b->remaining_us);
    assert_int_equal(a->auto_pause, b->auto_pause);
    assert_int_equal(a->net_bps, b->net_bps);
    assert_int_equal(a->disk_bps, b->disk_bps);
    assert_int_equal(a->disk_iops, b->disk_iops);
}

/* Lists with f and checks the ids, in order, against want (NULL-terminated). */
static void assert_list(struct store *s, const struct store_sandbox_filter *f,
                        const char *const *want)
{
    struct store_sandbox *list = NULL;
    size_t n = 0, n_want = 0;

    while (want[n_want]) {
        n_want++;
    }
    assert_int_equal(store_sandbox_list(s, f, &list, &n), 0);
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(list[i].id, want[i]);
    }
    store_sandbox_list_free(list, n);
}

static struct store_operation operation(const char *id, const char *sandbox_id, const char *state,
                                        int64_t created_at)
{
    return (struct store_operation){
        .id = (char *)id,
        .kind = "sandbox.create",
        .sandbox_id = (char *)sandbox_id,
        .state = (char *)state,
        .error = NULL,
        .result_json = NULL,
        .created_at = created_at,
        .updated_at = created_at,
    };
}

static struct store_api_key api_key(const char *id, const char *hash, int64_t created_at)
{
    return (struct store_api_key){
        .id = (char *)id,
        .name = "ci key",
        .prefix = "sk_1234",
        .hash = (char *)hash,
        .created_at = created_at,
        .last_used_at = 0,
    };
}

/* ---- tests ---- */

/* ---- envd access tokens at rest ---- */

/* Reopens the fixture's database (same file or schema) as a new store, without a key. */
static struct store *reopen(void **state)
{
    struct fixture *fx = *state;
    struct store *s = NULL;
    char url[4200];

    if (backend == BACKEND_SQLITE) {
        snprintf(url, sizeof(url), "sqlite:%s/%s", tmpdir, fx->name);
        assert_int_equal(store_open(url, &s), 0);
    } else {
        assert_int_equal(store_open(pg_url, &s), 0); /* PGOPTIONS still names the schema */
    }
    return s;
}

struct raw_text {
    char *text;
    bool found;
};

static int raw_text_row(const struct store_value *cols, size_t n_cols, void *userdata)
{
    struct raw_text *t = userdata;

    assert_int_equal(n_cols, 1);
    t->found = true;
    t->text = cols[0].is_null ? NULL : strdup(cols[0].text);
    return 0;
}

/* One text value from the database itself, bypassing the verbs. */
static int raw_select(struct store *s, const char *sql, const char *id, char **ret)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id) };
    struct raw_text t = { 0 };
    int r = s->driver->run(s, sql, false, p, 1, raw_text_row, &t, NULL);

    *ret = t.text;
    return r < 0 ? r : t.found ? 0 : -ENOENT;
}

static int raw_exec(struct store *s, const char *sql, const struct store_param *p, size_t n)
{
    return s->driver->run(s, sql, false, p, n, NULL, NULL, NULL);
}

/* Whether the bytes of needle occur anywhere in the file (SQLite: the database and its -wal). */
static bool file_contains(const char *path, const char *needle)
{
    char *data = NULL;
    size_t len = 0;
    bool found;

    if (read_file(path, 64 << 20, &data, &len) < 0) {
        return false;
    }
    found = memmem(data, len, needle, strlen(needle)) != NULL;
    free(data);
    return found;
}

static void test_store_token_sealed_at_rest(void **state)
{
    static const char token[] = "tok-0123456789abcdef-at-rest";
    struct store *s = S(state);
    struct store_sandbox sb = sandbox("sb00000000000000000a", 100, "running"), got = { 0 };
    char *raw = NULL;

    sb.envd_access_token = (char *)token;
    assert_int_equal(store_sandbox_insert(s, &sb), 0);
    assert_int_equal(
        raw_select(s, "SELECT envd_access_token_sealed FROM sandboxes WHERE id = $1", sb.id, &raw),
        0);
    assert_non_null(raw);
    assert_true(strncmp(raw, "v1.", 3) == 0);
    assert_null(strstr(raw, token));
    free(raw);
    /* The plaintext column is gone (migration 4). */
    assert_int_equal(
        raw_select(s, "SELECT envd_access_token FROM sandboxes WHERE id = $1", sb.id, &raw), -EIO);
    assert_int_equal(store_sandbox_get(s, sb.id, &got), 0);
    assert_string_equal(got.envd_access_token, token);
    store_sandbox_release(&got);

    /* A column update seals too, and clearing the token clears the column. */
    sb.envd_access_token = "tok-second-value-0123456789";
    assert_int_equal(store_sandbox_update_fields(s, &sb, STORE_SANDBOX_ENVD_ACCESS_TOKEN), 0);
    assert_int_equal(store_sandbox_get(s, sb.id, &got), 0);
    assert_string_equal(got.envd_access_token, "tok-second-value-0123456789");
    store_sandbox_release(&got);
    sb.envd_access_token = NULL;
    assert_int_equal(store_sandbox_update(s, &sb), 0);
    assert_int_equal(
        raw_select(s, "SELECT envd_access_token_sealed FROM sandboxes WHERE id = $1", sb.id, &raw),
        0);
    assert_null(raw);
    assert_int_equal(store_token_key_check(s, NULL), 0);

    if (backend == BACKEND_SQLITE) {
        struct fixture *fx = *state;
        char path[4200];

        snprintf(path, sizeof(path), "%s/%s", tmpdir, fx->name);
        assert_false(file_contains(path, token));
        snprintf(path, sizeof(path), "%s/%s-wal", tmpdir, fx->name);
        assert_false(file_contains(path, token));
        assert_false(file_contains(path, "tok-second-value-0123456789"));
    }
}

static void test_store_token_swapped_rows(void **state)
{
    struct store *s = S(state);
    struct store_sandbox a = sandbox("sb00000000000000000a", 100, "running");
    struct store_sandbox b = sandbox("sb00000000000000000b", 101, "running"), got = { 0 };
    struct store_sandbox *list = NULL;
    size_t n = 0;
    char *raw = NULL;

    a.envd_access_token = "token-of-a";
    b.envd_access_token = "token-of-b";
    assert_int_equal(store_sandbox_insert(s, &a), 0);
    assert_int_equal(store_sandbox_insert(s, &b), 0);
    /* Someone with write access to the database copies a's sealed token into b's row. */
    assert_int_equal(
        raw_select(s, "SELECT envd_access_token_sealed FROM sandboxes WHERE id = $1", a.id, &raw),
        0);
    const struct store_param p[] = { STORE_PARAM_TEXT(b.id), STORE_PARAM_TEXT(raw) };
    assert_int_equal(
        raw_exec(s, "UPDATE sandboxes SET envd_access_token_sealed = $2 WHERE id = $1", p, 2), 0);
    free(raw);
    assert_int_equal(store_sandbox_get(s, b.id, &got), -EBADMSG);
    assert_null(got.id);
    assert_int_equal(store_sandbox_list(s, NULL, &list, &n), -EBADMSG);
    assert_null(list);
    assert_int_equal(store_sandbox_get(s, a.id, &got), 0);
    assert_string_equal(got.envd_access_token, "token-of-a");
    store_sandbox_release(&got);

    /* Garbage in the column: an error, never a crash. */
    static const char *const junk[] = { "",      "v1.",   "v1.0123456789abcdef.",
                                        "v1.zz", "plain", "v1.0123456789abcdef.!!!!",
                                        "v2.x.y" };
    for (size_t i = 0; i < ARRAY_SIZE(junk); i++) {
        const struct store_param q[] = { STORE_PARAM_TEXT(b.id), STORE_PARAM_TEXT(junk[i]) };

        assert_int_equal(
            raw_exec(s, "UPDATE sandboxes SET envd_access_token_sealed = $2 WHERE id = $1", q, 2),
            0);
        int r = store_sandbox_get(s, b.id, &got);
        assert_true(r == -EBADMSG || r == -EKEYREJECTED);
    }
    /* Once the sandbox is killed a bad token reads as none: history stays readable. */
    assert_int_equal(store_sandbox_set_state(s, b.id, "killed", NULL, 200), 0);
    assert_int_equal(store_sandbox_get(s, b.id, &got), 0);
    assert_null(got.envd_access_token);
    store_sandbox_release(&got);
}

static void test_store_token_wrong_key(void **state)
{
    struct store *s = S(state), *t = NULL;
    struct store_sandbox sb = sandbox("sb00000000000000000a", 100, "running"), got = { 0 };
    struct store_sandbox bare = sandbox("sb00000000000000000b", 101, "running");
    struct secretbox_key key;
    char other[SECRETBOX_KEY_ID_LEN + 1] = "";

    assert_int_equal(store_sandbox_insert(s, &sb), 0);

    /* No key: a token can be neither written nor read; rows without one still work. */
    t = reopen(state);
    assert_int_equal(store_sandbox_get(t, sb.id, &got), -ENOKEY);
    assert_int_equal(store_sandbox_insert(t, &bare), -ENOKEY);
    bare.envd_access_token = NULL;
    assert_int_equal(store_sandbox_insert(t, &bare), 0);
    assert_int_equal(store_token_key_check(t, NULL), -ENOKEY);

    /* Another key: told apart from damage, and the start-up check names it. */
    set_test_key(t, 0x43);
    assert_int_equal(store_sandbox_get(t, sb.id, &got), -EKEYREJECTED);
    assert_int_equal(store_token_key_check(t, other), -EKEYREJECTED);
    test_key(0x42, &key);
    assert_string_equal(other, key.id);
    assert_int_equal(store_token_key_check(s, NULL), 0);
    t = store_close(t);
}

static void test_store_token_legacy_plaintext(void **state)
{
    struct store *s = S(state), *t = NULL;
    struct store_sandbox got = { 0 };
    char *raw = NULL;
    static const char insert[] =
        "INSERT INTO sandboxes (id, template_id, client_id, state, desired_state, metadata, env, "
        "envd_access_token, vcpus, memory_mb, disk_mb, created_at, updated_at, end_at) VALUES "
        "($1, 'base', 'c', $2, 'running', '{}', '{}', $3, 1, 512, 1024, 1, 1, 0)";

    /* The database as release 2 left it: plaintext tokens, a live and a killed row. */
    assert_int_equal(store_migrate_until(s, 2), 0);
    const struct store_param live[] = { STORE_PARAM_TEXT("sb0000000000000000l1"),
                                        STORE_PARAM_TEXT("running"),
                                        STORE_PARAM_TEXT("legacy-live-token-xyz") };
    const struct store_param dead[] = { STORE_PARAM_TEXT("sb0000000000000000k1"),
                                        STORE_PARAM_TEXT("killed"),
                                        STORE_PARAM_TEXT("legacy-dead-token-xyz") };
    assert_int_equal(raw_exec(s, insert, live, 3), 0);
    assert_int_equal(raw_exec(s, insert, dead, 3), 0);

    /* Without a key there is no sealing them: the migration fails and changes nothing. */
    t = reopen(state);
    assert_int_equal(store_migrate(t), -ENOKEY);
    assert_int_equal(raw_select(t, "SELECT envd_access_token FROM sandboxes WHERE id = $1",
                                "sb0000000000000000l1", &raw),
                     0);
    assert_string_equal(raw, "legacy-live-token-xyz");
    free(raw);
    t = store_close(t);

    assert_int_equal(store_migrate(s), 0);
    assert_int_equal(store_sandbox_get(s, "sb0000000000000000l1", &got), 0);
    assert_string_equal(got.envd_access_token, "legacy-live-token-xyz");
    store_sandbox_release(&got);
    assert_int_equal(store_sandbox_get(s, "sb0000000000000000k1", &got), 0);
    assert_null(got.envd_access_token);
    store_sandbox_release(&got);
    assert_int_equal(raw_select(s, "SELECT envd_access_token_sealed FROM sandboxes WHERE id = $1",
                                "sb0000000000000000k1", &raw),
                     0);
    assert_null(raw);
    assert_int_equal(store_token_key_check(s, NULL), 0);
    if (backend == BACKEND_SQLITE) {
        struct fixture *fx = *state;
        char path[4200];

        /* secure_delete zeroes what the update freed; the -wal holds what the old pages
         * were until a checkpoint, so check the database after one. */
        assert_int_equal(raw_exec(s, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, 0), 0);
        snprintf(path, sizeof(path), "%s/%s", tmpdir, fx->name);
        assert_false(file_contains(path, "legacy-live-token-xyz"));
        assert_false(file_contains(path, "legacy-dead-token-xyz"));
    }
}

static void test_store_migrate_idempotent(void **state)
{
    struct store *s = S(state);
    struct store_sandbox sb = sandbox("sb00000000000000000a", 100, "running"), got = { 0 };

    assert_int_equal(store_sandbox_insert(s, &sb), 0);
    assert_int_equal(store_migrate(s), 0);
    assert_int_equal(store_migrate(s), 0);
    assert_int_equal(store_sandbox_get(s, sb.id, &got), 0);
    assert_sandbox_equal(&got, &sb);
    store_sandbox_release(&got);
}

static void test_store_unmigrated_is_eio(void **state)
{
    struct store *s = S(state);
    struct store_sandbox sb = sandbox("sb00000000000000000a", 100, "running"), got = { 0 };
    struct store_sandbox *list = NULL;
    size_t n = 0;

    assert_int_equal(store_sandbox_get(s, sb.id, &got), -EIO);
    assert_int_equal(store_sandbox_insert(s, &sb), -EIO);
    assert_int_equal(store_sandbox_list(s, NULL, &list, &n), -EIO);
    assert_null(list);
    assert_int_equal(store_migrate(s), 0);
    assert_int_equal(store_sandbox_get(s, sb.id, &got), -ENOENT);
    assert_int_equal(store_sandbox_insert(s, &sb), 0);
}

static void test_store_sandbox_crud(void **state)
{
    struct store *s = S(state);
    struct store_sandbox sb = sandbox("sb00000000000000000a", 100, "creating"), got = { 0 };
    struct store_sandbox bare = {
        .id = "sb00000000000000000b",
        .template_id = "base",
        .client_id = "c",
        .state = "creating",
        .desired_state = "running",
    };

    assert_int_equal(store_sandbox_insert(s, &sb), 0);
    assert_int_equal(store_sandbox_get(s, sb.id, &got), 0);
    assert_sandbox_equal(&got, &sb);
    store_sandbox_release(&got);
    assert_null(got.id);

    /* Optional fields left NULL come back NULL; metadata and env as "{}". */
    assert_int_equal(store_sandbox_insert(s, &bare), 0);
    assert_int_equal(store_sandbox_get(s, bare.id, &got), 0);
    assert_null(got.alias);
    assert_null(got.node_id);
    assert_null(got.envd_access_token);
    assert_null(got.error);
    assert_string_equal(got.metadata_json, "{}");
    assert_string_equal(got.env_json, "{}");
    assert_int_equal(got.end_at, 0);
    assert_int_equal(got.remaining_us, 0);
    assert_false(got.auto_pause);
    store_sandbox_release(&got);

    sb.state = "running";
    sb.remaining_us = -1;
    sb.auto_pause = false;
    sb.node_id = NULL;
    sb.alias = NULL;
    sb.error = "placement failed";
    sb.metadata_json = "{\"team\":\"b\",\"env\":\"prod\"}";
    sb.vcpus = 8;
    sb.updated_at = 200;
    sb.end_at = 0;
    assert_int_equal(store_sandbox_update(s, &sb), 0);
    assert_int_equal(store_sandbox_get(s, sb.id, &got), 0);
    assert_sandbox_equal(&got, &sb);
    store_sandbox_release(&got);

    sb.id = "sb0000000000000nope0";
    assert_int_equal(store_sandbox_update(s, &sb), -ENOENT);
    assert_int_equal(store_sandbox_get(s, sb.id, &got), -ENOENT);
    assert_null(got.id); /* written only on success */

    assert_int_equal(store_sandbox_delete(s, "sb00000000000000000a"), 0);
    assert_int_equal(store_sandbox_get(s, "sb00000000000000000a", &got), -ENOENT);
    assert_int_equal(store_sandbox_delete(s, "sb00000000000000000a"), -ENOENT);
    assert_int_equal(store_sandbox_get(s, bare.id, &got), 0);
    store_sandbox_release(&got);
}

static void test_store_sandbox_duplicate(void **state)
{
    struct store *s = S(state);
    struct store_sandbox sb = sandbox("sb00000000000000000a", 100, "running"), got = { 0 };
    struct store_sandbox again = sandbox("sb00000000000000000a", 999, "paused");

    assert_int_equal(store_sandbox_insert(s, &sb), 0);
    assert_int_equal(store_sandbox_insert(s, &again), -EEXIST);
    assert_int_equal(store_sandbox_get(s, sb.id, &got), 0);
    assert_sandbox_equal(&got, &sb);
    store_sandbox_release(&got);
}

/* The egress policy column (migration 6): written whole, NULL for older rows. */
static void test_store_sandbox_network(void **state)
{
    struct store *s = S(state);
    struct store_sandbox sb = sandbox("sb00000000000000000a", 100, "running"), got = { 0 };
    struct store_sandbox bare = sandbox("sb00000000000000000b", 100, "running");
    const char *policy = "{\"native\":{\"internet\":true,\"allow\":[],\"deny\":[]}}";

    bare.network_json = NULL;
    assert_int_equal(store_sandbox_insert(s, &sb), 0);
    assert_int_equal(store_sandbox_insert(s, &bare), 0);
    assert_int_equal(store_sandbox_get(s, bare.id, &got), 0);
    assert_null(got.network_json);
    store_sandbox_release(&got);

    assert_int_equal(store_sandbox_set_network(s, sb.id, policy, 555), 0);
    assert_int_equal(store_sandbox_get(s, sb.id, &got), 0);
    assert_string_equal(got.network_json, policy);
    assert_int_equal(got.updated_at, 555);
    store_sandbox_release(&got);

    assert_int_equal(store_sandbox_set_network(s, "sb0000000000000000zz", policy, 1), -ENOENT);
    assert_int_equal(store_sandbox_set_network(s, sb.id, "[]", 1), -EINVAL);
    assert_int_equal(store_sandbox_set_network(s, sb.id, "{", 1), -EINVAL);
    assert_int_equal(store_sandbox_set_network(s, sb.id, NULL, 1), -EINVAL);
    sb.network_json = "not json";
    assert_int_equal(store_sandbox_update_fields(s, &sb, STORE_SANDBOX_NETWORK), -EINVAL);
    sb.network_json = "{\"native\":{}}";
    assert_int_equal(store_sandbox_update_fields(s, &sb, STORE_SANDBOX_NETWORK), 0);
    assert_int_equal(store_sandbox_get(s, sb.id, &got), 0);
    assert_string_equal(got.network_json, "{\"native\":{}}");
    store_sandbox_release(&got);
}

static struct store_egress_record egress_rec(const char *epoch, int64_t seq, const char *sandbox,
                                             int64_t time_us, const char *proto,
                                             const char *verdict)
{
    static char json[16][128];
    static unsigned slot;
    char *j = json[slot++ % ARRAY_SIZE(json)];

    snprintf(j, 128, "{\"sandbox\":\"%s\",\"proto\":\"%s\",\"verdict\":\"%s\",\"n\":%lld}",
             sandbox ? sandbox : "", proto ? proto : "", verdict ? verdict : "", (long long)seq);
    return (struct store_egress_record){
        .node_id = "local",
        .epoch = (char *)epoch,
        .seq = seq,
        .sandbox_id = (char *)sandbox,
        .time_us = time_us,
        .proto = (char *)proto,
        .verdict = (char *)verdict,
        .record_json = j,
    };
}

#define SB_A "sb00000000000000000a"
#define SB_B "sb00000000000000000b"

static void test_store_egress_audit(void **state)
{
    struct store *s = S(state);
    struct store_egress_record v[] = {
        egress_rec("e1", 1, SB_A, 1000, "dns", "allow"),
        egress_rec("e1", 2, SB_A, 2000, "tls", "deny"),
        egress_rec("e1", 3, SB_B, 3000, "http", "allow"),
        egress_rec("e1", 4, NULL, 4000, NULL, NULL),
        egress_rec("e1", 5, SB_A, 5000, "tcp", "deny"),
    };
    struct store_egress_record *list = NULL;
    struct store_egress_filter f = { .sandbox_id = SB_A };
    size_t n = 0, inserted = 99;
    uint64_t deleted = 0;

    assert_int_equal(store_egress_audit_insert(s, v, 0, &inserted), 0);
    assert_int_equal(inserted, 0);
    assert_int_equal(store_egress_audit_insert(s, v, ARRAY_SIZE(v), &inserted), 0);
    assert_int_equal(inserted, 5);
    /* The same records again (a restarted puller): nothing new. A new epoch is new. */
    assert_int_equal(store_egress_audit_insert(s, v, ARRAY_SIZE(v), &inserted), 0);
    assert_int_equal(inserted, 0);

    assert_int_equal(store_egress_audit_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(list[0].seq, 1);
    assert_int_equal(list[1].seq, 2);
    assert_int_equal(list[2].seq, 5);
    assert_true(list[0].id < list[1].id && list[1].id < list[2].id);
    assert_string_equal(list[0].node_id, "local");
    assert_string_equal(list[0].epoch, "e1");
    assert_string_equal(list[0].sandbox_id, SB_A);
    assert_string_equal(list[1].proto, "tls");
    assert_string_equal(list[1].verdict, "deny");
    assert_int_equal(list[1].time_us, 2000);
    assert_string_equal(list[1].record_json, v[1].record_json);
    int64_t second = list[1].id;
    store_egress_audit_list_free(list, n);

    /* Paging: after a cursor, with a limit. */
    f.after_id = second;
    assert_int_equal(store_egress_audit_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(list[0].seq, 5);
    store_egress_audit_list_free(list, n);
    f.after_id = 0;
    f.limit = 1;
    assert_int_equal(store_egress_audit_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(list[0].seq, 1);
    store_egress_audit_list_free(list, n);

    /* Filters. */
    f = (struct store_egress_filter){ .sandbox_id = SB_A, .verdict = "deny" };
    assert_int_equal(store_egress_audit_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 2);
    store_egress_audit_list_free(list, n);
    f.proto = "tcp";
    assert_int_equal(store_egress_audit_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(list[0].seq, 5);
    store_egress_audit_list_free(list, n);
    f = (struct store_egress_filter){ .sandbox_id = "sb0000000000000000zz" };
    assert_int_equal(store_egress_audit_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 0);
    store_egress_audit_list_free(list, n);

    /* Retention: by age (the NULL-sandbox record too), then by count per sandbox. */
    assert_int_equal(store_egress_audit_prune_before(s, 1500, &deleted), 0);
    assert_int_equal(deleted, 1);
    assert_int_equal(store_egress_audit_prune_sandbox(s, SB_A, 1, &deleted), 0);
    assert_int_equal(deleted, 1);
    f = (struct store_egress_filter){ .sandbox_id = SB_A };
    assert_int_equal(store_egress_audit_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(list[0].seq, 5);
    store_egress_audit_list_free(list, n);
    assert_int_equal(store_egress_audit_prune_sandbox(s, SB_A, 1, &deleted), 0);
    assert_int_equal(deleted, 0);
    assert_int_equal(store_egress_audit_prune_before(s, 4500, &deleted), 0);
    assert_int_equal(deleted, 2); /* SB_B's and the dropped-count record */

    /* Ids keep growing after deletes of the newest (the cursor never goes back). */
    struct store_egress_record w[] = { egress_rec("e2", 1, SB_A, 9000, "dns", "allow") };
    assert_int_equal(store_egress_audit_insert(s, w, 1, &inserted), 0);
    assert_int_equal(inserted, 1);
    f = (struct store_egress_filter){ .sandbox_id = SB_A };
    assert_int_equal(store_egress_audit_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 2);
    assert_true(list[1].id > list[0].id);
    store_egress_audit_list_free(list, n);
}

/* More than one INSERT statement's worth of rows, in one transaction. */
static void test_store_egress_audit_batch(void **state)
{
    struct store *s = S(state);
    size_t total = 1000, inserted = 0, n = 0;
    struct store_egress_record *v = calloc(total, sizeof(*v)), *list = NULL;
    char(*json)[64] = calloc(total, 64);
    struct store_egress_filter f = { .sandbox_id = SB_A };

    assert_non_null(v);
    assert_non_null(json);
    for (size_t i = 0; i < total; i++) {
        snprintf(json[i], 64, "{\"i\":%zu}", i);
        v[i] = egress_rec("e1", (int64_t)i, SB_A, 1000 + (int64_t)i, "tcp", "allow");
        v[i].record_json = json[i];
    }
    /* Half of them stored already: the rest are added around them. */
    assert_int_equal(store_egress_audit_insert(s, v + 250, 500, &inserted), 0);
    assert_int_equal(inserted, 500);
    assert_int_equal(store_egress_audit_insert(s, v, total, &inserted), 0);
    assert_int_equal(inserted, 500);
    assert_int_equal(store_egress_audit_list(s, &f, &list, &n), 0);
    assert_int_equal(n, total);
    for (size_t i = 1; i < n; i++) {
        assert_true(list[i].id > list[i - 1].id);
    }
    store_egress_audit_list_free(list, n);
    assert_int_equal(store_egress_audit_prune_sandbox(s, SB_A, 10, NULL), 0);
    assert_int_equal(store_egress_audit_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 10);
    store_egress_audit_list_free(list, n);
    free(v);
    free(json);
}

static void test_store_egress_audit_bad_input(void **state)
{
    struct store *s = S(state);
    struct store_egress_record good = egress_rec("e1", 1, SB_A, 1, "dns", "allow"), bad;
    struct store_egress_record *list = NULL;
    struct store_egress_filter f = { .sandbox_id = NULL };
    size_t n = 0;

    bad = good;
    bad.record_json = "[1]";
    assert_int_equal(store_egress_audit_insert(s, &bad, 1, NULL), -EINVAL);
    bad = good;
    bad.epoch = NULL;
    assert_int_equal(store_egress_audit_insert(s, &bad, 1, NULL), -EINVAL);
    bad = good;
    bad.sandbox_id = "\xff";
    assert_int_equal(store_egress_audit_insert(s, &bad, 1, NULL), -EINVAL);
    assert_int_equal(store_egress_audit_insert(s, NULL, 1, NULL), -EINVAL);
    assert_int_equal(store_begin(s), 0);
    assert_int_equal(store_egress_audit_insert(s, &good, 1, NULL), -EBUSY);
    assert_int_equal(store_rollback(s), 0);
    assert_int_equal(store_egress_audit_list(s, &f, &list, &n), -EINVAL);
    f.sandbox_id = SB_A;
    f.after_id = -1;
    assert_int_equal(store_egress_audit_list(s, &f, &list, &n), -EINVAL);
    assert_int_equal(store_egress_audit_prune_sandbox(s, SB_A, 0, NULL), -EINVAL);
    /* Nothing of a refused batch was stored. */
    f.after_id = 0;
    assert_int_equal(store_egress_audit_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 0);
    store_egress_audit_list_free(list, n);
}

static struct store_secret secret_row(const char *id, const char *owner, const char *name,
                                      const char *sandbox_id, int64_t created_at)
{
    return (struct store_secret){
        .id = (char *)id,
        .owner = (char *)owner,
        .name = (char *)name,
        .sandbox_id = (char *)sandbox_id,
        .sealed = "s1.c2VhbGVk",
        .metadata_json = "{\"team\":\"a\"}",
        .version = 1,
        .created_at = created_at,
        .updated_at = created_at,
    };
}

#define SECRET_ID(c) "0000000000000000000000000000000" c

/* Secrets (migration 7): names unique per owner, sealed text only, rotation counts. */
static void test_store_secrets(void **state)
{
    struct store *s = S(state);
    struct store_secret a = secret_row(SECRET_ID("a"), "space", "gh", NULL, 100);
    struct store_secret b = secret_row(SECRET_ID("b"), "space", "openai", NULL, 101);
    struct store_secret other = secret_row(SECRET_ID("c"), "other", "gh", NULL, 102);
    struct store_secret lit = secret_row(SECRET_ID("d"), "space", "_" SB_A "_0", SB_A, 103);
    struct store_secret got = { 0 }, *list = NULL;
    size_t n = 0;

    assert_int_equal(store_secret_insert(s, &a), 0);
    assert_int_equal(store_secret_insert(s, &b), 0);
    assert_int_equal(store_secret_insert(s, &other), 0); /* another owner: its own name space */
    assert_int_equal(store_secret_insert(s, &lit), 0);
    struct store_secret dup = secret_row(SECRET_ID("e"), "space", "gh", NULL, 104);
    assert_int_equal(store_secret_insert(s, &dup), -EEXIST);
    dup = secret_row(SECRET_ID("a"), "space", "fresh", NULL, 104);
    assert_int_equal(store_secret_insert(s, &dup), -EEXIST);

    assert_int_equal(store_secret_get(s, "space", "gh", &got), 0);
    assert_string_equal(got.id, a.id);
    assert_string_equal(got.owner, "space");
    assert_string_equal(got.sealed, a.sealed);
    assert_string_equal(got.metadata_json, a.metadata_json);
    assert_null(got.sandbox_id);
    assert_int_equal(got.version, 1);
    assert_int_equal(got.created_at, 100);
    store_secret_release(&got);
    assert_int_equal(store_secret_get_by_id(s, "space", SECRET_ID("b"), &got), 0);
    assert_string_equal(got.name, "openai");
    store_secret_release(&got);
    assert_int_equal(store_secret_get_by_id(s, "other", SECRET_ID("b"), &got), -ENOENT);
    assert_int_equal(store_secret_get(s, "space", "nope", &got), -ENOENT);
    assert_int_equal(store_secret_get(s, "space", lit.name, &got), 0);
    assert_string_equal(got.sandbox_id, SB_A);
    store_secret_release(&got);

    /* The owner's own, by name, paged; never the sandbox-scoped ones nor another owner's. */
    assert_int_equal(store_secret_list(s, "space", NULL, 0, &list, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].name, "gh");
    assert_string_equal(list[1].name, "openai");
    store_secret_list_free(list, n);
    assert_int_equal(store_secret_list(s, "space", NULL, 1, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].name, "gh");
    store_secret_list_free(list, n);
    assert_int_equal(store_secret_list(s, "space", "gh", 1, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].name, "openai");
    store_secret_list_free(list, n);
    assert_int_equal(store_secret_list(s, "space", "openai", 0, &list, &n), 0);
    assert_int_equal(n, 0);
    store_secret_list_free(list, n);

    /* Rotation: new sealed text, version + 1, metadata kept unless given. */
    assert_int_equal(store_secret_rotate(s, "space", "gh", "s1.bmV3", NULL, 200, &got), 0);
    assert_int_equal(got.version, 2);
    assert_string_equal(got.sealed, "s1.bmV3");
    assert_string_equal(got.metadata_json, a.metadata_json);
    assert_int_equal(got.updated_at, 200);
    assert_int_equal(got.created_at, 100);
    store_secret_release(&got);
    assert_int_equal(store_secret_rotate(s, "space", "gh", "s1.bmV4", "{\"k\":\"v\"}", 300, NULL),
                     0);
    assert_int_equal(store_secret_get(s, "space", "gh", &got), 0);
    assert_int_equal(got.version, 3);
    assert_string_equal(got.metadata_json, "{\"k\":\"v\"}");
    store_secret_release(&got);
    assert_int_equal(store_secret_rotate(s, "space", "nope", "s1.x", NULL, 1, NULL), -ENOENT);
    assert_int_equal(store_secret_rotate(s, "space", "gh", "s1.x", "[1]", 1, NULL), -EINVAL);
    assert_int_equal(store_secret_get(s, "other", "gh", &got), 0);
    assert_int_equal(got.version, 1);
    store_secret_release(&got);

    assert_int_equal(store_secret_delete(s, "space", "openai"), 0);
    assert_int_equal(store_secret_delete(s, "space", "openai"), -ENOENT);
    assert_int_equal(store_secret_get(s, "space", "openai", &got), -ENOENT);
    assert_int_equal(store_secret_get(s, "other", "gh", &got), 0);
    store_secret_release(&got);
}

static struct store_snapshot snapshot_row(const char *id, const char *name, const char *op,
                                          int64_t created)
{
    return (struct store_snapshot){ .id = (char *)id,
                                    .owner = "space",
                                    .sandbox_id = "sb00000000000000000a",
                                    .node_id = "local",
                                    .template_id = "base",
                                    .kind = "full",
                                    .name = (char *)name,
                                    .state = STORE_SNAPSHOT_PENDING,
                                    .operation_id = (char *)op,
                                    .vcpus = 1,
                                    .memory_mb = 512,
                                    .created_at = created,
                                    .updated_at = created };
}

/* Pending until its operation succeeds; a failed one leaves nothing; names unique; paging
 * newest first with a cursor. */
static void test_store_snapshots(void **state)
{
    struct store *s = S(state);
    struct store_snapshot a = snapshot_row("snap0000000000000001", "one", "op1", 100);
    struct store_snapshot b = snapshot_row("snap0000000000000002", NULL, "op2", 200);
    struct store_snapshot c = snapshot_row("snap0000000000000003", NULL, "op3", 300);
    struct store_snapshot dup = snapshot_row("snap0000000000000004", "one", "op4", 400);
    struct store_snapshot got = { 0 }, *list = NULL;
    size_t n = 0;

    assert_int_equal(store_snapshot_insert(s, &a), 0);
    assert_int_equal(store_snapshot_insert(s, &b), 0);
    assert_int_equal(store_snapshot_insert(s, &c), 0);
    assert_int_equal(store_snapshot_insert(s, &a), -EEXIST);
    assert_int_equal(store_snapshot_insert(s, &dup), -EEXIST); /* the name */

    assert_int_equal(store_snapshot_finish(s, "op1", true, 150), 0);
    assert_int_equal(store_snapshot_finish(s, "op2", false, 250), 0);
    assert_int_equal(store_snapshot_finish(s, "op2", false, 250), 0); /* a re-run */
    assert_int_equal(store_snapshot_get(s, "snap0000000000000002", &got), -ENOENT);
    assert_int_equal(store_snapshot_get_by_operation(s, "op1", &got), 0);
    assert_string_equal(got.state, STORE_SNAPSHOT_COMPLETE);
    assert_string_equal(got.name, "one");
    assert_int_equal(got.memory_mb, 512);
    assert_int_equal(got.updated_at, 150);
    store_snapshot_release(&got);
    /* A completed one is not un-completed by a late failure of a re-run. */
    assert_int_equal(store_snapshot_finish(s, "op1", false, 160), 0);
    assert_int_equal(store_snapshot_get(s, "snap0000000000000001", &got), 0);
    store_snapshot_release(&got);

    struct store_snapshot_filter f = { .owner = "space" };
    assert_int_equal(store_snapshot_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].id, "snap0000000000000003"); /* newest first */
    store_snapshot_list_free(list, n);
    f.complete_only = true;
    assert_int_equal(store_snapshot_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].id, "snap0000000000000001");
    store_snapshot_list_free(list, n);
    f = (struct store_snapshot_filter){ .owner = "space", .limit = 1 };
    assert_int_equal(store_snapshot_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 1);
    store_snapshot_list_free(list, n);
    f.after_id = "snap0000000000000003";
    assert_int_equal(store_snapshot_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].id, "snap0000000000000001");
    store_snapshot_list_free(list, n);
    f.after_id = "snap0000000000000009";
    assert_int_equal(store_snapshot_list(s, &f, &list, &n), -ENOENT);
    f = (struct store_snapshot_filter){ .owner = "space", .name = "one" };
    assert_int_equal(store_snapshot_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 1);
    store_snapshot_list_free(list, n);
    f = (struct store_snapshot_filter){ .owner = "other" };
    assert_int_equal(store_snapshot_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 0);
    store_snapshot_list_free(list, n);

    assert_int_equal(
        store_snapshot_set_state(s, "snap0000000000000001", STORE_SNAPSHOT_DELETING, 500), 0);
    assert_int_equal(store_snapshot_delete(s, "snap0000000000000001"), 0);
    assert_int_equal(store_snapshot_delete(s, "snap0000000000000001"), -ENOENT);
    assert_int_equal(store_snapshot_set_state(s, "snap0000000000000001", "x", 1), -ENOENT);
    a.kind = NULL;
    assert_int_equal(store_snapshot_insert(s, &a), -EINVAL);
}

/* Rolling snapshots (migration 11): the source and bytes columns, the source filter. */
static void test_store_snapshot_source(void **state)
{
    struct store *s = S(state);
    struct store_snapshot a = snapshot_row("snap0000000000000001", NULL, "op1", 100);
    struct store_snapshot b = snapshot_row("snap0000000000000002", NULL, "op2", 200);
    struct store_snapshot got = { 0 }, *list = NULL;
    size_t n = 0;

    b.source = STORE_SNAPSHOT_SOURCE_ROLLING;
    assert_int_equal(store_snapshot_insert(s, &a), 0);
    assert_int_equal(store_snapshot_insert(s, &b), 0);
    assert_int_equal(store_snapshot_get(s, a.id, &got), 0);
    assert_string_equal(got.source, STORE_SNAPSHOT_SOURCE_USER); /* NULL on insert: user */
    assert_int_equal(got.bytes, 0);
    store_snapshot_release(&got);
    assert_int_equal(store_snapshot_set_bytes(s, b.id, 12345), 0);
    assert_int_equal(store_snapshot_set_bytes(s, "snap0000000000000009", 1), -ENOENT);
    assert_int_equal(store_snapshot_set_bytes(s, b.id, -1), -EINVAL);
    struct store_snapshot_filter f = { .owner = "space", .source = STORE_SNAPSHOT_SOURCE_ROLLING };
    assert_int_equal(store_snapshot_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].id, b.id);
    assert_string_equal(list[0].source, STORE_SNAPSHOT_SOURCE_ROLLING);
    assert_int_equal(list[0].bytes, 12345);
    store_snapshot_list_free(list, n);
}

/* A policy per sandbox; the compare-and-set that takes a turn; the sweep of dead ones. */
static void test_store_snapshot_policies(void **state)
{
    struct store *s = S(state);
    struct store_sandbox live = sandbox(SB_A, 100, "running"), dead = sandbox(SB_B, 100, "killed");
    struct store_snapshot_policy pa = { .sandbox_id = SB_A,
                                        .owner = "space",
                                        .policy_json = "{\"disk_every_s\": 60}",
                                        .next_disk_at = 1000,
                                        .next_full_at = 0,
                                        .created_at = 10,
                                        .updated_at = 10 };
    struct store_snapshot_policy pb = pa, pc = pa, got = { 0 }, *list = NULL;
    uint64_t deleted = 0;
    size_t n = 0;

    pb.sandbox_id = SB_B;
    pc.sandbox_id = "sb0000000000000000zz"; /* no sandbox row */
    assert_int_equal(store_sandbox_insert(s, &live), 0);
    assert_int_equal(store_sandbox_insert(s, &dead), 0);
    assert_int_equal(store_snapshot_policy_get(s, SB_A, &got), -ENOENT);
    assert_int_equal(store_snapshot_policy_put(s, &pa), 0);
    assert_int_equal(store_snapshot_policy_put(s, &pb), 0);
    assert_int_equal(store_snapshot_policy_put(s, &pc), 0);
    /* A replace keeps created_at. */
    pa.policy_json = "{\"disk_every_s\": 120}";
    pa.created_at = 20;
    pa.updated_at = 20;
    assert_int_equal(store_snapshot_policy_put(s, &pa), 0);
    assert_int_equal(store_snapshot_policy_get(s, SB_A, &got), 0);
    assert_string_equal(got.policy_json, "{\"disk_every_s\": 120}");
    assert_int_equal(got.created_at, 10);
    assert_int_equal(got.updated_at, 20);
    assert_int_equal(got.next_disk_at, 1000);
    store_snapshot_policy_release(&got);
    pa.policy_json = "[1]";
    assert_int_equal(store_snapshot_policy_put(s, &pa), -EINVAL);

    /* One turn, one taker. */
    assert_int_equal(store_snapshot_policy_advance(s, SB_A, false, 1000, 2000), 0);
    assert_int_equal(store_snapshot_policy_advance(s, SB_A, false, 1000, 2000), -ESTALE);
    assert_int_equal(store_snapshot_policy_advance(s, SB_A, true, 0, 5000), 0);
    assert_int_equal(store_snapshot_policy_get(s, SB_A, &got), 0);
    assert_int_equal(got.next_disk_at, 2000);
    assert_int_equal(got.next_full_at, 5000);
    store_snapshot_policy_release(&got);

    assert_int_equal(store_snapshot_policy_list(s, 0, &list, &n), 0);
    assert_int_equal(n, 3);
    store_snapshot_policy_list_free(list, n);
    assert_int_equal(store_snapshot_policy_list(s, 2, &list, &n), 0);
    assert_int_equal(n, 2);
    store_snapshot_policy_list_free(list, n);

    assert_int_equal(store_snapshot_policy_sweep(s, &deleted), 0);
    assert_int_equal(deleted, 2);
    assert_int_equal(store_snapshot_policy_get(s, SB_B, &got), -ENOENT);
    assert_int_equal(store_snapshot_policy_delete(s, SB_A), 0);
    assert_int_equal(store_snapshot_policy_delete(s, SB_A), -ENOENT);
    assert_int_equal(store_snapshot_policy_advance(s, SB_A, false, 2000, 3000), -ESTALE);
}

/* Literals scoped to a sandbox go once it is killed or gone, not before, not others. */
static void test_store_secrets_sweep(void **state)
{
    struct store *s = S(state);
    struct store_sandbox live = sandbox(SB_A, 100, "running"), dead = sandbox(SB_B, 100, "killed");
    struct store_secret la = secret_row(SECRET_ID("a"), "space", "_a", SB_A, 100);
    struct store_secret lb = secret_row(SECRET_ID("b"), "space", "_b", SB_B, 100);
    struct store_secret lgone =
        secret_row(SECRET_ID("c"), "space", "_c", "sb0000000000000000zz", 100);
    struct store_secret young =
        secret_row(SECRET_ID("d"), "space", "_d", "sb0000000000000000zy", 900);
    struct store_secret own = secret_row(SECRET_ID("e"), "space", "gh", NULL, 100);
    struct store_secret got = { 0 };
    uint64_t deleted = 0;

    assert_int_equal(store_sandbox_insert(s, &live), 0);
    assert_int_equal(store_sandbox_insert(s, &dead), 0);
    assert_int_equal(store_secret_insert(s, &la), 0);
    assert_int_equal(store_secret_insert(s, &lb), 0);
    assert_int_equal(store_secret_insert(s, &lgone), 0);
    assert_int_equal(store_secret_insert(s, &young), 0);
    assert_int_equal(store_secret_insert(s, &own), 0);
    assert_int_equal(store_secret_sweep(s, 50, &deleted), 0);
    assert_int_equal(deleted, 1); /* the killed sandbox's, at once */
    assert_int_equal(store_secret_sweep(s, 500, &deleted), 0);
    assert_int_equal(deleted, 1); /* the one without a row, once old enough */
    assert_int_equal(store_secret_get(s, "space", "_a", &got), 0);
    store_secret_release(&got);
    assert_int_equal(store_secret_get(s, "space", "_b", &got), -ENOENT);
    assert_int_equal(store_secret_get(s, "space", "_c", &got), -ENOENT);
    assert_int_equal(store_secret_get(s, "space", "_d", &got), 0);
    store_secret_release(&got);
    assert_int_equal(store_secret_get(s, "space", "gh", &got), 0);
    store_secret_release(&got);
    assert_int_equal(store_secret_sweep(s, 1000, &deleted), 0);
    assert_int_equal(deleted, 1);
}

static void test_store_secrets_bad_input(void **state)
{
    struct store *s = S(state);
    struct store_secret bad = secret_row(SECRET_ID("a"), "space", "gh", NULL, 100), *list = NULL;
    size_t n = 0;

    bad.metadata_json = "{\"k\":1}";
    assert_int_equal(store_secret_insert(s, &bad), -EINVAL);
    bad.metadata_json = "{\"k\":\"v\"}";
    bad.sealed = NULL;
    assert_int_equal(store_secret_insert(s, &bad), -EINVAL);
    bad.sealed = "s1.x";
    bad.version = 0;
    assert_int_equal(store_secret_insert(s, &bad), -EINVAL);
    bad.version = 1;
    bad.name = "\xff";
    assert_int_equal(store_secret_insert(s, &bad), -EINVAL);
    assert_int_equal(store_secret_list(s, NULL, NULL, 0, &list, &n), -EINVAL);
    assert_int_equal(store_secret_delete(s, "space", NULL), -EINVAL);
}

/* The audit record's secret column (migration 7) round-trips; NULL stays NULL. */
static void test_store_egress_audit_secret(void **state)
{
    struct store *s = S(state);
    struct store_egress_record v[] = {
        egress_rec("e1", 1, SB_A, 1000, "http", "allow"),
        egress_rec("e1", 2, SB_A, 2000, "http", "allow"),
    };
    struct store_egress_record *list = NULL;
    struct store_egress_filter f = { .sandbox_id = SB_A };
    size_t n = 0;

    v[0].secret = "gh,openai";
    assert_int_equal(store_egress_audit_insert(s, v, ARRAY_SIZE(v), NULL), 0);
    assert_int_equal(store_egress_audit_list(s, &f, &list, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].secret, "gh,openai");
    assert_null(list[1].secret);
    store_egress_audit_list_free(list, n);
}

static void test_store_sandbox_list_states(void **state)
{
    struct store *s = S(state);
    const char *const states[] = { "running", "paused", "creating", "killed" };
    const char *const ids[] = { "sb0000000000000000r1", "sb0000000000000000p1",
                                "sb0000000000000000c1", "sb0000000000000000k1" };
    const char *const running_paused[] = { "running", "paused", NULL };
    const char *const killed[] = { "killed", NULL };
    const char *const none[] = { NULL };

    for (size_t i = 0; i < 4; i++) {
        struct store_sandbox sb = sandbox(ids[i], 100 + (int64_t)i, states[i]);

        assert_int_equal(store_sandbox_insert(s, &sb), 0);
    }
    assert_list(s, NULL, (const char *const[]){ ids[0], ids[1], ids[2], NULL });
    assert_list(s, &(struct store_sandbox_filter){ .states = running_paused },
                (const char *const[]){ ids[0], ids[1], NULL });
    assert_list(s, &(struct store_sandbox_filter){ .include_killed = true },
                (const char *const[]){ ids[0], ids[1], ids[2], ids[3], NULL });
    /* Killed rows stay hidden unless include_killed, whatever states says. */
    assert_list(s, &(struct store_sandbox_filter){ .states = killed }, none);
    assert_list(s, &(struct store_sandbox_filter){ .states = killed, .include_killed = true },
                (const char *const[]){ ids[3], NULL });
    /* An empty states list matches nothing. */
    assert_list(s, &(struct store_sandbox_filter){ .states = none }, none);
    assert_list(s, &(struct store_sandbox_filter){ .limit = 2 },
                (const char *const[]){ ids[0], ids[1], NULL });
}

static void test_store_sandbox_list_metadata(void **state)
{
    struct store *s = S(state);
    const char *const metadata[] = {
        "{\"team\":\"a\",\"env\":\"prod\"}",
        "{\"team\":\"a\",\"env\":\"dev\"}",
        "{\"team\":\"b\",\"env\":\"prod\"}",
        "{\"x\":\"k=v\",\"a.b\\\"c\":\"dot\",\"$.team\":\"a\",\"ключ\":\"значение 🚀\"}",
        "{}",
    };
    const char *const ids[] = { "sb000000000000000001", "sb000000000000000002",
                                "sb000000000000000003", "sb000000000000000004",
                                "sb000000000000000005" };
    struct store_sandbox *list = NULL;
    size_t n = 0;

    for (size_t i = 0; i < 5; i++) {
        struct store_sandbox sb = sandbox(ids[i], 100 + (int64_t)i, "running");

        sb.metadata_json = (char *)metadata[i];
        assert_int_equal(store_sandbox_insert(s, &sb), 0);
    }
    assert_list(s, &(struct store_sandbox_filter){ .metadata = (const char *[]){ "team=a", NULL } },
                (const char *const[]){ ids[0], ids[1], NULL });
    assert_list(s,
                &(struct store_sandbox_filter){
                    .metadata = (const char *[]){ "team=a", "env=prod", NULL } },
                (const char *const[]){ ids[0], NULL });
    assert_list(
        s,
        &(struct store_sandbox_filter){ .metadata = (const char *[]){ "env=prod", "team=b", NULL },
                                        .states = (const char *[]){ "running", NULL } },
        (const char *const[]){ ids[2], NULL });
    /* The value is everything after the first '='. */
    assert_list(s, &(struct store_sandbox_filter){ .metadata = (const char *[]){ "x=k=v", NULL } },
                (const char *const[]){ ids[3], NULL });
    /* Keys are matched exactly, never read as JSON paths. */
    assert_list(
        s, &(struct store_sandbox_filter){ .metadata = (const char *[]){ "a.b\"c=dot", NULL } },
        (const char *const[]){ ids[3], NULL });
    assert_list(s,
                &(struct store_sandbox_filter){ .metadata = (const char *[]){ "$.team=a", NULL } },
                (const char *const[]){ ids[3], NULL });
    assert_list(
        s,
        &(struct store_sandbox_filter){ .metadata = (const char *[]){ "ключ=значение 🚀", NULL } },
        (const char *const[]){ ids[3], NULL });
    assert_list(s, &(struct store_sandbox_filter){ .metadata = (const char *[]){ "team=", NULL } },
                (const char *const[]){ NULL });
    assert_list(s,
                &(struct store_sandbox_filter){ .metadata = (const char *[]){ "missing=a", NULL } },
                (const char *const[]){ NULL });
    assert_int_equal(
        store_sandbox_list(
            s, &(struct store_sandbox_filter){ .metadata = (const char *[]){ "team", NULL } },
            &list, &n),
        -EINVAL);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_store_sandbox_list_pagination(void **state)
{
    struct store *s = S(state);
    char ids[25][21], *expected[25];
    const char *after = NULL;
    char last[21] = "";
    size_t seen = 0, pages = 0;

    /* Three rows share each created_at and ids are not in insertion order,
     * so the id tiebreak and the strictly-after cursor are both exercised. */
    for (size_t i = 0; i < 25; i++) {
        struct store_sandbox sb;

        snprintf(ids[i], sizeof(ids[i]), "sb%018zu", (i * 7) % 25);
        sb = sandbox(ids[i], 1000 + (int64_t)(i / 3), i % 5 == 4 ? "paused" : "running");
        assert_int_equal(store_sandbox_insert(s, &sb), 0);
    }
    for (size_t g = 0; g < 25; g += 3) {
        size_t n = MIN((size_t)3, 25 - g);

        for (size_t i = 0; i < n; i++) {
            expected[g + i] = ids[g + i];
        }
        qsort(&expected[g], n, sizeof(expected[0]), cmp_str);
    }

    for (;;) {
        struct store_sandbox *list = NULL;
        size_t n = 0;

        assert_int_equal(
            store_sandbox_list(s, &(struct store_sandbox_filter){ .after_id = after, .limit = 10 },
                               &list, &n),
            0);
        if (n == 0) {
            assert_null(list);
            break;
        }
        pages++;
        assert_true(n <= 10);
        for (size_t i = 0; i < n; i++) {
            assert_true(seen < 25);
            assert_string_equal(list[i].id, expected[seen]);
            seen++;
        }
        snprintf(last, sizeof(last), "%s", list[n - 1].id);
        after = last;
        store_sandbox_list_free(list, n);
    }
    assert_int_equal(seen, 25);
    assert_int_equal(pages, 3);

    /* The cursor composes with filters: 5 paused rows, pages of 2. */
    after = NULL;
    seen = 0;
    for (;;) {
        struct store_sandbox *list = NULL;
        size_t n = 0;

        assert_int_equal(
            store_sandbox_list(
                s,
                &(struct store_sandbox_filter){
                    .after_id = after, .limit = 2, .states = (const char *[]){ "paused", NULL } },
                &list, &n),
            0);
        if (n == 0) {
            break;
        }
        for (size_t i = 0; i < n; i++) {
            assert_string_equal(list[i].state, "paused");
        }
        seen += n;
        snprintf(last, sizeof(last), "%s", list[n - 1].id);
        after = last;
        store_sandbox_list_free(list, n);
    }
    assert_int_equal(seen, 5);

    /* A cursor whose row is gone is an error, not an empty page. */
    {
        struct store_sandbox *list = NULL;
        size_t n = 0;

        assert_int_equal(
            store_sandbox_list(
                s, &(struct store_sandbox_filter){ .after_id = "sb0000000000000nope0" }, &list, &n),
            -ENOENT);
    }
}

/* Pages through f (its after_id and limit are overwritten) and returns every id seen. */
static size_t list_all_pages(struct store *s, struct store_sandbox_filter f, size_t page,
                             char ids[][21], size_t max)
{
    char last[21] = "";
    size_t seen = 0;

    f.limit = page;
    f.after_id = NULL;
    for (;;) {
        struct store_sandbox *list = NULL;
        size_t n = 0;

        assert_int_equal(store_sandbox_list(s, &f, &list, &n), 0);
        if (n == 0) {
            break;
        }
        assert_true(n <= page);
        for (size_t i = 0; i < n; i++) {
            assert_true(seen < max);
            snprintf(ids[seen++], 21, "%s", list[i].id);
        }
        snprintf(last, sizeof(last), "%s", list[n - 1].id);
        f.after_id = last;
        store_sandbox_list_free(list, n);
    }
    return seen;
}

static void test_store_sandbox_list_order_and_filters(void **state)
{
    struct store *s = S(state);
    char asc[12][21], desc[12][21], got[12][21];
    size_t n_asc, n_desc;

    /* Pairs share a created_at and ids run against insertion order within a pair. */
    for (size_t i = 0; i < 12; i++) {
        char id[21];
        struct store_sandbox sb;

        snprintf(id, sizeof(id), "sb%018zu", 100 - i);
        sb = sandbox(id, 1000 + (int64_t)(i / 2), "running");
        sb.template_id = i % 3 == 0 ? "python" : "base";
        sb.alias = i % 4 == 1 ? "tpl-alias" : NULL;
        sb.desired_state = i == 7 ? "killed" : "running";
        assert_int_equal(store_sandbox_insert(s, &sb), 0);
    }

    /* Descending is exactly ascending reversed, and pages (of any size) follow it. */
    n_asc = list_all_pages(s, (struct store_sandbox_filter){ 0 }, 100, asc, 12);
    n_desc = list_all_pages(s, (struct store_sandbox_filter){ .descending = true }, 100, desc, 12);
    assert_int_equal(n_asc, 12);
    assert_int_equal(n_desc, 12);
    for (size_t i = 0; i < 12; i++) {
        assert_string_equal(asc[i], desc[11 - i]);
    }
    /* Within a created_at the id decides: ascending, the smaller id first. */
    assert_true(strcmp(asc[0], asc[1]) < 0);
    for (size_t page = 1; page <= 5; page++) {
        assert_int_equal(
            list_all_pages(s, (struct store_sandbox_filter){ .descending = true }, page, got, 12),
            12);
        for (size_t i = 0; i < 12; i++) {
            assert_string_equal(got[i], desc[i]);
        }
        assert_int_equal(list_all_pages(s, (struct store_sandbox_filter){ 0 }, page, got, 12), 12);
        for (size_t i = 0; i < 12; i++) {
            assert_string_equal(got[i], asc[i]);
        }
    }

    /* template matches template_id or alias: i = 0,3,6,9 (python) and 1,5,9 (alias). */
    assert_list(s, &(struct store_sandbox_filter){ .template_id = "python", .descending = true },
                (const char *[]){ "sb000000000000000091", "sb000000000000000094",
                                  "sb000000000000000097", "sb000000000000000100", NULL });
    assert_list(s, &(struct store_sandbox_filter){ .template_id = "tpl-alias" },
                (const char *[]){ "sb000000000000000099", "sb000000000000000095",
                                  "sb000000000000000091", NULL });
    assert_list(s, &(struct store_sandbox_filter){ .template_id = "nope" },
                (const char *[]){ NULL });

    /* Time bounds: created_at >= after, < before (1000 + i/2). */
    assert_list(s,
                &(struct store_sandbox_filter){ .started_after = &(int64_t){ 1004 },
                                                .started_before = &(int64_t){ 1005 } },
                (const char *[]){ "sb000000000000000091", "sb000000000000000092", NULL });
    assert_list(s, &(struct store_sandbox_filter){ .started_after = &(int64_t){ 1006 } },
                (const char *[]){ NULL });
    assert_list(s, &(struct store_sandbox_filter){ .started_before = &(int64_t){ 1000 } },
                (const char *[]){ NULL });
    assert_list(
        s,
        &(struct store_sandbox_filter){ .started_before = &(int64_t){ 1001 }, .descending = true },
        (const char *[]){ "sb000000000000000100", "sb000000000000000099", NULL });

    /* hide_dying leaves out i = 7 (desired killed), and pages stay full without it. */
    n_desc = list_all_pages(
        s, (struct store_sandbox_filter){ .hide_dying = true, .descending = true }, 3, got, 12);
    assert_int_equal(n_desc, 11);
    for (size_t i = 0; i < n_desc; i++) {
        assert_string_not_equal(got[i], "sb000000000000000093");
    }

    /* A descending cursor composes with filters. */
    assert_list(s,
                &(struct store_sandbox_filter){ .template_id = "python",
                                                .descending = true,
                                                .after_id = "sb000000000000000094" },
                (const char *[]){ "sb000000000000000097", "sb000000000000000100", NULL });
}

static void test_store_operations(void **state)
{
    struct store *s = S(state);
    struct store_sandbox sb = sandbox("sb00000000000000000a", 100, "running");
    struct store_operation ops[] = {
        operation("00000000000000000000000000000003", sb.id, "pending", 30),
        operation("00000000000000000000000000000002", NULL, "running", 10),
        operation("00000000000000000000000000000001", sb.id, "pending", 10),
        operation("00000000000000000000000000000004", NULL, "succeeded", 5),
        operation("00000000000000000000000000000005", NULL, "failed", 1),
    };
    struct store_operation got = { 0 }, *list = NULL;
    struct store_operation orphan =
        operation("0000000000000000000000000000000f", "sb000000000000000000", "pending", 1);
    size_t n = 0;

    assert_int_equal(store_sandbox_insert(s, &sb), 0);
    for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
        assert_int_equal(store_operation_insert(s, &ops[i]), 0);
    }
    assert_int_equal(store_operation_insert(s, &ops[0]), -EEXIST);
    /* The sandbox it names must exist. */
    assert_int_equal(store_operation_insert(s, &orphan), -ENOENT);

    assert_int_equal(store_operation_get(s, ops[0].id, &got), 0);
    assert_string_equal(got.id, ops[0].id);
    assert_string_equal(got.kind, "sandbox.create");
    assert_string_equal(got.sandbox_id, sb.id);
    assert_string_equal(got.state, "pending");
    assert_null(got.error);
    assert_null(got.result_json);
    assert_int_equal(got.created_at, 30);
    store_operation_release(&got);

    /* Oldest first, id breaks ties; finished ones are left out. */
    assert_int_equal(store_operation_list_unfinished(s, &list, &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(list[0].id, "00000000000000000000000000000001");
    assert_string_equal(list[1].id, "00000000000000000000000000000002");
    assert_string_equal(list[2].id, "00000000000000000000000000000003");
    assert_null(list[1].sandbox_id);
    store_operation_list_free(list, n);

    ops[0].state = "succeeded";
    ops[0].result_json = "{\"sandboxID\":\"sb00000000000000000a\",\"n\":[1,2.5,null]}";
    ops[0].updated_at = 40;
    assert_int_equal(store_operation_update(s, &ops[0]), 0);
    ops[1].state = "failed";
    ops[1].error = "node 'a' is gone";
    assert_int_equal(store_operation_update(s, &ops[1]), 0);
    assert_int_equal(store_operation_get(s, ops[1].id, &got), 0);
    assert_string_equal(got.state, "failed");
    assert_string_equal(got.error, "node 'a' is gone");
    store_operation_release(&got);
    assert_int_equal(store_operation_get(s, ops[0].id, &got), 0);
    assert_string_equal(got.result_json, ops[0].result_json);
    assert_int_equal(got.updated_at, 40);
    store_operation_release(&got);

    assert_int_equal(store_operation_list_unfinished(s, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].id, "00000000000000000000000000000001");
    store_operation_list_free(list, n);

    assert_int_equal(store_operation_update(s, &orphan), -ENOENT);
    assert_int_equal(store_operation_get(s, orphan.id, &got), -ENOENT);

    /* Deleting the sandbox keeps its operations and clears the link. */
    assert_int_equal(store_sandbox_delete(s, sb.id), 0);
    assert_int_equal(store_operation_get(s, ops[2].id, &got), 0);
    assert_null(got.sandbox_id);
    store_operation_release(&got);

    /* No unfinished operations: an empty list. */
    ops[2].state = "succeeded";
    ops[2].sandbox_id = NULL;
    assert_int_equal(store_operation_update(s, &ops[2]), 0);
    assert_int_equal(store_operation_list_unfinished(s, &list, &n), 0);
    assert_int_equal(n, 0);
    assert_null(list);
}

static void test_store_sandbox_update_fields(void **state)
{
    struct store *s = S(state);
    struct store_sandbox sb = sandbox("sb00000000000000000a", 100, "creating"), got = { 0 };
    struct store_sandbox patch = { .id = sb.id, .state = "running", .end_at = 777 };

    assert_int_equal(store_sandbox_insert(s, &sb), 0);
    /* Only the named columns change; the NULLs in patch are not written. */
    assert_int_equal(
        store_sandbox_update_fields(s, &patch, STORE_SANDBOX_STATE | STORE_SANDBOX_END_AT), 0);
    assert_int_equal(store_sandbox_get(s, sb.id, &got), 0);
    sb.state = "running";
    sb.end_at = 777;
    assert_sandbox_equal(&got, &sb);
    store_sandbox_release(&got);

    /* The setters: state + error, desired state, end time, each with updated_at. */
    assert_int_equal(store_sandbox_set_state(s, sb.id, "killed", "lost by its node", 300), 0);
    assert_int_equal(store_sandbox_set_desired_state(s, sb.id, "killed", 301), 0);
    assert_int_equal(store_sandbox_set_end_at(s, sb.id, 999, 302), 0);
    assert_int_equal(store_sandbox_get(s, sb.id, &got), 0);
    sb.state = "killed";
    sb.error = "lost by its node";
    sb.desired_state = "killed";
    sb.end_at = 999;
    sb.updated_at = 302;
    assert_sandbox_equal(&got, &sb);
    store_sandbox_release(&got);
    assert_int_equal(store_sandbox_set_state(s, sb.id, "running", NULL, 303), 0);
    assert_int_equal(store_sandbox_get(s, sb.id, &got), 0);
    assert_null(got.error);
    store_sandbox_release(&got);

    /* A required column cannot be cleared, an unknown row is -ENOENT, no fields -EINVAL. */
    patch.state = NULL;
    assert_int_equal(store_sandbox_update_fields(s, &patch, STORE_SANDBOX_STATE), -EINVAL);
    assert_int_equal(store_sandbox_update_fields(s, &patch, 0), -EINVAL);
    assert_int_equal(store_sandbox_update_fields(s, &patch, STORE_SANDBOX_ALL + 1), -EINVAL);
    assert_int_equal(store_sandbox_set_state(s, "sb0000000000000nope0", "running", NULL, 1),
                     -ENOENT);
    assert_int_equal(store_sandbox_set_end_at(s, "sb0000000000000nope0", 1, 1), -ENOENT);
    patch.metadata_json = "{\"a\":1}";
    assert_int_equal(store_sandbox_update_fields(s, &patch, STORE_SANDBOX_METADATA), -EINVAL);
}

#define OWNER_A "owner-a"
#define OWNER_B "owner-b"

static void test_store_operation_claim(void **state)
{
    struct store *s = S(state);
    struct store_sandbox a = sandbox("sb00000000000000000a", 100, "running");
    struct store_sandbox b = sandbox("sb00000000000000000b", 100, "running");
    struct store_operation ops[] = {
        operation("00000000000000000000000000000001", a.id, "pending", 10),
        operation("00000000000000000000000000000002", a.id, "pending", 20), /* behind 1 */
        operation("00000000000000000000000000000003", b.id, "pending", 30),
        operation("00000000000000000000000000000004", NULL, "succeeded", 5),
    };
    struct store_operation got = { 0 }, done = { 0 };

    assert_int_equal(store_sandbox_insert(s, &a), 0);
    assert_int_equal(store_sandbox_insert(s, &b), 0);
    for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
        assert_int_equal(store_operation_insert(s, &ops[i]), 0);
    }

    /* A sandbox's oldest unfinished operation. */
    assert_int_equal(store_operation_get_unfinished(s, a.id, &got), 0);
    assert_string_equal(got.id, ops[0].id);
    store_operation_release(&got);
    assert_int_equal(store_operation_get_unfinished(s, "sb0000000000000nope0", &got), -ENOENT);

    /* Oldest first; 2 waits for 1 (same sandbox), so B gets 3, then nothing is left. */
    assert_int_equal(store_operation_claim(s, OWNER_A, 1000, 2000, &got), 0);
    assert_string_equal(got.id, ops[0].id);
    assert_string_equal(got.state, "running");
    assert_string_equal(got.lease_owner, OWNER_A);
    assert_int_equal(got.lease_expires_at, 2000);
    assert_int_equal(got.attempts, 1);
    assert_int_equal(got.updated_at, 1000);
    store_operation_release(&got);
    assert_int_equal(store_operation_claim(s, OWNER_B, 1000, 100000, &got), 0);
    assert_string_equal(got.id, ops[2].id);
    store_operation_release(&got);
    assert_int_equal(store_operation_claim(s, OWNER_B, 1500, 2500, &got), -ENOENT);

    /* Renewal by the holder only; the other owner is told it lost. */
    assert_int_equal(store_operation_renew(s, ops[0].id, OWNER_A, 3000), 0);
    assert_int_equal(store_operation_renew(s, ops[0].id, OWNER_B, 9000), -ESTALE);
    /* Not expired at 2500 any more (renewed to 3000). */
    assert_int_equal(store_operation_claim(s, OWNER_B, 2500, 3500, &got), -ENOENT);

    /* Past the lease, another owner takes it over: attempts 2; the old owner cannot finish. */
    assert_int_equal(store_operation_claim(s, OWNER_B, 3000, 4000, &got), 0);
    assert_string_equal(got.id, ops[0].id);
    assert_string_equal(got.lease_owner, OWNER_B);
    assert_int_equal(got.attempts, 2);
    done = got;
    done.state = "succeeded";
    done.result_json = "{\"status\":200}";
    done.updated_at = 3100;
    assert_int_equal(store_operation_finish(s, &done, OWNER_A), -ESTALE);
    assert_int_equal(store_operation_renew(s, ops[0].id, OWNER_A, 9000), -ESTALE);
    assert_int_equal(store_operation_finish(s, &done, OWNER_B), 0);
    /* Finished: no second finish, no renewal. */
    assert_int_equal(store_operation_finish(s, &done, OWNER_B), -ESTALE);
    store_operation_release(&got);
    assert_int_equal(store_operation_get(s, ops[0].id, &got), 0);
    assert_string_equal(got.state, "succeeded");
    assert_string_equal(got.result_json, "{\"status\":200}");
    assert_null(got.lease_owner);
    assert_int_equal(got.lease_expires_at, 0);
    assert_int_equal(got.attempts, 2);
    store_operation_release(&got);
    assert_int_equal(store_operation_renew(s, ops[0].id, OWNER_B, 9000), -ESTALE);

    assert_int_equal(store_operation_get_unfinished(s, a.id, &got), 0);
    assert_string_equal(got.id, ops[1].id);
    store_operation_release(&got);

    /* Now 2 (sandbox a's next) is claimable. */
    assert_int_equal(store_operation_claim(s, OWNER_A, 3200, 4200, &got), 0);
    assert_string_equal(got.id, ops[1].id);
    store_operation_release(&got);

    /* Bad arguments; and no claim inside a transaction. */
    assert_int_equal(store_operation_claim(s, NULL, 1, 2, &got), -EINVAL);
    assert_int_equal(store_operation_claim(s, OWNER_A, 2, 2, &got), -EINVAL);
    assert_int_equal(store_begin(s), 0);
    assert_int_equal(store_operation_claim(s, OWNER_A, 1, 2, &got), -EBUSY);
    assert_int_equal(store_rollback(s), 0);
}

/* The URL a second connection to the fixture's database uses (PGOPTIONS is already set). */
static void fixture_url(void **state, char *buf, size_t size)
{
    struct fixture *fx = *state;

    if (backend == BACKEND_SQLITE) {
        snprintf(buf, size, "sqlite:%s/%s", tmpdir, fx->name);
    } else {
        snprintf(buf, size, "%s", pg_url);
    }
}

#define CLAIM_PROCS 4
#define CLAIM_OPS 120
#define CLAIM_BUSY_TRIES 10

/*
 * Several processes, each with its own connection, claim and finish as fast
 * as they can: every operation must be claimed exactly once (what two
 * space-api replicas on one database rely on).
 */
static void test_store_operation_claim_concurrent(void **state)
{
    struct store *s = S(state);
    char url[4200], sb_id[21];
    int fds[CLAIM_PROCS][2];
    pid_t pids[CLAIM_PROCS];
    unsigned claimed[CLAIM_OPS] = { 0 };
    size_t total = 0;

    /* Ten sandboxes with 12 operations each, plus a few without a sandbox. */
    for (size_t i = 0; i < 10; i++) {
        struct store_sandbox sb;

        snprintf(sb_id, sizeof(sb_id), "sb%018zu", i);
        sb = sandbox(sb_id, 100, "running");
        assert_int_equal(store_sandbox_insert(s, &sb), 0);
    }
    assert_int_equal(store_begin(s), 0);
    for (size_t i = 0; i < CLAIM_OPS; i++) {
        char id[33];
        struct store_operation op;

        snprintf(id, sizeof(id), "%032zu", i);
        snprintf(sb_id, sizeof(sb_id), "sb%018zu", i % 10);
        op = operation(id, i % 17 == 0 ? NULL : sb_id, "pending", (int64_t)i);
        assert_int_equal(store_operation_insert(s, &op), 0);
    }
    assert_int_equal(store_commit(s), 0);
    fixture_url(state, url, sizeof(url));

    for (size_t p = 0; p < CLAIM_PROCS; p++) {
        assert_int_equal(pipe(fds[p]), 0);
        pids[p] = fork();
        assert_true(pids[p] >= 0);
        if (pids[p] == 0) {
            struct store *c = NULL;
            char owner[16];
            int misses = 0, busy = 0;

            close(fds[p][0]);
            snprintf(owner, sizeof(owner), "proc-%zu", p);
            if (store_open(url, &c) < 0) {
                _exit(2);
            }
            /* A miss can mean "the rest is claimed by others but unfinished": retry a while.
             * -EIO is SQLite's "database is locked" after its busy timeout, which a loaded
             * machine (ASan, other jobs) can exceed: like the controller, try again (the
             * claim did not happen; a finish still holds its lease). A few in a row, at
             * BUSY_TIMEOUT_MS each, mean a real failure. */
            while (misses < 200) {
                struct store_operation op = { 0 };
                int64_t now = (int64_t)now_realtime();
                int r = store_operation_claim(c, owner, now, now + 600 * 1000000LL, &op);

                if (r == -ENOENT) {
                    misses++;
                    usleep(2000);
                    continue;
                }
                if (r == -EIO && ++busy < CLAIM_BUSY_TRIES) {
                    continue;
                }
                if (r < 0) {
                    _exit(3);
                }
                misses = 0;
                busy = 0;
                if (write(fds[p][1], op.id, 32) != 32) {
                    _exit(4);
                }
                free(op.state);
                op.state = strdup("succeeded");
                while ((r = store_operation_finish(c, &op, owner)) == -EIO &&
                       ++busy < CLAIM_BUSY_TRIES) {
                }
                if (r < 0) {
                    _exit(5);
                }
                busy = 0;
                store_operation_release(&op);
            }
            store_close(c);
            _exit(0);
        }
        close(fds[p][1]);
    }
    for (size_t p = 0; p < CLAIM_PROCS; p++) {
        char id[33] = "";
        int status = 0;

        while (read(fds[p][0], id, 32) == 32) {
            uint64_t n = strtoull(id, NULL, 10);

            assert_true(n < CLAIM_OPS);
            claimed[n]++;
            total++;
        }
        close(fds[p][0]);
        assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    assert_int_equal(total, CLAIM_OPS);
    for (size_t i = 0; i < CLAIM_OPS; i++) {
        struct store_operation got = { 0 };
        char id[33];

        assert_int_equal(claimed[i], 1);
        snprintf(id, sizeof(id), "%032zu", i);
        assert_int_equal(store_operation_get(s, id, &got), 0);
        assert_string_equal(got.state, "succeeded");
        assert_int_equal(got.attempts, 1);
        store_operation_release(&got);
    }
}

static void test_store_api_keys(void **state)
{
    struct store *s = S(state);
    struct store_api_key k1 = api_key("a0000000000000000000000000000001", "hash-1", 20);
    struct store_api_key k2 = api_key("a0000000000000000000000000000002", "hash-2", 10);
    struct store_api_key same_hash = api_key("a0000000000000000000000000000003", "hash-1", 30);
    struct store_api_key got = { 0 }, *list = NULL;
    size_t n = 0;

    assert_int_equal(store_api_key_list(s, &list, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(store_api_key_insert(s, &k1), 0);
    assert_int_equal(store_api_key_insert(s, &k2), 0);
    assert_int_equal(store_api_key_insert(s, &k1), -EEXIST);
    assert_int_equal(store_api_key_insert(s, &same_hash), -EEXIST);

    assert_int_equal(store_api_key_get_by_hash(s, "hash-1", &got), 0);
    assert_string_equal(got.id, k1.id);
    assert_string_equal(got.name, "ci key");
    assert_string_equal(got.prefix, "sk_1234");
    assert_string_equal(got.hash, "hash-1");
    assert_int_equal(got.created_at, 20);
    assert_int_equal(got.last_used_at, 0);
    store_api_key_release(&got);
    assert_int_equal(store_api_key_get_by_hash(s, "hash-9", &got), -ENOENT);

    assert_int_equal(store_api_key_list(s, &list, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].id, k2.id); /* oldest first */
    assert_string_equal(list[1].id, k1.id);
    store_api_key_list_free(list, n);

    assert_int_equal(store_api_key_touch(s, k1.id, 1700000000000000LL), 0);
    assert_int_equal(store_api_key_get_by_hash(s, "hash-1", &got), 0);
    assert_int_equal(got.last_used_at, 1700000000000000LL);
    store_api_key_release(&got);
    assert_int_equal(store_api_key_touch(s, "nope", 1), -ENOENT);

    assert_int_equal(store_api_key_delete(s, k1.id), 0);
    assert_int_equal(store_api_key_delete(s, k1.id), -ENOENT);
    assert_int_equal(store_api_key_get_by_hash(s, "hash-1", &got), -ENOENT);
    /* Its hash is free again. */
    assert_int_equal(store_api_key_insert(s, &same_hash), 0);
    assert_int_equal(store_api_key_list(s, &list, &n), 0);
    assert_int_equal(n, 2);
    store_api_key_list_free(list, n);
}

static void test_store_transactions(void **state)
{
    struct store *s = S(state);
    struct store_sandbox a = sandbox("sb00000000000000000a", 100, "creating");
    struct store_sandbox b = sandbox("sb00000000000000000b", 101, "creating");
    struct store_operation op = operation("00000000000000000000000000000001", a.id, "pending", 1);
    struct store_sandbox got = { 0 };
    struct store_operation got_op = { 0 };

    /* Rollback undoes both rows. */
    assert_int_equal(store_begin(s), 0);
    assert_int_equal(store_begin(s), -EBUSY);
    assert_int_equal(store_migrate(s), -EBUSY);
    assert_int_equal(store_sandbox_insert(s, &a), 0);
    assert_int_equal(store_operation_insert(s, &op), 0);
    assert_int_equal(store_sandbox_get(s, a.id, &got), 0); /* visible inside */
    store_sandbox_release(&got);
    assert_int_equal(store_rollback(s), 0);
    assert_int_equal(store_sandbox_get(s, a.id, &got), -ENOENT);
    assert_int_equal(store_operation_get(s, op.id, &got_op), -ENOENT);

    /* Commit keeps them. */
    assert_int_equal(store_begin(s), 0);
    assert_int_equal(store_sandbox_insert(s, &a), 0);
    assert_int_equal(store_operation_insert(s, &op), 0);
    assert_int_equal(store_commit(s), 0);
    assert_int_equal(store_sandbox_get(s, a.id, &got), 0);
    store_sandbox_release(&got);
    assert_int_equal(store_operation_get(s, op.id, &got_op), 0);
    store_operation_release(&got_op);

    /* A failed statement fails alone; the transaction goes on. */
    assert_int_equal(store_begin(s), 0);
    assert_int_equal(store_sandbox_insert(s, &a), -EEXIST);
    assert_int_equal(
        store_operation_insert(s, &(struct store_operation){ .id = "0f",
                                                             .kind = "k",
                                                             .state = "pending",
                                                             .sandbox_id = "missing" }),
        -ENOENT);
    assert_int_equal(store_sandbox_insert(s, &b), 0);
    a.state = "running";
    assert_int_equal(store_sandbox_update(s, &a), 0);
    assert_int_equal(store_commit(s), 0);
    assert_int_equal(store_sandbox_get(s, b.id, &got), 0);
    store_sandbox_release(&got);
    assert_int_equal(store_sandbox_get(s, a.id, &got), 0);
    assert_string_equal(got.state, "running");
    store_sandbox_release(&got);

    /* Outside a transaction: commit is a misuse, rollback a no-op. */
    assert_int_equal(store_commit(s), -EINVAL);
    assert_int_equal(store_rollback(s), 0);
}

/* PRAGMA synchronous on SQLite (2 FULL, 1 NORMAL); -1 elsewhere. */
static int64_t synchronous(struct store *s)
{
    struct store_int64_row row = { 0 };

    if (strcmp(store_kind(s), "sqlite") != 0) {
        return -1;
    }
    assert_true(
        s->driver->run(s, "PRAGMA synchronous", false, NULL, 0, store_row_int64, &row, NULL) >= 0);
    assert_true(row.found);
    return row.value;
}

static void test_store_relaxed(void **state)
{
    struct store *s = S(state);
    struct store_sandbox a = sandbox("sb00000000000000000a", 100, "creating"), got = { 0 };
    struct store_operation op = operation("00000000000000000000000000000001", a.id, "pending", 1),
                           claimed = { 0 };
    bool sqlite = strcmp(store_kind(s), "sqlite") == 0;

    assert_int_equal(synchronous(s), sqlite ? 2 : -1); /* full unless asked */
    /* Relaxed inside, full again after a rollback and after a commit; nested: -EBUSY. */
    assert_int_equal(store_begin_relaxed(s), 0);
    assert_int_equal(store_begin_relaxed(s), -EBUSY);
    assert_int_equal(store_begin(s), -EBUSY);
    assert_int_equal(synchronous(s), sqlite ? 1 : -1);
    assert_int_equal(store_sandbox_insert(s, &a), 0);
    assert_int_equal(store_rollback(s), 0);
    assert_int_equal(synchronous(s), sqlite ? 2 : -1);
    assert_int_equal(store_sandbox_get(s, a.id, &got), -ENOENT);
    assert_int_equal(store_begin_relaxed(s), 0);
    assert_int_equal(store_sandbox_insert(s, &a), 0);
    assert_int_equal(store_operation_insert(s, &op), 0);
    assert_int_equal(store_commit(s), 0);
    assert_int_equal(synchronous(s), sqlite ? 2 : -1);
    assert_int_equal(store_sandbox_get(s, a.id, &got), 0);
    store_sandbox_release(&got);
    /* A claim is a relaxed transaction of its own: refused inside one, full after it. */
    assert_int_equal(store_begin(s), 0);
    assert_int_equal(store_operation_claim(s, "owner-1", 10, 20, &claimed), -EBUSY);
    assert_int_equal(store_rollback(s), 0);
    assert_int_equal(store_operation_claim(s, "owner-1", 10, 20, &claimed), 0);
    assert_string_equal(claimed.id, op.id);
    store_operation_release(&claimed);
    assert_int_equal(store_operation_claim(s, "owner-2", 11, 21, &claimed), -ENOENT);
    assert_int_equal(synchronous(s), sqlite ? 2 : -1);
}

static void test_store_strings_roundtrip(void **state)
{
    struct store *s = S(state);
    struct store_sandbox sb = sandbox("sb00000000000000000a", 100, "running"), got = { 0 };
    const size_t huge_len = 1024 * 1024;
    char *huge = malloc(huge_len + 1);
    const char *metadata = "{\"q\":\"it's \\\"quoted\\\" \\\\ back\\nslash\",\"ключ\":\"🚀\"}";

    assert_non_null(huge);
    for (size_t i = 0; i < huge_len; i++) {
        huge[i] = (char)('a' + i % 26);
    }
    huge[huge_len] = '\0';

    sb.template_id = "'; DROP TABLE sandboxes; --";
    sb.alias = "\"double\" 'single' `back` \\ %s %n ? $1 :name @p";
    sb.client_id = "日本語 ünïcödé 🚀 \xf4\x8f\xbf\xbf"; /* U+10FFFF, the last code point */
    sb.error = huge;
    sb.envd_access_token = "\x01\x02\t\n\r\x1b[31m\x7f end";
    sb.metadata_json = (char *)metadata;
    sb.env_json = "{\"A\":\"x=y;z\",\"EMPTY\":\"\"}";
    sb.node_id = "";
    sb.vcpus = INT64_MAX;
    sb.memory_mb = INT64_MIN;
    sb.created_at = -1;
    assert_int_equal(store_sandbox_insert(s, &sb), 0);
    assert_int_equal(store_sandbox_get(s, sb.id, &got), 0);
    assert_sandbox_equal(&got, &sb);
    assert_int_equal(strlen(got.error), huge_len);
    store_sandbox_release(&got);

    assert_list(
        s,
        &(struct store_sandbox_filter){
            .metadata = (const char *[]){ "q=it's \"quoted\" \\ back\nslash", "ключ=🚀", NULL } },
        (const char *const[]){ sb.id, NULL });

    /* A huge metadata value is fine too. */
    {
        char *big = malloc(huge_len + 32);

        assert_non_null(big);
        snprintf(big, huge_len + 32, "{\"k\":\"%s\"}", huge);
        sb.metadata_json = big;
        assert_int_equal(store_sandbox_update(s, &sb), 0);
        assert_int_equal(store_sandbox_get(s, sb.id, &got), 0);
        assert_string_equal(got.metadata_json, big);
        store_sandbox_release(&got);
        free(big);
    }
    free(huge);
}

static void test_store_bad_input(void **state)
{
    struct store *s = S(state);
    struct store_sandbox sb = sandbox("sb00000000000000000a", 100, "running"), got = { 0 };
    struct store_operation op = operation("00000000000000000000000000000001", NULL, "pending", 1);
    struct store_sandbox *list = NULL;
    size_t n = 0;
    const char *const bad_utf8[] = {
        "\xff",
        "\xc0\x80",         /* overlong NUL */
        "\xed\xa0\x80",     /* surrogate */
        "\xf4\x90\x80\x80", /* past U+10FFFF */
        "abc\xe2\x82",      /* truncated */
    };
    const char *const bad_metadata[] = {
        "{",
        "[]",
        "\"x\"",
        "{\"a\":1}",
        "{\"a\":null}",
        "{\"a\":\"1\",\"a\":\"2\"}",
        "{\"a\":\"\\u0000\"}",
        "{\"a\":\"\\ud800\"}",
        "{\"a\":\"b\"} trailing",
        "",
    };

    for (size_t i = 0; i < ARRAY_SIZE(bad_utf8); i++) {
        struct store_sandbox bad = sb;

        bad.template_id = (char *)bad_utf8[i];
        assert_int_equal(store_sandbox_insert(s, &bad), -EINVAL);
        assert_int_equal(store_sandbox_get(s, bad_utf8[i], &got), -EINVAL);
        assert_int_equal(store_sandbox_list(s,
                                            &(struct store_sandbox_filter){
                                                .states = (const char *[]){ bad_utf8[i], NULL } },
                                            &list, &n),
                         -EINVAL);
    }
    for (size_t i = 0; i < ARRAY_SIZE(bad_metadata); i++) {
        struct store_sandbox bad = sb;

        bad.metadata_json = (char *)bad_metadata[i];
        assert_int_equal(store_sandbox_insert(s, &bad), -EINVAL);
    }
    sb.env_json = "[1]";
    assert_int_equal(store_sandbox_insert(s, &sb), -EINVAL);
    sb.env_json = NULL;

    /* Required fields. */
    sb.template_id = NULL;
    assert_int_equal(store_sandbox_insert(s, &sb), -EINVAL);
    sb.template_id = "base";
    sb.id = NULL;
    assert_int_equal(store_sandbox_insert(s, &sb), -EINVAL);
    assert_int_equal(store_sandbox_update(s, &sb), -EINVAL);
    sb.id = "sb00000000000000000a";
    assert_int_equal(store_sandbox_insert(s, NULL), -EINVAL);
    assert_int_equal(store_sandbox_get(s, NULL, &got), -EINVAL);
    assert_int_equal(store_sandbox_get(s, sb.id, NULL), -EINVAL);
    assert_int_equal(store_sandbox_delete(s, NULL), -EINVAL);
    assert_int_equal(store_sandbox_list(s, NULL, NULL, &n), -EINVAL);

    op.result_json = "{not json";
    assert_int_equal(store_operation_insert(s, &op), -EINVAL);
    op.result_json = "42";
    op.kind = NULL;
    assert_int_equal(store_operation_insert(s, &op), -EINVAL);
    op.kind = "sandbox.kill";
    assert_int_equal(store_operation_insert(s, &op), 0);

    assert_int_equal(store_api_key_insert(s, &(struct store_api_key){ .id = "x" }), -EINVAL);
    assert_int_equal(store_api_key_get_by_hash(s, NULL, &(struct store_api_key){ 0 }), -EINVAL);

    /* Nothing bad got in; the good sandbox still does. */
    assert_int_equal(store_sandbox_list(s, NULL, &list, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(store_sandbox_insert(s, &sb), 0);

    assert_int_equal(store_migrate(NULL), -EINVAL);
    assert_int_equal(store_begin(NULL), -EINVAL);
    assert_null(store_kind(NULL));
    assert_null(store_close(NULL));
}

static void test_store_open_bad(void **state)
{
    struct store *s = NULL;

    assert_int_equal(store_open(NULL, &s), -EINVAL);
    assert_int_equal(store_open("", &s), -EINVAL);
    assert_int_equal(store_open("sqlite:", &s), -EINVAL);
    assert_int_equal(store_open("\xff", &s), -EINVAL);
    assert_int_equal(store_open("sqlite:/nonexistent-dir/a/b/store.db", &s), -EIO);
    assert_int_equal(store_open("postgresql:///nope?host=/nonexistent-dir&connect_timeout=2", &s),
                     -EIO);
    assert_int_equal(store_open("postgres://%zz", &s), -EIO);
    assert_null(s);
}

/* ---- PostgreSQL only ---- */

/* Ends the store's server session, as a server restart or an idle timeout would. */
static void pg_kill_session(const char *name)
{
    char sql[256];

    snprintf(sql, sizeof(sql),
             "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '%s'",
             name);
    pg_admin_exec(sql);
    /* pg_terminate_backend() only signals; wait until the session is gone. */
    snprintf(sql, sizeof(sql), "SELECT 1 FROM pg_stat_activity WHERE application_name = '%s'",
             name);
    for (unsigned i = 0;; i++) {
        PGresult *res = PQexec(pg_admin, sql);
        int rows = PQntuples(res);

        PQclear(res);
        if (rows == 0) {
            break;
        }
        assert_true(i < 500);
        sleep_usec(10 * USEC_PER_MSEC);
    }
}

static void test_store_pg_reconnect(void **state)
{
    struct fixture *fx = *state;
    struct store *s = fx->store;
    struct store_sandbox a = sandbox("sb00000000000000000a", 100, "running");
    struct store_sandbox b = sandbox("sb00000000000000000b", 101, "running");
    struct store_sandbox got = { 0 };

    assert_int_equal(store_sandbox_insert(s, &a), 0);

    /* Outside a transaction the statement is retried on a new connection. */
    pg_kill_session(fx->name);
    assert_int_equal(store_sandbox_get(s, a.id, &got), 0);
    store_sandbox_release(&got);

    /* Inside one it fails, and so does the commit: the transaction is gone. */
    assert_int_equal(store_begin(s), 0);
    assert_int_equal(store_sandbox_insert(s, &b), 0);
    pg_kill_session(fx->name);
    assert_int_equal(store_sandbox_get(s, a.id, &got), -EIO);
    assert_int_equal(store_commit(s), -EIO);
    /* The next statement reconnects; b was never committed. */
    assert_int_equal(store_sandbox_get(s, b.id, &got), -ENOENT);
    assert_int_equal(store_sandbox_get(s, a.id, &got), 0);
    store_sandbox_release(&got);

    /* Same, ended with a rollback. */
    assert_int_equal(store_begin(s), 0);
    pg_kill_session(fx->name);
    assert_int_equal(store_sandbox_insert(s, &b), -EIO);
    assert_int_equal(store_rollback(s), 0);
    assert_int_equal(store_sandbox_insert(s, &b), 0);
}

/* ---- main ---- */

#define STORE_TESTS                                                                                \
    cmocka_unit_test_setup_teardown(test_store_migrate_idempotent, setup, teardown),               \
        cmocka_unit_test_setup_teardown(test_store_unmigrated_is_eio, setup_unmigrated, teardown), \
        cmocka_unit_test_setup_teardown(test_store_sandbox_crud, setup, teardown),                 \
        cmocka_unit_test_setup_teardown(test_store_sandbox_duplicate, setup, teardown),            \
        cmocka_unit_test_setup_teardown(test_store_sandbox_network, setup, teardown),              \
        cmocka_unit_test_setup_teardown(test_store_egress_audit, setup, teardown),                 \
        cmocka_unit_test_setup_teardown(test_store_egress_audit_batch, setup, teardown),           \
        cmocka_unit_test_setup_teardown(test_store_egress_audit_bad_input, setup, teardown),       \
        cmocka_unit_test_setup_teardown(test_store_egress_audit_secret, setup, teardown),          \
        cmocka_unit_test_setup_teardown(test_store_secrets, setup, teardown),                      \
        cmocka_unit_test_setup_teardown(test_store_secrets_sweep, setup, teardown),                \
        cmocka_unit_test_setup_teardown(test_store_snapshots, setup, teardown),                    \
        cmocka_unit_test_setup_teardown(test_store_snapshot_source, setup, teardown),              \
        cmocka_unit_test_setup_teardown(test_store_snapshot_policies, setup, teardown),            \
        cmocka_unit_test_setup_teardown(test_store_secrets_bad_input, setup, teardown),            \
        cmocka_unit_test_setup_teardown(test_store_sandbox_list_states, setup, teardown),          \
        cmocka_unit_test_setup_teardown(test_store_sandbox_list_metadata, setup, teardown),        \
        cmocka_unit_test_setup_teardown(test_store_sandbox_list_pagination, setup, teardown),      \
        cmocka_unit_test_setup_teardown(test_store_sandbox_list_order_and_filters, setup,          \
                                        teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_store_operations, setup, teardown),                   \
        cmocka_unit_test_setup_teardown(test_store_sandbox_update_fields, setup, teardown),        \
        cmocka_unit_test_setup_teardown(test_store_operation_claim, setup, teardown),              \
        cmocka_unit_test_setup_teardown(test_store_operation_claim_concurrent, setup, teardown),   \
        cmocka_unit_test_setup_teardown(test_store_api_keys, setup, teardown),                     \
        cmocka_unit_test_setup_teardown(test_store_transactions, setup, teardown),                 \
        cmocka_unit_test_setup_teardown(test_store_relaxed, setup, teardown),                      \
        cmocka_unit_test_setup_teardown(test_store_strings_roundtrip, setup, teardown),            \
        cmocka_unit_test_setup_teardown(test_store_bad_input, setup, teardown),                    \
        cmocka_unit_test_setup_teardown(test_store_token_sealed_at_rest, setup, teardown),         \
        cmocka_unit_test_setup_teardown(test_store_token_swapped_rows, setup, teardown),           \
        cmocka_unit_test_setup_teardown(test_store_token_wrong_key, setup, teardown),              \
        cmocka_unit_test_setup_teardown(test_store_token_legacy_plaintext, setup_unmigrated,       \
                                        teardown)

static int run_sqlite(void)
{
    const struct CMUnitTest tests[] = {
        STORE_TESTS,
        cmocka_unit_test(test_store_open_bad),
    };
    const char *base = getenv("TMPDIR");
    int r;

    snprintf(tmpdir, sizeof(tmpdir), "%s/test-store-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    backend = BACKEND_SQLITE;
    r = cmocka_run_group_tests_name("store-sqlite", tests, NULL, NULL);
    (void)rm_rf(tmpdir);
    return r;
}

static int run_pg(void)
{
    const struct CMUnitTest tests[] = {
        STORE_TESTS,
        cmocka_unit_test_setup_teardown(test_store_pg_reconnect, setup, teardown),
    };
    int r;

    pg_admin = PQconnectdb(pg_url);
    if (PQstatus(pg_admin) != CONNECTION_OK) {
        fprintf(stderr, "test-store: cannot connect to SPACE_TEST_PG_URL: %s",
                PQerrorMessage(pg_admin));
        PQfinish(pg_admin);
        return 1;
    }
    /* DROP SCHEMA ... CASCADE lists every table it drops otherwise. */
    pg_admin_exec("SET client_min_messages = warning");
    backend = BACKEND_PG;
    r = cmocka_run_group_tests_name("store-postgresql", tests, NULL, NULL);
    PQfinish(pg_admin);
    return r;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "all";
    bool sqlite = strcmp(which, "sqlite") == 0 || strcmp(which, "all") == 0;
    bool pg = strcmp(which, "pg") == 0 || strcmp(which, "all") == 0;
    int r = 0;

    if (!sqlite && !pg) {
        fprintf(stderr, "usage: test-store [sqlite|pg]\n");
        return 2;
    }
    /* Exercise the debug messages, which carry the databases' errors. */
    log_set_level(LOG_LEVEL_DEBUG);
    pg_url = getenv("SPACE_TEST_PG_URL");
    if (pg_url && !*pg_url) {
        pg_url = NULL;
    }
    if (sqlite) {
        r = run_sqlite();
    }
    if (pg) {
        if (!pg_url) {
            printf("test-store: SPACE_TEST_PG_URL is unset: PostgreSQL tests SKIPPED "
                   "(start one with: export SPACE_TEST_PG_URL=$(tools/pg-test.sh start))\n");
            return sqlite ? r : 77;
        }
        r |= run_pg();
    }
    return r;
}
