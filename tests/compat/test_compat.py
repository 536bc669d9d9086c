"""The real `e2b` npm package (pinned in tests/compat/package.json) runs compat.mjs unchanged
against a real space-api + space-node, configured only by the E2B_* environment that
`space up --detach` prints."""
from lib.platform import Platform
from lib.sdk import run_sdk_script


def test_e2b_sdk_runs_unchanged():
    p = Platform("compat")
    try:
        p.start()
        run_sdk_script(p, "compat.mjs", expect="ok killed sandbox is gone")
    finally:
        p.destroy()
