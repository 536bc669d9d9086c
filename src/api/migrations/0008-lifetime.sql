-- Pause, suspend and the timeout (issue 12, docs/architecture.md "A sandbox's life").
--
-- remaining_us: while a sandbox is paused or suspended its lifetime clock stands still;
-- the pause (or suspend) stores what was left of it here, and resume (or restore) sets
-- end_at = now + remaining_us and clears it. 0: nothing kept (the sandbox is not paused);
-- -1: it had no end time (end_at 0), which it keeps.
ALTER TABLE sandboxes ADD COLUMN remaining_us BIGINT NOT NULL DEFAULT 0;

-- auto_pause: 1 when the sandbox is suspended at its end time instead of killed (E2B's
-- autoPause, the SDKs' lifecycle.onTimeout: "pause").
ALTER TABLE sandboxes ADD COLUMN auto_pause BIGINT NOT NULL DEFAULT 0;
