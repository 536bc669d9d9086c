/*
 * The store seam's front and every verb: store_open() picks a driver from
 * the URL; each store_*() verb validates its arguments and runs its SQL,
 * written once here, through the driver's run() (store-internal.h); and
 * store_migrate() applies the embedded migrations. The drivers
 * (store-sqlite.c, store-pg.c) know nothing about sandboxes or operations.
 *
 * Validation happens here, once, so both databases see the same input and
 * give the same answer. Every string must be valid UTF-8 (PostgreSQL rejects
 * anything else, SQLite would store it, so we reject it in both: -EINVAL).
 * metadata_json must be a JSON object whose values are all strings and
 * env_json a JSON object (NULL stands for "{}"); result_json, when set, any
 * JSON value. Duplicate object keys and "\u0000" are rejected.
 *
 * Metadata filtering: the metadata object is stored once, as JSON text in
 * sandboxes.metadata, and each key=value pair of a filter is tested with the
 * database's own JSON functions (SQLite json_each(), PostgreSQL
 * jsonb ->> key), compared as exact strings. A separate key/value table
 * would be indexable, but it is a second copy that every insert and update
 * must keep in sync inside a transaction; a host holds thousands of
 * sandboxes, not millions, and the list query already scans by
 * (created_at, id), so one source of truth wins. Because the values are
 * validated to be strings, json_each()'s typed values and jsonb ->>'s text
 * agree.
 *
 * Listing: rows come ordered by (created_at, id), ascending or (descending)
 * newest first; the id breaks ties so the order is total and pages are
 * stable. after_id names the last row of the previous page, in the same
 * direction; its created_at is looked up first, so an
 * after_id whose row no longer exists is -ENOENT rather than a silently
 * empty page. Rows whose observed state is "killed" are left out unless
 * include_killed is set, whatever the states filter says. A metadata pair is
 * split at its first '=' (values may contain '='); a pair without '=' is
 * -EINVAL.
 *
 * Transactions are not nested: store_begin() inside one is -EBUSY. A failed
 * statement inside a transaction fails only itself in both databases
 * (store-pg.c wraps each statement in a savepoint, which is what SQLite
 * does natively), so "insert, on -EEXIST update" works inside a
 * transaction. A failed store_commit() leaves no transaction open;
 * store_rollback() outside a transaction is a no-op.
 *
 * Envd access tokens are sealed here, on the way in and out (store.h,
 * secretbox.h): insert and update_fields seal sb->envd_access_token with the
 * row's id as associated data into envd_access_token_sealed; get and list
 * open it again. Callers and drivers never see the sealed form, the
 * database never sees the plaintext.
 *
 * Migrations run in version order, each in its own transaction that first
 * takes the driver's migration lock (PostgreSQL: an advisory lock,
 * so several space-api replicas starting together apply each migration
 * once; SQLite: BEGIN IMMEDIATE already excludes other writers), creates
 * schema_migrations if needed, and skips versions already recorded.
 */
#include "api/store.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/secretbox.h"
#include "api/store-internal.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/strbuf.h"
#include "basic/time-util.h"

/* Column order shared by every statement that reads or writes whole rows. */
#define SANDBOX_COLUMNS                                                                            \
    "id, template_id, alias, client_id, state, desired_state, node_id, metadata, env, "            \
    "envd_access_token_sealed, error, vcpus, memory_mb, disk_mb, created_at, updated_at, end_at, " \
    "private_traffic, network, remaining_us, auto_pause, net_bps, disk_bps, disk_iops"
/* The same columns one by one, for column-level updates: entry i is bit i of
 * enum store_sandbox_field and parameter i + 2 of the whole-row statements. */
static const char *const sandbox_field_columns[] = {
    "template_id",
    "alias",
    "client_id",
    "state",
    "desired_state",
    "node_id",
    "metadata",
    "env",
    "envd_access_token_sealed",
    "error",
    "vcpus",
    "memory_mb",
    "disk_mb",
    "created_at",
    "updated_at",
    "end_at",
    "private_traffic",
    "network",
    "remaining_us",
    "auto_pause",
    "net_bps",
    "disk_bps",
    "disk_iops",
};
#define OPERATION_COLUMNS                                                                          \
    "id, kind, sandbox_id, state, error, result, created_at, updated_at, lease_owner, "            \
    "lease_expires_at, attempts"
#define API_KEY_COLUMNS "id, name, prefix, hash, created_at, last_used_at"
#define UNFINISHED "state IN ('pending', 'running')"

#define STORE_SANDBOX_N_PARAMS 24
#define STORE_OPERATION_N_PARAMS 11
#define STORE_API_KEY_N_PARAMS 6

static const char sql_migrations_table[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)";
static const char sql_migration_applied[] =
    "SELECT version FROM schema_migrations WHERE version = $1";
static const char sql_migration_record[] =
    "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)";

/* ON CONFLICT DO NOTHING (SQLite >= 3.24, PostgreSQL >= 9.5): a duplicate
 * changes no row, which change_one() reports as -EEXIST, and it does not
 * abort a PostgreSQL transaction. */
static const char sql_sandbox_insert[] = "INSERT INTO sandboxes (" SANDBOX_COLUMNS ") VALUES "
                                         "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, "
                                         "$14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24) "
                                         "ON CONFLICT DO NOTHING";
static const char sql_sandbox_get[] = "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE id = $1";
static const char sql_sandbox_cursor[] = "SELECT created_at FROM sandboxes WHERE id = $1";
static const char sql_sandbox_delete[] = "DELETE FROM sandboxes WHERE id = $1";
static const char sql_sandbox_set_state[] =
    "UPDATE sandboxes SET state = $2, error = $3, updated_at = $4 WHERE id = $1";
static const char sql_sandbox_set_desired_state[] =
    "UPDATE sandboxes SET desired_state = $2, updated_at = $3 WHERE id = $1";
static const char sql_sandbox_set_end_at[] =
    "UPDATE sandboxes SET end_at = $2, updated_at = $3 WHERE id = $1";
static const char sql_sandbox_set_network[] =
    "UPDATE sandboxes SET network = $2, updated_at = $3 WHERE id = $1";

static const char sql_operation_insert[] =
    "INSERT INTO operations (" OPERATION_COLUMNS ") VALUES "
    "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING";
static const char sql_operation_update[] =
    "UPDATE operations SET kind = $2, sandbox_id = $3, state = $4, error = $5, result = $6, "
    "created_at = $7, updated_at = $8, lease_owner = $9, lease_expires_at = $10, "
    "attempts = $11 WHERE id = $1";
static const char sql_operation_get[] =
    "SELECT " OPERATION_COLUMNS " FROM operations WHERE id = $1";
static const char sql_operation_list_unfinished[] =
    "SELECT " OPERATION_COLUMNS " FROM operations WHERE " UNFINISHED " ORDER BY created_at, id";
static const char sql_operation_get_unfinished[] =
    "SELECT " OPERATION_COLUMNS " FROM operations WHERE sandbox_id = $1 AND " UNFINISHED " "
    "ORDER BY created_at, id LIMIT 1";
static const char sql_operation_renew[] =
    "UPDATE operations SET lease_expires_at = $3 WHERE id = $1 AND lease_owner = $2 "
    "AND " UNFINISHED;
static const char sql_operation_finish[] =
    "UPDATE operations SET state = $3, error = $4, result = $5, updated_at = $6, "
    "lease_owner = NULL, lease_expires_at = 0 WHERE id = $1 AND lease_owner = $2";
/*
 * The claim, completed with the driver's claim_lock_clause (%s). The inner
 * SELECT picks the oldest claimable row; the outer UPDATE takes it and
 * re-checks the lease, so a row another claimer took in between is left
 * alone (PostgreSQL re-evaluates both WHERE clauses on the newest row
 * version after waiting for a lock; with SKIP LOCKED it rarely waits). The
 * NOT EXISTS keeps a sandbox's operations in order, one at a time.
 * $1 owner, $2 now, $3 lease_until.
 */
static const char sql_operation_claim_fmt[] =
    "UPDATE operations SET state = 'running', lease_owner = $1, lease_expires_at = $3, "
    "attempts = attempts + 1, updated_at = $2 "
    "WHERE id = (SELECT o.id FROM operations AS o WHERE o." UNFINISHED " "
    "AND o.lease_expires_at <= $2 "
    "AND NOT EXISTS (SELECT 1 FROM operations AS p WHERE p.sandbox_id = o.sandbox_id "
    "AND p." UNFINISHED " AND (p.created_at < o.created_at "
    "OR (p.created_at = o.created_at AND p.id < o.id))) "
    "ORDER BY o.created_at, o.id LIMIT 1%s) "
    "AND " UNFINISHED " AND lease_expires_at <= $2 "
    "RETURNING " OPERATION_COLUMNS;

static const char sql_api_key_insert[] =
    "INSERT INTO api_keys (" API_KEY_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6) "
    "ON CONFLICT DO NOTHING";
static const char sql_api_key_get_by_hash[] =
    "SELECT " API_KEY_COLUMNS " FROM api_keys WHERE hash = $1";
static const char sql_api_key_list[] =
    "SELECT " API_KEY_COLUMNS " FROM api_keys ORDER BY created_at, id";
static const char sql_api_key_delete[] = "DELETE FROM api_keys WHERE id = $1";
static const char sql_api_key_touch[] = "UPDATE api_keys SET last_used_at = $2 WHERE id = $1";

/* ---- validation ---- */

/* Strict UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF. */
static bool utf8_is_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    while (*p) {
        uint32_t cp, min;
        size_t n;

        if (*p < 0x80) {
            p++;
            continue;
        }
        if ((*p & 0xE0) == 0xC0) {
            n = 1, cp = *p & 0x1F, min = 0x80;
        } else if ((*p & 0xF0) == 0xE0) {
            n = 2, cp = *p & 0x0F, min = 0x800;
        } else if ((*p & 0xF8) == 0xF0) {
            n = 3, cp = *p & 0x07, min = 0x10000;
        } else {
            return false;
        }
        /* A NUL fails the continuation test, so we never read past it. */
        for (size_t i = 1; i <= n; i++) {
            if ((p[i] & 0xC0) != 0x80) {
                return false;
            }
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return false;
        }
        p += n + 1;
    }
    return true;
}

static bool text_ok(const char *s, bool required)
{
    return s ? utf8_is_valid(s) : !required;
}

enum json_shape {
    JSON_SHAPE_ANY,
    JSON_SHAPE_OBJECT,
    JSON_SHAPE_STRING_OBJECT, /* an object whose values are all strings */
};

static int json_check(const char *text, enum json_shape shape)
{
    json_error_t error;
    json_t *j = NULL;
    const char *key;
    json_t *value;
    int r = 0;

    /* jansson also rejects invalid UTF-8 and, without JSON_ALLOW_NUL, "\u0000",
     * which PostgreSQL's jsonb cannot hold. */
    j = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &error);
    if (!j) {
        if (json_error_code(&error) == json_error_out_of_memory) {
            return -ENOMEM;
        }
        log_debug("store: rejecting malformed JSON: %s", error.text);
        return -EINVAL;
    }
    if (shape != JSON_SHAPE_ANY && !json_is_object(j)) {
        r = -EINVAL;
        goto out;
    }
    if (shape == JSON_SHAPE_STRING_OBJECT) {
        json_object_foreach (j, key, value) {
            if (!json_is_string(value)) {
                log_debug("store: rejecting metadata: value of '%s' is not a string", key);
                r = -EINVAL;
                goto out;
            }
        }
    }
out:
    json_decref(j);
    return r;
}

/* Checks the columns in fields (and always the id). */
static int sandbox_validate(const struct store_sandbox *sb, unsigned fields)
{
    const struct {
        unsigned field;
        const char *text;
        bool required;
    } texts[] = {
        { STORE_SANDBOX_TEMPLATE_ID, sb->template_id, true },
        { STORE_SANDBOX_ALIAS, sb->alias, false },
        { STORE_SANDBOX_CLIENT_ID, sb->client_id, true },
        { STORE_SANDBOX_STATE, sb->state, true },
        { STORE_SANDBOX_DESIRED_STATE, sb->desired_state, true },
        { STORE_SANDBOX_NODE_ID, sb->node_id, false },
        { STORE_SANDBOX_ENVD_ACCESS_TOKEN, sb->envd_access_token, false },
        { STORE_SANDBOX_ERROR, sb->error, false },
    };
    int r;

    if (!text_ok(sb->id, true)) {
        return -EINVAL;
    }
    for (size_t i = 0; i < ARRAY_SIZE(texts); i++) {
        if ((fields & texts[i].field) && !text_ok(texts[i].text, texts[i].required)) {
            return -EINVAL;
        }
    }
    if ((fields & STORE_SANDBOX_METADATA) && sb->metadata_json) {
        r = json_check(sb->metadata_json, JSON_SHAPE_STRING_OBJECT);
        if (r < 0) {
            return r;
        }
    }
    if ((fields & STORE_SANDBOX_ENV) && sb->env_json) {
        r = json_check(sb->env_json, JSON_SHAPE_OBJECT);
        if (r < 0) {
            return r;
        }
    }
    if ((fields & STORE_SANDBOX_NETWORK) && sb->network_json) {
        r = json_check(sb->network_json, JSON_SHAPE_OBJECT);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

static int operation_validate(const struct store_operation *op)
{
    if (!text_ok(op->id, true) || !text_ok(op->kind, true) || !text_ok(op->sandbox_id, false) ||
        !text_ok(op->state, true) || !text_ok(op->error, false) ||
        !text_ok(op->lease_owner, false)) {
        return -EINVAL;
    }
    return op->result_json ? json_check(op->result_json, JSON_SHAPE_ANY) : 0;
}

static int api_key_validate(const struct store_api_key *key)
{
    if (!text_ok(key->id, true) || !text_ok(key->name, true) || !text_ok(key->prefix, true) ||
        !text_ok(key->hash, true)) {
        return -EINVAL;
    }
    return 0;
}

static int filter_validate(const struct store_sandbox_filter *f)
{
    if (!text_ok(f->after_id, false) || !text_ok(f->template_id, false)) {
        return -EINVAL;
    }
    for (size_t i = 0; f->states && f->states[i]; i++) {
        if (!utf8_is_valid(f->states[i])) {
            return -EINVAL;
        }
    }
    for (size_t i = 0; f->metadata && f->metadata[i]; i++) {
        if (!utf8_is_valid(f->metadata[i]) || !strchr(f->metadata[i], '=')) {
            return -EINVAL;
        }
    }
    return 0;
}

/* ---- rows: release ---- */

void store_sandbox_release(struct store_sandbox *sb)
{
    if (!sb) {
        return;
    }
    free(sb->id);
    free(sb->template_id);
    free(sb->alias);
    free(sb->client_id);
    free(sb->state);
    free(sb->desired_state);
    free(sb->node_id);
    free(sb->metadata_json);
    free(sb->env_json);
    if (sb->envd_access_token) {
        explicit_bzero(sb->envd_access_token, strlen(sb->envd_access_token));
    }
    free(sb->envd_access_token);
    free(sb->error);
    free(sb->network_json);
    *sb = (struct store_sandbox){ 0 };
}

void store_sandbox_list_free(struct store_sandbox *list, size_t n)
{
    for (size_t i = 0; list && i < n; i++) {
        store_sandbox_release(&list[i]);
    }
    free(list);
}

void store_operation_release(struct store_operation *op)
{
    if (!op) {
        return;
    }
    free(op->id);
    free(op->kind);
    free(op->sandbox_id);
    free(op->state);
    free(op->error);
    free(op->result_json);
    free(op->lease_owner);
    *op = (struct store_operation){ 0 };
}

void store_operation_list_free(struct store_operation *list, size_t n)
{
    for (size_t i = 0; list && i < n; i++) {
        store_operation_release(&list[i]);
    }
    free(list);
}

void store_api_key_release(struct store_api_key *key)
{
    if (!key) {
        return;
    }
    free(key->id);
    free(key->name);
    free(key->prefix);
    free(key->hash);
    *key = (struct store_api_key){ 0 };
}

void store_api_key_list_free(struct store_api_key *list, size_t n)
{
    for (size_t i = 0; list && i < n; i++) {
        store_api_key_release(&list[i]);
    }
    free(list);
}

/* ---- rows: parameters (column order of the *_COLUMNS lists) ---- */

/* sealed_token: sb->envd_access_token as token_seal() sealed it (the column holds only that). */
static void sandbox_params(const struct store_sandbox *sb, const char *sealed_token,
                           struct store_param *ret)
{
    const struct store_param p[STORE_SANDBOX_N_PARAMS] = {
        STORE_PARAM_TEXT(sb->id),
        STORE_PARAM_TEXT(sb->template_id),
        STORE_PARAM_TEXT(sb->alias),
        STORE_PARAM_TEXT(sb->client_id),
        STORE_PARAM_TEXT(sb->state),
        STORE_PARAM_TEXT(sb->desired_state),
        STORE_PARAM_TEXT(sb->node_id),
        STORE_PARAM_TEXT(sb->metadata_json ? sb->metadata_json : "{}"),
        STORE_PARAM_TEXT(sb->env_json ? sb->env_json : "{}"),
        STORE_PARAM_TEXT(sealed_token),
        STORE_PARAM_TEXT(sb->error),
        STORE_PARAM_INT(sb->vcpus),
        STORE_PARAM_INT(sb->memory_mb),
        STORE_PARAM_INT(sb->disk_mb),
        STORE_PARAM_INT(sb->created_at),
        STORE_PARAM_INT(sb->updated_at),
        STORE_PARAM_INT(sb->end_at),
        STORE_PARAM_INT(sb->private_traffic ? 1 : 0),
        STORE_PARAM_TEXT(sb->network_json),
        STORE_PARAM_INT(sb->remaining_us),
        STORE_PARAM_INT((sb->auto_pause ? 1 : 0) | (sb->auto_resume ? 2 : 0) |
                        (sb->auto_pause_disk ? 4 : 0)),
        STORE_PARAM_INT(sb->net_bps),
        STORE_PARAM_INT(sb->disk_bps),
        STORE_PARAM_INT(sb->disk_iops),
    };
    memcpy(ret, p, sizeof(p));
}

static void operation_params(const struct store_operation *op, struct store_param *ret)
{
    const struct store_param p[STORE_OPERATION_N_PARAMS] = {
        STORE_PARAM_TEXT(op->id),          STORE_PARAM_TEXT(op->kind),
        STORE_PARAM_TEXT(op->sandbox_id),  STORE_PARAM_TEXT(op->state),
        STORE_PARAM_TEXT(op->error),       STORE_PARAM_TEXT(op->result_json),
        STORE_PARAM_INT(op->created_at),   STORE_PARAM_INT(op->updated_at),
        STORE_PARAM_TEXT(op->lease_owner), STORE_PARAM_INT(op->lease_expires_at),
        STORE_PARAM_INT(op->attempts),
    };
    memcpy(ret, p, sizeof(p));
}

static void api_key_params(const struct store_api_key *key, struct store_param *ret)
{
    const struct store_param p[STORE_API_KEY_N_PARAMS] = {
        STORE_PARAM_TEXT(key->id),        STORE_PARAM_TEXT(key->name),
        STORE_PARAM_TEXT(key->prefix),    STORE_PARAM_TEXT(key->hash),
        STORE_PARAM_INT(key->created_at), STORE_PARAM_INT(key->last_used_at),
    };
    memcpy(ret, p, sizeof(p));
}

/* ---- rows: decoding ---- */

/*
 * Rows collected from a statement: pass store_rows_add as the row callback
 * and the struct as its userdata, then take the rows out. The init
 * functions pick the row type.
 */
struct store_rows {
    void *items;
    size_t n, alloc, size;
    int (*decode)(const struct store_value *cols, size_t n_cols, void *item);
    void (*release)(void *item);
};
static void store_rows_release(struct store_rows *rows);

/* Copies a text column; SQL NULL stays NULL. */
static int dup_text(const struct store_value *v, char **ret)
{
    char *p = NULL;

    if (!v->is_null && v->text) {
        p = strdup(v->text);
        if (!p) {
            return -ENOMEM;
        }
    }
    *ret = p;
    return 0;
}

static int dup_texts(const struct store_value *cols, char **const *fields, size_t n)
{
    int r;

    for (size_t i = 0; i < n; i++) {
        r = dup_text(&cols[i], fields[i]);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

static int sandbox_decode(const struct store_value *cols, size_t n_cols, void *item)
{
    struct store_sandbox sb = { 0 };
    char **const texts[] = {
        &sb.id,       &sb.template_id,       &sb.alias,   &sb.client_id,
        &sb.state,    &sb.desired_state,     &sb.node_id, &sb.metadata_json,
        &sb.env_json, &sb.envd_access_token, &sb.error,
    };
    int r;

    if (n_cols != STORE_SANDBOX_N_PARAMS) {
        return -EIO;
    }
    r = dup_texts(cols, texts, ARRAY_SIZE(texts));
    if (r < 0) {
        goto fail;
    }
    /* The header promises "{}" for "no metadata" and "no env". */
    if ((!sb.metadata_json && !(sb.metadata_json = strdup("{}"))) ||
        (!sb.env_json && !(sb.env_json = strdup("{}")))) {
        r = -ENOMEM;
        goto fail;
    }
    sb.vcpus = cols[11].integer;
    sb.memory_mb = cols[12].integer;
    sb.disk_mb = cols[13].integer;
    sb.created_at = cols[14].integer;
    sb.updated_at = cols[15].integer;
    sb.end_at = cols[16].integer;
    sb.private_traffic = cols[17].integer != 0;
    r = dup_text(&cols[18], &sb.network_json);
    if (r < 0) {
        goto fail;
    }
    sb.remaining_us = cols[19].integer;
    sb.auto_pause = (cols[20].integer & 1) != 0;
    sb.auto_resume = (cols[20].integer & 2) != 0;
    sb.auto_pause_disk = (cols[20].integer & 4) != 0;
    sb.net_bps = cols[21].integer;
    sb.disk_bps = cols[22].integer;
    sb.disk_iops = cols[23].integer;
    *(struct store_sandbox *)item = sb;
    return 0;
fail:
    store_sandbox_release(&sb);
    return r;
}

static int operation_decode(const struct store_value *cols, size_t n_cols, void *item)
{
    struct store_operation op = { 0 };
    char **const texts[] = {
        &op.id, &op.kind, &op.sandbox_id, &op.state, &op.error, &op.result_json,
    };
    int r;

    if (n_cols != STORE_OPERATION_N_PARAMS) {
        return -EIO;
    }
    r = dup_texts(cols, texts, ARRAY_SIZE(texts));
    if (r >= 0) {
        r = dup_text(&cols[8], &op.lease_owner);
    }
    if (r < 0) {
        store_operation_release(&op);
        return r;
    }
    op.created_at = cols[6].integer;
    op.updated_at = cols[7].integer;
    op.lease_expires_at = cols[9].integer;
    op.attempts = cols[10].integer;
    *(struct store_operation *)item = op;
    return 0;
}

static int api_key_decode(const struct store_value *cols, size_t n_cols, void *item)
{
    struct store_api_key key = { 0 };
    char **const texts[] = { &key.id, &key.name, &key.prefix, &key.hash };
    int r;

    if (n_cols != STORE_API_KEY_N_PARAMS) {
        return -EIO;
    }
    r = dup_texts(cols, texts, ARRAY_SIZE(texts));
    if (r < 0) {
        store_api_key_release(&key);
        return r;
    }
    key.created_at = cols[4].integer;
    key.last_used_at = cols[5].integer;
    *(struct store_api_key *)item = key;
    return 0;
}

static void sandbox_release_item(void *item)
{
    store_sandbox_release(item);
}

static void operation_release_item(void *item)
{
    store_operation_release(item);
}

static void api_key_release_item(void *item)
{
    store_api_key_release(item);
}

static void store_rows_init_sandbox(struct store_rows *rows)
{
    *rows = (struct store_rows){
        .size = sizeof(struct store_sandbox),
        .decode = sandbox_decode,
        .release = sandbox_release_item,
    };
}

static void store_rows_init_operation(struct store_rows *rows)
{
    *rows = (struct store_rows){
        .size = sizeof(struct store_operation),
        .decode = operation_decode,
        .release = operation_release_item,
    };
}

static void store_rows_init_api_key(struct store_rows *rows)
{
    *rows = (struct store_rows){
        .size = sizeof(struct store_api_key),
        .decode = api_key_decode,
        .release = api_key_release_item,
    };
}

static int store_rows_add(const struct store_value *cols, size_t n_cols, void *userdata)
{
    struct store_rows *rows = userdata;
    int r;

    if (rows->n == rows->alloc) {
        size_t alloc = rows->alloc ? rows->alloc * 2 : 8;
        void *items;

        if (alloc > SIZE_MAX / rows->size) {
            return -ENOMEM;
        }
        items = realloc(rows->items, alloc * rows->size);
        if (!items) {
            return -ENOMEM;
        }
        rows->items = items;
        rows->alloc = alloc;
    }
    r = rows->decode(cols, n_cols, (char *)rows->items + rows->n * rows->size);
    if (r < 0) {
        return r;
    }
    rows->n++;
    return 0;
}

static int store_rows_take_one(struct store_rows *rows, void *ret)
{
    if (rows->n == 0) {
        return -ENOENT;
    }
    memcpy(ret, rows->items, rows->size);
    /* The first row now belongs to *ret; drop the rest. */
    memmove(rows->items, (char *)rows->items + rows->size, (rows->n - 1) * rows->size);
    rows->n--;
    store_rows_release(rows);
    return 0;
}

static void *store_rows_take_all(struct store_rows *rows, size_t *ret_n)
{
    void *items = rows->n > 0 ? TAKE_PTR(rows->items) : NULL;

    *ret_n = rows->n;
    store_rows_release(rows);
    return items;
}

static void store_rows_release(struct store_rows *rows)
{
    for (size_t i = 0; rows->items && i < rows->n; i++) {
        rows->release((char *)rows->items + i * rows->size);
    }
    free(rows->items);
    rows->items = NULL;
    rows->n = rows->alloc = 0;
}

int store_row_int64(const struct store_value *cols, size_t n_cols, void *userdata)
{
    struct store_int64_row *row = userdata;

    if (n_cols != 1 || cols[0].is_null) {
        return -EIO;
    }
    row->value = cols[0].integer;
    row->found = true;
    return 0;
}

/* ---- the list query ---- */

/*
 * The statement store_sandbox_list() runs, built from the filter. Only
 * placeholders are written into sql; values go into params.
 */
struct store_query {
    char *sql;
    struct store_param *params;
    size_t n_params;
    char **owned; /* copies the params point into */
    size_t n_owned;
};
static void store_query_release(struct store_query *q);

static int sandbox_list_query(const struct store_sandbox_filter *f, int64_t cursor_created_at,
                              store_metadata_clause_fn metadata_clause, struct store_query *ret)
{
    struct strbuf sql = STRBUF_INIT;
    struct store_query q = { 0 };
    size_t n_states = 0, n_metadata = 0, max_params;
    int r;

    for (; f->states && f->states[n_states]; n_states++) {
    }
    for (; f->metadata && f->metadata[n_metadata]; n_metadata++) {
    }
    if (n_states > STORE_MAX_PARAMS || n_metadata > STORE_MAX_PARAMS / 2) {
        return -EINVAL;
    }
    max_params = n_states + 2 * n_metadata + 7;
    if (max_params > STORE_MAX_PARAMS) {
        return -EINVAL;
    }
    q.params = calloc(max_params, sizeof(*q.params));
    q.owned = calloc(n_metadata + 1, sizeof(*q.owned));
    if (!q.params || !q.owned) {
        r = -ENOMEM;
        goto fail;
    }

    r = strbuf_appends(&sql, "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE 1 = 1");
    if (r < 0) {
        goto fail;
    }
    if (!f->include_killed) {
        r = strbuf_appends(&sql, " AND state <> 'killed'");
        if (r < 0) {
            goto fail;
        }
    }
    if (f->states) {
        /* An empty list matches nothing; "IN ()" is not SQL. */
        r = strbuf_appends(&sql, n_states == 0 ? " AND 1 = 0" : " AND state IN (");
        for (size_t i = 0; r >= 0 && i < n_states; i++) {
            q.params[q.n_params++] = STORE_PARAM_TEXT(f->states[i]);
            r = strbuf_appendf(&sql, "%s$%zu", i > 0 ? ", " : "", q.n_params);
        }
        if (r >= 0 && n_states > 0) {
            r = strbuf_appends(&sql, ")");
        }
        if (r < 0) {
            goto fail;
        }
    }
    for (size_t i = 0; i < n_metadata; i++) {
        char *key, *eq;

        key = strdup(f->metadata[i]);
        if (!key) {
            r = -ENOMEM;
            goto fail;
        }
        q.owned[q.n_owned++] = key;
        eq = strchr(key, '=');
        if (!eq) {
            r = -EINVAL;
            goto fail;
        }
        *eq = '\0';
        q.params[q.n_params++] = STORE_PARAM_TEXT(key);
        q.params[q.n_params++] = STORE_PARAM_TEXT(eq + 1);
        r = strbuf_appends(&sql, " AND ");
        if (r >= 0) {
            r = metadata_clause(&sql, q.n_params - 1, q.n_params);
        }
        if (r < 0) {
            goto fail;
        }
    }
    if (f->hide_dying) {
        r = strbuf_appends(&sql, " AND desired_state <> 'killed'");
        if (r < 0) {
            goto fail;
        }
    }
    if (f->template_id) {
        q.params[q.n_params++] = STORE_PARAM_TEXT(f->template_id);
        r = strbuf_appendf(&sql, " AND (template_id = $%zu OR alias = $%zu)", q.n_params,
                           q.n_params);
        if (r < 0) {
            goto fail;
        }
    }
    if (f->started_after) {
        q.params[q.n_params++] = STORE_PARAM_INT(*f->started_after);
        r = strbuf_appendf(&sql, " AND created_at >= $%zu", q.n_params);
        if (r < 0) {
            goto fail;
        }
    }
    if (f->started_before) {
        q.params[q.n_params++] = STORE_PARAM_INT(*f->started_before);
        r = strbuf_appendf(&sql, " AND created_at < $%zu", q.n_params);
        if (r < 0) {
            goto fail;
        }
    }
    if (f->updated_after) {
        q.params[q.n_params++] = STORE_PARAM_INT(*f->updated_after);
        r = strbuf_appendf(&sql, " AND updated_at >= $%zu", q.n_params);
        if (r < 0) {
            goto fail;
        }
    }
    if (f->after_id) {
        /* Strictly after the cursor row in the listing's own direction, so a page never
         * repeats or skips a row, even among rows sharing a created_at. */
        const char op = f->descending ? '<' : '>';

        q.params[q.n_params++] = STORE_PARAM_INT(cursor_created_at);
        q.params[q.n_params++] = STORE_PARAM_TEXT(f->after_id);
        r = strbuf_appendf(&sql, " AND (created_at %c $%zu OR (created_at = $%zu AND id %c $%zu))",
                           op, q.n_params - 1, q.n_params - 1, op, q.n_params);
        if (r < 0) {
            goto fail;
        }
    }
    r = strbuf_appends(&sql, f->descending ? " ORDER BY created_at DESC, id DESC"
                                           : " ORDER BY created_at, id");
    if (r < 0) {
        goto fail;
    }
    if (f->limit > 0) {
        uint64_t limit = MIN((uint64_t)f->limit, (uint64_t)INT64_MAX);

        q.params[q.n_params++] = STORE_PARAM_INT((int64_t)limit);
        r = strbuf_appendf(&sql, " LIMIT $%zu", q.n_params);
        if (r < 0) {
            goto fail;
        }
    }
    q.sql = strbuf_detach(&sql, NULL);
    if (!q.sql) {
        r = -ENOMEM;
        goto fail;
    }
    *ret = q;
    return 0;
fail:
    strbuf_release(&sql);
    store_query_release(&q);
    return r;
}

static void store_query_release(struct store_query *q)
{
    free(q->sql);
    free(q->params);
    for (size_t i = 0; q->owned && i < q->n_owned; i++) {
        free(q->owned[i]);
    }
    free(q->owned);
    *q = (struct store_query){ 0 };
}

/* ---- statements over the driver ---- */

static int run(struct store *s, const char *sql, bool stable_sql, const struct store_param *params,
               size_t n_params, store_row_fn fn, void *userdata, uint64_t *ret_changes)
{
    return s->driver->run(s, sql, stable_sql, params, n_params, fn, userdata, ret_changes);
}

/* A statement that must change exactly one row: none is what "no row" means (-ENOENT for
 * an update, -EEXIST for an insert that hit ON CONFLICT DO NOTHING). */
static int change_one(struct store *s, const char *sql, bool stable_sql,
                      const struct store_param *params, size_t n_params, int none)
{
    uint64_t changes = 0;
    int r;

    r = run(s, sql, stable_sql, params, n_params, NULL, NULL, &changes);
    if (r < 0) {
        return r;
    }
    return changes > 0 ? 0 : none;
}

/* Runs a SELECT (or RETURNING statement) and moves its first row into *ret. */
static int get_one(struct store *s, const char *sql, const struct store_param *params,
                   size_t n_params, void (*init)(struct store_rows *), void *ret)
{
    struct store_rows rows;
    int r;

    init(&rows);
    r = run(s, sql, true, params, n_params, store_rows_add, &rows, NULL);
    if (r >= 0) {
        r = store_rows_take_one(&rows, ret);
    }
    store_rows_release(&rows);
    return r;
}

/* Runs a SELECT and returns all its rows as an array of the rows' type. */
static int get_all(struct store *s, const char *sql, bool stable_sql,
                   const struct store_param *params, size_t n_params,
                   void (*init)(struct store_rows *), void **ret, size_t *ret_n)
{
    struct store_rows rows;
    int r;

    init(&rows);
    r = run(s, sql, stable_sql, params, n_params, store_rows_add, &rows, NULL);
    if (r >= 0) {
        *ret = store_rows_take_all(&rows, ret_n);
    }
    store_rows_release(&rows);
    return r;
}

/* ---- envd access tokens at rest (store.h, secretbox.h) ---- */

/* The associated data of a sealed token: its column and row, so a sealed value copied into
 * another sandbox's row (or another column, later) does not open there. */
#define TOKEN_AAD_PREFIX "sandboxes.envd_access_token:"

static char *token_aad(const char *id)
{
    char *aad = NULL;

    return asprintf(&aad, TOKEN_AAD_PREFIX "%s", id) < 0 ? NULL : aad;
}

/* *ret: token sealed for row id, NULL when token is NULL. */
static int token_seal(struct store *s, const char *id, const char *token, char **ret)
{
    char *aad;
    int r;

    *ret = NULL;
    if (!token) {
        return 0;
    }
    if (!s->token_key) {
        return -ENOKEY;
    }
    aad = token_aad(id);
    if (!aad) {
        return -ENOMEM;
    }
    r = secretbox_seal(s->token_key, aad, token, ret);
    free(aad);
    return r;
}

/* A row was read with the sealed text in envd_access_token: replaces it by the plaintext. */
static int token_open_row(struct store *s, struct store_sandbox *sb)
{
    char *aad, *plain = NULL;
    int r;

    if (!sb->envd_access_token) {
        return 0;
    }
    if (!s->token_key) {
        r = -ENOKEY;
    } else if (!(aad = token_aad(sb->id))) {
        return -ENOMEM;
    } else {
        r = secretbox_open(s->token_key, aad, sb->envd_access_token, &plain);
        free(aad);
        if (r == -ENOMEM) {
            return r;
        }
    }
    free(sb->envd_access_token);
    sb->envd_access_token = plain;
    if (r < 0) {
        /* A killed sandbox's token opens nothing any more: read it as none. */
        if (sb->state && strcmp(sb->state, "killed") == 0) {
            return 0;
        }
        log_warning_errno(r, "store: cannot open the envd access token of sandbox %s: %m", sb->id);
    }
    return r;
}

static int token_open_rows(struct store *s, struct store_sandbox *rows, size_t n)
{
    int r;

    for (size_t i = 0; i < n; i++) {
        r = token_open_row(s, &rows[i]);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

int store_set_token_key(struct store *s, const struct secretbox_key *key)
{
    if (!s || !key) {
        return -EINVAL;
    }
    if (!s->token_key) {
        s->token_key = malloc(sizeof(*s->token_key));
        if (!s->token_key) {
            return -ENOMEM;
        }
    }
    *s->token_key = *key;
    return 0;
}

/* Row callback for a single text column; userdata is a char ** that gets a copy. */
static int row_text(const struct store_value *cols, size_t n_cols, void *userdata)
{
    char **ret = userdata;

    if (n_cols != 1 || cols[0].is_null || *ret) {
        return -EIO;
    }
    *ret = strdup(cols[0].text);
    return *ret ? 0 : -ENOMEM;
}

int store_token_key_check(struct store *s, char *ret_other)
{
    static const char sql[] = "SELECT envd_access_token_sealed FROM sandboxes "
                              "WHERE state <> 'killed' AND envd_access_token_sealed IS NOT NULL "
                              "AND substr(envd_access_token_sealed, 4, 16) <> $1 LIMIT 1";
    char *other = NULL, id[SECRETBOX_KEY_ID_LEN + 1] = "";
    int r;

    if (!s) {
        return -EINVAL;
    }
    if (!s->token_key) {
        return -ENOKEY;
    }
    const struct store_param p[] = { STORE_PARAM_TEXT(s->token_key->id) };
    r = run(s, sql, false, p, ARRAY_SIZE(p), row_text, &other, NULL);
    if (r < 0 || !other) {
        return r;
    }
    (void)secretbox_sealed_key_id(other, id);
    free(other);
    if (ret_other) {
        memcpy(ret_other, id, sizeof(id));
    }
    return -EKEYREJECTED;
}

/* (id, token) pairs: the plaintext tokens an older release left. */
struct legacy_tokens {
    char **ids, **tokens;
    size_t n, alloc;
};

static int legacy_token_add(const struct store_value *cols, size_t n_cols, void *userdata)
{
    struct legacy_tokens *l = userdata;

    if (n_cols != 2 || cols[0].is_null || cols[1].is_null) {
        return -EIO;
    }
    if (l->n == l->alloc) {
        size_t alloc = l->alloc ? l->alloc * 2 : 16;
        char **ids = reallocarray(l->ids, alloc, sizeof(*ids));

        if (!ids) {
            return -ENOMEM;
        }
        l->ids = ids;
        char **tokens = reallocarray(l->tokens, alloc, sizeof(*tokens));
        if (!tokens) {
            return -ENOMEM;
        }
        l->tokens = tokens;
        l->alloc = alloc;
    }
    l->ids[l->n] = strdup(cols[0].text);
    l->tokens[l->n] = strdup(cols[1].text);
    if (!l->ids[l->n] || !l->tokens[l->n]) {
        free(l->ids[l->n]);
        free(l->tokens[l->n]);
        return -ENOMEM;
    }
    l->n++;
    return 0;
}

/*
 * After migration 3's script, inside its transaction: killed rows lose their
 * token (no use to anyone), every other plaintext token is sealed into
 * envd_access_token_sealed and its plaintext cleared. Needs the key only if
 * there is something to seal, so a fresh database migrates without one.
 */
static int seal_legacy_tokens(struct store *s)
{
    static const char sql_drop_killed[] =
        "UPDATE sandboxes SET envd_access_token = NULL WHERE state = 'killed'";
    static const char sql_select[] = "SELECT id, envd_access_token FROM sandboxes "
                                     "WHERE envd_access_token IS NOT NULL ORDER BY id";
    static const char sql_seal[] = "UPDATE sandboxes SET envd_access_token_sealed = $2, "
                                   "envd_access_token = NULL WHERE id = $1";
    struct legacy_tokens l = { 0 };
    int r;

    r = run(s, sql_drop_killed, false, NULL, 0, NULL, NULL, NULL);
    if (r >= 0) {
        r = run(s, sql_select, false, NULL, 0, legacy_token_add, &l, NULL);
    }
    for (size_t i = 0; r >= 0 && i < l.n; i++) {
        char *sealed = NULL;

        r = token_seal(s, l.ids[i], l.tokens[i], &sealed);
        if (r >= 0) {
            const struct store_param p[] = { STORE_PARAM_TEXT(l.ids[i]), STORE_PARAM_TEXT(sealed) };
            r = run(s, sql_seal, false, p, ARRAY_SIZE(p), NULL, NULL, NULL);
        }
        free(sealed);
    }
    if (r == -ENOKEY) {
        log_error("store: %zu plaintext envd access tokens to seal, and no key", l.n);
    } else if (r >= 0 && l.n > 0) {
        log_info("store: sealed %zu envd access tokens left in plaintext", l.n);
    }
    for (size_t i = 0; i < l.n; i++) {
        explicit_bzero(l.tokens[i], strlen(l.tokens[i]));
        free(l.tokens[i]);
        free(l.ids[i]);
    }
    free(l.tokens);
    free(l.ids);
    return r;
}

/* Code that runs after a migration's script, in its transaction: what SQL cannot do. */
static const struct {
    int64_t version;
    int (*after)(struct store *s);
} migration_steps[] = {
    { 3, seal_legacy_tokens },
};

/* ---- open, close, transactions, migrations ---- */

static bool startswith(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int store_open(const char *url, struct store **ret)
{
    const struct store_driver *driver = &store_sqlite_driver;
    const char *target = url;
    struct store *s = NULL;
    int r;

    if (!url || !ret) {
        return -EINVAL;
    }
    if (startswith(url, "postgresql://") || startswith(url, "postgres://")) {
        driver = &store_pg_driver;
    } else if (startswith(url, "sqlite://")) {
        target = url + strlen("sqlite://");
    } else if (startswith(url, "sqlite:")) {
        target = url + strlen("sqlite:");
    }
    /* An empty name would make SQLite open a private temporary database. */
    if (!*target || !utf8_is_valid(target)) {
        return -EINVAL;
    }
    r = driver->open(target, &s);
    if (r < 0) {
        return r;
    }
    assert(s->driver == driver);
    *ret = s;
    return 0;
}

struct store *store_close(struct store *s)
{
    if (s) {
        free(s->claim_sql);
        s->claim_sql = NULL;
        secretbox_key_wipe(s->token_key);
        free(s->token_key);
        s->token_key = NULL;
        s->driver->close(s);
    }
    return NULL;
}

const char *store_kind(const struct store *s)
{
    return s ? s->driver->kind : NULL;
}

int store_begin(struct store *s)
{
    int r;

    if (!s) {
        return -EINVAL;
    }
    if (s->in_transaction) {
        return -EBUSY;
    }
    r = s->driver->begin(s);
    if (r < 0) {
        return r;
    }
    s->in_transaction = true;
    return 0;
}

/* Back to full commits after a relaxed transaction (store_begin_relaxed()). */
static int end_relaxed(struct store *s, int r)
{
    if (s->relaxed) {
        int k = s->driver->set_synchronous(s, true);
        s->relaxed = false;
        r = r < 0 ? r : k;
    }
    return r;
}

int store_begin_relaxed(struct store *s)
{
    int r;

    if (!s) {
        return -EINVAL;
    }
    if (s->in_transaction) {
        return -EBUSY;
    }
    if (!s->driver->set_synchronous) {
        return store_begin(s);
    }
    r = s->driver->set_synchronous(s, false);
    if (r < 0) {
        return r;
    }
    s->relaxed = true;
    r = store_begin(s);
    return r < 0 ? end_relaxed(s, r) : 0;
}

int store_commit(struct store *s)
{
    int r;

    if (!s || !s->in_transaction) {
        return -EINVAL;
    }
    r = s->driver->commit(s);
    s->in_transaction = false;
    return end_relaxed(s, r);
}

int store_rollback(struct store *s)
{
    int r;

    if (!s) {
        return -EINVAL;
    }
    if (!s->in_transaction) {
        return 0;
    }
    r = s->driver->rollback(s);
    s->in_transaction = false;
    return end_relaxed(s, r);
}

static int migrate_one(struct store *s, const struct store_migration *m)
{
    const struct store_param version[] = { STORE_PARAM_INT(m->version) };
    struct store_int64_row applied = { 0 };
    int r;

    r = store_begin(s);
    if (r < 0) {
        return r;
    }
    if (s->driver->migration_lock_sql) {
        r = run(s, s->driver->migration_lock_sql, false, NULL, 0, NULL, NULL, NULL);
        if (r < 0) {
            goto fail;
        }
    }
    r = s->driver->exec_script(s, sql_migrations_table);
    if (r < 0) {
        goto fail;
    }
    /* Not kept prepared: it runs once per migration, at start-up. */
    r = run(s, sql_migration_applied, false, version, ARRAY_SIZE(version), store_row_int64,
            &applied, NULL);
    if (r < 0) {
        goto fail;
    }
    if (!applied.found) {
        const struct store_param record[] = { STORE_PARAM_INT(m->version),
                                              STORE_PARAM_INT((int64_t)now_realtime()) };

        r = s->driver->exec_script(s, m->sql);
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(migration_steps); i++) {
            if (migration_steps[i].version == m->version) {
                r = migration_steps[i].after(s);
            }
        }
        if (r < 0) {
            log_debug("store: migration %s failed", m->name);
            goto fail;
        }
        r = run(s, sql_migration_record, false, record, ARRAY_SIZE(record), NULL, NULL, NULL);
        if (r < 0) {
            goto fail;
        }
    }
    r = store_commit(s);
    if (r < 0) {
        return r;
    }
    if (!applied.found) {
        log_debug("store: applied migration %s to %s", m->name, s->driver->kind);
    }
    return 0;
fail:
    (void)store_rollback(s);
    return r;
}

int store_migrate(struct store *s)
{
    return store_migrate_until(s, INT64_MAX);
}

int store_migrate_until(struct store *s, int64_t version)
{
    int r;

    if (!s) {
        return -EINVAL;
    }
    /* Each migration commits on its own, so a transaction here would be split. */
    if (s->in_transaction) {
        return -EBUSY;
    }
    for (size_t i = 0; i < store_migrations_n && store_migrations[i].version <= version; i++) {
        r = migrate_one(s, &store_migrations[i]);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* ---- sandboxes ---- */

int store_sandbox_insert(struct store *s, const struct store_sandbox *sb)
{
    struct store_param p[STORE_SANDBOX_N_PARAMS];
    char *sealed = NULL;
    int r;

    if (!s || !sb) {
        return -EINVAL;
    }
    r = sandbox_validate(sb, STORE_SANDBOX_ALL);
    if (r < 0) {
        return r;
    }
    r = token_seal(s, sb->id, sb->envd_access_token, &sealed);
    if (r < 0) {
        return r;
    }
    sandbox_params(sb, sealed, p);
    r = change_one(s, sql_sandbox_insert, true, p, ARRAY_SIZE(p), -EEXIST);
    free(sealed);
    return r;
}

int store_sandbox_update(struct store *s, const struct store_sandbox *sb)
{
    return store_sandbox_update_fields(s, sb, STORE_SANDBOX_ALL);
}

/*
 * "UPDATE sandboxes SET col = $2, ... WHERE id = $1" with only the columns
 * asked for, and their values packed behind the id (PostgreSQL refuses a
 * parameter the text does not use: it cannot infer its type).
 */
int store_sandbox_update_fields(struct store *s, const struct store_sandbox *sb, unsigned fields)
{
    struct store_param all[STORE_SANDBOX_N_PARAMS], p[STORE_SANDBOX_N_PARAMS];
    struct strbuf sql = STRBUF_INIT;
    size_t n = 0;
    char *text = NULL, *sealed = NULL;
    int r;

    static_assert(ARRAY_SIZE(sandbox_field_columns) + 1 == STORE_SANDBOX_N_PARAMS,
                  "one column per field bit, plus the id");
    if (!s || !sb || fields == 0 || (fields & ~(unsigned)STORE_SANDBOX_ALL)) {
        return -EINVAL;
    }
    r = sandbox_validate(sb, fields);
    if (r < 0) {
        return r;
    }
    if (fields & STORE_SANDBOX_ENVD_ACCESS_TOKEN) {
        r = token_seal(s, sb->id, sb->envd_access_token, &sealed);
        if (r < 0) {
            return r;
        }
    }
    sandbox_params(sb, sealed, all);
    p[n++] = all[0];
    r = strbuf_appends(&sql, "UPDATE sandboxes SET ");
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(sandbox_field_columns); i++) {
        if (!(fields & (1u << i))) {
            continue;
        }
        p[n++] = all[i + 1];
        r = strbuf_appendf(&sql, "%s%s = $%zu", n > 2 ? ", " : "", sandbox_field_columns[i], n);
    }
    if (r >= 0) {
        r = strbuf_appends(&sql, " WHERE id = $1");
    }
    if (r < 0) {
        strbuf_release(&sql);
        free(sealed);
        return r;
    }
    text = strbuf_detach(&sql, NULL);
    r = text ? change_one(s, text, false, p, n, -ENOENT) : -ENOMEM;
    free(text);
    free(sealed);
    return r;
}

int store_sandbox_set_state(struct store *s, const char *id, const char *state, const char *error,
                            int64_t updated_at)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id), STORE_PARAM_TEXT(state),
                                     STORE_PARAM_TEXT(error), STORE_PARAM_INT(updated_at) };

    if (!s || !text_ok(id, true) || !text_ok(state, true) || !text_ok(error, false)) {
        return -EINVAL;
    }
    return change_one(s, sql_sandbox_set_state, true, p, ARRAY_SIZE(p), -ENOENT);
}

int store_sandbox_set_desired_state(struct store *s, const char *id, const char *desired_state,
                                    int64_t updated_at)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id), STORE_PARAM_TEXT(desired_state),
                                     STORE_PARAM_INT(updated_at) };

    if (!s || !text_ok(id, true) || !text_ok(desired_state, true)) {
        return -EINVAL;
    }
    return change_one(s, sql_sandbox_set_desired_state, true, p, ARRAY_SIZE(p), -ENOENT);
}

int store_sandbox_set_end_at(struct store *s, const char *id, int64_t end_at, int64_t updated_at)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id), STORE_PARAM_INT(end_at),
                                     STORE_PARAM_INT(updated_at) };

    if (!s || !text_ok(id, true)) {
        return -EINVAL;
    }
    return change_one(s, sql_sandbox_set_end_at, true, p, ARRAY_SIZE(p), -ENOENT);
}

int store_sandbox_set_network(struct store *s, const char *id, const char *network_json,
                              int64_t updated_at)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id), STORE_PARAM_TEXT(network_json),
                                     STORE_PARAM_INT(updated_at) };
    int r;

    if (!s || !text_ok(id, true) || !network_json) {
        return -EINVAL;
    }
    r = json_check(network_json, JSON_SHAPE_OBJECT);
    if (r < 0) {
        return r;
    }
    return change_one(s, sql_sandbox_set_network, true, p, ARRAY_SIZE(p), -ENOENT);
}

int store_sandbox_get(struct store *s, const char *id, struct store_sandbox *ret)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id) };

    if (!s || !ret || !text_ok(id, true)) {
        return -EINVAL;
    }
    struct store_sandbox sb = { 0 };
    int r = get_one(s, sql_sandbox_get, p, ARRAY_SIZE(p), store_rows_init_sandbox, &sb);

    if (r >= 0) {
        r = token_open_row(s, &sb);
    }
    if (r < 0) {
        store_sandbox_release(&sb);
        return r;
    }
    *ret = sb;
    return 0;
}

int store_sandbox_list(struct store *s, const struct store_sandbox_filter *f,
                       struct store_sandbox **ret, size_t *ret_n)
{
    static const struct store_sandbox_filter any = { 0 };
    struct store_int64_row cursor = { 0 };
    struct store_query q = { 0 };
    void *items = NULL;
    size_t n = 0;
    int r;

    if (!s || !ret || !ret_n) {
        return -EINVAL;
    }
    f = f ? f : &any;
    r = filter_validate(f);
    if (r < 0) {
        return r;
    }
    if (f->after_id) {
        const struct store_param p[] = { STORE_PARAM_TEXT(f->after_id) };

        r = run(s, sql_sandbox_cursor, true, p, ARRAY_SIZE(p), store_row_int64, &cursor, NULL);
        if (r < 0) {
            return r;
        }
        if (!cursor.found) {
            return -ENOENT;
        }
    }
    r = sandbox_list_query(f, cursor.value, s->driver->metadata_clause, &q);
    if (r < 0) {
        return r;
    }
    /* The text depends on the filter: not kept prepared. */
    r = get_all(s, q.sql, false, q.params, q.n_params, store_rows_init_sandbox, &items, &n);
    if (r >= 0) {
        r = token_open_rows(s, items, n);
        if (r < 0) {
            store_sandbox_list_free(items, n);
        } else {
            *ret = items;
            *ret_n = n;
        }
    }
    store_query_release(&q);
    return r;
}

int store_sandbox_delete(struct store *s, const char *id)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id) };

    if (!s || !text_ok(id, true)) {
        return -EINVAL;
    }
    return change_one(s, sql_sandbox_delete, true, p, ARRAY_SIZE(p), -ENOENT);
}

/* ---- operations ---- */

int store_operation_insert(struct store *s, const struct store_operation *op)
{
    struct store_param p[STORE_OPERATION_N_PARAMS];
    int r;

    if (!s || !op) {
        return -EINVAL;
    }
    r = operation_validate(op);
    if (r < 0) {
        return r;
    }
    operation_params(op, p);
    return change_one(s, sql_operation_insert, true, p, ARRAY_SIZE(p), -EEXIST);
}

int store_operation_update(struct store *s, const struct store_operation *op)
{
    struct store_param p[STORE_OPERATION_N_PARAMS];
    int r;

    if (!s || !op) {
        return -EINVAL;
    }
    r = operation_validate(op);
    if (r < 0) {
        return r;
    }
    operation_params(op, p);
    return change_one(s, sql_operation_update, true, p, ARRAY_SIZE(p), -ENOENT);
}

int store_operation_get(struct store *s, const char *id, struct store_operation *ret)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id) };

    if (!s || !ret || !text_ok(id, true)) {
        return -EINVAL;
    }
    return get_one(s, sql_operation_get, p, ARRAY_SIZE(p), store_rows_init_operation, ret);
}

int store_operation_list_unfinished(struct store *s, struct store_operation **ret, size_t *ret_n)
{
    void *items = NULL;
    int r;

    if (!s || !ret || !ret_n) {
        return -EINVAL;
    }
    r = get_all(s, sql_operation_list_unfinished, true, NULL, 0, store_rows_init_operation, &items,
                ret_n);
    if (r >= 0) {
        *ret = items;
    }
    return r;
}

int store_operation_get_unfinished(struct store *s, const char *sandbox_id,
                                   struct store_operation *ret)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(sandbox_id) };

    if (!s || !ret || !text_ok(sandbox_id, true)) {
        return -EINVAL;
    }
    return get_one(s, sql_operation_get_unfinished, p, ARRAY_SIZE(p), store_rows_init_operation,
                   ret);
}

int store_operation_claim(struct store *s, const char *owner, int64_t now, int64_t lease_until,
                          struct store_operation *ret)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(owner), STORE_PARAM_INT(now),
                                     STORE_PARAM_INT(lease_until) };
    int r;

    if (!s || !ret || !text_ok(owner, true) || lease_until <= now) {
        return -EINVAL;
    }
    /* Claimed rows must be visible to the other claimers as soon as they are taken. */
    if (s->in_transaction) {
        return -EBUSY;
    }
    if (!s->claim_sql &&
        asprintf(&s->claim_sql, sql_operation_claim_fmt, s->driver->claim_lock_clause) < 0) {
        s->claim_sql = NULL;
        return -ENOMEM;
    }
    /* A claim lost in a host crash is a lease that lapsed: the operation is claimed again
     * and runs again, as it would after its runner died. So it need not wait for the disk. */
    if (!s->driver->set_synchronous) {
        return get_one(s, s->claim_sql, p, ARRAY_SIZE(p), store_rows_init_operation, ret);
    }
    r = store_begin_relaxed(s);
    if (r < 0) {
        return r;
    }
    r = get_one(s, s->claim_sql, p, ARRAY_SIZE(p), store_rows_init_operation, ret);
    if (r < 0) {
        (void)store_rollback(s);
        return r;
    }
    r = store_commit(s);
    if (r < 0) {
        store_operation_release(ret); /* not claimed after all */
    }
    return r;
}

int store_operation_renew(struct store *s, const char *id, const char *owner, int64_t lease_until)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id), STORE_PARAM_TEXT(owner),
                                     STORE_PARAM_INT(lease_until) };

    if (!s || !text_ok(id, true) || !text_ok(owner, true)) {
        return -EINVAL;
    }
    return change_one(s, sql_operation_renew, true, p, ARRAY_SIZE(p), -ESTALE);
}

int store_operation_finish(struct store *s, const struct store_operation *op, const char *owner)
{
    int r;

    if (!s || !op || !text_ok(owner, true)) {
        return -EINVAL;
    }
    r = operation_validate(op);
    if (r < 0) {
        return r;
    }
    const struct store_param p[] = {
        STORE_PARAM_TEXT(op->id),          STORE_PARAM_TEXT(owner),
        STORE_PARAM_TEXT(op->state),       STORE_PARAM_TEXT(op->error),
        STORE_PARAM_TEXT(op->result_json), STORE_PARAM_INT(op->updated_at),
    };
    return change_one(s, sql_operation_finish, true, p, ARRAY_SIZE(p), -ESTALE);
}

/* ---- API keys ---- */

int store_api_key_insert(struct store *s, const struct store_api_key *key)
{
    struct store_param p[STORE_API_KEY_N_PARAMS];
    int r;

    if (!s || !key) {
        return -EINVAL;
    }
    r = api_key_validate(key);
    if (r < 0) {
        return r;
    }
    api_key_params(key, p);
    return change_one(s, sql_api_key_insert, true, p, ARRAY_SIZE(p), -EEXIST);
}

int store_api_key_get_by_hash(struct store *s, const char *hash, struct store_api_key *ret)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(hash) };

    if (!s || !ret || !text_ok(hash, true)) {
        return -EINVAL;
    }
    return get_one(s, sql_api_key_get_by_hash, p, ARRAY_SIZE(p), store_rows_init_api_key, ret);
}

int store_api_key_list(struct store *s, struct store_api_key **ret, size_t *ret_n)
{
    void *items = NULL;
    int r;

    if (!s || !ret || !ret_n) {
        return -EINVAL;
    }
    r = get_all(s, sql_api_key_list, true, NULL, 0, store_rows_init_api_key, &items, ret_n);
    if (r >= 0) {
        *ret = items;
    }
    return r;
}

int store_api_key_delete(struct store *s, const char *id)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id) };

    if (!s || !text_ok(id, true)) {
        return -EINVAL;
    }
    return change_one(s, sql_api_key_delete, true, p, ARRAY_SIZE(p), -ENOENT);
}

int store_api_key_touch(struct store *s, const char *id, int64_t used_at)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id), STORE_PARAM_INT(used_at) };

    if (!s || !text_ok(id, true)) {
        return -EINVAL;
    }
    return change_one(s, sql_api_key_touch, true, p, ARRAY_SIZE(p), -ENOENT);
}

/* ---- the egress audit log ---- */

#define EGRESS_COLUMNS                                                                             \
    "id, node_id, epoch, seq, sandbox_id, time_us, proto, verdict, record, secret"
#define EGRESS_N_COLUMNS 10
/* Rows per INSERT statement: 10 parameters each, far below STORE_MAX_PARAMS. */
#define EGRESS_INSERT_CHUNK 256

static const char sql_egress_max_id[] = "SELECT COALESCE(MAX(id), 0) FROM egress_audit";
static const char sql_egress_prune_before[] = "DELETE FROM egress_audit WHERE time_us < $1";
/* The newest row past the keep newest: it and everything older of the sandbox go. */
static const char sql_egress_keep_edge[] = "SELECT id FROM egress_audit WHERE sandbox_id = $1 "
                                           "ORDER BY id DESC LIMIT 1 OFFSET $2";
static const char sql_egress_prune_sandbox[] =
    "DELETE FROM egress_audit WHERE sandbox_id = $1 AND id <= $2";

void store_egress_record_release(struct store_egress_record *r)
{
    if (!r) {
        return;
    }
    free(r->node_id);
    free(r->epoch);
    free(r->sandbox_id);
    free(r->proto);
    free(r->verdict);
    free(r->secret);
    free(r->record_json);
    *r = (struct store_egress_record){ 0 };
}

void store_egress_audit_list_free(struct store_egress_record *list, size_t n)
{
    for (size_t i = 0; list && i < n; i++) {
        store_egress_record_release(&list[i]);
    }
    free(list);
}

static int egress_validate(const struct store_egress_record *r)
{
    if (!text_ok(r->node_id, true) || !text_ok(r->epoch, true) || !text_ok(r->sandbox_id, false) ||
        !text_ok(r->proto, false) || !text_ok(r->verdict, false) || !text_ok(r->secret, false) ||
        !r->record_json) {
        return -EINVAL;
    }
    return json_check(r->record_json, JSON_SHAPE_OBJECT);
}

static int egress_decode(const struct store_value *cols, size_t n_cols, void *item)
{
    struct store_egress_record e = { 0 };
    int r;

    if (n_cols != EGRESS_N_COLUMNS) {
        return -EIO;
    }
    r = dup_text(&cols[1], &e.node_id);
    if (r >= 0) {
        r = dup_text(&cols[2], &e.epoch);
    }
    if (r >= 0) {
        r = dup_text(&cols[4], &e.sandbox_id);
    }
    if (r >= 0) {
        r = dup_text(&cols[6], &e.proto);
    }
    if (r >= 0) {
        r = dup_text(&cols[7], &e.verdict);
    }
    if (r >= 0) {
        r = dup_text(&cols[8], &e.record_json);
    }
    if (r >= 0) {
        r = dup_text(&cols[9], &e.secret);
    }
    if (r < 0) {
        store_egress_record_release(&e);
        return r;
    }
    e.id = cols[0].integer;
    e.seq = cols[3].integer;
    e.time_us = cols[5].integer;
    *(struct store_egress_record *)item = e;
    return 0;
}

static void egress_release_item(void *item)
{
    store_egress_record_release(item);
}

static void store_rows_init_egress(struct store_rows *rows)
{
    *rows = (struct store_rows){
        .size = sizeof(struct store_egress_record),
        .decode = egress_decode,
        .release = egress_release_item,
    };
}

/* One multi-row INSERT of v[0..n), ids next_id, next_id + 1, ... */
static int egress_insert_chunk(struct store *s, const struct store_egress_record *v, size_t n,
                               int64_t next_id, uint64_t *ret_changes)
{
    struct store_param *p = calloc(n * EGRESS_N_COLUMNS, sizeof(*p));
    struct strbuf sql = STRBUF_INIT;
    size_t k = 0;
    char *text = NULL;
    int r;

    if (!p) {
        return -ENOMEM;
    }
    r = strbuf_appends(&sql, "INSERT INTO egress_audit (" EGRESS_COLUMNS ") VALUES ");
    for (size_t i = 0; r >= 0 && i < n; i++) {
        p[k++] = STORE_PARAM_INT(next_id + (int64_t)i);
        p[k++] = STORE_PARAM_TEXT(v[i].node_id);
        p[k++] = STORE_PARAM_TEXT(v[i].epoch);
        p[k++] = STORE_PARAM_INT(v[i].seq);
        p[k++] = STORE_PARAM_TEXT(v[i].sandbox_id);
        p[k++] = STORE_PARAM_INT(v[i].time_us);
        p[k++] = STORE_PARAM_TEXT(v[i].proto);
        p[k++] = STORE_PARAM_TEXT(v[i].verdict);
        p[k++] = STORE_PARAM_TEXT(v[i].record_json);
        p[k++] = STORE_PARAM_TEXT(v[i].secret);
        r = strbuf_appendf(&sql, "%s($%zu, $%zu, $%zu, $%zu, $%zu, $%zu, $%zu, $%zu, $%zu, $%zu)",
                           i > 0 ? ", " : "", k - 9, k - 8, k - 7, k - 6, k - 5, k - 4, k - 3,
                           k - 2, k - 1, k);
    }
    /* Only a duplicate source key is skipped: an id another writer took fails the batch. */
    if (r >= 0) {
        r = strbuf_appends(&sql, " ON CONFLICT (node_id, epoch, seq) DO NOTHING");
    }
    if (r >= 0) {
        text = strbuf_detach(&sql, NULL);
        r = text ? run(s, text, false, p, k, NULL, NULL, ret_changes) : -ENOMEM;
    }
    strbuf_release(&sql);
    free(text);
    free(p);
    return r;
}

int store_egress_audit_insert(struct store *s, const struct store_egress_record *v, size_t n,
                              size_t *ret_inserted)
{
    struct store_int64_row max = { 0 };
    size_t inserted = 0;
    int r;

    if (!s || (!v && n > 0)) {
        return -EINVAL;
    }
    if (s->in_transaction) {
        return -EBUSY;
    }
    for (size_t i = 0; i < n; i++) {
        r = egress_validate(&v[i]);
        if (r < 0) {
            return r;
        }
    }
    if (n == 0) {
        if (ret_inserted) {
            *ret_inserted = 0;
        }
        return 0;
    }
    r = store_begin(s);
    if (r < 0) {
        return r;
    }
    r = run(s, sql_egress_max_id, true, NULL, 0, store_row_int64, &max, NULL);
    for (size_t i = 0; r >= 0 && i < n; i += EGRESS_INSERT_CHUNK) {
        uint64_t changes = 0;
        size_t k = MIN(n - i, (size_t)EGRESS_INSERT_CHUNK);

        r = egress_insert_chunk(s, v + i, k, max.value + 1 + (int64_t)i, &changes);
        inserted += (size_t)changes;
    }
    if (r < 0) {
        /* -EEXIST: another writer took these ids first. */
        (void)store_rollback(s);
        return r;
    }
    r = store_commit(s);
    if (r >= 0 && ret_inserted) {
        *ret_inserted = inserted;
    }
    return r;
}

int store_egress_audit_list(struct store *s, const struct store_egress_filter *f,
                            struct store_egress_record **ret, size_t *ret_n)
{
    struct strbuf sql = STRBUF_INIT;
    struct store_param p[5];
    size_t n = 0;
    void *items = NULL;
    char *text = NULL;
    int r;

    if (!s || !f || !ret || !ret_n || !text_ok(f->sandbox_id, true) ||
        !text_ok(f->verdict, false) || !text_ok(f->proto, false) || f->after_id < 0) {
        return -EINVAL;
    }
    p[n++] = STORE_PARAM_TEXT(f->sandbox_id);
    p[n++] = STORE_PARAM_INT(f->after_id);
    r = strbuf_appends(&sql, "SELECT " EGRESS_COLUMNS
                             " FROM egress_audit WHERE sandbox_id = $1 AND id > $2");
    if (r >= 0 && f->verdict) {
        p[n++] = STORE_PARAM_TEXT(f->verdict);
        r = strbuf_appendf(&sql, " AND verdict = $%zu", n);
    }
    if (r >= 0 && f->proto) {
        p[n++] = STORE_PARAM_TEXT(f->proto);
        r = strbuf_appendf(&sql, " AND proto = $%zu", n);
    }
    if (r >= 0) {
        r = strbuf_appends(&sql, " ORDER BY id");
    }
    if (r >= 0 && f->limit > 0) {
        p[n++] = STORE_PARAM_INT((int64_t)MIN((uint64_t)f->limit, (uint64_t)INT64_MAX));
        r = strbuf_appendf(&sql, " LIMIT $%zu", n);
    }
    if (r >= 0) {
        text = strbuf_detach(&sql, NULL);
        r = text ? get_all(s, text, false, p, n, store_rows_init_egress, &items, ret_n) : -ENOMEM;
    }
    if (r >= 0) {
        *ret = items;
    }
    strbuf_release(&sql);
    free(text);
    return r;
}

int store_egress_audit_prune_before(struct store *s, int64_t before_us, uint64_t *ret_deleted)
{
    const struct store_param p[] = { STORE_PARAM_INT(before_us) };
    uint64_t changes = 0;
    int r;

    if (!s) {
        return -EINVAL;
    }
    r = run(s, sql_egress_prune_before, true, p, ARRAY_SIZE(p), NULL, NULL, &changes);
    if (r >= 0 && ret_deleted) {
        *ret_deleted = changes;
    }
    return r;
}

int store_egress_audit_prune_sandbox(struct store *s, const char *sandbox_id, uint64_t keep,
                                     uint64_t *ret_deleted)
{
    struct store_int64_row edge = { 0 };
    uint64_t changes = 0;
    int r;

    if (!s || !text_ok(sandbox_id, true) || keep == 0 || keep > INT64_MAX) {
        return -EINVAL;
    }
    const struct store_param q[] = { STORE_PARAM_TEXT(sandbox_id), STORE_PARAM_INT((int64_t)keep) };
    r = run(s, sql_egress_keep_edge, true, q, ARRAY_SIZE(q), store_row_int64, &edge, NULL);
    if (r >= 0 && edge.found) {
        const struct store_param p[] = { STORE_PARAM_TEXT(sandbox_id),
                                         STORE_PARAM_INT(edge.value) };
        r = run(s, sql_egress_prune_sandbox, true, p, ARRAY_SIZE(p), NULL, NULL, &changes);
    }
    if (r >= 0 && ret_deleted) {
        *ret_deleted = changes;
    }
    return r;
}

/* ---- secrets (sealed values only; see store.h) ---- */

#define SECRET_COLUMNS                                                                             \
    "id, owner, name, sandbox_id, sealed, metadata, version, created_at, updated_at"
#define SECRET_N_COLUMNS 9

static const char sql_secret_insert[] =
    "INSERT INTO secrets (" SECRET_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
    "ON CONFLICT DO NOTHING";
static const char sql_secret_get[] =
    "SELECT " SECRET_COLUMNS " FROM secrets WHERE owner = $1 AND name = $2";
static const char sql_secret_get_by_id[] =
    "SELECT " SECRET_COLUMNS " FROM secrets WHERE owner = $1 AND id = $2";
static const char sql_secret_rotate[] =
    "UPDATE secrets SET sealed = $3, metadata = COALESCE($4, metadata), version = version + 1, "
    "updated_at = $5 WHERE owner = $1 AND name = $2 RETURNING " SECRET_COLUMNS;
static const char sql_secret_delete[] = "DELETE FROM secrets WHERE owner = $1 AND name = $2";
/* Literals of sandboxes that are killed, or whose row is gone (or never came: a create that
 * failed between writing its literals and its row) and which are older than $1. */
#define SECRET_SWEEP_WHERE                                                                         \
    "WHERE sandbox_id IS NOT NULL AND (EXISTS "                                                    \
    "(SELECT 1 FROM sandboxes WHERE sandboxes.id = secrets.sandbox_id "                            \
    "AND sandboxes.state = 'killed') OR (created_at < $1 AND NOT EXISTS "                          \
    "(SELECT 1 FROM sandboxes WHERE sandboxes.id = secrets.sandbox_id)))"
static const char sql_secret_sweep[] = "DELETE FROM secrets " SECRET_SWEEP_WHERE;
/* Read first: a DELETE takes the write lock even when it matches nothing, and the tick runs
 * on the loop, so a store locked by someone else would stall the loop (and the ingress on it)
 * for the busy timeout every sweep; a read does not wait on a writer (WAL). */
static const char sql_secret_sweep_any[] = "SELECT 1 FROM secrets " SECRET_SWEEP_WHERE " LIMIT 1";

void store_secret_release(struct store_secret *sec)
{
    if (!sec) {
        return;
    }
    free(sec->id);
    free(sec->owner);
    free(sec->name);
    free(sec->sandbox_id);
    free(sec->sealed);
    free(sec->metadata_json);
    *sec = (struct store_secret){ 0 };
}

void store_secret_list_free(struct store_secret *list, size_t n)
{
    for (size_t i = 0; list && i < n; i++) {
        store_secret_release(&list[i]);
    }
    free(list);
}

static int secret_decode(const struct store_value *cols, size_t n_cols, void *item)
{
    struct store_secret sec = { 0 };
    char **const texts[] = { &sec.id,         &sec.owner,  &sec.name,
                             &sec.sandbox_id, &sec.sealed, &sec.metadata_json };
    int r;

    if (n_cols != SECRET_N_COLUMNS) {
        return -EIO;
    }
    r = dup_texts(cols, texts, ARRAY_SIZE(texts));
    if (r < 0) {
        store_secret_release(&sec);
        return r;
    }
    sec.version = cols[6].integer;
    sec.created_at = cols[7].integer;
    sec.updated_at = cols[8].integer;
    *(struct store_secret *)item = sec;
    return 0;
}

static void secret_release_item(void *item)
{
    store_secret_release(item);
}

static void store_rows_init_secret(struct store_rows *rows)
{
    *rows = (struct store_rows){
        .size = sizeof(struct store_secret),
        .decode = secret_decode,
        .release = secret_release_item,
    };
}

int store_secret_insert(struct store *s, const struct store_secret *sec)
{
    int r;

    if (!s || !sec || !text_ok(sec->id, true) || !text_ok(sec->owner, true) ||
        !text_ok(sec->name, true) || !text_ok(sec->sandbox_id, false) ||
        !text_ok(sec->sealed, true) || !sec->metadata_json || sec->version < 1) {
        return -EINVAL;
    }
    r = json_check(sec->metadata_json, JSON_SHAPE_STRING_OBJECT);
    if (r < 0) {
        return r;
    }
    const struct store_param p[SECRET_N_COLUMNS] = {
        STORE_PARAM_TEXT(sec->id),        STORE_PARAM_TEXT(sec->owner),
        STORE_PARAM_TEXT(sec->name),      STORE_PARAM_TEXT(sec->sandbox_id),
        STORE_PARAM_TEXT(sec->sealed),    STORE_PARAM_TEXT(sec->metadata_json),
        STORE_PARAM_INT(sec->version),    STORE_PARAM_INT(sec->created_at),
        STORE_PARAM_INT(sec->updated_at),
    };
    return change_one(s, sql_secret_insert, true, p, ARRAY_SIZE(p), -EEXIST);
}

int store_secret_get(struct store *s, const char *owner, const char *name, struct store_secret *ret)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(owner), STORE_PARAM_TEXT(name) };

    if (!s || !ret || !text_ok(owner, true) || !text_ok(name, true)) {
        return -EINVAL;
    }
    return get_one(s, sql_secret_get, p, ARRAY_SIZE(p), store_rows_init_secret, ret);
}

int store_secret_get_by_id(struct store *s, const char *owner, const char *id,
                           struct store_secret *ret)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(owner), STORE_PARAM_TEXT(id) };

    if (!s || !ret || !text_ok(owner, true) || !text_ok(id, true)) {
        return -EINVAL;
    }
    return get_one(s, sql_secret_get_by_id, p, ARRAY_SIZE(p), store_rows_init_secret, ret);
}

int store_secret_list(struct store *s, const char *owner, const char *after_name, size_t limit,
                      struct store_secret **ret, size_t *ret_n)
{
    struct strbuf sql = STRBUF_INIT;
    struct store_param p[3];
    size_t n = 0;
    void *items = NULL;
    char *text = NULL;
    int r;

    if (!s || !ret || !ret_n || !text_ok(owner, true) || !text_ok(after_name, false)) {
        return -EINVAL;
    }
    p[n++] = STORE_PARAM_TEXT(owner);
    r = strbuf_appends(&sql, "SELECT " SECRET_COLUMNS
                             " FROM secrets WHERE owner = $1 AND sandbox_id IS NULL");
    if (r >= 0 && after_name) {
        p[n++] = STORE_PARAM_TEXT(after_name);
        r = strbuf_appendf(&sql, " AND name > $%zu", n);
    }
    if (r >= 0) {
        r = strbuf_appends(&sql, " ORDER BY name");
    }
    if (r >= 0 && limit > 0) {
        p[n++] = STORE_PARAM_INT((int64_t)MIN((uint64_t)limit, (uint64_t)INT64_MAX));
        r = strbuf_appendf(&sql, " LIMIT $%zu", n);
    }
    if (r >= 0) {
        text = strbuf_detach(&sql, NULL);
        r = text ? get_all(s, text, false, p, n, store_rows_init_secret, &items, ret_n) : -ENOMEM;
    }
    if (r >= 0) {
        *ret = items;
    }
    strbuf_release(&sql);
    free(text);
    return r;
}

int store_secret_rotate(struct store *s, const char *owner, const char *name, const char *sealed,
                        const char *metadata_json, int64_t updated_at, struct store_secret *ret)
{
    struct store_secret row = { 0 };
    int r;

    if (!s || !text_ok(owner, true) || !text_ok(name, true) || !text_ok(sealed, true)) {
        return -EINVAL;
    }
    if (metadata_json) {
        r = json_check(metadata_json, JSON_SHAPE_STRING_OBJECT);
        if (r < 0) {
            return r;
        }
    }
    const struct store_param p[] = {
        STORE_PARAM_TEXT(owner),         STORE_PARAM_TEXT(name),      STORE_PARAM_TEXT(sealed),
        STORE_PARAM_TEXT(metadata_json), STORE_PARAM_INT(updated_at),
    };
    r = get_one(s, sql_secret_rotate, p, ARRAY_SIZE(p), store_rows_init_secret, &row);
    if (r >= 0 && ret) {
        *ret = row;
    } else {
        store_secret_release(&row);
    }
    return r;
}

int store_secret_delete(struct store *s, const char *owner, const char *name)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(owner), STORE_PARAM_TEXT(name) };

    if (!s || !text_ok(owner, true) || !text_ok(name, true)) {
        return -EINVAL;
    }
    return change_one(s, sql_secret_delete, true, p, ARRAY_SIZE(p), -ENOENT);
}

/* A row callback that only counts rows (userdata: uint64_t *). */
static int count_row(const struct store_value *cols, size_t n_cols, void *userdata)
{
    (*(uint64_t *)userdata)++;
    return 0;
}

int store_secret_sweep(struct store *s, int64_t before_us, uint64_t *ret_deleted)
{
    const struct store_param p[] = { STORE_PARAM_INT(before_us) };
    uint64_t changes = 0, any = 0;
    int r;

    if (!s) {
        return -EINVAL;
    }
    r = run(s, sql_secret_sweep_any, true, p, ARRAY_SIZE(p), count_row, &any, NULL);
    if (r >= 0 && any > 0) {
        r = run(s, sql_secret_sweep, true, p, ARRAY_SIZE(p), NULL, NULL, &changes);
    }
    if (r >= 0 && ret_deleted) {
        *ret_deleted = changes;
    }
    return r;
}

/* ---- snapshots (see store.h) ---- */

#define SNAPSHOT_COLUMNS                                                                           \
    "id, owner, sandbox_id, node_id, template_id, kind, name, state, operation_id, vcpus, "        \
    "memory_mb, created_at, updated_at, source, bytes"
#define SNAPSHOT_N_COLUMNS 15

static const char sql_snapshot_insert[] =
    "INSERT INTO snapshots (" SNAPSHOT_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
    "$10, $11, $12, $13, $14, $15) ON CONFLICT DO NOTHING";
static const char sql_snapshot_get[] = "SELECT " SNAPSHOT_COLUMNS " FROM snapshots WHERE id = $1";
static const char sql_snapshot_get_by_op[] =
    "SELECT " SNAPSHOT_COLUMNS " FROM snapshots WHERE operation_id = $1";
static const char sql_snapshot_complete[] =
    "UPDATE snapshots SET state = '" STORE_SNAPSHOT_COMPLETE "', updated_at = $2 "
    "WHERE operation_id = $1 AND state = '" STORE_SNAPSHOT_PENDING "'";
static const char sql_snapshot_drop_pending[] =
    "DELETE FROM snapshots WHERE operation_id = $1 AND state = '" STORE_SNAPSHOT_PENDING "'";
static const char sql_snapshot_set_state[] =
    "UPDATE snapshots SET state = $2, updated_at = $3 WHERE id = $1";
static const char sql_snapshot_delete[] = "DELETE FROM snapshots WHERE id = $1";
static const char sql_snapshot_set_bytes[] = "UPDATE snapshots SET bytes = $2 WHERE id = $1";

void store_snapshot_release(struct store_snapshot *snap)
{
    if (!snap) {
        return;
    }
    free(snap->id);
    free(snap->owner);
    free(snap->sandbox_id);
    free(snap->node_id);
    free(snap->template_id);
    free(snap->kind);
    free(snap->name);
    free(snap->state);
    free(snap->operation_id);
    free(snap->source);
    *snap = (struct store_snapshot){ 0 };
}

void store_snapshot_list_free(struct store_snapshot *list, size_t n)
{
    for (size_t i = 0; list && i < n; i++) {
        store_snapshot_release(&list[i]);
    }
    free(list);
}

static int snapshot_decode(const struct store_value *cols, size_t n_cols, void *item)
{
    struct store_snapshot snap = { 0 };
    char **const texts[] = { &snap.id,      &snap.owner,       &snap.sandbox_id,
                             &snap.node_id, &snap.template_id, &snap.kind,
                             &snap.name,    &snap.state,       &snap.operation_id };
    int r;

    if (n_cols != SNAPSHOT_N_COLUMNS) {
        return -EIO;
    }
    r = dup_texts(cols, texts, ARRAY_SIZE(texts));
    if (r < 0) {
        store_snapshot_release(&snap);
        return r;
    }
    snap.vcpus = cols[9].integer;
    snap.memory_mb = cols[10].integer;
    snap.created_at = cols[11].integer;
    snap.updated_at = cols[12].integer;
    snap.source = strdup(cols[13].text ? cols[13].text : STORE_SNAPSHOT_SOURCE_USER);
    snap.bytes = cols[14].integer;
    if (!snap.source) {
        store_snapshot_release(&snap);
        return -ENOMEM;
    }
    *(struct store_snapshot *)item = snap;
    return 0;
}

static void snapshot_release_item(void *item)
{
    store_snapshot_release(item);
}

static void store_rows_init_snapshot(struct store_rows *rows)
{
    *rows = (struct store_rows){
        .size = sizeof(struct store_snapshot),
        .decode = snapshot_decode,
        .release = snapshot_release_item,
    };
}

int store_snapshot_insert(struct store *s, const struct store_snapshot *snap)
{
    if (!s || !snap || !text_ok(snap->id, true) || !text_ok(snap->owner, true) ||
        !text_ok(snap->sandbox_id, true) || !text_ok(snap->node_id, true) ||
        !text_ok(snap->template_id, true) || !text_ok(snap->kind, true) ||
        !text_ok(snap->name, false) || !text_ok(snap->state, true) ||
        !text_ok(snap->operation_id, true) || !text_ok(snap->source, false) || snap->bytes < 0) {
        return -EINVAL;
    }
    const struct store_param p[SNAPSHOT_N_COLUMNS] = {
        STORE_PARAM_TEXT(snap->id),
        STORE_PARAM_TEXT(snap->owner),
        STORE_PARAM_TEXT(snap->sandbox_id),
        STORE_PARAM_TEXT(snap->node_id),
        STORE_PARAM_TEXT(snap->template_id),
        STORE_PARAM_TEXT(snap->kind),
        STORE_PARAM_TEXT(snap->name),
        STORE_PARAM_TEXT(snap->state),
        STORE_PARAM_TEXT(snap->operation_id),
        STORE_PARAM_INT(snap->vcpus),
        STORE_PARAM_INT(snap->memory_mb),
        STORE_PARAM_INT(snap->created_at),
        STORE_PARAM_INT(snap->updated_at),
        STORE_PARAM_TEXT(snap->source ? snap->source : STORE_SNAPSHOT_SOURCE_USER),
        STORE_PARAM_INT(snap->bytes),
    };
    return change_one(s, sql_snapshot_insert, true, p, ARRAY_SIZE(p), -EEXIST);
}

int store_snapshot_get(struct store *s, const char *id, struct store_snapshot *ret)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id) };

    if (!s || !ret || !text_ok(id, true)) {
        return -EINVAL;
    }
    return get_one(s, sql_snapshot_get, p, ARRAY_SIZE(p), store_rows_init_snapshot, ret);
}

int store_snapshot_get_by_operation(struct store *s, const char *operation_id,
                                    struct store_snapshot *ret)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(operation_id) };

    if (!s || !ret || !text_ok(operation_id, true)) {
        return -EINVAL;
    }
    return get_one(s, sql_snapshot_get_by_op, p, ARRAY_SIZE(p), store_rows_init_snapshot, ret);
}

int store_snapshot_list(struct store *s, const struct store_snapshot_filter *f,
                        struct store_snapshot **ret, size_t *ret_n)
{
    struct strbuf sql = STRBUF_INIT;
    struct store_param p[7];
    size_t n = 0;
    void *items = NULL;
    char *text = NULL;
    int r;

    if (!s || !f || !ret || !ret_n || !text_ok(f->owner, true) || !text_ok(f->sandbox_id, false) ||
        !text_ok(f->name, false) || !text_ok(f->after_id, false) || !text_ok(f->source, false)) {
        return -EINVAL;
    }
    if (f->after_id) {
        struct store_snapshot cursor = { 0 };
        r = store_snapshot_get(s, f->after_id, &cursor);
        bool mine = r >= 0 && strcmp(cursor.owner, f->owner) == 0;
        store_snapshot_release(&cursor);
        if (r < 0 || !mine) {
            return r < 0 && r != -ENOENT ? r : -ENOENT;
        }
    }
    p[n++] = STORE_PARAM_TEXT(f->owner);
    r = strbuf_appends(&sql, "SELECT " SNAPSHOT_COLUMNS " FROM snapshots WHERE owner = $1");
    if (r >= 0 && f->complete_only) {
        r = strbuf_appends(&sql, " AND state = '" STORE_SNAPSHOT_COMPLETE "'");
    }
    if (r >= 0 && f->sandbox_id) {
        p[n++] = STORE_PARAM_TEXT(f->sandbox_id);
        r = strbuf_appendf(&sql, " AND sandbox_id = $%zu", n);
    }
    if (r >= 0 && f->name) {
        p[n++] = STORE_PARAM_TEXT(f->name);
        r = strbuf_appendf(&sql, " AND name = $%zu", n);
    }
    if (r >= 0 && f->source) {
        p[n++] = STORE_PARAM_TEXT(f->source);
        r = strbuf_appendf(&sql, " AND source = $%zu", n);
    }
    /* Strictly after the cursor in the order below (newest first), a row-value test both
     * databases index. */
    if (r >= 0 && f->after_id) {
        p[n++] = STORE_PARAM_TEXT(f->after_id);
        r = strbuf_appendf(&sql,
                           " AND (created_at, id) < (SELECT created_at, id FROM snapshots "
                           "WHERE id = $%zu)",
                           n);
    }
    if (r >= 0) {
        r = strbuf_appends(&sql, " ORDER BY created_at DESC, id DESC");
    }
    if (r >= 0 && f->limit > 0) {
        p[n++] = STORE_PARAM_INT((int64_t)MIN((uint64_t)f->limit, (uint64_t)INT64_MAX));
        r = strbuf_appendf(&sql, " LIMIT $%zu", n);
    }
    if (r >= 0) {
        text = strbuf_detach(&sql, NULL);
        r = text ? get_all(s, text, false, p, n, store_rows_init_snapshot, &items, ret_n) : -ENOMEM;
    }
    if (r >= 0) {
        *ret = items;
    }
    strbuf_release(&sql);
    free(text);
    return r;
}

int store_snapshot_finish(struct store *s, const char *operation_id, bool ok, int64_t updated_at)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(operation_id), STORE_PARAM_INT(updated_at) };

    if (!s || !text_ok(operation_id, true)) {
        return -EINVAL;
    }
    return ok ? run(s, sql_snapshot_complete, true, p, ARRAY_SIZE(p), NULL, NULL, NULL)
              : run(s, sql_snapshot_drop_pending, true, p, 1, NULL, NULL, NULL);
}

int store_snapshot_set_state(struct store *s, const char *id, const char *state, int64_t updated_at)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id), STORE_PARAM_TEXT(state),
                                     STORE_PARAM_INT(updated_at) };

    if (!s || !text_ok(id, true) || !text_ok(state, true)) {
        return -EINVAL;
    }
    return change_one(s, sql_snapshot_set_state, true, p, ARRAY_SIZE(p), -ENOENT);
}

int store_snapshot_delete(struct store *s, const char *id)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id) };

    if (!s || !text_ok(id, true)) {
        return -EINVAL;
    }
    return change_one(s, sql_snapshot_delete, true, p, ARRAY_SIZE(p), -ENOENT);
}

int store_snapshot_set_bytes(struct store *s, const char *id, int64_t bytes)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(id), STORE_PARAM_INT(bytes) };

    if (!s || !text_ok(id, true) || bytes < 0) {
        return -EINVAL;
    }
    return change_one(s, sql_snapshot_set_bytes, true, p, ARRAY_SIZE(p), -ENOENT);
}

/* ---- rolling snapshot policies (migration 11; see store.h) ---- */

#define POLICY_COLUMNS                                                                             \
    "sandbox_id, owner, policy, next_disk_at, next_full_at, created_at, updated_at"
#define POLICY_N_COLUMNS 7

static const char sql_policy_put[] =
    "INSERT INTO snapshot_policies (" POLICY_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $7) "
    "ON CONFLICT (sandbox_id) DO UPDATE SET owner = excluded.owner, policy = excluded.policy, "
    "next_disk_at = excluded.next_disk_at, next_full_at = excluded.next_full_at, "
    "updated_at = excluded.updated_at";
static const char sql_policy_get[] =
    "SELECT " POLICY_COLUMNS " FROM snapshot_policies WHERE sandbox_id = $1";
static const char sql_policy_delete[] = "DELETE FROM snapshot_policies WHERE sandbox_id = $1";
static const char sql_policy_advance_disk[] =
    "UPDATE snapshot_policies SET next_disk_at = $3 WHERE sandbox_id = $1 AND next_disk_at = $2";
static const char sql_policy_advance_full[] =
    "UPDATE snapshot_policies SET next_full_at = $3 WHERE sandbox_id = $1 AND next_full_at = $2";
#define POLICY_SWEEP_WHERE                                                                         \
    "WHERE NOT EXISTS (SELECT 1 FROM sandboxes WHERE "                                             \
    "sandboxes.id = snapshot_policies.sandbox_id AND sandboxes.state <> 'killed')"
static const char sql_policy_sweep[] = "DELETE FROM snapshot_policies " POLICY_SWEEP_WHERE;
static const char sql_policy_sweep_any[] =
    "SELECT 1 FROM snapshot_policies " POLICY_SWEEP_WHERE " LIMIT 1";

void store_snapshot_policy_release(struct store_snapshot_policy *p)
{
    if (!p) {
        return;
    }
    free(p->sandbox_id);
    free(p->owner);
    free(p->policy_json);
    *p = (struct store_snapshot_policy){ 0 };
}

void store_snapshot_policy_list_free(struct store_snapshot_policy *list, size_t n)
{
    for (size_t i = 0; list && i < n; i++) {
        store_snapshot_policy_release(&list[i]);
    }
    free(list);
}

static int policy_decode(const struct store_value *cols, size_t n_cols, void *item)
{
    struct store_snapshot_policy p = { 0 };
    char **const texts[] = { &p.sandbox_id, &p.owner, &p.policy_json };
    int r;

    if (n_cols != POLICY_N_COLUMNS) {
        return -EIO;
    }
    r = dup_texts(cols, texts, ARRAY_SIZE(texts));
    if (r < 0) {
        store_snapshot_policy_release(&p);
        return r;
    }
    p.next_disk_at = cols[3].integer;
    p.next_full_at = cols[4].integer;
    p.created_at = cols[5].integer;
    p.updated_at = cols[6].integer;
    *(struct store_snapshot_policy *)item = p;
    return 0;
}

static void policy_release_item(void *item)
{
    store_snapshot_policy_release(item);
}

static void store_rows_init_policy(struct store_rows *rows)
{
    *rows = (struct store_rows){
        .size = sizeof(struct store_snapshot_policy),
        .decode = policy_decode,
        .release = policy_release_item,
    };
}

int store_snapshot_policy_put(struct store *s, const struct store_snapshot_policy *pol)
{
    int r;

    if (!s || !pol || !text_ok(pol->sandbox_id, true) || !text_ok(pol->owner, true) ||
        !pol->policy_json) {
        return -EINVAL;
    }
    r = json_check(pol->policy_json, JSON_SHAPE_OBJECT);
    if (r < 0) {
        return r;
    }
    const struct store_param p[POLICY_N_COLUMNS] = {
        STORE_PARAM_TEXT(pol->sandbox_id),  STORE_PARAM_TEXT(pol->owner),
        STORE_PARAM_TEXT(pol->policy_json), STORE_PARAM_INT(pol->next_disk_at),
        STORE_PARAM_INT(pol->next_full_at), STORE_PARAM_INT(pol->created_at),
        STORE_PARAM_INT(pol->updated_at),
    };
    return run(s, sql_policy_put, true, p, ARRAY_SIZE(p), NULL, NULL, NULL);
}

int store_snapshot_policy_get(struct store *s, const char *sandbox_id,
                              struct store_snapshot_policy *ret)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(sandbox_id) };

    if (!s || !ret || !text_ok(sandbox_id, true)) {
        return -EINVAL;
    }
    return get_one(s, sql_policy_get, p, ARRAY_SIZE(p), store_rows_init_policy, ret);
}

int store_snapshot_policy_delete(struct store *s, const char *sandbox_id)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(sandbox_id) };

    if (!s || !text_ok(sandbox_id, true)) {
        return -EINVAL;
    }
    return change_one(s, sql_policy_delete, true, p, ARRAY_SIZE(p), -ENOENT);
}

int store_snapshot_policy_list(struct store *s, size_t limit, struct store_snapshot_policy **ret,
                               size_t *ret_n)
{
    static const char all[] =
        "SELECT " POLICY_COLUMNS " FROM snapshot_policies ORDER BY sandbox_id";
    static const char some[] =
        "SELECT " POLICY_COLUMNS " FROM snapshot_policies ORDER BY sandbox_id LIMIT $1";
    const struct store_param p[] = { STORE_PARAM_INT(
        (int64_t)MIN((uint64_t)limit, (uint64_t)INT64_MAX)) };
    void *items = NULL;
    int r;

    if (!s || !ret || !ret_n) {
        return -EINVAL;
    }
    r = limit ? get_all(s, some, true, p, 1, store_rows_init_policy, &items, ret_n)
              : get_all(s, all, true, NULL, 0, store_rows_init_policy, &items, ret_n);
    if (r >= 0) {
        *ret = items;
    }
    return r;
}

int store_snapshot_policy_advance(struct store *s, const char *sandbox_id, bool full,
                                  int64_t old_at, int64_t new_at)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(sandbox_id), STORE_PARAM_INT(old_at),
                                     STORE_PARAM_INT(new_at) };

    if (!s || !text_ok(sandbox_id, true)) {
        return -EINVAL;
    }
    return change_one(s, full ? sql_policy_advance_full : sql_policy_advance_disk, true, p,
                      ARRAY_SIZE(p), -ESTALE);
}

int store_snapshot_policy_sweep(struct store *s, uint64_t *ret_deleted)
{
    uint64_t changes = 0, any = 0;
    int r;

    if (!s) {
        return -EINVAL;
    }
    /* Read first, as the secret sweep: the tick runs on the loop thread, and a DELETE takes
     * the write lock (and waits out the busy timeout behind another writer) even when it
     * deletes nothing. */
    r = run(s, sql_policy_sweep_any, true, NULL, 0, count_row, &any, NULL);
    if (r >= 0 && any > 0) {
        r = run(s, sql_policy_sweep, true, NULL, 0, NULL, NULL, &changes);
    }
    if (r >= 0 && ret_deleted) {
        *ret_deleted = changes;
    }
    return r;
}

/* ---- per-template default egress policy (migration 10; see store.h) ---- */

static const char sql_template_network_put[] =
    "INSERT INTO template_network (owner, template, network, updated_at) VALUES ($1, $2, $3, $4) "
    "ON CONFLICT (owner, template) DO UPDATE SET network = excluded.network, "
    "updated_at = excluded.updated_at";
static const char sql_template_network_get[] =
    "SELECT network FROM template_network WHERE owner = $1 AND template = $2";
static const char sql_template_network_delete[] =
    "DELETE FROM template_network WHERE owner = $1 AND template = $2";

/* A row callback for one text column (userdata: char **, which must start NULL). */
static int text_row(const struct store_value *cols, size_t n_cols, void *userdata)
{
    char **ret = userdata;

    if (n_cols != 1 || cols[0].is_null || *ret) {
        return -EIO;
    }
    *ret = strdup(cols[0].text);
    return *ret ? 0 : -ENOMEM;
}

int store_template_network_put(struct store *s, const char *owner, const char *template_id,
                               const char *network_json, int64_t updated_at)
{
    int r;

    if (!s || !text_ok(owner, true) || !text_ok(template_id, true) || !network_json) {
        return -EINVAL;
    }
    r = json_check(network_json, JSON_SHAPE_OBJECT);
    if (r < 0) {
        return r;
    }
    const struct store_param p[] = { STORE_PARAM_TEXT(owner), STORE_PARAM_TEXT(template_id),
                                     STORE_PARAM_TEXT(network_json), STORE_PARAM_INT(updated_at) };
    return run(s, sql_template_network_put, true, p, ARRAY_SIZE(p), NULL, NULL, NULL);
}

int store_template_network_get(struct store *s, const char *owner, const char *template_id,
                               char **ret_network_json)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(owner), STORE_PARAM_TEXT(template_id) };
    char *text = NULL;
    int r;

    if (!s || !ret_network_json || !text_ok(owner, true) || !text_ok(template_id, true)) {
        return -EINVAL;
    }
    r = run(s, sql_template_network_get, true, p, ARRAY_SIZE(p), text_row, &text, NULL);
    if (r < 0) {
        free(text);
        return r;
    }
    if (!text) {
        return -ENOENT;
    }
    *ret_network_json = text;
    return 0;
}

int store_template_network_delete(struct store *s, const char *owner, const char *template_id)
{
    const struct store_param p[] = { STORE_PARAM_TEXT(owner), STORE_PARAM_TEXT(template_id) };

    if (!s || !text_ok(owner, true) || !text_ok(template_id, true)) {
        return -EINVAL;
    }
    return change_one(s, sql_template_network_delete, true, p, ARRAY_SIZE(p), -ENOENT);
}
