"""The real E2B JS SDK against space-agent (debug mode, no control plane).

Needs node and the SDK installed into the build directory; without them the
test is skipped. Install with:
    npm install --prefix "${SPACE_BUILD_DIR:-build}/agent-sdk" --no-audit --no-fund e2b@2.51.0
"""
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import ROOT


def sdk_dir():
    build = os.environ.get("SPACE_BUILD_DIR", "build")
    if not os.path.isabs(build):
        build = os.path.join(ROOT, build)
    return os.path.join(build, "agent-sdk")


@pytest.mark.skipif(not shutil.which("node") or
                    not os.path.isdir(os.path.join(sdk_dir(), "node_modules", "e2b")),
                    reason="node or the e2b SDK is not installed (see the module docstring)")
def test_js_sdk_smoke(agent):
    work = tempfile.mkdtemp(prefix="space-agent-sdk-")
    env = dict(os.environ, E2B_DEBUG="true", E2B_SANDBOX_URL=agent.url,
               NODE_PATH=os.path.join(sdk_dir(), "node_modules"))
    # ESM resolves packages from the script's location, so run a copy next to node_modules.
    script = os.path.join(sdk_dir(), "sdk_smoke.mjs")
    shutil.copy(os.path.join(os.path.dirname(__file__), "sdk_smoke.mjs"), script)
    try:
        p = subprocess.run(["node", script, work], env=env, capture_output=True, text=True,
                           timeout=120)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(p.stdout)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "sdk smoke passed" in p.stdout
