"""The real `e2b` npm SDK and auto-resume (issue 12): autoresume_compat.mjs creates a sandbox
with lifecycle {onTimeout: "pause", autoResume: true}, pauses it, and reads through the
ingress without connecting: the read restores it (a counting process and an unsynced file
survive); a sandbox without autoResume stays paused. Real space-api + space-node."""

from lib.platform import Platform
from lib.sdk import run_sdk_script, stop_and_leftovers


def test_e2b_sdk_auto_resume():
    p = Platform("autoresume-compat")
    try:
        p.start()
        run_sdk_script(p, "autoresume_compat.mjs", timeout=600)
        left = stop_and_leftovers(p)
    finally:
        p.destroy()
    assert not left, left
