"""The real `e2b` npm SDK and pause (issue 12): pause_compat.mjs pauses (space's suspend),
connects (restore) three times in a row with a counting process and unsynced writes, checks
the 409-means-false second pause, the paused state in getInfo and list, connect of a running
sandbox never shortening its TTL, and lifecycle.onTimeout: "pause" suspending at the timeout,
against a real space-api + space-node."""
import os
import shutil
import subprocess

from lib.platform import Platform

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_BIN = os.environ.get("SPACE_NODEJS", shutil.which("node") or "node")


def test_e2b_sdk_pause_connect_and_auto_pause():
    assert os.path.isdir(os.path.join(HERE, "node_modules", "e2b")), \
        "run tools/install-deps.sh (npm ci in tests/compat)"
    p = Platform("pause-compat")
    try:
        p.start()
        env = dict(os.environ, E2B_API_URL=p.url, E2B_SANDBOX_URL=p.ingress_url,
                   E2B_DOMAIN="space.test", E2B_API_KEY=p.key)
        res = subprocess.run([NODE_BIN, os.path.join(HERE, "pause_compat.mjs")], cwd=HERE,
                             env=env, capture_output=True, text=True, timeout=900)
        print(res.stdout)
        assert res.returncode == 0, res.stdout + res.stderr + p.api_log()
        assert "ok all" in res.stdout
        p.stop_api()
        p.node.stop()
        left = p.node.leftovers()
    finally:
        p.destroy()
    assert not left, left
