"""The real `e2b` npm SDK runs conformance.mjs (issue 8 point 1, issue 7 "no silent drops"):
ids that do not exist are "not found" (kill returns false), features space lacks are
errors the SDK raises. The first test needs no guest (the node has no template); the
second also creates a sandbox with the SDK's default options."""
import functools
import os
import shutil
import subprocess
from unittest import mock

import lib.platform as lp

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_BIN = os.environ.get("SPACE_NODEJS", shutil.which("node") or "node")


def run(vm):
    assert os.path.isdir(os.path.join(HERE, "node_modules", "e2b")), \
        "run tools/install-deps.sh (npm ci in tests/compat)"
    if vm:
        p = lp.Platform("conformance-vm")
    else:
        with mock.patch.object(lp, "Node", functools.partial(lp.Node, template=False)):
            p = lp.Platform("conformance")
    try:
        p.start()
        env = dict(os.environ, E2B_API_URL=p.url, E2B_SANDBOX_URL=p.ingress_url,
                   E2B_DOMAIN="space.test", E2B_API_KEY=p.key,
                   SPACE_CONFORMANCE_VM="1" if vm else "0")
        res = subprocess.run([NODE_BIN, os.path.join(HERE, "conformance.mjs")], cwd=HERE,
                             env=env, capture_output=True, text=True, timeout=600)
        print(res.stdout)
        assert res.returncode == 0, res.stdout + res.stderr + p.api_log()
        assert "ok all" in res.stdout
    finally:
        p.destroy()


def test_sdk_sees_not_found_and_not_implemented():
    run(vm=False)


def test_sdk_default_create_is_accepted():
    run(vm=True)
