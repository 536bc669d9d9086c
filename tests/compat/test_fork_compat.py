"""The real `e2b` npm SDK and fork (issue 12): fork_compat.mjs forks a running sandbox with a
counting process and an unsynced file into two (sbx.fork), checks each fork's files, process,
identity and divergence, a capacity refusal as a RateLimitError entry, Sandbox.fork(id)'s
default of one, SandboxNotFoundError for an unknown sandbox, and that no snapshot is left,
against a real space-api (--max-sandboxes 3) + space-node."""

from lib.platform import Platform
from lib.sdk import run_sdk_script, stop_and_leftovers


def test_e2b_sdk_fork():
    p = Platform("fork-compat", api_args=["--max-sandboxes", "3"])
    try:
        p.start()
        run_sdk_script(p, "fork_compat.mjs", timeout=900)
        left = stop_and_leftovers(p)
    finally:
        p.destroy()
    assert not left, left
