/*
 * The store on PostgreSQL (libpq): for several hosts and several space-api
 * replicas sharing one database.
 *
 * One connection, opened from the URL with client_encoding forced to UTF8
 * and, unless the URL says otherwise, a 10 s connect timeout. Every
 * statement goes through PQexecParams() with text parameters (integers are
 * printed here); the SQL text is store.c's and never contains a value. Server notices ("relation
 * already exists, skipping") go to the debug log instead of libpq's default, stderr.
 *
 * Lost connections: before a statement, a connection known to be broken is
 * reset; a statement that fails because the connection dropped is retried
 * once on a fresh one. Neither happens inside a transaction: the server has
 * already rolled it back, so continuing on a new connection would silently
 * run the rest outside it. There the statement fails with -EIO, the commit
 * fails, and store_rollback() succeeds (the transaction is gone either way);
 * the next statement outside reconnects. A retried INSERT whose first reply
 * was lost can report -EEXIST: the row is there.
 *
 * Failed statements inside a transaction: PostgreSQL aborts the whole
 * transaction on any error, SQLite fails only the statement. To give both
 * SQLite's behaviour (store.c), each statement inside a transaction runs
 * under SAVEPOINT store_statement, released on success and rolled back to
 * on failure. That costs two round trips per statement, only inside
 * transactions, which are rare and short.
 *
 * Claims: the claim's row selection ends in FOR UPDATE SKIP LOCKED, so
 * replicas claiming at once each take a different row instead of queueing
 * on one (store.c explains the statement).
 *
 * Errors: unique_violation (23505) is -EEXIST, foreign_key_violation
 * (23503) -ENOENT, out_of_memory (53200) and libpq allocation failures
 * -ENOMEM, anything else -EIO with the server's message logged at debug.
 *
 * Loop thread only; calls block for one round trip (or two, see above).
 */
#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/store-internal.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/strbuf.h"

/* pg_type OIDs of the integer types (catalog/pg_type_d.h is a server header). */
#define INT8OID 20
#define INT2OID 21
#define INT4OID 23

/* "-9223372036854775808" plus NUL. */
#define INT64_TEXT_MAX 21

/* Any constant will do; it only has to be the same in every replica. */
#define MIGRATION_LOCK_SQL "SELECT pg_advisory_xact_lock(7310575182693773666)"

struct store_pg {
    struct store base; /* first: struct store * converts to and from this */
    PGconn *conn;
};

static struct store_pg *to_pg(struct store *s)
{
    assert(s->driver == &store_pg_driver);
    return (struct store_pg *)s;
}

/* libpq messages end in a newline, which a log line must not. */
static int message_len(const char *msg)
{
    size_t n = strlen(msg);

    while (n > 0 && msg[n - 1] == '\n') {
        n--;
    }
    return (int)MIN(n, (size_t)INT32_MAX);
}

static void pg_notice(void *userdata, const char *message)
{
    log_debug("store-pg: %.*s", message_len(message), message);
}

static int pg_error(struct store_pg *s, const PGresult *res, const char *sql)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(s->conn);

    log_debug("store-pg: %.*s (%s) in '%s'", message_len(msg), msg, state ? state : "-", sql);
    if (!state) {
        return -EIO;
    }
    if (strcmp(state, "23505") == 0) {
        return -EEXIST;
    }
    if (strcmp(state, "23503") == 0) {
        return -ENOENT;
    }
    if (strcmp(state, "53200") == 0) {
        return -ENOMEM;
    }
    return -EIO;
}

/* Resets a broken connection, except inside a transaction (see the top of the file). */
static int pg_ensure_connected(struct store_pg *s)
{
    if (PQstatus(s->conn) == CONNECTION_OK) {
        return 0;
    }
    if (s->base.in_transaction) {
        log_debug("store-pg: connection lost inside a transaction");
        return -EIO;
    }
    log_debug("store-pg: connection lost, reconnecting");
    PQreset(s->conn);
    if (PQstatus(s->conn) != CONNECTION_OK) {
        const char *msg = PQerrorMessage(s->conn);

        log_debug("store-pg: cannot reconnect: %.*s", message_len(msg), msg);
        return -EIO;
    }
    return 0;
}

/*
 * Sends one statement (values != NULL or n == 0: PQexecParams) or a script
 * (script: PQexec, several statements, no parameters) and returns its
 * result, retrying once on a fresh connection when this one dropped.
 */
static int pg_exec(struct store_pg *s, const char *sql, bool script, int n,
                   const char *const *values, PGresult **ret)
{
    for (unsigned attempt = 0;; attempt++) {
        PGresult *res;
        ExecStatusType st;
        int r;

        r = pg_ensure_connected(s);
        if (r < 0) {
            return r;
        }
        res = script ? PQexec(s->conn, sql)
                     : PQexecParams(s->conn, sql, n, NULL, values, NULL, NULL, 0);
        st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
            *ret = res;
            return 0;
        }
        if (attempt == 0 && PQstatus(s->conn) == CONNECTION_BAD && !s->base.in_transaction) {
            PQclear(res);
            continue;
        }
        /* NULL on a healthy connection: libpq could not allocate. */
        r = !res && PQstatus(s->conn) == CONNECTION_OK ? -ENOMEM : pg_error(s, res, sql);
        PQclear(res);
        return r;
    }
}

static int pg_simple(struct store_pg *s, const char *sql, bool script)
{
    PGresult *res = NULL;
    int r;

    r = pg_exec(s, sql, script, 0, NULL, &res);
    PQclear(res);
    return r;
}

static int pg_rows(const PGresult *res, store_row_fn fn, void *userdata)
{
    struct store_value cols[STORE_MAX_COLUMNS];
    int n_rows = PQntuples(res), n_cols = PQnfields(res);
    int r;

    if (n_cols < 0 || (size_t)n_cols > ARRAY_SIZE(cols)) {
        return -EIO;
    }
    for (int i = 0; i < n_rows; i++) {
        for (int j = 0; j < n_cols; j++) {
            Oid type = PQftype(res, j);

            cols[j] = (struct store_value){ 0 };
            if (PQgetisnull(res, i, j)) {
                cols[j].is_null = true;
                continue;
            }
            cols[j].text = PQgetvalue(res, i, j);
            if ((type == INT8OID || type == INT4OID || type == INT2OID) &&
                parse_i64(cols[j].text, &cols[j].integer) < 0) {
                log_debug("store-pg: cannot parse integer '%s'", cols[j].text);
                return -EIO;
            }
        }
        r = fn(cols, (size_t)n_cols, userdata);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/*
 * Runs one statement: fn (may be NULL) sees each result row, *ret_changes
 * (may be NULL) gets the rows an INSERT/UPDATE/DELETE changed.
 */
static int pg_run(struct store *base, const char *sql, bool stable_sql,
                  const struct store_param *params, size_t n_params, store_row_fn fn,
                  void *userdata, uint64_t *ret_changes)
{
    struct store_pg *s = to_pg(base);
    const bool savepoint = s->base.in_transaction;
    const char **values = NULL;
    char *numbers = NULL; /* n_params slots of INT64_TEXT_MAX bytes */
    PGresult *res = NULL;
    const char *tuples;
    int r;

    if (n_params > STORE_MAX_PARAMS) {
        return -EINVAL;
    }
    if (n_params > 0) {
        values = calloc(n_params, sizeof(*values));
        numbers = calloc(n_params, INT64_TEXT_MAX);
        if (!values || !numbers) {
            r = -ENOMEM;
            goto out;
        }
    }
    for (size_t i = 0; i < n_params; i++) {
        switch (params[i].type) {
        case STORE_PARAM_TEXT:
            values[i] = params[i].text;
            break;
        case STORE_PARAM_INT:
            values[i] = numbers + i * INT64_TEXT_MAX;
            snprintf(numbers + i * INT64_TEXT_MAX, INT64_TEXT_MAX, "%" PRId64, params[i].integer);
            break;
        default:
            values[i] = NULL;
            break;
        }
    }

    if (savepoint) {
        r = pg_simple(s, "SAVEPOINT store_statement", false);
        if (r < 0) {
            goto out;
        }
    }
    r = pg_exec(s, sql, false, (int)n_params, values, &res);
    if (savepoint) {
        if (r < 0) {
            /* Undo the statement, keep the transaction. */
            if (PQstatus(s->conn) == CONNECTION_OK) {
                (void)pg_simple(s,
                                "ROLLBACK TO SAVEPOINT store_statement; "
                                "RELEASE SAVEPOINT store_statement",
                                true);
            }
            goto out;
        }
        r = pg_simple(s, "RELEASE SAVEPOINT store_statement", false);
    }
    if (r < 0) {
        goto out;
    }
    if (fn) {
        r = pg_rows(res, fn, userdata);
        if (r < 0) {
            goto out;
        }
    }
    if (ret_changes) {
        uint64_t changes = 0;

        /* Empty for statements that change no rows by nature. */
        tuples = PQcmdTuples(res);
        if (*tuples && parse_u64(tuples, &changes) < 0) {
            r = -EIO;
            goto out;
        }
        *ret_changes = changes;
    }
    r = 0;
out:
    PQclear(res);
    free(numbers);
    free(values);
    return r;
}

static void pg_close(struct store *base)
{
    struct store_pg *s = to_pg(base);

    /* Closing the connection rolls back any open transaction. */
    PQfinish(s->conn);
    free(s);
}

static int pg_open(const char *url, struct store **ret)
{
    /* With expand_dbname, the URL's parameters take the place of "dbname":
     * they override the defaults before it and are overridden by those after. */
    const char *const keywords[] = {
        "connect_timeout", "fallback_application_name", "dbname", "client_encoding", NULL,
    };
    const char *const values[] = { "10", "space-api", url, "UTF8", NULL };
    struct store_pg *s = NULL;
    int r;

    s = calloc(1, sizeof(*s));
    if (!s) {
        return -ENOMEM;
    }
    s->base.driver = &store_pg_driver;
    s->conn = PQconnectdbParams(keywords, values, 1);
    if (!s->conn) {
        r = -ENOMEM;
        goto fail;
    }
    if (PQstatus(s->conn) != CONNECTION_OK) {
        const char *msg = PQerrorMessage(s->conn);

        /* Never log the URL: it may carry a password. */
        log_debug("store-pg: cannot connect: %.*s", message_len(msg), msg);
        r = -EIO;
        goto fail;
    }
    PQsetNoticeProcessor(s->conn, pg_notice, NULL);
    *ret = &s->base;
    return 0;
fail:
    PQfinish(s->conn);
    free(s);
    return r;
}

static int pg_begin(struct store *base)
{
    return pg_simple(to_pg(base), "BEGIN", false);
}

static int pg_commit(struct store *base)
{
    struct store_pg *s = to_pg(base);
    PGresult *res = NULL;
    int r;

    r = pg_exec(s, "COMMIT", false, 0, NULL, &res);
    /* COMMIT of a transaction that had failed "succeeds" with the tag ROLLBACK.
     * Either way the server has ended the transaction. */
    if (r >= 0 && strcmp(PQcmdStatus(res), "COMMIT") != 0) {
        log_debug("store-pg: commit rolled back a failed transaction");
        r = -EIO;
    }
    PQclear(res);
    return r;
}

static int pg_rollback(struct store *base)
{
    struct store_pg *s = to_pg(base);

    /* A lost connection took the transaction with it. */
    if (PQstatus(s->conn) != CONNECTION_OK) {
        return 0;
    }
    return pg_simple(s, "ROLLBACK", false);
}

static int pg_exec_script(struct store *base, const char *sql)
{
    return pg_simple(to_pg(base), sql, true);
}

/*
 * The column is TEXT (one schema for both databases) and cast per row;
 * ->> with a text key yields the member's string value, NULL when absent.
 * The explicit ::text picks the text overload of ->> (there is an integer
 * one for arrays).
 */
static int pg_metadata_clause(struct strbuf *sql, size_t key_param, size_t value_param)
{
    return strbuf_appendf(sql, "(sandboxes.metadata::jsonb ->> $%zu::text) = $%zu::text", key_param,
                          value_param);
}

const struct store_driver store_pg_driver = {
    .kind = "postgresql",
    .open = pg_open,
    .close = pg_close,
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .exec_script = pg_exec_script,
    .run = pg_run,
    .migration_lock_sql = MIGRATION_LOCK_SQL,
    .metadata_clause = pg_metadata_clause,
    .claim_lock_clause = " FOR UPDATE OF o SKIP LOCKED",
};
