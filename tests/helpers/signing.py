"""The API's fact-signing key of the tests: a fixed Ed25519 key, its public-keys file line."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from resolver.human.signing import FactSigner

TEST_ISSUER = "https://issuer.test"
TEST_SIGNING_KID = "audit-test-1"
# A fixed seed, so facts signed by one test process verify in another.
TEST_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
TEST_SIGNER = FactSigner(TEST_KEY, TEST_SIGNING_KID)


TEST_KEY_PEM = TEST_KEY.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
).decode("ascii")


def write_signing_key(directory: Path) -> Path:
    """TEST_KEY as the PEM file RESOLVER_AUDIT_SIGNING_KEY_FILE names."""
    path = directory / "audit-signing.pem"
    path.write_text(TEST_KEY_PEM, encoding="ascii")
    return path


def signing_env(directory: Path) -> dict[str, str]:
    """The environment `resolver api` signs facts with (TEST_SIGNER)."""
    return {
        "RESOLVER_AUDIT_SIGNING_KEY_FILE": str(write_signing_key(directory)),
        "RESOLVER_AUDIT_SIGNING_KID": TEST_SIGNING_KID,
    }


def signing_settings(directory: Path) -> dict[str, object]:
    """The same, as load_settings keywords."""
    return {
        "audit_signing_key_file": write_signing_key(directory),
        "audit_signing_kid": TEST_SIGNING_KID,
    }


def write_public_keys(path: Path, *signers: FactSigner) -> Path:
    """A public-keys file for `resolver audit verify --public-keys` (TEST_SIGNER by default)."""
    lines = [signer.public_line() for signer in (signers or (TEST_SIGNER,))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
