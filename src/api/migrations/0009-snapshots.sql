-- Snapshots of sandboxes (issue 12, docs/architecture.md "A sandbox's life"): what the
-- node keeps under <data>/snapshots/<id>/ (disk-snapshot.h), as the control plane knows it.
--
-- A row is written with state 'pending' in the transaction that records its
-- sandbox.snapshot operation (operation_id), and flips to 'complete' only in the
-- transaction that records that operation's success, after the node committed the
-- snapshot (its rename, fsync'd): a snapshot is restorable only when complete. A failed
-- operation deletes its pending row; 'deleting' while the node removes the files.
--
-- kind: 'disk' or 'full' (memory too: what a create from it restores). name: at most one,
-- unique per owner (the E2B names[] is [name], or [] without one). template_id, vcpus and
-- memory_mb are the source sandbox's, which a sandbox created from the snapshot takes (the
-- source row may be long gone by then). node_id: where the files are.
CREATE TABLE snapshots (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    sandbox_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    template_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT,
    state TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    vcpus BIGINT NOT NULL,
    memory_mb BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE UNIQUE INDEX snapshots_owner_name ON snapshots (owner, name);
CREATE INDEX snapshots_created ON snapshots (created_at, id);
CREATE INDEX snapshots_sandbox_id ON snapshots (sandbox_id);
CREATE INDEX snapshots_operation_id ON snapshots (operation_id);
