"""The real E2B JS SDK against space-agent.

[host]: debug mode, no control plane; E2B_SANDBOX_URL points at the agent.
[guest]: the SDK as users run it: it creates a sandbox through space-api and reaches that
guest's agent through the ingress (E2B_SANDBOX_URL is the ingress; the SDK sends the
E2b-Sandbox-Id/-Port headers only outside debug mode).

Uses the pinned SDK that tools/install-deps.sh installs into tests/compat
(npm ci) and the Node.js it found or installed ($SPACE_NODEJS).
"""
import os
import shutil
import subprocess
import tempfile

from conftest import ROOT


NODE_BIN = os.environ.get("SPACE_NODEJS", shutil.which("node") or "node")


def sdk_dir():
    return os.path.join(ROOT, "tests", "compat")


def test_js_sdk_smoke(target, request):
    assert os.path.isdir(os.path.join(sdk_dir(), "node_modules", "e2b")), \
        "run tools/install-deps.sh (npm ci in tests/compat)"
    env = dict(os.environ, NODE_PATH=os.path.join(sdk_dir(), "node_modules"))
    for k in ("E2B_API_KEY", "E2B_ACCESS_TOKEN", "E2B_API_URL", "E2B_DOMAIN", "E2B_DEBUG"):
        env.pop(k, None)
    work = None
    if target == "host":
        agent = request.getfixturevalue("agent")
        work = tempfile.mkdtemp(prefix="space-agent-sdk-")
        env.update(E2B_DEBUG="true", E2B_SANDBOX_URL=agent.url)
        dir_ = work
    else:
        plat = request.getfixturevalue("guest_lab").plat
        env.update(E2B_API_URL=plat.url, E2B_SANDBOX_URL=plat.ingress_url,
                   E2B_DOMAIN="space.test", E2B_API_KEY=plat.key)
        dir_ = "/home/user/sdk-smoke"  # in the sandbox the script creates
    # ESM resolves packages from the script's location, so run a copy next to node_modules.
    script = os.path.join(sdk_dir(), f".sdk_smoke-{os.getpid()}-{target}.mjs")
    shutil.copy(os.path.join(os.path.dirname(__file__), "sdk_smoke.mjs"), script)
    try:
        p = subprocess.run([NODE_BIN, script, dir_], env=env, capture_output=True, text=True,
                           timeout=120)
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)
        os.unlink(script)
    print(p.stdout)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "sdk smoke passed" in p.stdout
