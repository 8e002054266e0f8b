"""Generate docs/receipt-v1-vectors.json, the published test vectors of receipt v1.

The vectors are computed here from first principles (json, hmac, hashlib), not with
`resolver.evidence.receipts`, so that the implementation is checked against an independent reading
of the format, and so are the SDKs of other languages (sdk/node runs the same file):

    python tools/receipt_vectors.py           # rewrite the file
    python tools/receipt_vectors.py --check   # exit 1 when the file and this generator drift

tests/unit/test_receipt_vectors.py runs the check and passes every vector through
resolver/evidence/receipts.py byte for byte. Every value is fixed: the output is deterministic.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
from pathlib import Path
from typing import Any

VECTORS = Path(__file__).resolve().parents[1] / "docs" / "receipt-v1-vectors.json"

KEYS = {
    "vec-k1": bytes(range(32)).hex(),
    "vec-k2": hashlib.sha256(b"receipt v1 test vector key 2").hexdigest(),
}

IDENTITY: dict[str, Any] = {
    "schema_version": 1,
    "dispatch_id": "d-2026-000001",
    "approval_request_id": "ar-77",
    "project_id": "proj-payments",
    "action_type": "payments.charge",
    "action_digest": hashlib.sha256(b'{"amount":1200,"currency":"EUR"}').hexdigest(),
    "attempt": 1,
    "started_at_ms": 1_790_000_000_000,
    "idempotency_key": "idem-d-2026-000001",
}

# Ids at their longest (128 characters, every allowed punctuation) and integers past 2**53:
# a JavaScript number cannot hold them, so an SDK must carry them as exact integers.
LONG_IDENTITY: dict[str, Any] = {
    "schema_version": 1,
    "dispatch_id": "D" + "a1.:_-" * 21 + "z",
    "approval_request_id": "A" * 128,
    "project_id": "p" + "9" * 127,
    "action_type": "a" + "b.c_d-e" * 9,
    "action_digest": hashlib.sha256(b"long identity").hexdigest(),
    "attempt": 2_147_483_647,
    "started_at_ms": 2**53 + 1,
    "idempotency_key": "k:" + "0123456789" * 12 + "-last",
}


def canonical(value: Any) -> bytes:
    """Sorted keys (by code point), `,` and `:`, UTF-8 (no \\u escapes but controls)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def body_for(identity: dict[str, Any], **fields: Any) -> dict[str, Any]:
    body = {
        "v": 1,
        **{k: v for k, v in identity.items() if k != "schema_version"},
        "outcome": "succeeded",
        "result_code": "charged",
        "finished_at_ms": identity["started_at_ms"] + 1_250,
        "receipt_identity_digest": hashlib.sha256(b"pay_0001").hexdigest(),
        "kid": "vec-k1",
    }
    body.update(fields)
    return body


def mac(kid: str, data: bytes) -> str:
    return hmac.new(bytes.fromhex(KEYS[kid]), data, hashlib.sha256).hexdigest()


def signed(body: dict[str, Any], kid: str | None = None) -> dict[str, Any]:
    return {**body, "sig": mac(kid or body["kid"], canonical(body))}


def accepted(
    name: str, note: str, identity: dict[str, Any], receipt_id: str, **fields: Any
) -> dict[str, Any]:
    body = body_for(
        identity,
        receipt_identity_digest=hashlib.sha256(receipt_id.encode("utf-8")).hexdigest(),
        **fields,
    )
    unsigned = canonical(body)
    receipt = signed(body)
    wire = canonical(receipt)
    return {
        "name": name,
        "note": note,
        "identity": identity,
        "receipt_id": receipt_id,
        "body": body,
        "canonical": unsigned.decode("utf-8"),
        "canonical_hex": unsigned.hex(),
        "sig": receipt["sig"],
        "receipt": wire.decode("utf-8"),
        "receipt_hex": wire.hex(),
        "evidence_digest": hashlib.sha256(wire).hexdigest(),
    }


def transport_case(base: dict[str, Any]) -> dict[str, Any]:
    """The first receipt as a service may send it: pretty-printed, reordered, escaped."""
    receipt = json.loads(base["receipt"])
    reordered = dict(reversed(list(receipt.items())))
    raw = json.dumps(reordered, indent=2, ensure_ascii=True)
    # A JSON escape of a plain letter still means that letter: the canonical form (and so the
    # evidence digest) is the one of the parsed value, not of the bytes received.
    raw = raw.replace('"charged"', '"\\u0063harged"')
    return {
        "name": "transport-form",
        "note": "what a receipt service may send; verifies to the canonical receipt of "
        "'succeeded-basic' and its evidence digest",
        "identity": base["identity"],
        "raw": raw,
        "receipt": base["receipt"],
        "evidence_digest": base["evidence_digest"],
    }


def escapes_case(base: dict[str, Any]) -> dict[str, Any]:
    """Escapes in either hex case mean their character: the canonical form has none."""
    raw = (
        base["receipt"]
        .replace('"vec-k1"', '"vec\\u002Dk1"')
        .replace('"charged"', '"\\u0063h\\u0061rged"')
    )
    raw = raw.replace('"ar-77"', '"ar\\u002d77"')
    return {
        "name": "escape-forms",
        "note": "\\u escapes with upper- and lowercase hex digits: the canonical receipt and "
        "digest of 'succeeded-basic' (a verifier parses, then encodes; it never compares bytes)",
        "identity": base["identity"],
        "raw": raw,
        "receipt": base["receipt"],
        "evidence_digest": base["evidence_digest"],
    }


def negative_zero_case() -> dict[str, Any]:
    """`-0` is the integer 0: its canonical form is `0`, and the signature covers that."""
    identity = {**IDENTITY, "started_at_ms": 0}
    body = body_for(identity, finished_at_ms=0)
    receipt = signed(body)
    wire = canonical(receipt)
    raw = wire.decode("utf-8").replace('"finished_at_ms":0', '"finished_at_ms":-0')
    return {
        "name": "negative-zero",
        "note": "-0 on the wire is the integer 0; the canonical form (signed, digested) has 0",
        "identity": identity,
        "raw": raw,
        "receipt": wire.decode("utf-8"),
        "evidence_digest": hashlib.sha256(wire).hexdigest(),
    }


def rejected(
    name: str, reason: str, note: str, raw: str | dict[str, Any], identity: dict[str, Any]
) -> dict[str, Any]:
    text = raw if isinstance(raw, str) else canonical(raw).decode("utf-8")
    return {"name": name, "reason": reason, "note": note, "identity": identity, "raw": text}


def rejected_cases() -> list[dict[str, Any]]:
    good = signed(body_for(IDENTITY))
    other_project = {**IDENTITY, "project_id": "proj-other"}
    duplicate = (
        canonical(good).decode("utf-8").replace('{"action_digest"', '{"v":1,"action_digest"')
    )
    return [
        rejected(
            "tampered-result-code",
            "bad_signature",
            "result_code changed after signing",
            {**good, "result_code": "refunded"},
            IDENTITY,
        ),
        rejected(
            "unknown-kid",
            "unknown_kid",
            "signed with a kid the verifier does not hold",
            signed({**body_for(IDENTITY), "kid": "vec-k9"}, kid="vec-k1"),
            IDENTITY,
        ),
        rejected(
            "unicode-result-code",
            "bad_value",
            "correctly signed, but result_code must match [a-z0-9_.-]{1,64}: no signer may "
            "produce it and no verifier accepts it",
            signed(body_for(IDENTITY, result_code="café")),
            IDENTITY,
        ),
        rejected(
            "unicode-field-name",
            "unknown_field",
            "a field v1 does not define (exact shape)",
            signed({**body_for(IDENTITY), "nöte": "ok"}),
            IDENTITY,
        ),
        rejected(
            "float-attempt",
            "float",
            "1.0 is not an integer on the wire",
            canonical(good).decode("utf-8").replace('"attempt":1,', '"attempt":1.0,'),
            IDENTITY,
        ),
        rejected(
            "duplicate-field",
            "duplicate_field",
            "a field appears twice; parsers disagree on which wins",
            duplicate,
            IDENTITY,
        ),
        rejected(
            "other-project",
            "identity_mismatch",
            "a valid receipt presented for a dispatch of another project",
            good,
            other_project,
        ),
        rejected(
            "byte-order-mark",
            "not_json",
            "a UTF-8 BOM before the object: JSON text starts with the object, so not JSON",
            "\ufeff" + canonical(good).decode("utf-8"),
            IDENTITY,
        ),
        rejected(
            "uppercase-signature",
            "bad_value",
            "the signature in uppercase hex: sig is lowercase hex, so the form is wrong",
            {**good, "sig": good["sig"].upper()},
            IDENTITY,
        ),
        rejected(
            "exponent-attempt",
            "float",
            "1e0 is a number with an exponent, never an integer, whatever its value",
            canonical(good).decode("utf-8").replace('"attempt":1,', '"attempt":1e0,'),
            IDENTITY,
        ),
        rejected(
            "integer-as-string",
            "bad_type",
            "started_at_ms as a string (what drivers return for bigint): must be a JSON integer",
            signed(body_for(IDENTITY, started_at_ms=str(IDENTITY["started_at_ms"]))),
            IDENTITY,
        ),
        # The order of the checks (docs/receipts.md, "What the resolver checks"): where two
        # rules are broken, the step that comes first names the reason.
        rejected(
            "order-float-inside-an-array",
            "float",
            "step 3 before step 4: the float is met while parsing, before the value is found "
            "not to be an object",
            "[1.5]",
            IDENTITY,
        ),
        rejected(
            "order-duplicate-then-float",
            "float",
            "step 3: a repeated key is found when its object closes, a float when it is read; "
            "here the float is read before the object closes",
            duplicate.replace('"attempt":1,', '"attempt":1.5,'),
            IDENTITY,
        ),
        rejected(
            "order-bad-outcome-and-integer-sig",
            "bad_type",
            "step 8 takes the fields in a fixed order: sig (a number, bad_type) comes before "
            "outcome (not succeeded or failed, bad_value)",
            {**good, "outcome": "maybe", "sig": 7},
            IDENTITY,
        ),
    ]


CANONICAL_VALUES: list[Any] = [
    {"b": 1, "a": [3, 2, {"d": None, "c": True}], "": False},
    {"é": "ü", "e": "naïve café", "z": "日本語"},
    {"\uffff": "U+FFFF", "\U0001f600": "U+1F600 sorts after U+FFFF (code point order)"},
    {"controls": 'tab\tnewline\nquote"backslash\\bell\u0007del\u007f', "ls": "\u2028\u2029"},
    {"big": 2**63 - 1, "neg": -(2**53) - 1, "zero": 0},
    # Escaped are U+0000-U+001F only, as \b \t \n \f \r or \u00XX in lowercase hex; U+007F
    # (DEL) and everything above stays as it is, in UTF-8.
    {
        "nul": "\u0000",
        "unit_separator": "\u001f",
        "escape": "\u001b",
        "del": "\u007f",
        "nbsp": "\u00a0",
    },
    # Keys that look like integers sort as text, by code point: "1" < "10" < "9" < "a"
    # (a JavaScript object would list them as 1, 9, 10 before "a").
    {"9": "nine", "10": "ten", "1": "one", "a": "letter", "-1": "minus one"},
]


def canonical_cases() -> list[dict[str, Any]]:
    return [
        {"value": v, "canonical": canonical(v).decode("utf-8"), "canonical_hex": canonical(v).hex()}
        for v in CANONICAL_VALUES
    ]


def vectors() -> dict[str, Any]:
    basic = accepted("succeeded-basic", "the common case, signed with vec-k1", IDENTITY, "pay_0001")
    return {
        "format": "receipt v1 test vectors (the format: docs/receipts.md)",
        "generator": "tools/receipt_vectors.py",
        "keys": [{"kid": kid, "secret_hex": secret} for kid, secret in KEYS.items()],
        "accepted": [
            basic,
            accepted(
                "failed-second-attempt",
                "outcome failed on attempt 2",
                {**IDENTITY, "attempt": 2, "started_at_ms": IDENTITY["started_at_ms"] + 60_000},
                "pay_0001/attempt-2",
                outcome="failed",
                result_code="card_declined",
            ),
            accepted(
                "rotated-kid",
                "signed with the second key (rotation: verifiers hold both)",
                IDENTITY,
                "pay_0001",
                kid="vec-k2",
            ),
            accepted(
                "bounds",
                "ids at 128 characters, integers past 2**53 up to 2**63-1",
                LONG_IDENTITY,
                "receipt id with unicode: 領収書-№1",
                finished_at_ms=2**63 - 1,
                result_code="a" * 64,
            ),
        ],
        "transport": [transport_case(basic), escapes_case(basic), negative_zero_case()],
        "rejected": rejected_cases(),
        "canonical_json": canonical_cases(),
    }


def render() -> str:
    return json.dumps(vectors(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if VECTORS.read_text(encoding="utf-8") != text:
            print(f"{VECTORS} is stale: run python tools/receipt_vectors.py", file=sys.stderr)
            return 1
        return 0
    VECTORS.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
