"""The real `e2b` npm SDK and space's secrets (issue 10): secrets_compat.mjs drives the Secret
class and network.rules (Secret.fill placeholders and literals) at Sandbox.create and in
updateNetwork against a real space-api + space-node started with --secrets-key (an X25519
public key this test makes, as space-gw's DATA/gw/secrets.pub would be). That the values are
injected on the wire is the gateway's suite (tests/egress/test_credentials.py); here: they
are stored sealed, echoed only as placeholders, and never reach the guest or the logs."""
import os
import shutil
import subprocess

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from lib.platform import Platform

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_BIN = os.environ.get("SPACE_NODEJS", shutil.which("node") or "node")


def test_e2b_sdk_secrets_and_network_rules():
    assert os.path.isdir(os.path.join(HERE, "node_modules", "e2b")), \
        "run tools/install-deps.sh (npm ci in tests/compat)"
    p = Platform("secrets-compat")
    pub = os.path.join(p.data, "secrets.pub")
    with open(pub, "wb") as f:
        f.write(X25519PrivateKey.generate().public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    p.api_args += ["--secrets-key", pub]
    try:
        p.start()
        env = dict(os.environ, E2B_API_URL=p.url, E2B_SANDBOX_URL=p.ingress_url,
                   E2B_DOMAIN="space.test", E2B_API_KEY=p.key)
        res = subprocess.run([NODE_BIN, os.path.join(HERE, "secrets_compat.mjs")], cwd=HERE,
                             env=env, capture_output=True, text=True, timeout=600)
        print(res.stdout)
        assert res.returncode == 0, res.stdout + res.stderr + p.api_log()
        assert "ok all" in res.stdout
        # The values (ghp_<tag>..., lit_<tag>...) are in no log line.
        log = p.api_log_full()
        assert "ghp_" not in log and "lit_" not in log
        p.stop_api()
        p.node.stop()
        left = p.node.leftovers()
    finally:
        p.destroy()
    assert not left, left
