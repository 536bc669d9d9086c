"""The real `e2b` npm package with network.allowPublicTraffic: false (issue 7
item 7): runs traffic.mjs against a real space-api + space-node, configured
only by E2B_* as `space up` prints."""
import os
import shutil
import subprocess

from lib.platform import Platform

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_BIN = os.environ.get("SPACE_NODEJS", shutil.which("node") or "node")


def test_e2b_sdk_private_traffic():
    assert os.path.isdir(os.path.join(HERE, "node_modules", "e2b")), \
        "run tools/install-deps.sh (npm ci in tests/compat)"
    p = Platform("traffic")
    try:
        p.start()
        env = dict(os.environ, E2B_API_URL=p.url, E2B_SANDBOX_URL=p.ingress_url,
                   E2B_DOMAIN="space.test", E2B_API_KEY=p.key)
        res = subprocess.run([NODE_BIN, os.path.join(HERE, "traffic.mjs")], cwd=HERE, env=env,
                             capture_output=True, text=True, timeout=600)
        print(res.stdout)
        assert res.returncode == 0, res.stdout + res.stderr + p.api_log()
        assert "ok envd works without the traffic token" in res.stdout
    finally:
        p.destroy()
