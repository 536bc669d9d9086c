"""Sealed secrets in Python, for tests: the format of src/shared/sealed-secret.h,
written a second time from its description (so a test that seals here and has
space-gw open it also checks the two agree).

    "s1." BASE64(eph_pub[32] || nonce[12] || ciphertext || tag[16])
    key[32] || nonce[12] = HKDF-SHA256(X25519(eph, recipient),
                                       salt = eph_pub || recipient_pub,
                                       info = "space-secret-v1")
    AES-256-GCM, AAD = the secret's name.

Uses python3-cryptography (a Debian package, in tools/install-deps.sh)."""
import base64

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

_RAW = dict(encoding=serialization.Encoding.Raw, format=serialization.PublicFormat.Raw)


def load_public(path_or_pem):
    pem = path_or_pem
    if isinstance(pem, str):
        with open(pem, "rb") as f:
            pem = f.read()
    key = serialization.load_pem_public_key(pem)
    assert isinstance(key, X25519PublicKey), "not an X25519 public key"
    return key


def _okm(shared, eph_pub, rpub):
    return HKDF(algorithm=hashes.SHA256(), length=44, salt=eph_pub + rpub,
                info=b"space-secret-v1").derive(shared)


def seal(pub, name, value, eph=None):
    """The sealed string of value (bytes or str) for the recipient key pub under name."""
    if isinstance(value, str):
        value = value.encode()
    eph = eph or X25519PrivateKey.generate()
    eph_pub = eph.public_key().public_bytes(**_RAW)
    okm = _okm(eph.exchange(pub), eph_pub, pub.public_bytes(**_RAW))
    nonce = okm[32:]
    ct = AESGCM(okm[:32]).encrypt(nonce, value, name.encode())
    return "s1." + base64.b64encode(eph_pub + nonce + ct).decode()


def open_sealed(priv, name, sealed):
    """The inverse, for checking what space-gw would see (raises on failure)."""
    assert sealed.startswith("s1.")
    blob = base64.b64decode(sealed[3:])
    eph_pub, nonce, ct = blob[:32], blob[32:44], blob[44:]
    okm = _okm(priv.exchange(X25519PublicKey.from_public_bytes(eph_pub)), eph_pub,
               priv.public_key().public_bytes(**_RAW))
    if okm[32:] != nonce:
        raise ValueError("sealed to another key")
    return AESGCM(okm[:32]).decrypt(nonce, ct, name.encode())
