"""The API's request and response types, and the bounds every input meets before any SQL.

Request types are strict (a version is a JSON integer, never `"7"`, `7.0` or `true`); the
response models are the API's own, not the storage rows.
"""

# No `from __future__ import annotations` here: FastAPI and pydantic read these annotations
# at definition time.

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from resolver.core.domain import (
    BIGINT_MAX,
    HEX64_REGEX,
    ID_REGEX,
    REASON_CODE_REGEX,
    Decision,
    OpenProposal,
    TerminalState,
)

MAX_CURSOR_LENGTH = 300
# A decision body is a few hundred bytes: anything near this is not one, and is not read.
MAX_BODY_BYTES = 64 * 1024


class DecisionRequest(BaseModel):
    """The body of a decision. Unknown fields are refused; no value is coerced."""

    model_config = ConfigDict(extra="forbid")

    decision: Decision
    mutation_id: StrictStr = Field(pattern=ID_REGEX, description="1-128 of [A-Za-z0-9_.:-]")
    expected_execution_version: StrictInt = Field(ge=1, le=BIGINT_MAX)
    reason_code: StrictStr = Field(pattern=REASON_CODE_REGEX)
    evidence_digest: StrictStr | None = Field(default=None, pattern=HEX64_REGEX)
    tamper_acknowledged: StrictBool = Field(
        default=False,
        description="true: the decider knows the evidence may be forged and checked the "
        "downstream system; required for confirm_succeeded when the case's conflict reason "
        "suggests tampering (else 409 tamper_acknowledgement_required)",
    )


class CurrentState(BaseModel):
    """The dispatch as it stands, on a 409: what the console shows instead of the stale view."""

    state: str
    version: int
    control_status: str | None


class Problem(BaseModel):
    """An RFC 9457 problem document; `code` is stable, `title` is for humans. A 409 of a
    decision also carries the dispatch's `current` state."""

    type: str
    title: str
    status: int
    code: str
    current: CurrentState | None = None


class ProposalActionRequest(BaseModel):
    """The body of a withdrawal or rejection of an open proposal. Unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")

    mutation_id: StrictStr = Field(pattern=ID_REGEX, description="1-128 of [A-Za-z0-9_.:-]")
    reason_code: StrictStr = Field(pattern=REASON_CODE_REGEX)


class Proposal(BaseModel):
    """A pending two-person decision: who proposed what, fenced on which version, until when."""

    decision: str
    proposed_by: str
    proposed_at_ms: int
    expires_at_ms: int
    reason_code: str
    evidence_digest: str | None
    expected_execution_version: int

    @classmethod
    def of(cls, proposal: OpenProposal | None) -> "Proposal | None":
        if proposal is None:
            return None
        return cls(
            decision=proposal.decision.value,
            proposed_by=proposal.proposed_by,
            proposed_at_ms=proposal.proposed_at_ms,
            expires_at_ms=proposal.expires_at_ms,
            reason_code=proposal.reason_code,
            evidence_digest=proposal.evidence_digest,
            expected_execution_version=proposal.expected_execution_version,
        )


class DecisionResponse(BaseModel):
    dispatch_id: str
    outcome: TerminalState
    result: Literal["committed", "replayed", "proposed"]
    """`proposed` (HTTP 202): a two-person case; a different person must confirm."""
    proposal: Proposal | None = None


class ProposalActionResponse(BaseModel):
    dispatch_id: str
    result: Literal["withdrawn", "rejected", "replayed"]
