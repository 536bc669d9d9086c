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
struct secretbox_key;

/*
 * A sandbox as the control plane knows it: what was asked (desired_state)
 * and what the controller last saw (state). States are the strings of
 * sandbox.h ("creating", "running", "paused", "killed", ...).
 */
struct store_sandbox {
    char *id; /* 20 chars [a-z0-9] */
    char *template_id;
    char *alias; /* may be NULL */
    char *client_id;
    char *state; /* observed */
    char *desired_state;
    char *node_id;           /* may be NULL until placed */
    char *metadata_json;     /* object, "{}" when none */
    char *env_json;          /* object, "{}" when none */
    char *envd_access_token; /* may be NULL; plaintext here, sealed at rest (store_set_token_key) */
    char *error;             /* may be NULL */
    int64_t vcpus;
    int64_t memory_mb;
    int64_t disk_mb;
    int64_t created_at;
    int64_t updated_at;
    int64_t end_at;       /* when the timeout kills it; 0 = never */
    bool private_traffic; /* user ports demand the traffic access token (E2B
                             network.allowPublicTraffic: false) */
    /* The egress policy (migration 6): a JSON object {"native": {...}, "e2b": {...}}
     * (api/egress.h); NULL = none recorded (a row an older release wrote: deny all). */
    char *network_json;
    /* Lifetime (migration 8, architecture.md "A sandbox's life"): while paused or suspended
     * the clock stands still, and this is what resume/restore gives back (end_at = now +
     * remaining_us). 0 = nothing kept (not paused); -1 = it had no end time. */
    int64_t remaining_us;
    bool auto_pause; /* at its end time it is suspended, not killed (E2B autoPause) */
    /* Traffic through the ingress restores (or resumes) it (E2B lifecycle.autoResume). Bit 1
     * of the auto_pause column (bit 0: auto_pause), so it needs no migration of its own. */
    bool auto_resume;
    /* The suspend at its end time keeps no memory (E2B autoPauseMemory: false): a restore
     * boots from the disk. Bit 2 of the auto_pause column, no migration either. */
    bool auto_pause_disk;
    /* Its own I/O limits (migration 12), handed to the node at create; 0: the node's. */
    int64_t net_bps, disk_bps, disk_iops;
};

struct store_sandbox_filter {
    const char *const *states;   /* NULL-terminated; NULL = any */
    const char *const *metadata; /* NULL-terminated "key=value" pairs, all must match; NULL = any */
    const char *template_id;     /* rows whose template_id or alias equals it; NULL = any */
    const int64_t *started_after;  /* created_at >= *started_after; NULL = unbounded */
    const int64_t *started_before; /* created_at < *started_before; NULL = unbounded */
    const int64_t *updated_after;  /* updated_at >= *updated_after (the route cache's poll);
                                      NULL = unbounded */
    bool include_killed;           /* killed rows are hidden unless asked for */
    bool hide_dying;               /* also hide rows whose desired_state is killed (being killed) */
    bool descending;               /* newest first: (created_at, id) descending */
    const char *after_id;          /* pagination: rows strictly after this id's position in the
                                      order above (either direction); NULL = from the start */
    size_t limit;                  /* 0 = no limit */
};

/*
 * Columns of a sandbox row, for store_sandbox_update_fields(): only the
 * columns named are written, so two writers changing different columns of
 * one row (the controller its state, a handler its end time) never undo
 * each other. id is the key and is never written.
 */
enum store_sandbox_field {
    STORE_SANDBOX_TEMPLATE_ID = 1u << 0,
    STORE_SANDBOX_ALIAS = 1u << 1,
    STORE_SANDBOX_CLIENT_ID = 1u << 2,
    STORE_SANDBOX_STATE = 1u << 3,
    STORE_SANDBOX_DESIRED_STATE = 1u << 4,
    STORE_SANDBOX_NODE_ID = 1u << 5,
    STORE_SANDBOX_METADATA = 1u << 6,
    STORE_SANDBOX_ENV = 1u << 7,
    STORE_SANDBOX_ENVD_ACCESS_TOKEN = 1u << 8,
    STORE_SANDBOX_ERROR = 1u << 9,
    STORE_SANDBOX_VCPUS = 1u << 10,
    STORE_SANDBOX_MEMORY_MB = 1u << 11,
    STORE_SANDBOX_DISK_MB = 1u << 12,
    STORE_SANDBOX_CREATED_AT = 1u << 13,
    STORE_SANDBOX_UPDATED_AT = 1u << 14,
    STORE_SANDBOX_END_AT = 1u << 15,
    STORE_SANDBOX_PRIVATE_TRAFFIC = 1u << 16,
    STORE_SANDBOX_NETWORK = 1u << 17,
    STORE_SANDBOX_REMAINING = 1u << 18,
    STORE_SANDBOX_AUTO_PAUSE = 1u << 19,
    STORE_SANDBOX_NET_BPS = 1u << 20,
    STORE_SANDBOX_DISK_BPS = 1u << 21,
    STORE_SANDBOX_DISK_IOPS = 1u << 22,
    STORE_SANDBOX_ALL = (1u << 23) - 1,
};

/*
 * An asynchronous operation: the API -> controller contract. A controller
 * runs one only while it holds its lease (store_operation_claim()): several
 * space-api replicas on one database never run one operation twice, and an
 * operation whose runner died is taken over once its lease expires.
 */
struct store_operation {
    char *id;          /* 32 hex chars */
    char *kind;        /* "sandbox.create", "sandbox.kill", ... */
    char *sandbox_id;  /* may be NULL */
    char *state;       /* "pending", "running", "succeeded", "failed" */
    char *error;       /* may be NULL */
    char *result_json; /* may be NULL */
    int64_t created_at;
    int64_t updated_at;
    char *lease_owner;        /* the controller running it; NULL when none */
    int64_t lease_expires_at; /* the lease is free at or after this time; 0 = free */
    int64_t attempts;         /* how many times it was claimed */
};

struct store_api_key {
    char *id; /* 32 hex chars */
    char *name;
    char *prefix; /* first characters of the key, shown in listings */
    char *hash;   /* sha256 hex of the whole key; the key itself is never stored */
    int64_t created_at;
    int64_t last_used_at; /* 0 = never */
};

/* "sqlite:PATH", a bare path (SQLite), or "postgresql://..." / "postgres://...". */
int store_open(const char *url, struct store **ret);
struct store *store_close(struct store *s);
/* Applies every migration not yet applied, each in its own transaction. Idempotent. */
int store_migrate(struct store *s);
/*
 * Envd access tokens are handed back (E2B connect) and so cannot be hashed: the store keeps
 * them sealed (secretbox.h, AES-256-GCM, the sandbox id as associated data) in
 * sandboxes.envd_access_token_sealed and seals/opens them itself, so callers see plaintext in
 * struct store_sandbox and the database never does. The key is copied; set it before
 * store_migrate() (migration 3 seals the plaintext tokens an older release left). Without a
 * key, writing or reading a row that has a token is -ENOKEY. Reading a token sealed under
 * another key is -EKEYREJECTED and a damaged one -EBADMSG, except in rows whose state is
 * "killed": their token is no use to anyone and reads as NULL, so a lost key never makes
 * history unreadable.
 */
int store_set_token_key(struct store *s, const struct secretbox_key *key);
/*
 * -EKEYREJECTED (and the key id found in *ret_other, 17 bytes, when ret_other is set) if a
 * live row (state not "killed") holds a token sealed under another key than the one set:
 * replicas on one PostgreSQL started with different --store-key files. 0 otherwise.
 */
int store_token_key_check(struct store *s, char *ret_other);
/* "sqlite" or "postgresql". */
const char *store_kind(const struct store *s);

/* Transactions, for multi-row changes (e.g. sandbox row + its operation). Not nested. */
int store_begin(struct store *s);
/*
 * A transaction whose commit need not wait for the disk: for rows a host crash (power
 * loss, kernel panic) makes moot anyway, such as a create's, whose VM dies with the host.
 * A process crash never loses it, and the next full commit makes it durable too (SQLite:
 * `synchronous = NORMAL` for it, the WAL is written in order). PostgreSQL: a full one
 * (the store may be on another machine than the VMs it describes).
 */
int store_begin_relaxed(struct store *s);
int store_commit(struct store *s);
int store_rollback(struct store *s);

int store_sandbox_insert(struct store *s, const struct store_sandbox *sb);
/* Replaces every column of the row with sb->id (update_fields with STORE_SANDBOX_ALL). */
int store_sandbox_update(struct store *s, const struct store_sandbox *sb);
/* Writes only the columns in fields (enum store_sandbox_field) of the row sb->id; the other
 * members of sb are not read. -EINVAL for fields 0 or outside STORE_SANDBOX_ALL. */
int store_sandbox_update_fields(struct store *s, const struct store_sandbox *sb, unsigned fields);
/* The observed state, its error (NULL clears it) and updated_at. */
int store_sandbox_set_state(struct store *s, const char *id, const char *state, const char *error,
                            int64_t updated_at);
int store_sandbox_set_desired_state(struct store *s, const char *id, const char *desired_state,
                                    int64_t updated_at);
int store_sandbox_set_end_at(struct store *s, const char *id, int64_t end_at, int64_t updated_at);
/* The egress policy (network_json, a JSON object) and updated_at. */
int store_sandbox_set_network(struct store *s, const char *id, const char *network_json,
                              int64_t updated_at);
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
/* The oldest unfinished operation on sandbox_id; -ENOENT when there is none. */
int store_operation_get_unfinished(struct store *s, const char *sandbox_id,
                                   struct store_operation *ret);
/*
 * Takes the oldest claimable operation for owner and returns it (state "running",
 * lease_owner owner, lease_expires_at lease_until, attempts incremented). Claimable: pending
 * or running, its lease free or expired at now, and the oldest unfinished operation of its
 * sandbox (operations on one sandbox run one at a time, in order). -ENOENT when none is.
 * Atomic against other claimers on the same database (PostgreSQL: FOR UPDATE SKIP LOCKED;
 * SQLite: one UPDATE, writers serialised). Not inside a transaction (-EBUSY).
 */
int store_operation_claim(struct store *s, const char *owner, int64_t now, int64_t lease_until,
                          struct store_operation *ret);
/* Extends owner's lease on id. -ESTALE when owner no longer holds it (or it has finished). */
int store_operation_renew(struct store *s, const char *id, const char *owner, int64_t lease_until);
/*
 * Records the outcome of an operation owner holds: op->state, error, result_json and
 * updated_at are written and the lease is released. -ESTALE when owner no longer holds it:
 * another controller took it over and its outcome is the one that counts.
 */
int store_operation_finish(struct store *s, const struct store_operation *op, const char *owner);
void store_operation_release(struct store_operation *op);
void store_operation_list_free(struct store_operation *list, size_t n);

int store_api_key_insert(struct store *s, const struct store_api_key *key);
int store_api_key_get_by_hash(struct store *s, const char *hash, struct store_api_key *ret);
int store_api_key_list(struct store *s, struct store_api_key **ret, size_t *ret_n);
int store_api_key_delete(struct store *s, const char *id);
int store_api_key_touch(struct store *s, const char *id, int64_t used_at);
void store_api_key_release(struct store_api_key *key);
void store_api_key_list_free(struct store_api_key *list, size_t n);

/*
 * The egress audit log (migration 6): one row per decision space-gw made,
 * as each node's GET /v1/egress-audit handed it over (gw-proto.h records).
 * Rows are identified at their source by (node_id, epoch, seq): inserting
 * one again is skipped, so pulling a node's ring twice is harmless. id is
 * the store's own, increasing in the order rows were stored: the paging
 * cursor.
 */
struct store_egress_record {
    int64_t id;        /* written by store_egress_audit_insert(); 0 before */
    char *node_id;     /* the node the record came from */
    char *epoch;       /* the node process's epoch (a restarted node starts a new one) */
    int64_t seq;       /* the record's number in that epoch */
    char *sandbox_id;  /* may be NULL (records about no sandbox: "audit-dropped") */
    int64_t time_us;   /* when space-gw decided (realtime); retention's clock */
    char *proto;       /* "dns", "http", "tls", "tcp"; may be NULL */
    char *verdict;     /* "allow", "deny"; may be NULL */
    char *secret;      /* the secret names an injection used, comma-joined (migration 7);
                          may be NULL */
    char *record_json; /* the record as a JSON object */
};

struct store_egress_filter {
    const char *sandbox_id; /* required */
    const char *verdict;    /* NULL = any */
    const char *proto;      /* NULL = any */
    int64_t after_id;       /* rows with id > after_id; 0 = from the oldest */
    size_t limit;           /* 0 = no limit */
};

/*
 * Stores n records (their id members are ignored) in one transaction of
 * its own (-EBUSY inside the caller's), as multi-row statements. A record
 * whose (node_id, epoch, seq) is stored already is skipped; *ret_inserted
 * (may be NULL) counts the others. Two writers racing on one database may
 * pick the same ids: the loser gets -EEXIST and nothing of its batch is
 * stored, so it can pull the same records again.
 */
int store_egress_audit_insert(struct store *s, const struct store_egress_record *v, size_t n,
                              size_t *ret_inserted);
/* One sandbox's records, oldest first (id ascending), after f->after_id. */
int store_egress_audit_list(struct store *s, const struct store_egress_filter *f,
                            struct store_egress_record **ret, size_t *ret_n);
/* Retention by age: drops every record with time_us < before_us. */
int store_egress_audit_prune_before(struct store *s, int64_t before_us, uint64_t *ret_deleted);
/* Retention by count: drops all but sandbox_id's newest keep records (keep >= 1). */
int store_egress_audit_prune_sandbox(struct store *s, const char *sandbox_id, uint64_t keep,
                                     uint64_t *ret_deleted);
void store_egress_record_release(struct store_egress_record *r);
void store_egress_audit_list_free(struct store_egress_record *list, size_t n);

/*
 * Secrets (migration 7, docs/architecture.md "Credentials"): values space-gw
 * injects into a sandbox's requests. The store holds only the sealed form
 * (sealed-secret.h, sealed to space-gw's public key with the name as
 * associated data): nothing here can open it, and no verb takes or returns a
 * plaintext. Names are unique per owner; rows whose sandbox_id is set are
 * scoped to that sandbox (E2B network.rules literals) and hidden from
 * store_secret_list().
 */
struct store_secret {
    char *id;            /* 32 hex chars (E2B's secretID) */
    char *owner;         /* the owner scope (sandboxes.client_id) */
    char *name;          /* unique per owner */
    char *sandbox_id;    /* NULL: the owner's; else scoped to that sandbox, deleted with it */
    char *sealed;        /* sealed_secret_seal() output */
    char *metadata_json; /* object of strings, "{}" when none */
    int64_t version;     /* 1 at create, +1 per rotation */
    int64_t created_at;
    int64_t updated_at;
};

/* -EEXIST when owner already has the name (or the id exists). */
int store_secret_insert(struct store *s, const struct store_secret *sec);
/* By name, within owner (sandbox-scoped rows too: rules name them). */
int store_secret_get(struct store *s, const char *owner, const char *name,
                     struct store_secret *ret);
int store_secret_get_by_id(struct store *s, const char *owner, const char *id,
                           struct store_secret *ret);
/* owner's own secrets (not sandbox-scoped ones), by name, after after_name (NULL = from the
 * first); limit 0 = all. */
int store_secret_list(struct store *s, const char *owner, const char *after_name, size_t limit,
                      struct store_secret **ret, size_t *ret_n);
/*
 * Rotation: a new sealed value, version + 1, updated_at; metadata_json replaces the metadata
 * unless NULL. *ret (may be NULL) gets the row as it is now. -ENOENT for an unknown name.
 */
int store_secret_rotate(struct store *s, const char *owner, const char *name, const char *sealed,
                        const char *metadata_json, int64_t updated_at, struct store_secret *ret);
int store_secret_delete(struct store *s, const char *owner, const char *name);
/*
 * Deletes the sandbox-scoped secrets whose sandbox is killed, and those whose sandbox row
 * does not exist and which were created before before_us (a create in flight writes its
 * secrets just before its sandbox row).
 */
int store_secret_sweep(struct store *s, int64_t before_us, uint64_t *ret_deleted);
void store_secret_release(struct store_secret *sec);
void store_secret_list_free(struct store_secret *list, size_t n);

/*
 * Snapshots (migration 9, docs/architecture.md "A sandbox's life"): the control plane's
 * record of a node's <data>/snapshots/<id>/. Written "pending" with the sandbox.snapshot
 * operation that takes it, "complete" once that operation succeeded (the node committed the
 * files first): only a complete snapshot is restorable or listed to E2B. "deleting" while the
 * node removes it.
 */
#define STORE_SNAPSHOT_PENDING "pending"
#define STORE_SNAPSHOT_COMPLETE "complete"
#define STORE_SNAPSHOT_DELETING "deleting"
/* Who asked for it (migration 11): a caller, or a rolling policy (retention deletes only these). */
#define STORE_SNAPSHOT_SOURCE_USER "user"
#define STORE_SNAPSHOT_SOURCE_ROLLING "rolling"

struct store_snapshot {
    char *id;           /* 20 chars [a-z0-9] (the node's snapshot id) */
    char *owner;        /* the source sandbox's client_id */
    char *sandbox_id;   /* the source; the row may be killed or gone */
    char *node_id;      /* the node holding the files */
    char *template_id;  /* the source's template: a create from it boots that kernel */
    char *kind;         /* "disk" or "full" */
    char *name;         /* unique per owner; may be NULL */
    char *state;        /* STORE_SNAPSHOT_* */
    char *operation_id; /* the sandbox.snapshot operation that takes it */
    char *source;       /* STORE_SNAPSHOT_SOURCE_* (migration 11); NULL on insert: user */
    int64_t bytes;      /* the node's size of the files; 0 until complete (migration 11) */
    int64_t vcpus;
    int64_t memory_mb;
    int64_t created_at;
    int64_t updated_at;
};

struct store_snapshot_filter {
    const char *owner;      /* required */
    const char *sandbox_id; /* NULL = any */
    const char *name;       /* NULL = any */
    bool complete_only;     /* hide pending and deleting rows */
    const char *source;     /* NULL = any */
    const char *after_id;   /* pagination: rows after this id in the order (newest first) */
    size_t limit;           /* 0 = no limit */
};

/* -EEXIST when the id exists or owner has the name already. */
int store_snapshot_insert(struct store *s, const struct store_snapshot *snap);
int store_snapshot_get(struct store *s, const char *id, struct store_snapshot *ret);
int store_snapshot_get_by_operation(struct store *s, const char *operation_id,
                                    struct store_snapshot *ret);
/* Newest first, by (created_at, id). -ENOENT when after_id names no snapshot of owner. */
int store_snapshot_list(struct store *s, const struct store_snapshot_filter *f,
                        struct store_snapshot **ret, size_t *ret_n);
/* The outcome of operation_id: its pending snapshot becomes complete (ok) or is deleted.
 * No pending row (a re-run): 0. */
int store_snapshot_finish(struct store *s, const char *operation_id, bool ok, int64_t updated_at);
int store_snapshot_set_state(struct store *s, const char *id, const char *state,
                             int64_t updated_at);
/* What the node said the files take (bytes >= 0). */
int store_snapshot_set_bytes(struct store *s, const char *id, int64_t bytes);
int store_snapshot_delete(struct store *s, const char *id);
void store_snapshot_release(struct store_snapshot *snap);
void store_snapshot_list_free(struct store_snapshot *list, size_t n);

/*
 * Rolling snapshot policies (migration 11, api/rolling-retention.h): one per sandbox.
 * next_disk_at / next_full_at are when each kind is next due (unix microseconds, 0 = off).
 */
struct store_snapshot_policy {
    char *sandbox_id;
    char *owner;
    char *policy_json; /* rolling_policy_to_json()'s text */
    int64_t next_disk_at;
    int64_t next_full_at;
    int64_t created_at;
    int64_t updated_at;
};

/* Inserts or replaces sandbox_id's policy (created_at kept on a replace). */
int store_snapshot_policy_put(struct store *s, const struct store_snapshot_policy *p);
int store_snapshot_policy_get(struct store *s, const char *sandbox_id,
                              struct store_snapshot_policy *ret);
int store_snapshot_policy_delete(struct store *s, const char *sandbox_id);
/* Every policy (limit 0) or the first limit, by sandbox id: the controller's work list. */
int store_snapshot_policy_list(struct store *s, size_t limit, struct store_snapshot_policy **ret,
                               size_t *ret_n);
/*
 * The compare-and-set that takes a turn: moves sandbox_id's next_full_at (full) or
 * next_disk_at from old_at to new_at. -ESTALE when it is no longer old_at (another replica
 * took the turn, or the policy was replaced); -ENOENT is never returned (a deleted policy is
 * -ESTALE too).
 */
int store_snapshot_policy_advance(struct store *s, const char *sandbox_id, bool full,
                                  int64_t old_at, int64_t new_at);
/* Deletes the policies whose sandbox is killed or has no row. */
int store_snapshot_policy_sweep(struct store *s, uint64_t *ret_deleted);
void store_snapshot_policy_release(struct store_snapshot_policy *p);
void store_snapshot_policy_list_free(struct store_snapshot_policy *list, size_t n);

/*
 * A template's default egress policy (migration 10, docs/architecture.md "Credentials"): the
 * stored text of a native policy (api/egress.h), copied into a sandbox created from that
 * template without a policy of its own. One per (owner, template); put replaces it.
 * get: -ENOENT when the template has none; *ret_network_json is the caller's to free.
 */
int store_template_network_put(struct store *s, const char *owner, const char *template_id,
                               const char *network_json, int64_t updated_at);
int store_template_network_get(struct store *s, const char *owner, const char *template_id,
                               char **ret_network_json);
int store_template_network_delete(struct store *s, const char *owner, const char *template_id);
