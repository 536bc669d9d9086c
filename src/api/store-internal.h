#pragma once
/*
 * What store.c shares with the two database drivers behind the store seam
 * (store-sqlite.c, store-pg.c). Callers never include this: they use
 * store.h. The seam sits one level below the verbs: a driver knows how to
 * open a connection, run transactions, run one statement with typed
 * parameters and hand back its rows, plus a few dialect hooks; every verb
 * (insert, get, list, claim, ...) is written once, in store.c, over it.
 *
 *  - struct store_driver, the seam, and struct store, the head every
 *    driver embeds as its first member;
 *  - parameters and result values in a backend-neutral form;
 *  - the embedded migrations (generated from migrations/NNNN-*.sql).
 *
 * Placeholders: the shared SQL writes $1..$n. That is PostgreSQL's syntax,
 * and SQLite reads "$1" as a named parameter that store-sqlite.c binds by
 * the number in its name, so no dialect hook is needed to rewrite them (a
 * driver for a database that only knows '?' would add one here).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/store.h"

struct strbuf;
struct secretbox_key;

/*
 * The head of every driver's object. in_transaction is maintained by the
 * store_begin/commit/rollback() wrappers; drivers only read it (store-pg.c
 * must not reconnect or retry inside a transaction). claim_sql is built
 * once, from the dialect, the first time store_operation_claim() runs.
 */
struct store {
    const struct store_driver *driver;
    bool in_transaction;
    bool relaxed; /* the open transaction is store_begin_relaxed()'s */
    char *claim_sql;
    struct secretbox_key *token_key; /* store_set_token_key(); NULL until set */
};

enum store_param_type {
    STORE_PARAM_NULL,
    STORE_PARAM_TEXT,
    STORE_PARAM_INT,
};

/* One statement parameter. text is borrowed for the duration of the call. */
struct store_param {
    enum store_param_type type;
    const char *text;
    int64_t integer;
};

/* A NULL string becomes SQL NULL. */
#define STORE_PARAM_TEXT(s)                                                                        \
    ((struct store_param){ .type = (s) ? STORE_PARAM_TEXT : STORE_PARAM_NULL, .text = (s) })
#define STORE_PARAM_INT(i) ((struct store_param){ .type = STORE_PARAM_INT, .integer = (i) })

/*
 * One column of a result row, valid only during the row callback. For SQL
 * NULL is_null is set and text is NULL; for an integer column integer holds
 * the value (text may be NULL); for a text column text holds it.
 */
struct store_value {
    const char *text;
    int64_t integer;
    bool is_null;
};

/* The most columns any statement of ours returns; implementations check it. */
#define STORE_MAX_COLUMNS 32
/* The most parameters a statement may carry (SQLite's default is 32766). */
#define STORE_MAX_PARAMS 10000

/* Called once per result row; a negative return stops the statement and is returned. */
typedef int (*store_row_fn)(const struct store_value *cols, size_t n_cols, void *userdata);

struct store_migration {
    int64_t version;
    const char *name;
    const char *sql;
};

/* Generated from migrations/NNNN-*.sql by migrations/embed.py, ordered by version. */
extern const struct store_migration store_migrations[];
extern const size_t store_migrations_n;
/* store_migrate() up to and including version (tests: a database as an older release left it). */
int store_migrate_until(struct store *s, int64_t version);

/*
 * Appends the dialect's test "the metadata object has key $key_param with
 * value $value_param" (parameter numbers, 1-based).
 */
typedef int (*store_metadata_clause_fn)(struct strbuf *sql, size_t key_param, size_t value_param);

/*
 * The seam: one per database. Every member is required except
 * migration_lock_sql. store.c validates arguments (non-NULL, UTF-8, JSON
 * shape) before calling, so drivers see only well-formed values. Return
 * values follow store.h; ret_* are written only on success.
 */
struct store_driver {
    const char *kind;
    /* target is the URL with any "sqlite:" prefix removed. */
    int (*open)(const char *target, struct store **ret);
    /* Frees the driver's object; store.c frees what struct store holds. */
    void (*close)(struct store *s);

    int (*begin)(struct store *s);
    /* A commit that fails leaves no transaction open (it is rolled back). */
    int (*commit)(struct store *s);
    int (*rollback)(struct store *s);
    /*
     * Outside a transaction: whether the commits that follow wait for the disk (full) or
     * only reach the OS (store_begin_relaxed()). NULL where a commit always waits.
     */
    int (*set_synchronous)(struct store *s, bool full);

    /* Runs a parameterless script of one or more statements (a migration). */
    int (*exec_script)(struct store *s, const char *sql);
    /*
     * Runs one statement: fn (may be NULL) sees each result row, *ret_changes
     * (may be NULL) gets the rows an INSERT/UPDATE/DELETE changed. With
     * stable_sql the text lives as long as the store and is the same for every
     * call with this address, so the driver may keep it prepared. A failed
     * statement inside a transaction fails only itself (store.c's contract).
     */
    int (*run)(struct store *s, const char *sql, bool stable_sql, const struct store_param *params,
               size_t n_params, store_row_fn fn, void *userdata, uint64_t *ret_changes);

    /* ---- dialect hooks ---- */
    /* Serialises concurrent migrators until the transaction ends; NULL when BEGIN does. */
    const char *migration_lock_sql;
    store_metadata_clause_fn metadata_clause;
    /*
     * Appended to the row selection of store_operation_claim() so concurrent
     * claimers skip rows another one holds (PostgreSQL: FOR UPDATE SKIP LOCKED).
     * Empty where writers are serialised anyway (SQLite: one writer at a time,
     * and the claim is a single UPDATE that re-checks the lease).
     */
    const char *claim_lock_clause;
};

extern const struct store_driver store_sqlite_driver;
extern const struct store_driver store_pg_driver;

/* Row callback for a single BIGINT column; userdata is a struct store_int64_row. */
struct store_int64_row {
    int64_t value;
    bool found;
};
int store_row_int64(const struct store_value *cols, size_t n_cols, void *userdata);
