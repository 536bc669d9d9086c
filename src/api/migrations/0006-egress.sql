-- Egress (issue 9, docs/architecture.md "Network"): each sandbox's policy
-- and the audit log of every decision space-gw made for it.

-- The sandbox's egress policy as JSON text (store.h struct store_sandbox
-- network_json): {"native": <canonical native policy, what the node and
-- space-gw enforce>, "e2b": {"network": {allowOut?, denyOut?},
-- "allowInternetAccess": true|false|null}, what E2B getInfo echoes back as
-- it was given}. NULL for rows an older release wrote: those sandboxes had
-- no egress at all, which is the native default (deny everything).
ALTER TABLE sandboxes ADD COLUMN network TEXT;

-- One row per decision (src/shared/gw-proto.h "audit" records), pulled
-- from each node's ring (GET /v1/egress-audit) by the controller's tick.
-- id is chosen by space-api (no AUTOINCREMENT/SERIAL, as in 0001): one more
-- than the largest so far, so it orders rows as they were stored and is the
-- paging cursor of GET /v1/sandboxes/{id}/egress. (node_id, epoch, seq)
-- names a record at its source: pulling it twice (a restarted space-api
-- starts again at the start of the node's ring; two replicas pull one node)
-- stores it once. record is the JSON the node sent, without its seq;
-- sandbox_id, time_us, proto and verdict are copied out of it for the
-- route's filters and for retention. sandbox_id is NULL for a record that
-- belongs to no sandbox (space-gw's {"reason":"audit-dropped"}). No foreign
-- key: the log outlives its sandbox row's history and is pruned on its own.
CREATE TABLE egress_audit (
    id BIGINT PRIMARY KEY,
    node_id TEXT NOT NULL,
    epoch TEXT NOT NULL,
    seq BIGINT NOT NULL,
    sandbox_id TEXT,
    time_us BIGINT NOT NULL,
    proto TEXT,
    verdict TEXT,
    record TEXT NOT NULL
);

CREATE UNIQUE INDEX egress_audit_source ON egress_audit (node_id, epoch, seq);
-- The route (one sandbox, oldest first after a cursor) and the per-sandbox
-- retention cap.
CREATE INDEX egress_audit_sandbox_id ON egress_audit (sandbox_id, id);
-- Retention by age.
CREATE INDEX egress_audit_time ON egress_audit (time_us);
