"""What a provider is asked about (the dispatch identity) and what it answers (a finding)."""

from __future__ import annotations

import msgspec

from resolver.core.domain.sets import VERIFIED_KINDS, FindingKind, Outcome, ProviderFailure
from resolver.core.domain.shapes import CAUSE_PATTERN, HEX64_PATTERN, RESULT_CODE_PATTERN


class DispatchIdentity(msgspec.Struct, frozen=True):
    """The immutable identity every piece of evidence must be bound to (docs/design.md)."""

    schema_version: int
    dispatch_id: str
    approval_request_id: str
    project_id: str
    action_type: str
    action_digest: str
    attempt: int
    started_at_ms: int
    idempotency_key: str


class Finding(msgspec.Struct, frozen=True):
    """What a provider observed. Only verified kinds carry evidence for a resolution."""

    kind: FindingKind
    evidence_digest: str | None = None
    result_code: str | None = None
    failure: ProviderFailure | None = None
    """Only on `unavailable`: why the source did not answer (counted, logged, in /readyz)."""
    cause: str | None = None
    """Why the evidence says what it says, as a short code, never message text: with a
    failure the source's refusal (`sqlstate_42501`, `http_403`, logged on `provider_failed`
    and listed in /readyz); on a conflict, missing or unsupported finding the provider's
    reason (`unknown_kid`, `digest_mismatch`, `http_404`). Kept on the control
    (`last_reason`, `reason_counts`) and shown to the operator."""

    def __post_init__(self) -> None:
        if self.failure is not None and self.kind is not FindingKind.UNAVAILABLE:
            raise ValueError("only an unavailable finding names a provider failure")
        if self.cause is not None:
            if self.kind is FindingKind.UNAVAILABLE and self.failure is None:
                raise ValueError("a cause goes with a failure on an unavailable finding")
            if self.kind in VERIFIED_KINDS or not CAUSE_PATTERN.match(self.cause):
                raise ValueError(
                    "a cause goes with a failure or an unverified finding and matches"
                    " [a-z0-9_]{1,32}"
                )
        if self.kind in VERIFIED_KINDS:  # not the property: a Python call per finding
            if self.evidence_digest is None or not HEX64_PATTERN.match(self.evidence_digest):
                raise ValueError("a verified finding needs a lowercase hex sha256 evidence digest")
            if self.result_code is None or not RESULT_CODE_PATTERN.match(self.result_code):
                raise ValueError(
                    "a verified finding needs a result code matching [a-z0-9_.-]{1,64}"
                )
        elif self.evidence_digest is not None or self.result_code is not None:
            raise ValueError(f"a {self.kind} finding carries no evidence")

    @property
    def outcome(self) -> Outcome | None:
        if self.kind is FindingKind.VERIFIED_SUCCEEDED:
            return Outcome.SUCCEEDED
        if self.kind is FindingKind.VERIFIED_FAILED:
            return Outcome.FAILED
        return None

    @classmethod
    def verified(cls, outcome: Outcome, evidence_digest: str, result_code: str) -> Finding:
        kind = (
            FindingKind.VERIFIED_SUCCEEDED
            if outcome is Outcome.SUCCEEDED
            else FindingKind.VERIFIED_FAILED
        )
        return cls(kind, evidence_digest, result_code)
