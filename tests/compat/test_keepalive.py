"""The real `e2b` npm package against the ingress' keep-alive and its end of
a stream whose sandbox dies (issue 8 point 5): runs keepalive.mjs against a
real space-api + space-node, configured only by E2B_* as `space up` prints."""

from lib.platform import Platform
from lib.sdk import run_sdk_script


def test_e2b_sdk_keepalive_and_killed_stream():
    p = Platform("keepalive")
    try:
        p.start()
        run_sdk_script(p, "keepalive.mjs", expect="ok killed sandbox fails its stream")
    finally:
        p.destroy()
