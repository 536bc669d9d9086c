"""Issue 8 points 4 (command timeout), 6 (file metadata) and 7 (`python`) with the real `e2b`
npm package against a real space-api + space-node, configured only by the E2B_* environment
that `space up --detach` prints (envd_conformance.mjs)."""
import os
import shutil
import subprocess

from lib.platform import Platform

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_BIN = os.environ.get("SPACE_NODEJS", shutil.which("node") or "node")


def test_envd_conformance_with_the_sdk():
    assert os.path.isdir(os.path.join(HERE, "node_modules", "e2b")), \
        "run tools/install-deps.sh (npm ci in tests/compat)"
    p = Platform("envd-conf")
    try:
        p.start()
        env = dict(os.environ, E2B_API_URL=p.url, E2B_SANDBOX_URL=p.ingress_url,
                   E2B_DOMAIN="space.test", E2B_API_KEY=p.key)
        res = subprocess.run([NODE_BIN, os.path.join(HERE, "envd_conformance.mjs")], cwd=HERE,
                             env=env, capture_output=True, text=True, timeout=600)
        print(res.stdout)
        assert res.returncode == 0, res.stdout + res.stderr + p.api_log()
        assert "envd conformance passed" in res.stdout
    finally:
        p.destroy()
