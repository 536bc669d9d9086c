-- A sandbox's own I/O limits (issue 13, docs/architecture.md "Limits"), asked for in the
-- native create and handed to the node with every create of it (a create re-run after a
-- crash asks the same): net_bps its network rate each way (bytes/s), disk_bps and
-- disk_iops its disk throttling. 0: the node's default (--net-bps, --disk-bps,
-- --disk-iops), which is also what rows an older release wrote mean.
ALTER TABLE sandboxes ADD COLUMN net_bps BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN disk_bps BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN disk_iops BIGINT NOT NULL DEFAULT 0;
