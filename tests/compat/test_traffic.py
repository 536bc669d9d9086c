"""The real `e2b` npm package with network.allowPublicTraffic: false (issue 7
item 7): runs traffic.mjs against a real space-api + space-node, configured
only by E2B_* as `space up` prints."""

from lib.platform import Platform
from lib.sdk import run_sdk_script


def test_e2b_sdk_private_traffic():
    p = Platform("traffic")
    try:
        p.start()
        run_sdk_script(p, "traffic.mjs", expect="ok envd works without the traffic token")
    finally:
        p.destroy()
