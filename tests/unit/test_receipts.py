"""Receipt v1: exact shape, size, key ring, signature and identity binding, each on its own."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from resolver.core.domain import (
    DispatchIdentity,
    FindingKind,
    Outcome,
    action_digest,
    canonical_json,
)
from resolver.core.errors import ConfigError, ReceiptRejected
from resolver.evidence import receipts
from resolver.evidence.receipts import (
    MAX_RECEIPT_BYTES,
    RECEIPT_FIELDS,
    KeyRing,
    RejectReason,
    encode_receipt,
    receipt_finding,
    sign_receipt,
    verify_receipt,
    verify_stepwise,
)

SECRET_HEX = "ab" * 32
IDENTITY = DispatchIdentity(
    schema_version=1,
    dispatch_id="d-000001",
    approval_request_id="ar-1",
    project_id="proj-1",
    action_type="payments.charge",
    action_digest=action_digest({"charge": 1}),
    attempt=1,
    started_at_ms=1_800_000_000_000,
    idempotency_key="idem-1",
)


def keys() -> KeyRing:
    return KeyRing({"k1": bytes.fromhex(SECRET_HEX)}, signing_kid="k1")


def receipt(outcome: Outcome = Outcome.SUCCEEDED, ring: KeyRing | None = None) -> dict[str, Any]:
    return sign_receipt(
        IDENTITY,
        outcome=outcome,
        result_code="ok" if outcome is Outcome.SUCCEEDED else "card_declined",
        finished_at_ms=1_800_000_000_500,
        receipt_id="pay_123",
        keys=ring or keys(),
    )


def resign(r: dict[str, Any], ring: KeyRing | None = None) -> dict[str, Any]:
    body = {k: v for k, v in r.items() if k != "sig"}
    return {**body, "sig": (ring or keys()).mac(body["kid"], canonical_json(body))}


def reason_of(
    raw: bytes | str, identity: DispatchIdentity = IDENTITY, ring: KeyRing | None = None
) -> str:
    with pytest.raises(ReceiptRejected) as info:
        verify_receipt(raw, identity, ring or keys())
    with pytest.raises(ReceiptRejected) as reference:
        verify_stepwise(raw, identity, ring or keys())
    assert info.value.reason == reference.value.reason
    return info.value.reason


def test_signed_receipt_verifies_with_the_canonical_digest() -> None:
    r = receipt()
    assert set(r) == RECEIPT_FIELDS
    verified = verify_receipt(encode_receipt(r), IDENTITY, keys())
    assert (verified.outcome, verified.result_code, verified.kid) == (Outcome.SUCCEEDED, "ok", "k1")
    assert verified.evidence_digest == hashlib.sha256(encode_receipt(r)).hexdigest()
    finding = verified.finding()
    assert finding.kind is FindingKind.VERIFIED_SUCCEEDED
    assert finding.evidence_digest == verified.evidence_digest


def test_failed_outcome_is_verified_failed() -> None:
    finding = receipt_finding(encode_receipt(receipt(Outcome.FAILED)), IDENTITY, keys(), source="t")
    assert (finding.kind, finding.result_code) == (FindingKind.VERIFIED_FAILED, "card_declined")


def test_canonical_form_is_sorted_compact_utf8() -> None:
    r = receipt()
    text = encode_receipt(r).decode()
    assert text == json.dumps(r, sort_keys=True, separators=(",", ":"))
    assert list(json.loads(text)) == sorted(r)


def test_transport_formatting_does_not_change_the_evidence() -> None:
    r = receipt()
    pretty = json.dumps(dict(reversed(list(r.items()))), indent=4)
    assert (
        verify_receipt(pretty, IDENTITY, keys()).evidence_digest
        == verify_receipt(encode_receipt(r), IDENTITY, keys()).evidence_digest
    )


Mutation = Callable[[dict[str, Any]], dict[str, Any]]

MUTATIONS: dict[str, tuple[Mutation, RejectReason]] = {
    "flipped_outcome": (lambda r: {**r, "outcome": "failed"}, RejectReason.BAD_SIGNATURE),
    "changed_result_code": (lambda r: {**r, "result_code": "ok2"}, RejectReason.BAD_SIGNATURE),
    "sig_of_other_key": (
        lambda r: resign(r, KeyRing({"k1": b"\x01" * 32}, "k1")),
        RejectReason.BAD_SIGNATURE,
    ),
    "uppercase_sig": (lambda r: {**r, "sig": r["sig"].upper()}, RejectReason.BAD_VALUE),
    "unknown_kid": (
        lambda r: resign({**r, "kid": "k9"}, KeyRing({"k9": b"\x09" * 32})),
        RejectReason.UNKNOWN_KID,
    ),
    "missing_field": (
        lambda r: {k: v for k, v in r.items() if k != "finished_at_ms"},
        RejectReason.MISSING_FIELD,
    ),
    "extra_field": (lambda r: resign({**r, "note": "x"}), RejectReason.UNKNOWN_FIELD),
    "string_attempt": (lambda r: resign({**r, "attempt": "1"}), RejectReason.BAD_TYPE),
    "bool_attempt": (lambda r: resign({**r, "attempt": True}), RejectReason.BAD_TYPE),
    "zero_attempt": (lambda r: resign({**r, "attempt": 0}), RejectReason.BAD_VALUE),
    "negative_time": (lambda r: resign({**r, "finished_at_ms": -1}), RejectReason.BAD_VALUE),
    "huge_time": (lambda r: resign({**r, "finished_at_ms": 2**63}), RejectReason.BAD_VALUE),
    "bad_outcome": (lambda r: resign({**r, "outcome": "maybe"}), RejectReason.BAD_VALUE),
    "newline_code": (lambda r: resign({**r, "result_code": "ok\n"}), RejectReason.BAD_VALUE),
    "uppercase_digest": (
        lambda r: resign({**r, "action_digest": r["action_digest"].upper()}),
        RejectReason.BAD_VALUE,
    ),
    "version_2": (lambda r: resign({**r, "v": 2}), RejectReason.VERSION_MISMATCH),
    "other_dispatch": (
        lambda r: resign({**r, "dispatch_id": "d-2"}),
        RejectReason.IDENTITY_MISMATCH,
    ),
    "other_approval": (
        lambda r: resign({**r, "approval_request_id": "ar-2"}),
        RejectReason.IDENTITY_MISMATCH,
    ),
    "other_project": (lambda r: resign({**r, "project_id": "p-2"}), RejectReason.IDENTITY_MISMATCH),
    "other_action_type": (
        lambda r: resign({**r, "action_type": "payments.refund"}),
        RejectReason.IDENTITY_MISMATCH,
    ),
    "other_key": (
        lambda r: resign({**r, "idempotency_key": "idem-2"}),
        RejectReason.IDENTITY_MISMATCH,
    ),
    "other_digest": (
        lambda r: resign({**r, "action_digest": action_digest({"charge": 2})}),
        RejectReason.DIGEST_MISMATCH,
    ),
    "other_attempt": (lambda r: resign({**r, "attempt": 2}), RejectReason.FENCE_MISMATCH),
    "other_start": (lambda r: resign({**r, "started_at_ms": 1}), RejectReason.FENCE_MISMATCH),
    "padded": (lambda r: resign({**r, "pad": "x" * MAX_RECEIPT_BYTES}), RejectReason.TOO_LARGE),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_every_mismatch_is_rejected_with_its_reason(name: str) -> None:
    mutate, reason = MUTATIONS[name]
    assert reason_of(canonical_json(mutate(receipt()))) == reason.value


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\xff\xfe", RejectReason.NOT_JSON),
        (b"[1, 2]", RejectReason.NOT_OBJECT),
        (b'{"v": 1, "v": 1}', RejectReason.DUPLICATE_FIELD),
        (b'{"v": 1.0}', RejectReason.FLOAT),
        (b'{"v": NaN}', RejectReason.FLOAT),
        (b'{"v": 1e3}', RejectReason.FLOAT),
        (b"[" * 5000, RejectReason.NOT_JSON),
        (b" " * 8193, RejectReason.TOO_LARGE),
        (b"", RejectReason.NOT_JSON),
    ],
)
def test_malformed_json_is_rejected(raw: bytes, reason: RejectReason) -> None:
    assert reason_of(raw) == reason.value


@pytest.mark.parametrize("raw", ["\ud800", '{"project_id": "\\ud800"}'])
def test_lone_surrogates_are_rejected_not_raised(raw: str) -> None:
    assert reason_of(raw) == RejectReason.NOT_JSON.value
    assert reason_of(json.dumps({**receipt(), "project_id": "\ud800"})) == "not_json"


def test_duplicate_field_hidden_in_a_valid_receipt_is_rejected() -> None:
    text = encode_receipt(receipt()).decode()
    assert reason_of(text[:-1] + ',"outcome":"failed"}') == RejectReason.DUPLICATE_FIELD.value


def test_schema_version_two_dispatch_is_not_bound_by_a_v1_receipt() -> None:
    later = msgspec.structs.replace(IDENTITY, schema_version=2)
    assert reason_of(encode_receipt(receipt()), later) == RejectReason.VERSION_MISMATCH.value


def test_rotation_verify_with_any_active_key_sign_with_the_current() -> None:
    old = KeyRing({"k1": bytes.fromhex(SECRET_HEX)}, "k1")
    both = KeyRing({"k1": bytes.fromhex(SECRET_HEX), "k2": b"\x02" * 32}, "k2")
    by_old, by_new = receipt(ring=old), receipt(ring=both)
    assert by_new["kid"] == "k2"
    for r in (by_old, by_new):
        verify_receipt(encode_receipt(r), IDENTITY, both)
    retired = KeyRing({"k2": b"\x02" * 32}, "k2")
    assert reason_of(encode_receipt(by_old), ring=retired) == RejectReason.UNKNOWN_KID.value


def test_rejection_logs_the_reason_and_nothing_of_the_receipt_or_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tampered = canonical_json({**receipt(), "result_code": "secret_looking_value"})
    # A command run in this process earlier (the CLI tests) configures structlog to cache each
    # logger on first use, which would keep the module's logger away from the capture.
    monkeypatch.setattr(receipts, "log", structlog.get_logger("resolver.receipts"))
    with structlog.testing.capture_logs() as logs:
        finding = receipt_finding(tampered, IDENTITY, keys(), source="test")
    assert finding.kind is FindingKind.CONFLICT
    assert logs == [
        {
            "event": "receipt_rejected",
            "log_level": "warning",
            "source": "test",
            "dispatch_id": IDENTITY.dispatch_id,
            "reason": "bad_signature",
        }
    ]


def test_signing_refuses_a_bad_result_code() -> None:
    with pytest.raises(ReceiptRejected):
        sign_receipt(
            IDENTITY,
            outcome=Outcome.SUCCEEDED,
            result_code="Not OK",
            finished_at_ms=1,
            receipt_id="x",
            keys=keys(),
        )


# -- key ring configuration -----------------------------------------------------------------


def test_keys_from_env_and_secrets_dir(tmp_path: Path) -> None:
    (tmp_path / "k2").write_text("cd" * 32 + "\n")
    (tmp_path / "..data").mkdir()  # what a Kubernetes secret volume holds besides the keys
    (tmp_path / ".hidden").write_text("zz")
    ring = KeyRing.from_environment(
        {
            "RESOLVER_RECEIPT_KEYS": f"k1={SECRET_HEX}, ",
            "RESOLVER_SECRETS_DIR": str(tmp_path),
            "RESOLVER_RECEIPT_SIGNING_KID": "k2",
        }
    )
    assert ring.kids == {"k1", "k2"} and ring.current_kid == "k2"
    assert SECRET_HEX not in repr(ring) and "abab" not in repr(ring)


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"RESOLVER_RECEIPT_KEYS": "k1"}, "entry 1 is not kid=hexsecret"),
        ({"RESOLVER_RECEIPT_KEYS": "k1=nothex-secret-value"}, "not hex"),
        ({"RESOLVER_RECEIPT_KEYS": "k1=abcd"}, "at least 32"),
        ({"RESOLVER_RECEIPT_KEYS": f"k1={SECRET_HEX},k1={SECRET_HEX}"}, "appears twice"),
        ({"RESOLVER_RECEIPT_KEYS": f"bad/kid={SECRET_HEX}"}, "key id"),
        (
            {"RESOLVER_RECEIPT_KEYS": f"k1={SECRET_HEX}", "RESOLVER_RECEIPT_SIGNING_KID": "k3"},
            "names no key",
        ),
        ({"RESOLVER_SECRETS_DIR": "/nonexistent/dir"}, "not a directory"),
    ],
)
def test_bad_key_config_names_the_key_and_the_fix_without_the_secret(
    env: dict[str, str], needle: str
) -> None:
    with pytest.raises(ConfigError, match=needle) as info:
        KeyRing.from_environment(env)
    assert "nothex-secret-value" not in str(info.value) and SECRET_HEX not in str(info.value)


def test_conflicting_sources_for_one_kid_are_refused(tmp_path: Path) -> None:
    (tmp_path / "k1").write_text("cd" * 32)
    with pytest.raises(ConfigError, match="differs between"):
        KeyRing.from_environment(
            {"RESOLVER_RECEIPT_KEYS": f"k1={SECRET_HEX}", "RESOLVER_SECRETS_DIR": str(tmp_path)}
        )


def test_a_verifier_without_keys_fails_at_start() -> None:
    with pytest.raises(ConfigError, match="RESOLVER_RECEIPT_KEYS"):
        KeyRing.from_environment({}).require_keys("internal_mutation")


def test_signing_needs_a_current_kid() -> None:
    with pytest.raises(ConfigError, match="RESOLVER_RECEIPT_SIGNING_KID"):
        _ = KeyRing({"k1": b"\x01" * 32}).current_kid


@given(
    text=st.text(min_size=1, max_size=40),
    sig=st.from_regex(r"\A[0-9a-f]{64}\Z", fullmatch=True),
)
@settings(max_examples=300, deadline=None)
def test_unsigned_form_cut_from_the_signed_one_equals_encoding_it_again(
    text: str, sig: str
) -> None:
    from resolver.evidence import receipts

    # Any text in the identity fields, including quotes and a forged `"sig":"...",`.
    receipt = {
        "v": 1,
        "dispatch_id": text,
        "approval_request_id": f'","sig":"{sig}",',
        "project_id": text[::-1],
        "action_type": "t",
        "action_digest": "a" * 64,
        "attempt": 1,
        "started_at_ms": 1,
        "idempotency_key": f'\\"sig\\":"{sig}"',
        "outcome": "succeeded",
        "result_code": "ok",
        "finished_at_ms": 2,
        "receipt_identity_digest": "b" * 64,
        "kid": "k",
        "sig": sig,
    }
    canonical = canonical_json(receipt)
    unsigned = canonical_json({k: v for k, v in receipt.items() if k != "sig"})
    assert receipts._unsigned_form(canonical, receipt) == unsigned


def test_the_typed_receipt_declares_its_fields_in_canonical_order() -> None:
    # Its compact encoding is the canonical form only if the fields are in sorted order.
    assert list(receipts._ReceiptV1.__struct_fields__) == sorted(RECEIPT_FIELDS)


def test_the_typed_path_takes_every_spelling_of_a_well_formed_receipt() -> None:
    genuine = receipt()
    canonical = encode_receipt(genuine)
    spellings = [
        canonical,
        json.dumps(genuine).encode(),  # PostgreSQL's jsonb text has spaces too
        json.dumps(genuine, indent=2).encode(),
        json.dumps(dict(reversed(list(genuine.items())))).encode(),
        canonical.replace(b'"kid"', b'"\\u006bid"'),
        canonical.replace(b'"ok"', b'"\\u006fk"'),
    ]
    for raw in spellings:
        assert receipts._decode_well_formed(raw) is not None, raw
        verified = verify_receipt(raw, IDENTITY, keys())
        assert verified == verify_stepwise(raw, IDENTITY, keys())
        assert verified.evidence_digest == hashlib.sha256(canonical).hexdigest()


@pytest.mark.parametrize(
    "raw",
    [
        # Repeated keys, same value and other value: the typed decoder alone keeps the last.
        lambda c: c[:-1] + b',"outcome":"succeeded"}',
        lambda c: c[:-1] + b',"result_code":"ok"}',
        # A string that needs an escape never matches its pattern.
        lambda c: c.replace(b'"ok"', b'"o\\"k"'),
        lambda c: c.replace(b'"ok"', b'"o,k"'),
        lambda c: c.replace(b'"ok"', b'"o\\u002ck"'),
    ],
)
def test_the_typed_path_hands_what_it_cannot_vouch_for_to_the_steps(
    raw: Callable[[bytes], bytes],
) -> None:
    mutated = raw(encode_receipt(receipt()))
    assert receipts._decode_well_formed(mutated) is None
    reason_of(mutated)  # rejected on both paths, for the same reason
