"""The real `e2b` npm SDK and pause (issue 12): pause_compat.mjs pauses (space's suspend),
connects (restore) three times in a row with a counting process and unsynced writes, checks
the 409-means-false second pause, the paused state in getInfo and list, connect of a running
sandbox never shortening its TTL, and lifecycle.onTimeout: "pause" suspending at the timeout,
against a real space-api + space-node."""

from lib.platform import Platform
from lib.sdk import run_sdk_script, stop_and_leftovers


def test_e2b_sdk_pause_connect_and_auto_pause():
    p = Platform("pause-compat")
    try:
        p.start()
        run_sdk_script(p, "pause_compat.mjs", timeout=900)
        left = stop_and_leftovers(p)
    finally:
        p.destroy()
    assert not left, left
