"""Fuzz: thousands of mutated receipts per run; none but the genuine receipt is ever accepted.

The property is exact: a receipt is accepted only if its canonical form (hence its evidence
digest) equals the genuine receipt's. Mutations that change nothing (reordering keys,
whitespace, re-setting a field to its own value) are the only ones allowed through.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resolver.core.domain import DispatchIdentity, Outcome, action_digest, canonical_json
from resolver.core.errors import ReceiptRejected
from resolver.evidence.receipts import (
    RECEIPT_FIELDS,
    KeyRing,
    VerifiedReceipt,
    encode_receipt,
    sign_receipt,
    verify_receipt,
    verify_stepwise,
)

EXAMPLES = 3000
RING = KeyRing({"k1": b"\x11" * 32, "k2": b"\x22" * 32}, signing_kid="k1")
ATTACKER = KeyRing({"k1": b"\x33" * 32, "k2": b"\x44" * 32, "k3": b"\x55" * 32}, "k1")
IDENTITY = DispatchIdentity(
    schema_version=1,
    dispatch_id="d-fuzz",
    approval_request_id="ar-fuzz",
    project_id="proj-fuzz",
    action_type="payments.charge",
    action_digest=action_digest({"fuzz": True}),
    attempt=3,
    started_at_ms=1_800_000_000_000,
    idempotency_key="idem-fuzz",
)
GENUINE = sign_receipt(
    IDENTITY,
    outcome=Outcome.SUCCEEDED,
    result_code="ok",
    finished_at_ms=1_800_000_001_000,
    receipt_id="rcpt-1",
    keys=RING,
)
GENUINE_DIGEST = hashlib.sha256(encode_receipt(GENUINE)).hexdigest()
# Fields whose change a legitimate signer may make: re-signing those with the real key
# produces a different but genuine receipt, so the identity-binding fuzz leaves them alone.
FREE_FIELDS = {"outcome", "result_code", "finished_at_ms", "receipt_identity_digest", "kid", "sig"}
BOUND_FIELDS = sorted(RECEIPT_FIELDS - FREE_FIELDS)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=24)
    | st.text(st.characters(codec=None, categories=["Cs", "Co", "Cc"]), max_size=3)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=4,
)


def near(value: Any) -> st.SearchStrategy[Any]:
    """Values close to the genuine one: the mutations most likely to slip through."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return json_values
    if isinstance(value, int):
        return st.sampled_from([value - 1, value + 1, -value, str(value), float(value), True, 0])
    return st.sampled_from(
        [
            value.upper(),
            value + "\n",
            " " + value,
            value[:-1],
            value + value[-1:],
            value.replace("-", "_"),
            value[::-1],
            "",
        ]
    ) | st.text(max_size=24)


@st.composite
def field_edit(draw: st.DrawFn, fields: list[str]) -> tuple[str, str, Any]:
    kind = draw(st.sampled_from(["set", "near", "delete", "add"]))
    name = draw(st.sampled_from(fields))
    if kind == "add":
        return kind, draw(st.text(min_size=1, max_size=12)), draw(json_values)
    if kind == "near":
        return "set", name, draw(near(GENUINE[name]))
    return kind, name, draw(json_values) if kind == "set" else None


def apply(receipt: dict[str, Any], edits: list[tuple[str, str, Any]]) -> dict[str, Any]:
    out = dict(receipt)
    for kind, name, value in edits:
        if kind == "delete":
            out.pop(name, None)
        else:
            out[name] = value
    return out


def serialize(receipt: dict[str, Any]) -> bytes:
    try:
        return canonical_json(receipt)
    except Exception:  # floats and the like: send what a sloppy encoder would
        return json.dumps(receipt).encode()


def resign(receipt: dict[str, Any], ring: KeyRing) -> dict[str, Any]:
    body = {k: v for k, v in receipt.items() if k != "sig"}
    kid = body.get("kid") if isinstance(body.get("kid"), str) else "k1"
    secret = ring.keys.get(str(kid), ring.keys["k1"])
    try:
        sig = hmac.new(secret, canonical_json(body), hashlib.sha256).hexdigest()
    except Exception:
        sig = "0" * 64
    return {**body, "sig": sig}


def verdict(verify: Callable[[], VerifiedReceipt]) -> VerifiedReceipt | str:
    """The verified receipt, or the reason it was rejected."""
    try:
        return verify()
    except ReceiptRejected as exc:
        return exc.reason


def assert_only_genuine_accepted(raw: bytes) -> None:
    accepted = verdict(lambda: verify_receipt(raw, IDENTITY, RING))
    # The typed fast path and the step-by-step checks agree on every input: the same
    # receipt, canonical bytes and digest, or the same reason.
    assert accepted == verdict(lambda: verify_stepwise(raw, IDENTITY, RING)), raw[:300]
    if isinstance(accepted, str):
        return
    assert accepted.evidence_digest == GENUINE_DIGEST, raw[:300]


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(edits=st.lists(field_edit(sorted(RECEIPT_FIELDS)), min_size=1, max_size=3))
def test_field_mutations_without_the_key_are_never_accepted(
    edits: list[tuple[str, str, Any]],
) -> None:
    assert_only_genuine_accepted(serialize(apply(GENUINE, edits)))


@FUZZ
@given(
    edits=st.lists(field_edit(sorted(RECEIPT_FIELDS)), min_size=1, max_size=3),
    forger=st.sampled_from(["attacker", "keyless"]),
)
def test_mutations_signed_by_a_wrong_key_are_never_accepted(
    edits: list[tuple[str, str, Any]], forger: str
) -> None:
    forged = resign(apply(GENUINE, edits), ATTACKER)
    if forger == "keyless":
        forged["sig"] = hashlib.sha256(serialize(forged)).hexdigest()  # a digest is not a MAC
    assert_only_genuine_accepted(serialize(forged))


@FUZZ
@given(edits=st.lists(field_edit(BOUND_FIELDS), min_size=1, max_size=3))
def test_identity_drift_signed_by_the_real_key_is_never_accepted(
    edits: list[tuple[str, str, Any]],
) -> None:
    # Even a correctly signed receipt must not settle a dispatch it is not bound to.
    assert_only_genuine_accepted(serialize(resign(apply(GENUINE, edits), RING)))


@FUZZ
@given(
    data=st.data(),
    operation=st.sampled_from(["flip", "insert", "delete", "truncate", "duplicate", "pad"]),
)
def test_byte_level_mutations_are_never_accepted(data: st.DataObject, operation: str) -> None:
    raw = bytearray(encode_receipt(GENUINE))
    at = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
    if operation == "flip":
        raw[at] ^= data.draw(st.integers(min_value=1, max_value=255))
    elif operation == "insert":
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=8))
    elif operation == "delete":
        del raw[at : at + data.draw(st.integers(min_value=1, max_value=8))]
    elif operation == "truncate":
        del raw[at:]
    elif operation == "duplicate":
        name = data.draw(st.sampled_from(sorted(GENUINE)))
        raw[-1:] = f',"{name}":{json.dumps(GENUINE[name])}}}'.encode()
    else:
        raw[at:at] = b" " * data.draw(st.integers(min_value=1, max_value=9000))
    assert_only_genuine_accepted(bytes(raw))
