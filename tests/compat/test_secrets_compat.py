"""The real `e2b` npm SDK and space's secrets (issue 10): secrets_compat.mjs drives the Secret
class and network.rules (Secret.fill placeholders and literals) at Sandbox.create and in
updateNetwork against a real space-api + space-node started with --secrets-key (an X25519
public key this test makes, as space-gw's DATA/gw/secrets.pub would be). That the values are
injected on the wire is the gateway's suite (tests/egress/test_credentials.py); here: they
are stored sealed, echoed only as placeholders, and never reach the guest or the logs."""
import os

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from lib.platform import Platform
from lib.sdk import run_sdk_script, stop_and_leftovers


def test_e2b_sdk_secrets_and_network_rules():
    p = Platform("secrets-compat")
    pub = os.path.join(p.data, "secrets.pub")
    with open(pub, "wb") as f:
        f.write(X25519PrivateKey.generate().public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    p.api_args += ["--secrets-key", pub]
    try:
        p.start()
        run_sdk_script(p, "secrets_compat.mjs")
        # The values (ghp_<tag>..., lit_<tag>...) are in no log line.
        log = p.api_log_full()
        assert "ghp_" not in log and "lit_" not in log
        left = stop_and_leftovers(p)
    finally:
        p.destroy()
    assert not left, left
