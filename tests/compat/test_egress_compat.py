"""The real `e2b` npm SDK and the egress policy (issue 9): egress_compat.mjs sets
allowInternetAccess and network.allowOut/denyOut at create, reads them back with getInfo,
replaces them with Sandbox.updateNetwork() and gets bad entries refused by name, against a
real space-api + space-node. What needs the node's PUT /v1/sandboxes/{id}/network is
reported as skipped when the node does not have that route yet; the traffic itself (the
policy enforced) is the redteam suite's (tests/egress)."""
import os
import shutil
import subprocess

import pytest

from lib.platform import Platform

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_BIN = os.environ.get("SPACE_NODEJS", shutil.which("node") or "node")


def test_e2b_sdk_sets_reads_and_updates_the_policy():
    assert os.path.isdir(os.path.join(HERE, "node_modules", "e2b")), \
        "run tools/install-deps.sh (npm ci in tests/compat)"
    p = Platform("egress-compat")
    try:
        p.start()
        env = dict(os.environ, E2B_API_URL=p.url, E2B_SANDBOX_URL=p.ingress_url,
                   E2B_DOMAIN="space.test", E2B_API_KEY=p.key)
        res = subprocess.run([NODE_BIN, os.path.join(HERE, "egress_compat.mjs")], cwd=HERE,
                             env=env, capture_output=True, text=True, timeout=600)
        print(res.stdout)
        assert res.returncode == 0, res.stdout + res.stderr + p.api_log()
        assert "ok all" in res.stdout
        p.stop_api()
        p.node.stop()
        left = p.node.leftovers()
    finally:
        p.destroy()
    assert not left, left
    skipped = [line for line in res.stdout.splitlines() if line.startswith("skip ")]
    if skipped:
        pytest.skip("; ".join(skipped))
