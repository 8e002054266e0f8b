"""The published receipt v1 test vectors, passed by resolver/evidence/receipts.py byte for byte.

docs/receipt-v1-vectors.json is what other implementations (sdk/node among them) test
against; tools/receipt_vectors.py computes it without this package. Here the package signs,
encodes and verifies every vector and must produce exactly the published bytes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from resolver.core.domain import DispatchIdentity, Outcome, canonical_json
from resolver.core.errors import ReceiptRejected
from resolver.evidence.receipts import (
    KeyRing,
    RejectReason,
    encode_receipt,
    sign_receipt,
    verify_receipt,
)
from tools import receipt_vectors

VECTORS: dict[str, Any] = json.loads(receipt_vectors.VECTORS.read_text(encoding="utf-8"))
SECRETS = {key["kid"]: bytes.fromhex(key["secret_hex"]) for key in VECTORS["keys"]}


def ring(signing_kid: str | None = None) -> KeyRing:
    return KeyRing(SECRETS, signing_kid=signing_kid)


def identity(case: dict[str, Any]) -> DispatchIdentity:
    return DispatchIdentity(**case["identity"])


def by_name(section: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize(
        "case",
        VECTORS[section],
        ids=[case.get("name", str(i)) for i, case in enumerate(VECTORS[section])],
    )


def test_the_published_file_is_the_generators_output() -> None:
    assert receipt_vectors.main(["--check"]) == 0


def test_every_section_holds_cases() -> None:
    assert {name: len(VECTORS[name]) > 0 for name in ("accepted", "transport", "rejected")} == {
        "accepted": True,
        "transport": True,
        "rejected": True,
    }
    assert {case["reason"] for case in VECTORS["rejected"]} <= {r.value for r in RejectReason}


@by_name("accepted")
def test_signing_produces_the_published_bytes(case: dict[str, Any]) -> None:
    body = case["body"]
    receipt = sign_receipt(
        identity(case),
        outcome=Outcome(body["outcome"]),
        result_code=body["result_code"],
        finished_at_ms=body["finished_at_ms"],
        receipt_id=case["receipt_id"],
        keys=ring(body["kid"]),
    )
    unsigned = {k: v for k, v in receipt.items() if k != "sig"}
    assert canonical_json(unsigned) == bytes.fromhex(case["canonical_hex"])
    assert canonical_json(unsigned).decode("utf-8") == case["canonical"]
    assert receipt["sig"] == case["sig"]
    assert encode_receipt(receipt) == bytes.fromhex(case["receipt_hex"])
    assert encode_receipt(receipt).decode("utf-8") == case["receipt"]


@by_name("accepted")
def test_verifying_yields_the_published_evidence_digest(case: dict[str, Any]) -> None:
    verified = verify_receipt(case["receipt"], identity(case), ring())
    assert (verified.evidence_digest, verified.kid, verified.outcome.value) == (
        case["evidence_digest"],
        case["body"]["kid"],
        case["body"]["outcome"],
    )
    assert hashlib.sha256(bytes.fromhex(case["receipt_hex"])).hexdigest() == case["evidence_digest"]


@by_name("transport")
def test_a_transport_form_verifies_to_its_canonical_digest(case: dict[str, Any]) -> None:
    assert case["raw"].encode("utf-8") != case["receipt"].encode("utf-8")
    verified = verify_receipt(case["raw"], identity(case), ring())
    assert verified.evidence_digest == case["evidence_digest"]


@by_name("rejected")
def test_a_rejected_vector_is_refused_for_its_reason(case: dict[str, Any]) -> None:
    with pytest.raises(ReceiptRejected) as refused:
        verify_receipt(case["raw"], identity(case), ring())
    assert refused.value.reason == case["reason"]


@by_name("canonical_json")
def test_canonical_json_of_each_value(case: dict[str, Any]) -> None:
    assert canonical_json(case["value"]) == bytes.fromhex(case["canonical_hex"])
    assert canonical_json(case["value"]).decode("utf-8") == case["canonical"]
