-- Operation leases (store_operation_claim()): the controller that runs an
-- operation holds a lease on it until lease_expires_at (unix microseconds;
-- 0 = free), renews it while the operation runs and releases it when it
-- records the outcome. Several space-api replicas on one database thereby
-- never run one operation twice, and an operation whose runner died is taken
-- over once the lease expires. attempts counts claims: more than one means
-- a takeover (or a crash) happened.

ALTER TABLE operations ADD COLUMN lease_owner TEXT;
ALTER TABLE operations ADD COLUMN lease_expires_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE operations ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;

-- The claim looks up a sandbox's older unfinished operations.
CREATE INDEX operations_sandbox_id_state ON operations (sandbox_id, state, created_at, id);
