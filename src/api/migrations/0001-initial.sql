-- The control plane's first schema. Portable between SQLite and PostgreSQL:
-- TEXT and BIGINT only, ids chosen by space-api (no AUTOINCREMENT/SERIAL),
-- times in unix microseconds, JSON kept as TEXT (see store.c on metadata).
-- schema_migrations itself is created by store_migrate() before this runs.

CREATE TABLE sandboxes (
    id TEXT PRIMARY KEY,
    template_id TEXT NOT NULL,
    alias TEXT,
    client_id TEXT NOT NULL,
    state TEXT NOT NULL,
    desired_state TEXT NOT NULL,
    node_id TEXT,
    metadata TEXT NOT NULL,
    env TEXT NOT NULL,
    envd_access_token TEXT,
    error TEXT,
    vcpus BIGINT NOT NULL,
    memory_mb BIGINT NOT NULL,
    disk_mb BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    end_at BIGINT NOT NULL
);

-- Listing and pagination walk (created_at, id).
CREATE INDEX sandboxes_created_at_id ON sandboxes (created_at, id);
CREATE INDEX sandboxes_state ON sandboxes (state);

-- An operation outlives its sandbox row: deleting the sandbox keeps the
-- operation's history and clears the link.
CREATE TABLE operations (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    sandbox_id TEXT REFERENCES sandboxes (id) ON DELETE SET NULL,
    state TEXT NOT NULL,
    error TEXT,
    result TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- The controller's work list: unfinished operations, oldest first.
CREATE INDEX operations_state_created_at_id ON operations (state, created_at, id);
-- ON DELETE SET NULL looks operations up by sandbox.
CREATE INDEX operations_sandbox_id ON operations (sandbox_id);

CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    last_used_at BIGINT NOT NULL
);
