"""Manual decisions: who decides on what standing, the decision and its answers, and the
two-person proposals, as stored and as decided."""

from __future__ import annotations

from enum import StrEnum

import msgspec

from resolver.core.domain.sets import ControlStatus, Decision, ExecutionState, ResolutionSource
from resolver.core.domain.shapes import (
    REASON_CODE_PATTERN,
    check_evidence_digest,
    check_mutation_id,
)


class Principal(msgspec.Struct, frozen=True):
    """A user as a verified token describes them: stable id, when and how they authenticated,
    and who vouched for it (the token's issuer and the key id it was verified with)."""

    user_id: str
    auth_time_ms: int
    amr: tuple[str, ...]
    issuer: str
    token_kid: str


class SignedFact(msgspec.Struct, frozen=True):
    """What a signed authorization fact adds (resolver.human.signing): the verified token's
    issuer and key id, and the API's Ed25519 signature over the fact with its key id."""

    issuer: str
    token_kid: str
    signing_kid: str
    signature: str


class Authority(msgspec.Struct, frozen=True):
    """Who acts, on what standing: the person, the project of the dispatch, and their grant
    there as read; a fenced human write checks each again inside the database."""

    principal: Principal
    project_id: str
    grant: Grant


class DecisionLimits(msgspec.Struct, frozen=True):
    """The service's limits a fenced human write is held to: how old the strong sign-in may
    be, the leeway for a sign-in time ahead of the database clock, and how long a proposal
    stays open."""

    max_auth_age_ms: int
    clock_leeway_ms: int
    proposal_ttl_ms: int


class ManualDecision(msgspec.Struct, frozen=True):
    dispatch_id: str
    decision: Decision
    mutation_id: str
    expected_execution_version: int
    reason_code: str
    evidence_digest: str | None = None

    def __post_init__(self) -> None:
        check_mutation_id(self.mutation_id)
        if not REASON_CODE_PATTERN.match(self.reason_code):
            raise ValueError("reason_code must match [a-z0-9_.-]{1,64}")
        check_evidence_digest(self.evidence_digest)
        if self.expected_execution_version < 1:
            raise ValueError("expected_execution_version must be >= 1")


class ManualCommitAnswer(StrEnum):
    """What the fenced manual commit answered when it applied (resolver_commit_manual's
    `result`); no answer at all means a fence held and nothing was written."""

    COMMITTED = "committed"
    """The decision settled the case: alone, or confirming a proposal."""
    PROPOSED = "proposed"
    """A two-person case: recorded as a proposal (or found open), nothing settled."""
    SECOND_PERSON_REQUIRED = "second_person_required"
    """The proposer decided again: a different person must confirm; nothing written."""
    REJECTED = "rejected"
    """A different decision closed the open proposal as rejected; nothing settled."""
    VOIDED = "voided"
    """The proposer no longer holds the permission: the proposal is void."""
    PROPOSAL_LIMIT = "proposal_limit"
    """The case already had as many proposals as one may; nothing written."""


class ManualResult(StrEnum):
    """A decision's result, as the API answers it."""

    COMMITTED = "committed"
    REPLAYED = "replayed"
    PROPOSED = "proposed"
    """A two-person case: recorded as a proposal, waiting for a second person."""


class ProposalAction(StrEnum):
    """What a person does to an open proposal without deciding."""

    WITHDRAW = "withdraw"
    REJECT = "reject"


class ProposalClose(msgspec.Struct, frozen=True):
    """Withdraw (the proposer) or reject (anyone else) the open proposal on a dispatch."""

    dispatch_id: str
    action: ProposalAction
    mutation_id: str
    reason_code: str


class ProposalCloseAnswer(StrEnum):
    """What closing a proposal answered when the grant fence held (resolver_proposal_close's
    `result`): how it closed, or why it did not."""

    WITHDRAWN = "withdrawn"
    REJECTED = "rejected"
    REPLAYED = "replayed"
    """This mutation id already closed it the same way."""
    STALE_AUTH = "stale_auth"
    NO_PROPOSAL = "no_proposal"
    NOT_PROPOSER = "not_proposer"
    OWN_PROPOSAL = "own_proposal"
    MUTATION_USED = "mutation_used"


class ProposalResult(StrEnum):
    WITHDRAWN = "withdrawn"
    REJECTED = "rejected"
    REPLAYED = "replayed"


class Grant(msgspec.Struct, frozen=True):
    """The versions of a user's `approval.recover` binding and its project, as read."""

    project_version: int
    role_binding_version: int


class ManualContext(msgspec.Struct, frozen=True):
    project_id: str
    state: ExecutionState
    version: int
    lease_expires_at_ms: int
    control_status: ControlStatus | None
    resolution_mutation_id: str | None
    resolution_source: ResolutionSource | None
    resolution_outcome: ExecutionState | None
    resolution_actor: str | None
    resolution_reason_code: str | None
    resolution_evidence_digest: str | None
    resolution_expected_version: int | None
    mutation_dispatch_id: str | None
    db_now_ms: int
    resolution_confirmed_by: str | None = None
    """The second person of a two-person resolution (None for one person)."""
    mutation_proposal_closed_as: str | None = None
    """The mutation id names a proposal (or its closing): how it ended, None while open."""
    mutation_proposed_by: str | None = None


class OpenProposal(msgspec.Struct, frozen=True):
    """The open first decision of a two-person case, waiting for a second person."""

    decision: Decision
    proposed_by: str
    proposed_at_ms: int
    expires_at_ms: int
    reason_code: str
    evidence_digest: str | None
    expected_execution_version: int


class ProposalRecord(msgspec.Struct, frozen=True):
    """One two-person proposal in a case's history, open or closed."""

    decision: Decision
    reason_code: str
    proposed_by: str
    proposed_at_ms: int
    expires_at_ms: int
    closed_as: str | None
    """`confirmed`, `rejected`, `withdrawn`, `expired` or `voided`; None while open."""
    closed_at_ms: int | None
    closed_by: str | None
    close_reason_code: str | None
