"""The real `e2b` npm SDK and the egress policy (issue 9): egress_compat.mjs sets
allowInternetAccess and network.allowOut/denyOut at create, reads them back with getInfo,
replaces them with Sandbox.updateNetwork() and gets bad entries refused by name, against a
real space-api + space-node. What needs the node's PUT /v1/sandboxes/{id}/network is
reported as skipped when the node does not have that route yet; the traffic itself (the
policy enforced) is the redteam suite's (tests/egress)."""

import pytest

from lib.platform import Platform
from lib.sdk import run_sdk_script, stop_and_leftovers


def test_e2b_sdk_sets_reads_and_updates_the_policy():
    p = Platform("egress-compat")
    try:
        p.start()
        res = run_sdk_script(p, "egress_compat.mjs")
        left = stop_and_leftovers(p)
    finally:
        p.destroy()
    assert not left, left
    skipped = [line for line in res.stdout.splitlines() if line.startswith("skip ")]
    if skipped:
        pytest.skip("; ".join(skipped))
