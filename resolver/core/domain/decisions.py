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


class Act(StrEnum):
    """The act a person's signed fact names, consumed by it once (the same set as the
    database's resolver_fact_acts())."""

    DECIDE = "decide"
    """A decision one person settles."""
    PROPOSE = "propose"
    """The first of two people's decision: a proposal."""
    CONFIRM = "confirm"
    """The second person's same decision, which settles the proposal's case."""
    REJECT = "reject"
    """Someone else ends a proposal without deciding."""
    WITHDRAW = "withdraw"
    """The proposer ends its own proposal."""


class SignedFact(msgspec.Struct, frozen=True):
    """What a signed authorization fact adds (resolver.human.signing): the act it names (with
    the proposal it confirms or ends, and when the API verified the token, on the database
    clock), the verified token's issuer and key id, and the API's Ed25519 signature over the
    fact with its key id."""

    issuer: str
    token_kid: str
    signing_kid: str
    signature: str
    act: Act
    proposal_id: int | None
    verified_at_ms: int


class Authority(msgspec.Struct, frozen=True):
    """Who acts, on what standing: the person, the project of the dispatch, and their grant
    there as read; a fenced human write checks each again inside the database."""

    principal: Principal
    project_id: str
    grant: Grant


class DecisionLimits(msgspec.Struct, frozen=True):
    """The bounds a fenced human act asks to be held to: how old the strong sign-in may be and
    how long a proposal stays open. The database's policy (recovery_decision_policy) sets the
    loosest; a service asks for these only within it (`within`), since the database refuses a
    looser one."""

    max_auth_age_ms: int
    proposal_ttl_ms: int

    def within(self, ctx: ManualContext) -> DecisionLimits:
        """These limits, tightened to the database's policy as `ctx` read it."""
        return DecisionLimits(
            min(self.max_auth_age_ms, ctx.policy_max_auth_age_ms or self.max_auth_age_ms),
            min(self.proposal_ttl_ms, ctx.policy_proposal_ttl_ms or self.proposal_ttl_ms),
        )


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
    `result`); no answer at all means a fence held and nothing was written, and a fact it
    refuses is a typed error (FactConsumed, ActRefused)."""

    COMMITTED = "committed"
    """The decision settled the case: alone (decide), or confirming a proposal (confirm)."""
    PROPOSED = "proposed"
    """A two-person case: the first decision recorded as a proposal (propose)."""
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
    """What a person does to an open proposal without deciding (an `Act` of its own)."""

    WITHDRAW = "withdraw"
    REJECT = "reject"

    @property
    def act(self) -> Act:
        return Act(self.value)

    @property
    def closed_as(self) -> str:
        """How the proposal ends: `withdrawn` or `rejected`."""
        return "withdrawn" if self is ProposalAction.WITHDRAW else "rejected"


class ProposalClose(msgspec.Struct, frozen=True):
    """Withdraw (the proposer) or reject (anyone else) the open proposal on a dispatch."""

    dispatch_id: str
    action: ProposalAction
    mutation_id: str
    reason_code: str


class ProposalCloseAnswer(StrEnum):
    """What closing a proposal answered when the grant fence held (resolver_proposal_close's
    `result`): how it closed, or that the sign-in is too old. A fact it refuses (a mutation id
    used, a proposal that is not the open one, the wrong person) is a typed error
    (FactConsumed, ActRefused), which the service explains."""

    WITHDRAWN = "withdrawn"
    REJECTED = "rejected"
    STALE_AUTH = "stale_auth"


class ProposalResult(StrEnum):
    WITHDRAWN = "withdrawn"
    REJECTED = "rejected"
    REPLAYED = "replayed"


class Grant(msgspec.Struct, frozen=True):
    """The versions of a user's `approval.recover` binding and its project, as read."""

    project_version: int
    role_binding_version: int


class ManualContext(msgspec.Struct, frozen=True):
    """A case as a person's act needs it: where it stands, what a mutation id already did,
    the open proposal, the decisions a two-person rule covers, the database's bounds, and the
    database clock (the time a signed fact names)."""

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
    mutation_proposal_id: int | None = None
    mutation_proposal_dispatch_id: str | None = None
    mutation_closes_proposal: bool | None = None
    """The mutation id closed that proposal (a confirm, reject or withdraw), not proposed it."""
    mutation_closed_by: str | None = None
    mutation_close_reason_code: str | None = None
    mutation_proposal_outcome: ExecutionState | None = None
    mutation_proposal_reason_code: str | None = None
    mutation_proposal_evidence_digest: str | None = None
    open_proposal_id: int | None = None
    """The proposal open (and not expired) on the dispatch now, if any, and what it proposes."""
    open_proposed_by: str | None = None
    open_outcome: ExecutionState | None = None
    open_evidence_digest: str | None = None
    open_expected_version: int | None = None
    two_person_outcomes: tuple[ExecutionState, ...] = ()
    """The outcomes a two-person rule covers on the dispatch's action type."""
    policy_max_auth_age_ms: int | None = None
    """The database's bounds (recovery_decision_policy); None without a policy row."""
    policy_proposal_ttl_ms: int | None = None
    policy_clock_leeway_ms: int | None = None


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
