-- Rolling snapshots (issue 12, docs/architecture.md "A sandbox's life", "Rolling
-- snapshots"): a per-sandbox schedule and what the snapshots it took weigh.
--
-- snapshots.source: 'user' (asked for through the API: retention never deletes one) or
-- 'rolling' (taken by the controller on a policy's schedule, deleted by its retention).
-- snapshots.bytes: what the node reported the files take on its disk (meta.json "bytes"),
-- written with the row's 'complete'; 0 for rows an older release wrote.
ALTER TABLE snapshots ADD COLUMN source TEXT NOT NULL DEFAULT 'user';
ALTER TABLE snapshots ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0;
CREATE INDEX snapshots_source ON snapshots (source, created_at);

-- One policy per sandbox (api/rolling-retention.h): policy is its JSON text as
-- rolling_policy_to_json() writes it. next_disk_at and next_full_at (unix microseconds;
-- 0 = that kind is off) are when the next snapshot of each kind is due: the controller
-- that moves one forward with a compare-and-set on its old value is the one that takes
-- that turn, so two api replicas never take the same one. Deleted when the sandbox is
-- killed (or its row is gone).
CREATE TABLE snapshot_policies (
    sandbox_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    policy TEXT NOT NULL,
    next_disk_at BIGINT NOT NULL,
    next_full_at BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE INDEX snapshot_policies_next_disk ON snapshot_policies (next_disk_at);
CREATE INDEX snapshot_policies_next_full ON snapshot_policies (next_full_at);
