/*
 * The store on SQLite: the embedded default for a single host.
 *
 * One connection, opened with WAL (readers never block the writer, and a
 * crash loses nothing committed), foreign keys on (SQLite leaves them off
 * per connection), a busy timeout so a second process (the CLI, a backup)
 * holding the lock briefly makes us wait rather than fail, and extended
 * result codes so a constraint violation can be told apart.
 *
 * Every statement is prepared with its parameters bound (sqlite_run()); the
 * fixed statements of store.c (stable_sql) are prepared once and kept in a
 * small cache keyed by the address of their text, the others (the list
 * query, whose shape depends on the filter) are prepared per call. The shared SQL writes
 * parameters as $1..$n, which SQLite treats as named parameters "$1"...;
 * sqlite_bind() binds each by the number in its name, so repeating a
 * parameter or using them out of order is safe.
 *
 * Transactions are BEGIN IMMEDIATE: the write lock is taken up front, so two
 * writers queue on the busy timeout instead of one failing with SQLITE_BUSY
 * when it upgrades from reader to writer. That also serialises migrators.
 *
 * Claims: SQLite has no row locks; a write transaction locks the database,
 * so the claim's single UPDATE ... RETURNING runs alone and re-checks the
 * lease itself (claim_lock_clause is empty).
 *
 * Errors: a PRIMARY KEY/UNIQUE violation is -EEXIST, a FOREIGN KEY violation
 * -ENOENT (the referenced row is missing), SQLITE_NOMEM -ENOMEM, everything
 * else -EIO with SQLite's message logged at debug.
 *
 * Loop thread only, like the rest of the store (opened SQLITE_OPEN_NOMUTEX).
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/store-internal.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/strbuf.h"

#define BUSY_TIMEOUT_MS 5000
#define STMT_CACHE_MAX 32

struct store_sqlite {
    struct store base; /* first: struct store * converts to and from this */
    sqlite3 *db;
    struct {
        const char *sql;
        sqlite3_stmt *stmt;
    } cache[STMT_CACHE_MAX];
    size_t n_cache;
};

static struct store_sqlite *to_sqlite(struct store *s)
{
    assert(s->driver == &store_sqlite_driver);
    return (struct store_sqlite *)s;
}

/* Maps an SQLite result code to an errno and logs SQLite's message. */
static int sqlite_error(struct store_sqlite *s, int rc, const char *sql)
{
    log_debug("store-sqlite: %s (%d) in '%s'", sqlite3_errmsg(s->db), rc, sql);
    switch (rc) {
    case SQLITE_CONSTRAINT_PRIMARYKEY:
    case SQLITE_CONSTRAINT_UNIQUE:
        return -EEXIST;
    case SQLITE_CONSTRAINT_FOREIGNKEY:
        return -ENOENT;
    case SQLITE_NOMEM:
        return -ENOMEM;
    default:
        return -EIO;
    }
}

/* Returns a statement ready to bind; *ret_cached says whether to reset rather than finalize it. */
static int sqlite_prepare(struct store_sqlite *s, const char *sql, bool cache, sqlite3_stmt **ret,
                          bool *ret_cached)
{
    sqlite3_stmt *stmt = NULL;
    int rc;

    if (cache) {
        for (size_t i = 0; i < s->n_cache; i++) {
            if (s->cache[i].sql == sql) {
                *ret = s->cache[i].stmt;
                *ret_cached = true;
                return 0;
            }
        }
    }
    cache = cache && s->n_cache < STMT_CACHE_MAX;
    rc = sqlite3_prepare_v3(s->db, sql, -1, cache ? SQLITE_PREPARE_PERSISTENT : 0, &stmt, NULL);
    if (rc != SQLITE_OK) {
        return sqlite_error(s, rc, sql);
    }
    if (cache) {
        s->cache[s->n_cache].sql = sql;
        s->cache[s->n_cache].stmt = stmt;
        s->n_cache++;
    }
    *ret = stmt;
    *ret_cached = cache;
    return 0;
}

static int sqlite_bind(struct store_sqlite *s, sqlite3_stmt *stmt, const char *sql,
                       const struct store_param *params, size_t n_params)
{
    int n = sqlite3_bind_parameter_count(stmt);

    for (int i = 1; i <= n; i++) {
        const char *name = sqlite3_bind_parameter_name(stmt, i);
        const struct store_param *p;
        uint32_t number;
        int rc;

        /* Our SQL only ever says $1..$n; anything else is a bug in it. */
        if (!name || name[0] != '$' || parse_u32(name + 1, &number) < 0 || number < 1 ||
            number > n_params) {
            log_debug("store-sqlite: parameter '%s' has no value in '%s'", name ? name : "?", sql);
            return -EIO;
        }
        p = &params[number - 1];
        switch (p->type) {
        case STORE_PARAM_TEXT:
            rc = sqlite3_bind_text(stmt, i, p->text, -1, SQLITE_STATIC);
            break;
        case STORE_PARAM_INT:
            rc = sqlite3_bind_int64(stmt, i, p->integer);
            break;
        default:
            rc = sqlite3_bind_null(stmt, i);
            break;
        }
        if (rc != SQLITE_OK) {
            return sqlite_error(s, rc, sql);
        }
    }
    return 0;
}

static int sqlite_row(sqlite3_stmt *stmt, store_row_fn fn, void *userdata)
{
    struct store_value cols[STORE_MAX_COLUMNS];
    int n = sqlite3_column_count(stmt);

    if (n < 0 || (size_t)n > ARRAY_SIZE(cols)) {
        return -EIO;
    }
    for (int i = 0; i < n; i++) {
        cols[i] = (struct store_value){ 0 };
        switch (sqlite3_column_type(stmt, i)) {
        case SQLITE_NULL:
            cols[i].is_null = true;
            break;
        case SQLITE_INTEGER:
            cols[i].integer = sqlite3_column_int64(stmt, i);
            break;
        case SQLITE_FLOAT:
            cols[i].integer = (int64_t)sqlite3_column_double(stmt, i);
            break;
        default:
            /* NULL here, for a TEXT column, can only mean out of memory. */
            cols[i].text = (const char *)sqlite3_column_text(stmt, i);
            if (!cols[i].text) {
                return -ENOMEM;
            }
            break;
        }
    }
    return fn(cols, (size_t)n, userdata);
}

/*
 * Runs one statement: fn (may be NULL) sees each result row, *ret_changes
 * (may be NULL) gets the rows an INSERT/UPDATE/DELETE changed.
 */
static int sqlite_run(struct store *base, const char *sql, bool cache,
                      const struct store_param *params, size_t n_params, store_row_fn fn,
                      void *userdata, uint64_t *ret_changes)
{
    struct store_sqlite *s = to_sqlite(base);
    sqlite3_stmt *stmt = NULL;
    bool cached = false;
    int r;

    r = sqlite_prepare(s, sql, cache, &stmt, &cached);
    if (r < 0) {
        return r;
    }
    r = sqlite_bind(s, stmt, sql, params, n_params);
    if (r < 0) {
        goto out;
    }
    for (;;) {
        int rc = sqlite3_step(stmt);

        if (rc == SQLITE_DONE) {
            break;
        }
        if (rc != SQLITE_ROW) {
            r = sqlite_error(s, rc, sql);
            goto out;
        }
        if (fn) {
            r = sqlite_row(stmt, fn, userdata);
            if (r < 0) {
                goto out;
            }
        }
    }
    if (ret_changes) {
        *ret_changes = (uint64_t)sqlite3_changes64(s->db);
    }
    r = 0;
out:
    if (cached) {
        /* Reset ends the statement's implicit read transaction. */
        sqlite3_reset(stmt);
        sqlite3_clear_bindings(stmt);
    } else {
        sqlite3_finalize(stmt);
    }
    return r;
}

static int sqlite_exec(struct store_sqlite *s, const char *sql)
{
    char *error = NULL;
    int rc;

    rc = sqlite3_exec(s->db, sql, NULL, NULL, &error);
    if (rc != SQLITE_OK) {
        log_debug("store-sqlite: %s (%d)", error ? error : sqlite3_errstr(rc), rc);
        sqlite3_free(error);
        return rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
    }
    return 0;
}

static void sqlite_close(struct store *base)
{
    struct store_sqlite *s = to_sqlite(base);

    for (size_t i = 0; i < s->n_cache; i++) {
        sqlite3_finalize(s->cache[i].stmt);
    }
    /* Closing finishes any open transaction by rolling it back. */
    sqlite3_close_v2(s->db);
    free(s);
}

static int sqlite_open(const char *target, struct store **ret)
{
    struct store_sqlite *s = NULL;
    int r, rc;

    s = calloc(1, sizeof(*s));
    if (!s) {
        return -ENOMEM;
    }
    s->base.driver = &store_sqlite_driver;
    rc = sqlite3_open_v2(target, &s->db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        /* Even on failure a handle may be returned to carry the message. */
        log_debug("store-sqlite: cannot open '%s': %s", target,
                  s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        r = rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
        goto fail;
    }
    sqlite3_extended_result_codes(s->db, 1);
    rc = sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
    if (rc != SQLITE_OK) {
        r = sqlite_error(s, rc, "busy_timeout");
        goto fail;
    }
    /* journal_mode answers with the mode in effect: "memory" for ":memory:",
     * which cannot do WAL and does not need it. secure_delete: the bytes of a
     * cleared or deleted value (a legacy plaintext token, a deleted row) are
     * zeroed, not left in free pages (Debian builds it on; say so anyway).
     * synchronous FULL: every commit waits for the disk unless store_begin_relaxed()
     * says it need not (Debian's default too; say so anyway). */
    r = sqlite_exec(s, "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON; "
                       "PRAGMA secure_delete = ON; PRAGMA synchronous = FULL");
    if (r < 0) {
        goto fail;
    }
    *ret = &s->base;
    return 0;
fail:
    sqlite3_close_v2(s->db);
    free(s);
    return r;
}

static int sqlite_begin(struct store *base)
{
    return sqlite_exec(to_sqlite(base), "BEGIN IMMEDIATE");
}

static int sqlite_commit(struct store *base)
{
    struct store_sqlite *s = to_sqlite(base);
    int r;

    r = sqlite_exec(s, "COMMIT");
    if (r < 0 && !sqlite3_get_autocommit(s->db)) {
        /* COMMIT can fail (SQLITE_BUSY) and leave the transaction open;
         * the contract is that a failed commit leaves none. */
        (void)sqlite_exec(s, "ROLLBACK");
    }
    return r;
}

static int sqlite_rollback(struct store *base)
{
    struct store_sqlite *s = to_sqlite(base);

    /* SQLite may already have rolled back by itself (SQLITE_FULL, SQLITE_IOERR). */
    if (sqlite3_get_autocommit(s->db)) {
        return 0;
    }
    return sqlite_exec(s, "ROLLBACK");
}

/* SQLite refuses to change it inside a transaction: store.c sets it before BEGIN. */
static int sqlite_set_synchronous(struct store *base, bool full)
{
    return sqlite_exec(to_sqlite(base),
                       full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
}

static int sqlite_exec_script(struct store *base, const char *sql)
{
    return sqlite_exec(to_sqlite(base), sql);
}

/*
 * json_each() yields one row per member of the metadata object; its value
 * column is SQL text for a JSON string, and store.c only lets strings in.
 */
static int sqlite_metadata_clause(struct strbuf *sql, size_t key_param, size_t value_param)
{
    return strbuf_appendf(sql,
                          "EXISTS (SELECT 1 FROM json_each(sandboxes.metadata) AS m "
                          "WHERE m.key = $%zu AND m.value = $%zu)",
                          key_param, value_param);
}

const struct store_driver store_sqlite_driver = {
    .kind = "sqlite",
    .open = sqlite_open,
    .close = sqlite_close,
    .begin = sqlite_begin,
    .commit = sqlite_commit,
    .rollback = sqlite_rollback,
    .set_synchronous = sqlite_set_synchronous,
    .exec_script = sqlite_exec_script,
    .run = sqlite_run,
    .migration_lock_sql = NULL,
    .metadata_clause = sqlite_metadata_clause,
    .claim_lock_clause = "",
};
