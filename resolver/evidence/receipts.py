"""Receipt v1: exact-shape, size-capped, HMAC-signed evidence bound to one dispatch identity.

The wire contract (docs/receipts.md) is public: executors and services in other
languages sign receipts, the resolver verifies them. Verification fails closed: any deviation
raises `ReceiptRejected` with a reason code, and `receipt_finding` turns that into `conflict`.
Nothing here logs a receipt body or a secret.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import operator
import os
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import structlog

from resolver.core.declarations import Reason
from resolver.core.domain import (
    ACTION_TYPE_PATTERN,
    HEX64_PATTERN,
    ID_PATTERN,
    RESULT_CODE_PATTERN,
    DispatchIdentity,
    Finding,
    FindingKind,
    Outcome,
    canonical_json,
    sha256_hex,
)
from resolver.core.errors import ConfigError, ReceiptRejected

log = structlog.get_logger("resolver.receipts")

RECEIPT_VERSION = 1
MAX_RECEIPT_BYTES = 4096
"""Cap on the canonical serialization (the signed receipt, `sig` included)."""
MAX_RAW_RECEIPT_BYTES = 8192
"""Cap on the transport form before parsing (a service may pretty-print)."""
MIN_KEY_BYTES = 32
KID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}\Z")
_MAX_INT = 2**63 - 1

KEYS_ENV = "RESOLVER_RECEIPT_KEYS"
SECRETS_DIR_ENV = "RESOLVER_SECRETS_DIR"
SIGNING_KID_ENV = "RESOLVER_RECEIPT_SIGNING_KID"

_INT_FIELDS = ("v", "attempt", "started_at_ms", "finished_at_ms")
_PATTERN_FIELDS: dict[str, re.Pattern[str]] = {
    "dispatch_id": ID_PATTERN,
    "approval_request_id": ID_PATTERN,
    "project_id": ID_PATTERN,
    "idempotency_key": ID_PATTERN,
    "action_type": ACTION_TYPE_PATTERN,
    "action_digest": HEX64_PATTERN,
    "receipt_identity_digest": HEX64_PATTERN,
    "result_code": RESULT_CODE_PATTERN,
    "kid": KID_PATTERN,
    "sig": HEX64_PATTERN,
}
RECEIPT_FIELDS = frozenset({*_INT_FIELDS, *_PATTERN_FIELDS, "outcome"})
_OUTCOMES = frozenset(outcome.value for outcome in Outcome)
_IDENTITY_FIELDS = (
    "dispatch_id",
    "approval_request_id",
    "project_id",
    "action_type",
    "idempotency_key",
)
_OUTCOME_OF = {outcome.value: outcome for outcome in Outcome}
# What binds a receipt to its dispatch, as `_check_binding` checks it field by field: `v`
# is the dispatch's schema version, then the identity, the action digest and the fence.
_BOUND = (*_IDENTITY_FIELDS, "action_digest", "attempt", "started_at_ms")
_BOUND_BY_RECEIPT = operator.attrgetter("v", *_BOUND)
_BOUND_BY_IDENTITY = operator.attrgetter("schema_version", *_BOUND)


class RejectReason(StrEnum):
    """Why a receipt was refused; low-sensitivity codes for logs and metrics."""

    TOO_LARGE = "too_large"
    NOT_JSON = "not_json"
    NOT_OBJECT = "not_object"
    DUPLICATE_FIELD = "duplicate_field"
    FLOAT = "float"
    MISSING_FIELD = "missing_field"
    UNKNOWN_FIELD = "unknown_field"
    BAD_TYPE = "bad_type"
    BAD_VALUE = "bad_value"
    VERSION_MISMATCH = "version_mismatch"
    UNKNOWN_KID = "unknown_kid"
    BAD_SIGNATURE = "bad_signature"
    IDENTITY_MISMATCH = "identity_mismatch"
    DIGEST_MISMATCH = "digest_mismatch"
    FENCE_MISMATCH = "fence_mismatch"


# What each rejection means to a person, for the declaration of every provider that verifies
# receipts (`declare(reasons=RECEIPT_REASONS + ...)`): one sentence per code, shared, so two
# receipt providers never give one code two meanings. The four that suggest tampering are what a
# forged or altered success looks like; the rest are a broken or foreign producer.
_RECEIPT_SENTENCES: Mapping[RejectReason, tuple[str, bool]] = {
    RejectReason.TOO_LARGE: ("the receipt is larger than any valid receipt", False),
    RejectReason.NOT_JSON: ("the receipt is not valid JSON", False),
    RejectReason.NOT_OBJECT: ("the receipt is not a JSON object", False),
    RejectReason.DUPLICATE_FIELD: ("the receipt repeats a field", False),
    RejectReason.FLOAT: ("the receipt carries a fractional number", False),
    RejectReason.MISSING_FIELD: ("the receipt lacks a required field", False),
    RejectReason.UNKNOWN_FIELD: ("the receipt carries an unknown field", False),
    RejectReason.BAD_TYPE: ("a receipt field has the wrong type", False),
    RejectReason.BAD_VALUE: ("a receipt field has an invalid value", False),
    RejectReason.VERSION_MISMATCH: (
        "the receipt has a format version this installation does not read",
        False,
    ),
    RejectReason.UNKNOWN_KID: (
        "the receipt is signed with a key this installation does not know",
        True,
    ),
    RejectReason.BAD_SIGNATURE: (
        "the receipt's signature does not verify: it was altered or not signed by the executor",
        True,
    ),
    RejectReason.IDENTITY_MISMATCH: (
        "the evidence names another dispatch, project or attempt",
        True,
    ),
    RejectReason.DIGEST_MISMATCH: (
        "the receipt is for a different action than the one approved",
        True,
    ),
    RejectReason.FENCE_MISMATCH: (
        "the receipt was written under a lease that no longer held",
        False,
    ),
}
RECEIPT_REASONS: tuple[Reason, ...] = tuple(
    Reason(code.value, sentence, tampering)
    for code, (sentence, tampering) in _RECEIPT_SENTENCES.items()
)


def _reject(reason: RejectReason, message: str) -> ReceiptRejected:
    return ReceiptRejected(message, reason.value)


# -- key ring -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyRing:
    """HMAC keys by key id: sign with `signing_kid`, verify with any key in the ring.

    Rotation: add the new kid to every verifier first, then switch signers to it, then drop
    the old kid once no unresolved dispatch can still hold a receipt signed with it. A
    receipt whose kid left the ring is `conflict` (a human decides), never success.
    """

    keys: Mapping[str, bytes] = field(repr=False)
    signing_kid: str | None = None
    # Each key's HMAC state after the key is absorbed, copied per receipt: HMAC by name
    # fetches the digest and absorbs the key again on every call, about a third of a
    # receipt's check. Read from `keys` once: a ring does not change after it is built.
    _keyed: Mapping[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for kid, secret in self.keys.items():
            _check_key(kid, secret, source="key ring")
        keyed = {kid: hmac.new(secret, digestmod="sha256") for kid, secret in self.keys.items()}
        object.__setattr__(self, "_keyed", keyed)
        if self.signing_kid is not None and self.signing_kid not in self.keys:
            raise ConfigError(
                f"{SIGNING_KID_ENV}={self.signing_kid!r} names no key in the ring; add that "
                f"kid to {KEYS_ENV} or {SECRETS_DIR_ENV}, or sign with one of {sorted(self.keys)}"
            )

    @property
    def kids(self) -> frozenset[str]:
        return frozenset(self.keys)

    def mac(self, kid: str, body: bytes) -> str:
        keyed = self._keyed.get(kid)
        if keyed is None:
            raise _reject(RejectReason.UNKNOWN_KID, "the receipt's kid is not in the key ring")
        mac = keyed.copy()
        mac.update(body)
        return str(mac.hexdigest())

    @property
    def current_kid(self) -> str:
        """The kid new receipts are signed with."""
        if self.signing_kid is None:
            raise ConfigError(
                f"{SIGNING_KID_ENV} is not set: name the kid executors sign receipts with"
            )
        return self.signing_kid

    def check(self, kid: str, body: bytes, sig: str) -> None:
        expected = self.mac(kid, body)
        # Constant time: the comparison must not reveal how many leading characters match.
        if not hmac.compare_digest(expected.encode("ascii"), sig.encode("ascii")):
            raise _reject(RejectReason.BAD_SIGNATURE, "the receipt's signature does not verify")

    @classmethod
    def ephemeral(cls, kid: str = "ephemeral") -> KeyRing:
        """A fresh random key that lives only in this process (demo and tests)."""
        return cls({kid: secrets.token_bytes(MIN_KEY_BYTES)}, signing_kid=kid)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> KeyRing:
        """Keys from `RESOLVER_RECEIPT_KEYS` and files in `RESOLVER_SECRETS_DIR`."""
        env = os.environ if environ is None else environ
        keys = _parse_keys_env(env.get(KEYS_ENV, ""))
        secrets_dir = env.get(SECRETS_DIR_ENV)
        if secrets_dir:
            for kid, secret in _read_secrets_dir(Path(secrets_dir)).items():
                if kid in keys and not hmac.compare_digest(keys[kid], secret):
                    raise ConfigError(
                        f"receipt key {kid!r} differs between {KEYS_ENV} and {SECRETS_DIR_ENV}; "
                        "keep one source per kid"
                    )
                keys[kid] = secret
        return cls(keys, signing_kid=env.get(SIGNING_KID_ENV) or None)

    def require_keys(self, who: str) -> KeyRing:
        if not self.keys:
            raise ConfigError(
                f"{who} verifies signed receipts but no receipt key is configured; set "
                f"{KEYS_ENV}=kid=hexsecret (at least {MIN_KEY_BYTES} bytes, e.g. "
                f"`openssl rand -hex {MIN_KEY_BYTES}`) or put one file per kid in {SECRETS_DIR_ENV}"
            )
        return self


def _check_key(kid: str, secret: bytes, *, source: str) -> None:
    if not KID_PATTERN.match(kid):
        raise ConfigError(
            f"{source}: receipt key id {kid!r} must match [A-Za-z0-9][A-Za-z0-9_.-]{{0,63}}"
        )
    if len(secret) < MIN_KEY_BYTES:
        raise ConfigError(
            f"{source}: receipt key {kid!r} is {len(secret)} bytes; use at least "
            f"{MIN_KEY_BYTES} random bytes (`openssl rand -hex {MIN_KEY_BYTES}`)"
        )


def _parse_keys_env(raw: str) -> dict[str, bytes]:
    keys: dict[str, bytes] = {}
    for position, entry in enumerate(part.strip() for part in raw.split(",")):
        if not entry:
            continue
        kid, sep, hex_secret = entry.partition("=")
        kid = kid.strip()
        if not sep or not kid:
            raise ConfigError(
                f"{KEYS_ENV}: entry {position + 1} is not kid=hexsecret; "
                "write kid=hexsecret,kid2=hexsecret"
            )
        if kid in keys:
            raise ConfigError(f"{KEYS_ENV}: kid {kid!r} appears twice; keep one entry per kid")
        keys[kid] = _hex_secret(hex_secret, f"{KEYS_ENV} entry {kid!r}")
        _check_key(kid, keys[kid], source=KEYS_ENV)
    return keys


def _read_secrets_dir(directory: Path) -> dict[str, bytes]:
    if not directory.is_dir():
        raise ConfigError(
            f"{SECRETS_DIR_ENV}={directory} is not a directory; point it at the mounted secrets"
        )
    keys: dict[str, bytes] = {}
    for path in sorted(directory.iterdir()):
        # Kubernetes secret volumes hold `..data` links; dotfiles are never keys.
        if path.name.startswith(".") or not path.is_file():
            continue
        source = f"{SECRETS_DIR_ENV} file {path.name!r}"
        try:
            text = path.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError):
            raise ConfigError(f"{source}: cannot read it as hex text") from None
        keys[path.name] = _hex_secret(text, source)
        _check_key(path.name, keys[path.name], source=source)
    return keys


def _hex_secret(text: str, source: str) -> bytes:
    try:
        return bytes.fromhex(text.strip())
    except ValueError:
        # The message must not quote the value: it is a secret.
        raise ConfigError(f"{source}: the secret is not hex; encode the key as hex") from None


# -- signing --------------------------------------------------------------------------------


def receipt_identity_digest(receipt_id: str) -> str:
    """Digest of the provider's own receipt id (the id itself is never stored)."""
    return sha256_hex(receipt_id)


def sign_receipt(
    identity: DispatchIdentity,
    *,
    outcome: Outcome,
    result_code: str,
    finished_at_ms: int,
    receipt_id: str,
    keys: KeyRing,
) -> dict[str, Any]:
    """A signed receipt v1 for `identity` (what an executor or receipt service produces)."""
    body: dict[str, Any] = {
        "v": RECEIPT_VERSION,
        "dispatch_id": identity.dispatch_id,
        "approval_request_id": identity.approval_request_id,
        "project_id": identity.project_id,
        "action_type": identity.action_type,
        "action_digest": identity.action_digest,
        "attempt": identity.attempt,
        "started_at_ms": identity.started_at_ms,
        "idempotency_key": identity.idempotency_key,
        "outcome": outcome.value,
        "result_code": result_code,
        "finished_at_ms": finished_at_ms,
        "receipt_identity_digest": receipt_identity_digest(receipt_id),
        "kid": keys.current_kid,
    }
    _check_shape(body, signed=False)
    body["sig"] = keys.mac(body["kid"], canonical_json(body))
    return body


def encode_receipt(receipt: Mapping[str, Any]) -> bytes:
    """The canonical serialization: sorted keys, `,` and `:`, UTF-8, no floats."""
    return canonical_json(dict(receipt))


# -- verification ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VerifiedReceipt:
    outcome: Outcome
    result_code: str
    finished_at_ms: int
    kid: str
    evidence_digest: str
    """sha256 of the canonical signed receipt: what the resolution stores."""

    def finding(self) -> Finding:
        return Finding.verified(self.outcome, self.evidence_digest, self.result_code)


def verify_receipt(
    raw: bytes | str,
    identity: DispatchIdentity,
    keys: KeyRing,
    *,
    max_raw_bytes: int = MAX_RAW_RECEIPT_BYTES,
) -> VerifiedReceipt:
    """Accept a receipt only if its shape, size, signature and whole identity all match."""
    data = _bounded(raw, max_raw_bytes)
    decoded = _decode_well_formed(data)
    if decoded is not None:
        return _verify_well_formed(decoded, identity, keys)
    # Anything the typed decoder refused takes the step-by-step path, which names the reason
    # (or accepts a form v1 allows that the typed decoder does not take).
    return _verify_steps(data, identity, keys)


def verify_stepwise(
    raw: bytes | str,
    identity: DispatchIdentity,
    keys: KeyRing,
    *,
    max_raw_bytes: int = MAX_RAW_RECEIPT_BYTES,
) -> VerifiedReceipt:
    """The reference verifier: every rule checked in turn. `verify_receipt` answers the same
    (receipt, bytes, digest or reason) for every input, faster when the receipt is
    well-formed."""
    return _verify_steps(_bounded(raw, max_raw_bytes), identity, keys)


def _bounded(raw: bytes | str, max_raw_bytes: int) -> bytes:
    # surrogatepass: a lone surrogate must reach the parser and be refused there, not escape
    # as an encoding error (which would turn one bad receipt into an unavailable page).
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if len(data) > max_raw_bytes:
        raise _reject(RejectReason.TOO_LARGE, f"receipt is over {max_raw_bytes} bytes")
    return data


def _verify_steps(data: bytes, identity: DispatchIdentity, keys: KeyRing) -> VerifiedReceipt:
    receipt = parse_receipt_json(data)
    try:
        canonical = _encode_parsed(receipt)
    except UnicodeEncodeError:  # an escaped lone surrogate ("\ud800") is not UTF-8 text
        raise _reject(RejectReason.NOT_JSON, "receipt holds text that is not UTF-8") from None
    if len(canonical) > MAX_RECEIPT_BYTES:
        raise _reject(RejectReason.TOO_LARGE, f"receipt is over {MAX_RECEIPT_BYTES} bytes")
    _check_shape(receipt, signed=True)
    keys.check(receipt["kid"], _unsigned_form(canonical, receipt), receipt["sig"])
    _check_binding(receipt.__getitem__, identity)
    return VerifiedReceipt(
        outcome=Outcome(receipt["outcome"]),
        result_code=receipt["result_code"],
        finished_at_ms=receipt["finished_at_ms"],
        kid=receipt["kid"],
        evidence_digest=hashlib.sha256(canonical).hexdigest(),
    )


# -- the typed decoder: a well-formed receipt v1 in two native passes ------------------------
#
# msgspec decodes the receipt in C into a struct of the v1 fields (types, integer ranges, the
# two literals, no unknown or missing field); the struct's fields are declared in sorted key
# order, so encoding it gives the canonical form. Every string pattern is then checked at
# once: the canonical form of a v1 receipt is a regular language (`_CANONICAL_V1`, built from
# the same patterns as the step-by-step checks). This path accepts a strict subset of what the
# step-by-step checks accept, with one gap closed below: a repeated key (the last one wins).
# Whatever it refuses goes the step-by-step way, which names the reason; tests hold both
# paths to the same verdict, reason and bytes.

_Ms = Annotated[int, msgspec.Meta(ge=0, le=_MAX_INT)]


class _ReceiptV1(msgspec.Struct, forbid_unknown_fields=True):
    # Sorted by name: the canonical key order (a test checks it against RECEIPT_FIELDS).
    action_digest: str
    action_type: str
    approval_request_id: str
    attempt: Annotated[int, msgspec.Meta(ge=1, le=_MAX_INT)]
    dispatch_id: str
    finished_at_ms: _Ms
    idempotency_key: str
    kid: str
    outcome: Literal["succeeded", "failed"]
    project_id: str
    receipt_identity_digest: str
    result_code: str
    sig: str
    started_at_ms: _Ms
    v: Literal[1]


def _canonical_v1_pattern() -> re.Pattern[bytes]:
    """The canonical bytes of every receipt whose strings match their field's pattern.

    A pattern here admits no quote, backslash or non-ASCII character, so a string matches it
    exactly when its JSON encoding does (an encoding with an escape never matches). Integers
    are only shaped here: the decoder checked their types and ranges.
    """
    members = []
    for name in sorted(RECEIPT_FIELDS):
        if name in _PATTERN_FIELDS:
            source = _PATTERN_FIELDS[name].pattern
            assert source.startswith("^") and source.endswith("\\Z"), name
            value = f'"{source[1:-2]}"'
        elif name == "outcome":
            value = '"(?:' + "|".join(sorted(_OUTCOMES)) + ')"'
        else:
            value = "[0-9]+"
        members.append(f'"{name}":{value}')
    return re.compile(("\\{" + ",".join(members) + "\\}").encode("ascii"))


_CANONICAL_V1 = _canonical_v1_pattern()
_TYPED_DECODER = msgspec.json.Decoder(_ReceiptV1)
_encode_struct = msgspec.json.Encoder().encode
# A well-formed v1 object has exactly one comma per member after the first: once the strings
# match their patterns (no commas, and an escaped comma decodes to a refused character), every
# number is an integer and no value nests, a raw comma separates members. One comma more is
# one member more, i.e. a repeated key, which the typed decoder would otherwise let through.
_MEMBER_COMMAS = len(RECEIPT_FIELDS) - 1


def _decode_well_formed(data: bytes) -> tuple[_ReceiptV1, bytes] | None:
    """The struct and its canonical bytes, or None for the step-by-step path."""
    try:
        receipt = _TYPED_DECODER.decode(data)
    except msgspec.MsgspecError:
        return None
    canonical = _encode_struct(receipt)
    if _CANONICAL_V1.fullmatch(canonical) is None or data.count(b",") != _MEMBER_COMMAS:
        return None
    return receipt, canonical


def _verify_well_formed(
    decoded: tuple[_ReceiptV1, bytes], identity: DispatchIdentity, keys: KeyRing
) -> VerifiedReceipt:
    receipt, canonical = decoded
    evidence_digest = _check_well_formed(receipt, canonical, identity, keys)
    return VerifiedReceipt(
        outcome=_OUTCOME_OF[receipt.outcome],
        result_code=receipt.result_code,
        finished_at_ms=receipt.finished_at_ms,
        kid=receipt.kid,
        evidence_digest=evidence_digest,
    )


def _check_well_formed(
    receipt: _ReceiptV1, canonical: bytes, identity: DispatchIdentity, keys: KeyRing
) -> str:
    """Size, signature and binding of a typed-decoded receipt; its evidence digest."""
    # Within the patterns the canonical form stays far below the cap; the rule still holds.
    if len(canonical) > MAX_RECEIPT_BYTES:
        raise _reject(RejectReason.TOO_LARGE, f"receipt is over {MAX_RECEIPT_BYTES} bytes")
    # `sig` is neither first nor last and its value is hex: the segment occurs once.
    segment = b'"sig":"' + receipt.sig.encode("ascii") + b'",'
    keys.check(receipt.kid, canonical.replace(segment, b"", 1), receipt.sig)
    # Every bound field in one comparison; only a mismatch walks them for its reason.
    if _BOUND_BY_RECEIPT(receipt) != _BOUND_BY_IDENTITY(identity):
        _check_binding(functools.partial(getattr, receipt), identity)
        raise _reject(RejectReason.IDENTITY_MISMATCH, "receipt differs from dispatch")
    return hashlib.sha256(canonical).hexdigest()


# The canonical encoder of canonical_json, for values parse_receipt_json produced: that
# parser already refused floats, NaN and non-string keys, so the walk looking for them
# (_reject_floats of resolver.core.domain.canonical) would find nothing.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def _encode_parsed(receipt: Mapping[str, Any]) -> bytes:
    return _CANONICAL.encode(receipt).encode("utf-8")


def _unsigned_form(canonical: bytes, receipt: Mapping[str, Any]) -> bytes:
    """The canonical form without `sig`, cut out of the signed one instead of encoded again.

    Keys are sorted and `sig` is neither first nor last (`started_at_ms` and `v` follow it),
    so the signed form holds `"sig":"<hex>",` exactly once, at the top level: a quote inside
    a string value is always escaped, so that byte sequence cannot occur elsewhere. The
    shape check has already made `sig` lowercase hex. Anything else: encode again.
    """
    segment = b'"sig":"' + receipt["sig"].encode("ascii") + b'",'
    if canonical.count(segment) == 1:
        return canonical.replace(segment, b"", 1)
    return _encode_parsed({k: v for k, v in receipt.items() if k != "sig"})


def receipt_finding(
    raw: bytes | str,
    identity: DispatchIdentity,
    keys: KeyRing,
    *,
    source: str,
    max_raw_bytes: int = MAX_RAW_RECEIPT_BYTES,
) -> Finding:
    """The finding a receipt proves: verified, or `conflict` on any mismatch."""
    try:
        data = _bounded(raw, max_raw_bytes)
        decoded = _decode_well_formed(data)
        if decoded is None:
            return _verify_steps(data, identity, keys).finding()
        # The typed path straight to the finding: the same checks as verify_receipt's,
        # without the intermediate VerifiedReceipt a page of receipts would build and drop.
        receipt, canonical = decoded
        evidence_digest = _check_well_formed(receipt, canonical, identity, keys)
        return Finding.verified(_OUTCOME_OF[receipt.outcome], evidence_digest, receipt.result_code)
    except ReceiptRejected as exc:
        log.warning(
            "receipt_rejected", source=source, dispatch_id=identity.dispatch_id, reason=exc.reason
        )
        return Finding(FindingKind.CONFLICT, cause=exc.reason)


def parse_receipt_json(data: bytes) -> dict[str, Any]:
    """Strict JSON: UTF-8, one object, no duplicate keys, no floats, NaN or Infinity."""
    try:
        value = _strict_decoder().decode(data.decode("utf-8"))
    except ReceiptRejected:
        raise
    except (ValueError, RecursionError):
        # ValueError covers bad UTF-8, bad JSON and integers past the digit limit.
        raise _reject(RejectReason.NOT_JSON, "receipt is not valid JSON") from None
    if not isinstance(value, dict):
        raise _reject(RejectReason.NOT_OBJECT, "receipt is not a JSON object")
    return value


@cache
def _strict_decoder() -> json.JSONDecoder:
    # One decoder for every receipt: json.loads with hooks builds a new one per call.
    return json.JSONDecoder(
        object_pairs_hook=_object_without_duplicates,
        parse_float=_refuse_float,
        parse_constant=_refuse_float,
    )


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            # Parsers disagree on which duplicate wins; a receipt must mean one thing.
            raise _reject(RejectReason.DUPLICATE_FIELD, "receipt repeats a field")
        result[key] = value
    return result


def _refuse_float(_text: str) -> Any:
    raise _reject(RejectReason.FLOAT, "receipt holds a non-integer number")


def _check_shape(receipt: Mapping[str, Any], *, signed: bool) -> None:
    expected = RECEIPT_FIELDS if signed else RECEIPT_FIELDS - {"sig"}
    present = set(receipt)
    if present - expected:
        raise _reject(RejectReason.UNKNOWN_FIELD, "receipt holds a field v1 does not define")
    if expected - present:
        raise _reject(RejectReason.MISSING_FIELD, "receipt lacks a field v1 requires")
    for name in _INT_FIELDS:
        value = receipt[name]
        # bool is an int subclass in Python; `true` is never a number on the wire.
        if type(value) is not int:
            raise _reject(RejectReason.BAD_TYPE, f"receipt field {name} must be an integer")
        if not 0 <= value <= _MAX_INT:
            raise _reject(RejectReason.BAD_VALUE, f"receipt field {name} is out of range")
    for name, pattern in _PATTERN_FIELDS.items():
        if name == "sig" and not signed:
            continue
        value = receipt[name]
        if type(value) is not str:
            raise _reject(RejectReason.BAD_TYPE, f"receipt field {name} must be a string")
        if not pattern.match(value):
            raise _reject(RejectReason.BAD_VALUE, f"receipt field {name} has the wrong form")
    if type(receipt["outcome"]) is not str or receipt["outcome"] not in _OUTCOMES:
        raise _reject(RejectReason.BAD_VALUE, "receipt outcome must be succeeded or failed")
    if receipt["v"] != RECEIPT_VERSION:
        raise _reject(RejectReason.VERSION_MISMATCH, "receipt is not version 1")
    if receipt["attempt"] < 1:
        raise _reject(RejectReason.BAD_VALUE, "receipt attempt must be at least 1")


def _check_binding(field: Callable[[str], Any], identity: DispatchIdentity) -> None:
    """`field(name)` reads the receipt (a parsed object or the typed struct)."""
    # `v` doubles as the schema version the receipt attests: a v1 receipt only binds a
    # schema-version-1 dispatch; a later dispatch schema needs a later receipt version.
    if identity.schema_version != field("v"):
        raise _reject(RejectReason.VERSION_MISMATCH, "receipt version differs from the dispatch's")
    for name in _IDENTITY_FIELDS:
        if field(name) != getattr(identity, name):
            raise _reject(RejectReason.IDENTITY_MISMATCH, f"receipt {name} differs from dispatch")
    if field("action_digest") != identity.action_digest:
        raise _reject(RejectReason.DIGEST_MISMATCH, "receipt action_digest differs from dispatch")
    if (field("attempt"), field("started_at_ms")) != (identity.attempt, identity.started_at_ms):
        raise _reject(RejectReason.FENCE_MISMATCH, "receipt attempt or start differs from dispatch")
