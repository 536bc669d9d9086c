"""The real E2B JS SDK against space-agent (debug mode, no control plane).

Uses the pinned SDK that tools/install-deps.sh installs into tests/compat
(npm ci) and the Node.js it found or installed ($SPACE_NODEJS).
"""
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import ROOT


NODE_BIN = os.environ.get("SPACE_NODEJS", shutil.which("node") or "node")


def sdk_dir():
    return os.path.join(ROOT, "tests", "compat")


def test_js_sdk_smoke(agent):
    assert os.path.isdir(os.path.join(sdk_dir(), "node_modules", "e2b")), \
        "run tools/install-deps.sh (npm ci in tests/compat)"
    work = tempfile.mkdtemp(prefix="space-agent-sdk-")
    env = dict(os.environ, E2B_DEBUG="true", E2B_SANDBOX_URL=agent.url,
               NODE_PATH=os.path.join(sdk_dir(), "node_modules"))
    # ESM resolves packages from the script's location, so run a copy next to node_modules.
    script = os.path.join(sdk_dir(), ".sdk_smoke.mjs")
    shutil.copy(os.path.join(os.path.dirname(__file__), "sdk_smoke.mjs"), script)
    try:
        p = subprocess.run([NODE_BIN, script, work], env=env, capture_output=True, text=True,
                           timeout=120)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        os.unlink(script)
    print(p.stdout)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "sdk smoke passed" in p.stdout
