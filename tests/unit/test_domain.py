"""Canonical JSON, digests and the validation of domain values."""

from __future__ import annotations

import hashlib
import inspect

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from resolver.core import domain
from resolver.core.domain import (
    CommitReport,
    Completion,
    ControlStatus,
    DispatchIdentity,
    DispatchSpec,
    Finding,
    FindingKind,
    Outcome,
    action_digest,
    canonical_json,
)
from resolver.core.errors import InvalidDispatch

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


def test_canonical_json_sorts_keys_and_drops_whitespace() -> None:
    assert canonical_json({"b": 1, "a": [1, "é"]}) == '{"a":[1,"é"],"b":1}'.encode()


def test_action_digest_is_sha256_of_canonical_json() -> None:
    expected = hashlib.sha256(b'{"amount":"10.00","to":"acct-1"}').hexdigest()
    assert action_digest({"to": "acct-1", "amount": "10.00"}) == expected


@given(json_values)
def test_canonical_json_is_independent_of_key_order(value: object) -> None:
    if isinstance(value, dict):
        reordered = dict(reversed(list(value.items())))
        assert canonical_json(reordered) == canonical_json(value)


@pytest.mark.parametrize("value", [1.5, {"a": 0.1}, [1, [2.0]]])
def test_floats_are_refused(value: object) -> None:
    with pytest.raises(InvalidDispatch, match="no floats"):
        canonical_json(value)


def test_verified_finding_requires_evidence() -> None:
    with pytest.raises(ValueError, match="evidence digest"):
        Finding(FindingKind.VERIFIED_SUCCEEDED, None, "ok")
    with pytest.raises(ValueError, match="result code"):
        Finding(FindingKind.VERIFIED_FAILED, "a" * 64, "Bad Code")
    with pytest.raises(ValueError, match="carries no evidence"):
        Finding(FindingKind.MISSING, "a" * 64, None)
    assert Finding.verified(Outcome.FAILED, "a" * 64, "ok").outcome is Outcome.FAILED


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("dispatch_id", "", "dispatch_id"),
        ("dispatch_id", "x" * 129, "dispatch_id"),
        ("project_id", "has space", "project_id"),
        ("action_type", "Payments.Charge", "action_type"),
        ("action_digest", "ABC", "action_digest"),
        ("schema_version", 0, "schema_version"),
    ],
)
def test_dispatch_spec_rejects_malformed_fields(field: str, value: object, message: str) -> None:
    fields: dict[str, object] = {
        "dispatch_id": "d-1",
        "approval_request_id": "ar-1",
        "project_id": "p-1",
        "action_type": "payments.charge",
        "action_digest": "0" * 64,
        "idempotency_key": "k-1",
    }
    fields[field] = value
    with pytest.raises(InvalidDispatch, match=message):
        DispatchSpec(**fields)  # type: ignore[arg-type]


def test_completion_validates_codes() -> None:
    with pytest.raises(ValueError, match="result_code"):
        Completion(Outcome.SUCCEEDED, "", "m-1")
    with pytest.raises(ValueError, match="evidence_digest"):
        Completion(Outcome.SUCCEEDED, "ok", "m-1", "nothex")


IDENTITY = DispatchIdentity(1, "d-1", "a-1", "p-1", "refund.issue", "0" * 64, 1, 1_000, "i-1")


@pytest.mark.parametrize(
    "cls",
    [
        cls
        for _, cls in inspect.getmembers(domain, inspect.isclass)
        if issubclass(cls, msgspec.Struct) and cls.__module__.startswith(f"{domain.__name__}.")
    ],
)
def test_every_domain_value_is_frozen(cls: type[msgspec.Struct]) -> None:
    # Values travel between threads and into the page commit: none may change after it is built.
    assert cls.__struct_config__.frozen, cls.__name__


def test_a_value_refuses_assignment_and_compares_by_value() -> None:
    with pytest.raises(AttributeError):
        IDENTITY.attempt = 2  # type: ignore[misc]
    later = msgspec.structs.replace(IDENTITY, attempt=2)
    assert (later.attempt, IDENTITY.attempt) == (2, 1)
    assert later != IDENTITY
    assert msgspec.structs.replace(later, attempt=1) == IDENTITY
    assert hash(msgspec.structs.replace(later, attempt=1)) == hash(IDENTITY)


def test_a_finding_is_checked_on_every_construction() -> None:
    verified = Finding.verified(Outcome.FAILED, "a" * 64, "declined")
    assert verified.kind is FindingKind.VERIFIED_FAILED and verified.kind.is_verified
    with pytest.raises(ValueError, match="evidence digest"):
        msgspec.structs.replace(verified, evidence_digest="A" * 64)


def test_the_commit_report_derives_its_accepted_set_from_what_was_routed() -> None:
    routed = {"d-1": ControlStatus.RESOLVED, "d-2": ControlStatus.ARMED}
    report = CommitReport(routed, frozenset({"d-3"}), frozenset({"d-9"}))
    assert report.accepted == frozenset(routed)
    assert report == CommitReport(routed, frozenset({"d-3"}))
