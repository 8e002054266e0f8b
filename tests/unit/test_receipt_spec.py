"""docs/receipts.md is the receipt v1 the code implements: fields, reasons and the worked example."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from pathlib import Path

from resolver.core.domain import DispatchIdentity, canonical_json
from resolver.evidence.receipts import (
    RECEIPT_FIELDS,
    KeyRing,
    RejectReason,
    encode_receipt,
    verify_receipt,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "receipts.md"


def section(heading: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def blocks(heading: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```\w+\n(.*?)```", section(heading), re.S)]


def test_the_field_table_is_the_verifier_s() -> None:
    documented = re.findall(r"^\| `(\w+)` \| (?:integer|string) \|", section("## Fields"), re.M)
    assert sorted(documented) == sorted(RECEIPT_FIELDS)
    assert f"exactly these {len(RECEIPT_FIELDS)} keys" in section("## Fields")


def test_every_rejection_reason_is_documented() -> None:
    table = section("## What the resolver checks")
    assert {reason.value for reason in RejectReason} <= set(re.findall(r"`([a-z_]+)`", table))


def test_the_numbered_steps_take_the_fields_in_the_verifiers_order() -> None:
    """Step 8 names the fields in the order both verifiers check them (the Node SDK's
    INT_FIELDS and PATTERN_FIELDS are the same lists as these)."""
    from resolver.evidence.receipts import _INT_FIELDS, _PATTERN_FIELDS

    step = re.search(r"^8\. (.*?)^9\. ", section("## What the resolver checks"), re.M | re.S)
    assert step is not None
    named = re.findall(r"`([a-z_]+)`", step.group(1))
    fields = [n for n in dict.fromkeys(named) if n in RECEIPT_FIELDS]
    assert fields == [*_INT_FIELDS, *_PATTERN_FIELDS, "outcome"]
    source = (DOC.parents[1] / "sdk" / "node" / "index.js").read_text(encoding="utf-8")
    node_ints = re.search(r"const INT_FIELDS = \[(.*?)\];", source, re.S)
    node_patterns = re.search(r"const PATTERN_FIELDS = \[(.*?)\n\];", source, re.S)
    assert node_ints is not None and node_patterns is not None
    assert re.findall(r'"(\w+)"', node_ints.group(1)) == list(_INT_FIELDS)
    assert re.findall(r'\["(\w+)"', node_patterns.group(1)) == list(_PATTERN_FIELDS)


def test_the_worked_example_is_what_the_resolver_signs_and_verifies() -> None:
    key_hex, signed_bytes, sig, digest = blocks("## A worked example")
    body = json.loads(signed_bytes)
    assert canonical_json(body).decode("utf-8") == signed_bytes  # already canonical
    keys = KeyRing({body["kid"]: bytes.fromhex(key_hex)}, signing_kid=body["kid"])
    expected_sig = hmac.new(bytes.fromhex(key_hex), signed_bytes.encode(), "sha256").hexdigest()
    assert sig == expected_sig == keys.mac(body["kid"], signed_bytes.encode("utf-8"))
    receipt = {**body, "sig": sig}
    assert hashlib.sha256(encode_receipt(receipt)).hexdigest() == digest
    identity = DispatchIdentity(
        schema_version=body["v"],
        **{
            name: body[name]
            for name in (
                "dispatch_id",
                "approval_request_id",
                "project_id",
                "action_type",
                "action_digest",
                "attempt",
                "started_at_ms",
                "idempotency_key",
            )
        },
    )
    verified = verify_receipt(encode_receipt(receipt), identity, keys)
    assert (verified.outcome.value, verified.evidence_digest) == (body["outcome"], digest)


def test_the_javascript_canonical_form_is_the_node_sdk_s_own_code() -> None:
    # The page shows the SDK's function verbatim; sdk/node/test/vectors.test.mjs runs the
    # page's block on every vector.
    (shown,) = [b for b in blocks("## Canonical form") if "function canonicalJson" in b]
    source = (DOC.parents[1] / "sdk" / "node" / "index.js").read_text(encoding="utf-8")
    region = re.search(r"// canonical-json:begin[^\n]*\n(.*?)\n// canonical-json:end", source, re.S)
    assert region is not None
    assert shown == region.group(1).strip()


def test_the_page_states_each_rule_a_second_implementation_needs() -> None:
    rules = section("## Canonical form")
    for rule in (
        "U+0000-U+001F",
        "lowercase",
        "U+007F",
        "code point",
        "2^63-1",
        "byte-order mark",
        "`not_json`",
        "`duplicate_field`",
        "`-0`",
        "exponent",
        "integer-like",
    ):
        assert rule in rules, rule
    assert "inserted in\nsorted order" not in DOC.read_text(encoding="utf-8")  # the old wrong hint
