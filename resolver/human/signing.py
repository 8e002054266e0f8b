"""Signed authorization facts: what a database write cannot invent.

The API verifies a person's token, then signs the authorization fact it is about to record
with an Ed25519 key that no database role ever sees (a file the API pod reads, kept as a
Kubernetes Secret). The fact names who (`user_id`), who vouched for them (the token's issuer
and key id), how and when they authenticated (`amr`, `auth_time`), the grant it was fenced
on (project and role-binding versions) and the decision itself (dispatch, outcome, execution
version, evidence digest). The signature and the API's key id are stored with the fact and
carried by its audit link, so `resolver audit verify --public-keys FILE` can tell a fact the
API recorded from one written by hand, even by the table owner, and even after a prune (the
link in the export still carries it). A retired key's public half stays in the file for as
long as facts it signed are kept.

Payload `v: 2` (every fact since facts name their act) also binds the act: which act
(`decide`, `propose`, `confirm`, `reject`, `withdraw`), the request's mutation id, the proposal
it confirms or ends, and the database clock when the API verified the token
(`verified_at_ms`). The database consumes each fact once and refuses one used in another act;
the verifier checks that each fact's act and mutation id are its link's. A `v: 1` fact (signed
before) binds only who and which decision: it cannot prove which act it was for, nor that it
was used once, so the same signature could stand for a withdrawn proposal or a confirmation.

A digest of the token would prove nothing: nobody can check it against the issuer's keys
later. The token itself is never stored: it is a bearer credential until it expires.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from resolver.core.domain import Act, SignedFact
from resolver.core.errors import ConfigError

KID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
_PUBLIC_HEX = re.compile(r"[0-9a-f]{64}")


class PublicKeysUnreadable(ValueError):
    """A public-keys file that is not `kid=hex` lines of Ed25519 public keys."""


class DecisionFacts(msgspec.Struct, frozen=True):
    """The decision an authorization fact is for: what the signature binds it to."""

    dispatch_id: str
    outcome: str
    expected_execution_version: int
    evidence_digest: str | None


class PersonFacts(msgspec.Struct, frozen=True):
    """Who decided, as the verified token and the grant fence describe them."""

    user_id: str
    issuer: str
    token_kid: str
    auth_time_ms: int
    amr: tuple[str, ...]
    project_id: str
    project_version: int
    role_binding_version: int


class ActFacts(msgspec.Struct, frozen=True):
    """The one act a fact is consumed by (payload v2): which act, the mutation id of its
    request, the proposal it confirms or ends (None for decide and propose), and the database
    clock when the API verified the token."""

    act: Act
    mutation_id: str
    proposal_id: int | None
    verified_at_ms: int


def fact_payload(
    person: PersonFacts,
    decision: DecisionFacts,
    signing_kid: str,
    act: ActFacts | None = None,
) -> bytes:
    """The exact bytes signed: canonical JSON (keys sorted, no spaces, UTF-8). Payload v2 when
    `act` is given (what the API signs); v1 without, as facts were signed before."""
    document: dict[str, Any] = {
        "v": 1 if act is None else 2,
        "kind": "resolver.authorization",
        "signing_kid": signing_kid,
        "user_id": person.user_id,
        "issuer": person.issuer,
        "token_kid": person.token_kid,
        "auth_time_ms": person.auth_time_ms,
        "amr": list(person.amr),
        "project_id": person.project_id,
        "project_version": person.project_version,
        "role_binding_version": person.role_binding_version,
        "dispatch_id": decision.dispatch_id,
        "outcome": decision.outcome,
        "expected_execution_version": decision.expected_execution_version,
        "evidence_digest": decision.evidence_digest,
    }
    if act is not None:
        document |= {
            "act": act.act.value,
            "mutation_id": act.mutation_id,
            "proposal_id": act.proposal_id,
            "verified_at_ms": act.verified_at_ms,
        }
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


class FactSigner:
    """The API's signing key and its key id."""

    def __init__(self, key: Ed25519PrivateKey, kid: str) -> None:
        if not KID_PATTERN.fullmatch(kid):
            raise ConfigError(f"audit signing key id {kid!r} must match {KID_PATTERN.pattern}")
        self._key = key
        self.kid = kid

    @classmethod
    def from_file(cls, path: Path, kid: str) -> FactSigner:
        """A PEM (PKCS#8) Ed25519 private key, e.g. `openssl genpkey -algorithm ed25519`."""
        try:
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigError(
                f"RESOLVER_AUDIT_SIGNING_KEY_FILE: {path} is not a readable PEM private key "
                f"({type(exc).__name__})"
            ) from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ConfigError(f"RESOLVER_AUDIT_SIGNING_KEY_FILE: {path} is not an Ed25519 key")
        return cls(key, kid)

    def sign(self, person: PersonFacts, decision: DecisionFacts, act: ActFacts) -> SignedFact:
        """The fact of one act of one person (payload v2)."""
        signature = self._key.sign(fact_payload(person, decision, self.kid, act)).hex()
        return SignedFact(
            person.issuer,
            person.token_kid,
            self.kid,
            signature,
            act.act,
            act.proposal_id,
            act.verified_at_ms,
        )

    def public_line(self) -> str:
        """This key's line of a public-keys file (`resolver audit public-key`)."""
        raw = self._key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return f"{self.kid}={raw.hex()}"


def load_public_keys(path: Path) -> dict[str, Ed25519PublicKey]:
    """`kid=hex` lines (64 hex digits, the raw Ed25519 public key); `#` comments, blank lines."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError) as exc:
        raise PublicKeysUnreadable(f"{path}: not readable ({type(exc).__name__})") from None
    return parse_public_keys(lines, str(path))


def parse_public_keys(lines: Iterable[str], source: str) -> dict[str, Ed25519PublicKey]:
    keys: dict[str, Ed25519PublicKey] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        kid, sep, hex_key = line.partition("=")
        if not sep or not KID_PATTERN.fullmatch(kid) or not _PUBLIC_HEX.fullmatch(hex_key):
            raise PublicKeysUnreadable(f"{source}:{number}: not `kid=<64 hex digits>`")
        if kid in keys:
            raise PublicKeysUnreadable(f"{source}:{number}: key id {kid!r} twice")
        keys[kid] = Ed25519PublicKey.from_public_bytes(bytes.fromhex(hex_key))
    if not keys:
        raise PublicKeysUnreadable(f"{source}: holds no keys")
    return keys


def fact_act(fact: Mapping[str, Any]) -> ActFacts | None:
    """The act a fact (as its audit link records it) names, None for a v1 or unsigned fact.
    Raises ValueError, KeyError or TypeError when a fact names an act malformed."""
    if "act" not in fact:
        return None
    proposal_id = fact["proposal_id"]
    return ActFacts(
        act=Act(fact["act"]),
        mutation_id=_text(fact["mutation_id"]),
        proposal_id=None if proposal_id is None else _integer(proposal_id),
        verified_at_ms=_integer(fact["verified_at_ms"]),
    )


def check_fact(
    fact: Mapping[str, Any], decision: DecisionFacts, keys: Mapping[str, Ed25519PublicKey]
) -> str | None:
    """Why an authorization fact (as its audit link records it) does not verify, or None:
    `unsigned_fact`, `unknown_signing_key` or `bad_signature`. A fact naming its act is
    checked as payload v2, any other as v1."""
    signature, kid = fact.get("signature"), fact.get("signing_kid")
    if not isinstance(signature, str) or not isinstance(kid, str):
        return "unsigned_fact"
    key = keys.get(kid)
    if key is None:
        return "unknown_signing_key"
    try:
        person = PersonFacts(
            user_id=_text(fact["user_id"]),
            issuer=_text(fact["issuer"]),
            token_kid=_text(fact["token_kid"]),
            auth_time_ms=_integer(fact["auth_time_ms"]),
            amr=tuple(_text(v) for v in fact["amr"]),
            project_id=_text(fact["project_id"]),
            project_version=_integer(fact["project_version"]),
            role_binding_version=_integer(fact["role_binding_version"]),
        )
        payload = fact_payload(person, decision, kid, fact_act(fact))
        key.verify(bytes.fromhex(signature), payload)
    except (KeyError, TypeError, ValueError, InvalidSignature):
        return "bad_signature"
    return None


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value


def _integer(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("not an integer")
    return value
