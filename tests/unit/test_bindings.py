"""Binding v1: a token signed over the whole identity, the kind and the subject, refused on
any deviation with a receipt reason."""

from __future__ import annotations

import msgspec
import pytest

from resolver.core.domain import DispatchIdentity
from resolver.core.errors import ReceiptRejected
from resolver.evidence.bindings import (
    GIT_COMMIT,
    IDEMPOTENCY_RECORD,
    git_subject,
    sign_binding,
    verify_binding,
)
from resolver.evidence.receipts import KeyRing
from resolver.executor import (
    git_commit_evidence_digest,
    git_commit_trailer,
    idempotency_binding,
    oci_annotations,
    oci_manifest_evidence_digest,
)

KEYS = KeyRing({"bind-1": b"b" * 32}, signing_kid="bind-1")
IDENTITY = DispatchIdentity(
    schema_version=1,
    dispatch_id="d-bind-1",
    approval_request_id="ar-1",
    project_id="proj-1",
    action_type="refunds.create",
    action_digest="a" * 64,
    attempt=2,
    started_at_ms=1_800_000_000_000,
    idempotency_key="idem-bind-1",
)
SUBJECT = git_subject("t" * 40, ["p" * 40])


def _reason(token: str, identity: DispatchIdentity = IDENTITY, **kwargs: object) -> str:
    options: dict[str, object] = {"kind": GIT_COMMIT, "subject": SUBJECT, "keys": KEYS} | kwargs
    with pytest.raises(ReceiptRejected) as caught:
        verify_binding(token, identity, **options)  # type: ignore[arg-type]
    return caught.value.reason


def test_a_token_verifies_for_its_identity_kind_and_subject_only() -> None:
    token = sign_binding(IDENTITY, kind=GIT_COMMIT, subject=SUBJECT, keys=KEYS)
    assert token.startswith("v1 dispatch=d-bind-1 attempt=2 kid=bind-1 sig=")
    verify_binding(token, IDENTITY, kind=GIT_COMMIT, subject=SUBJECT, keys=KEYS)
    # The same token on other content, for another kind of object, or another action: altered.
    assert _reason(token, subject=git_subject("u" * 40, ["p" * 40])) == "bad_signature"
    assert _reason(token, kind=IDEMPOTENCY_RECORD) == "bad_signature"
    for field, value in [
        ("action_digest", "b" * 64),
        ("idempotency_key", "idem-2"),
        ("project_id", "proj-2"),
        ("started_at_ms", 1),
    ]:
        assert _reason(token, msgspec.structs.replace(IDENTITY, **{field: value})) == (
            "bad_signature"
        ), field
    # Bound to another dispatch or attempt: said as such.
    assert _reason(token, msgspec.structs.replace(IDENTITY, attempt=3)) == "identity_mismatch"
    assert _reason(token, msgspec.structs.replace(IDENTITY, dispatch_id="d-2")) == (
        "identity_mismatch"
    )


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda t: t.replace("sig=", "sig=0")[:-1], "bad_signature"),
        (lambda t: t.replace("kid=bind-1", "kid=forger"), "unknown_kid"),
        (lambda t: t.replace("v1 ", "v2 "), "version_mismatch"),
        (lambda t: t.replace("attempt=2", "attempt=two"), "bad_value"),
        (lambda t: t + " extra=1", "bad_value"),
        (lambda t: "", "bad_value"),
        (lambda t: t + " " * 600, "too_large"),
    ],
)
def test_every_deviation_is_refused_with_its_reason(mutate: object, reason: str) -> None:
    token = sign_binding(IDENTITY, kind=GIT_COMMIT, subject=SUBJECT, keys=KEYS)
    assert _reason(mutate(token)) == reason  # type: ignore[operator]


def test_the_sdk_helpers_sign_what_the_providers_verify() -> None:
    token = idempotency_binding(IDENTITY, KEYS)
    verify_binding(token, IDENTITY, kind=IDEMPOTENCY_RECORD, subject="", keys=KEYS)
    trailer = git_commit_trailer(IDENTITY, KEYS, tree="t" * 40, parents=["p" * 40])
    assert trailer.startswith("Resolver-Binding: v1 dispatch=d-bind-1 ")
    verify_binding(trailer.split(": ", 1)[1], IDENTITY, kind=GIT_COMMIT, subject=SUBJECT, keys=KEYS)
    assert git_commit_evidence_digest("c" * 40, trailer) != git_commit_evidence_digest(
        "d" * 40, trailer
    )
    annotations = oci_annotations(
        IDENTITY, KEYS, config_digest="sha256:" + "c" * 64, layer_digests=["sha256:" + "d" * 64]
    )
    assert list(annotations) == ["org.approved-action-resolver.binding"]
    assert len(oci_manifest_evidence_digest("sha256:" + "e" * 64, annotations)) == 64
