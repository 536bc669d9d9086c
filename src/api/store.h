#pragma once
/*
 * The store seam (architecture.md "State", style.md R16): the control
 * plane's durable state. Two implementations with one schema and one set of
 * numbered migrations (migrations/NNNN-*.sql): SQLite (embedded default, WAL)
 * in store-sqlite.c and PostgreSQL (libpq) in store-pg.c. Callers use the
 * store_*() wrappers only. One test suite (test-store.c) runs against both.
 *
 * Every function returns 0 or a negative errno: -ENOENT for a missing row,
 * -EEXIST for a duplicate key, -EIO for a database error (the library's
 * message is logged at debug inside the implementation), -ENOMEM.
 * Calls are blocking and made from the api's loop thread; they are short
 * (single-row statements on an index). Not thread-safe.
 *
 * Times are unix microseconds (int64). Strings in rows are heap-allocated and
 * owned by the row; *_release() frees them. JSON columns (metadata, env,
 * result) are stored and returned as JSON text.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

/*
 * A sandbox as the control plane knows it: what was asked (desired_state)
 * and what the controller last saw (state). States are the strings of
 * sandbox.h ("creating", "running", "paused", "killed", ...).
 */
struct store_sandbox {
    char *id;              /* 20 chars [a-z0-9] */
    char *template_id;
    char *alias;           /* may be NULL */
    char *client_id;
    char *state;           /* observed */
    char *desired_state;
    char *node_id;         /* may be NULL until placed */
    char *metadata_json;   /* object, "{}" when none */
    char *env_json;        /* object, "{}" when none */
    char *envd_access_token; /* may be NULL */
    char *error;           /* may be NULL */
    int64_t vcpus;
    int64_t memory_mb;
    int64_t disk_mb;
    int64_t created_at;
    int64_t updated_at;
    int64_t end_at;        /* when the timeout kills it; 0 = never */
};

struct store_sandbox_filter {
    const char *const *states;   /* NULL-terminated; NULL = any */
    const char *const *metadata; /* NULL-terminated "key=value" pairs, all must match; NULL = any */
    const char *template_id;     /* rows whose template_id or alias equals it; NULL = any */
    const int64_t *started_after;  /* created_at >= *started_after; NULL = unbounded */
    const int64_t *started_before; /* created_at < *started_before; NULL = unbounded */
    bool include_killed;         /* killed rows are hidden unless asked for */
    bool hide_dying;             /* also hide rows whose desired_state is killed (being killed) */
    bool descending;             /* newest first: (created_at, id) descending */
    const char *after_id;        /* pagination: rows strictly after this id's position in the
                                    order above (either direction); NULL = from the start */
    size_t limit;                /* 0 = no limit */
};

/* An asynchronous operation: the API -> controller contract. */
struct store_operation {
    char *id;              /* 32 hex chars */
    char *kind;            /* "sandbox.create", "sandbox.kill", ... */
    char *sandbox_id;      /* may be NULL */
    char *state;           /* "pending", "running", "succeeded", "failed" */
    char *error;           /* may be NULL */
    char *result_json;     /* may be NULL */
    int64_t created_at;
    int64_t updated_at;
};

struct store_api_key {
    char *id;              /* 32 hex chars */
    char *name;
    char *prefix;          /* first characters of the key, shown in listings */
    char *hash;            /* sha256 hex of the whole key; the key itself is never stored */
    int64_t created_at;
    int64_t last_used_at;  /* 0 = never */
};

/* "sqlite:PATH", a bare path (SQLite), or "postgresql://..." / "postgres://...". */
int store_open(const char *url, struct store **ret);
struct store *store_close(struct store *s);
/* Applies every migration not yet applied, each in its own transaction. Idempotent. */
int store_migrate(struct store *s);
/* "sqlite" or "postgresql". */
const char *store_kind(const struct store *s);

/* Transactions, for multi-row changes (e.g. sandbox row + its operation). Not nested. */
int store_begin(struct store *s);
int store_commit(struct store *s);
int store_rollback(struct store *s);

int store_sandbox_insert(struct store *s, const struct store_sandbox *sb);
/* Replaces every column of the row with sb->id. */
int store_sandbox_update(struct store *s, const struct store_sandbox *sb);
int store_sandbox_get(struct store *s, const char *id, struct store_sandbox *ret);
/* *ret is an array of *ret_n rows; free with store_sandbox_list_free(). */
int store_sandbox_list(struct store *s, const struct store_sandbox_filter *f,
                       struct store_sandbox **ret, size_t *ret_n);
int store_sandbox_delete(struct store *s, const char *id);
void store_sandbox_release(struct store_sandbox *sb);
void store_sandbox_list_free(struct store_sandbox *list, size_t n);

int store_operation_insert(struct store *s, const struct store_operation *op);
int store_operation_update(struct store *s, const struct store_operation *op);
int store_operation_get(struct store *s, const char *id, struct store_operation *ret);
/* Operations in state pending or running, oldest first (the controller's work list). */
int store_operation_list_unfinished(struct store *s, struct store_operation **ret, size_t *ret_n);
void store_operation_release(struct store_operation *op);
void store_operation_list_free(struct store_operation *list, size_t n);

int store_api_key_insert(struct store *s, const struct store_api_key *key);
int store_api_key_get_by_hash(struct store *s, const char *hash, struct store_api_key *ret);
int store_api_key_list(struct store *s, struct store_api_key **ret, size_t *ret_n);
int store_api_key_delete(struct store *s, const char *id);
int store_api_key_touch(struct store *s, const char *id, int64_t used_at);
void store_api_key_release(struct store_api_key *key);
void store_api_key_list_free(struct store_api_key *list, size_t n);
