#pragma once
/*
 * What store.c shares with the two implementations behind the store seam
 * (store-sqlite.c, store-pg.c). Callers never include this: they use
 * store.h. Everything here is about running the one schema's SQL:
 *
 *  - struct store_ops, the seam itself, and struct store, the head every
 *    implementation embeds as its first member;
 *  - the SQL text both implementations run. Parameters are written $1..$n:
 *    PostgreSQL's syntax, and to SQLite a named parameter "$1", which
 *    store-sqlite.c binds by name. The text never contains a value;
 *  - parameters and result values in a backend-neutral form, and the shared
 *    code that turns them into and out of store rows, so column order is
 *    written down exactly once;
 *  - the embedded migrations (generated from migrations/NNNN-*.sql).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/store.h"

struct strbuf;

/*
 * The head of every implementation's object. in_transaction is maintained
 * by the store_begin/commit/rollback() wrappers; implementations only read
 * it (store-pg.c must not reconnect or retry inside a transaction).
 */
struct store {
    const struct store_ops *ops;
    bool in_transaction;
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

/*
 * The seam. Every member is required except migration_lock. The wrappers
 * in store.c validate arguments (non-NULL, UTF-8, JSON shape) before
 * calling, so implementations see only well-formed rows. Return values
 * follow store.h; ret_* are written only on success.
 */
struct store_ops {
    const char *kind;
    /* target is the URL with any "sqlite:" prefix removed. */
    int (*open)(const char *target, struct store **ret);
    void (*close)(struct store *s);

    int (*begin)(struct store *s);
    /* A commit that fails leaves no transaction open (it is rolled back). */
    int (*commit)(struct store *s);
    int (*rollback)(struct store *s);

    /* Runs a parameterless script of one or more statements (a migration). */
    int (*exec_script)(struct store *s, const char *sql);
    /* Serialises concurrent migrators until the transaction ends; NULL when BEGIN does. */
    int (*migration_lock)(struct store *s);
    int (*migration_applied)(struct store *s, int64_t version, bool *ret);
    int (*migration_record)(struct store *s, int64_t version, int64_t applied_at);

    int (*sandbox_insert)(struct store *s, const struct store_sandbox *sb);
    int (*sandbox_update)(struct store *s, const struct store_sandbox *sb);
    int (*sandbox_get)(struct store *s, const char *id, struct store_sandbox *ret);
    int (*sandbox_list)(struct store *s, const struct store_sandbox_filter *f,
                        struct store_sandbox **ret, size_t *ret_n);
    int (*sandbox_delete)(struct store *s, const char *id);

    int (*operation_insert)(struct store *s, const struct store_operation *op);
    int (*operation_update)(struct store *s, const struct store_operation *op);
    int (*operation_get)(struct store *s, const char *id, struct store_operation *ret);
    int (*operation_list_unfinished)(struct store *s, struct store_operation **ret, size_t *ret_n);

    int (*api_key_insert)(struct store *s, const struct store_api_key *key);
    int (*api_key_get_by_hash)(struct store *s, const char *hash, struct store_api_key *ret);
    int (*api_key_list)(struct store *s, struct store_api_key **ret, size_t *ret_n);
    int (*api_key_delete)(struct store *s, const char *id);
    int (*api_key_touch)(struct store *s, const char *id, int64_t used_at);
};

extern const struct store_ops store_sqlite_ops;
extern const struct store_ops store_pg_ops;

/* SQL shared by both implementations (defined in store.c). */
extern const char store_sql_migrations_table[];
extern const char store_sql_migration_applied[];
extern const char store_sql_migration_record[];
extern const char store_sql_sandbox_insert[];
extern const char store_sql_sandbox_update[];
extern const char store_sql_sandbox_get[];
extern const char store_sql_sandbox_cursor[];
extern const char store_sql_sandbox_delete[];
extern const char store_sql_operation_insert[];
extern const char store_sql_operation_update[];
extern const char store_sql_operation_get[];
extern const char store_sql_operation_list_unfinished[];
extern const char store_sql_api_key_insert[];
extern const char store_sql_api_key_get_by_hash[];
extern const char store_sql_api_key_list[];
extern const char store_sql_api_key_delete[];
extern const char store_sql_api_key_touch[];

/* Parameter arrays for the insert/update statements above; the row is borrowed. */
#define STORE_SANDBOX_N_PARAMS 17
#define STORE_OPERATION_N_PARAMS 8
#define STORE_API_KEY_N_PARAMS 6
void store_sandbox_params(const struct store_sandbox *sb, struct store_param *ret);
void store_operation_params(const struct store_operation *op, struct store_param *ret);
void store_api_key_params(const struct store_api_key *key, struct store_param *ret);

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
void store_rows_init_sandbox(struct store_rows *rows);
void store_rows_init_operation(struct store_rows *rows);
void store_rows_init_api_key(struct store_rows *rows);
int store_rows_add(const struct store_value *cols, size_t n_cols, void *rows);
/* Moves the first row into *ret (an item of the rows' type); -ENOENT when there is none. */
int store_rows_take_one(struct store_rows *rows, void *ret);
/* Returns the array (NULL when empty) and its length; rows is left empty. */
void *store_rows_take_all(struct store_rows *rows, size_t *ret_n);
void store_rows_release(struct store_rows *rows);

/* Row callback for a single BIGINT column; userdata is a struct store_int64_row. */
struct store_int64_row {
    int64_t value;
    bool found;
};
int store_row_int64(const struct store_value *cols, size_t n_cols, void *userdata);

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

/*
 * Appends the dialect's test "the metadata object has key $key_param with
 * value $value_param" (parameter numbers, 1-based).
 */
typedef int (*store_metadata_clause_fn)(struct strbuf *sql, size_t key_param, size_t value_param);

/*
 * Builds the list query. cursor_created_at is the created_at of f->after_id's
 * row, looked up by the caller (store_sql_sandbox_cursor); ignored when
 * f->after_id is NULL. -EINVAL for a malformed filter.
 */
int store_sandbox_list_query(const struct store_sandbox_filter *f, int64_t cursor_created_at,
                             store_metadata_clause_fn metadata_clause, struct store_query *ret);
void store_query_release(struct store_query *q);
