"""The real `e2b` npm SDK and snapshots (issue 12): snapshot_compat.mjs creates, lists (by
sandbox, by name, paged), creates a sandbox from a snapshot (Sandbox.create(snapshotId): the
source's file and running process are there, under the new sandbox's own hostname; its writes
stay its own) and deletes (true, then false), against a real space-api + space-node."""

from lib.platform import Platform
from lib.sdk import run_sdk_script, stop_and_leftovers


def test_e2b_sdk_snapshots_and_create_from_snapshot():
    p = Platform("snap-compat")
    try:
        p.start()
        run_sdk_script(p, "snapshot_compat.mjs", timeout=900)
        left = stop_and_leftovers(p)
    finally:
        p.destroy()
    assert not left, left
