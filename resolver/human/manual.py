"""Manual resolution: a human's explicit, authorized, version-fenced terminal decision.

There is no retry, reset-to-pending, clear-start-barrier or dispatch edit. Doing the action
again means a new dispatch that references this one (`supersedes_dispatch_id`).

Where the database's two-person rules say so, the first decision is a proposal and a second,
different person's same decision settles it (docs/manual-resolution.md); the database decides
which, so this service only turns its answer into a result or a typed refusal.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from resolver.core.domain import (
    REASON_CODE_PATTERN,
    Authority,
    DecisionLimits,
    ExecutionState,
    Grant,
    ManualCommitAnswer,
    ManualContext,
    ManualDecision,
    ManualResult,
    OpenProposal,
    Principal,
    ProposalAction,
    ProposalClose,
    ProposalCloseAnswer,
    ProposalResult,
    ResolutionSource,
    SignedFact,
    check_mutation_id,
)
from resolver.core.errors import (
    FenceConflict,
    NotFound,
    PermissionDenied,
    ProposalConflict,
    StrongAuthRequired,
)
from resolver.core.ports import ManualStore
from resolver.human.signing import DecisionFacts, FactSigner, PersonFacts

PERMISSION = "approval.recover"
MAX_AUTH_AGE_MS = 5 * 60 * 1000
STRONG_AMR = frozenset({"mfa", "hwk", "swk", "otp", "fido"})
# How long a proposal waits for its second person: long enough to find a colleague on call,
# short enough that the evidence both looked at is still the evidence.
PROPOSAL_TTL_MS = 60 * 60 * 1000
# What each answer of the manual commit means to the caller: a result when it wrote the
# decision or its proposal, else the refusal (a 409 problem code and its title).
WRITTEN: Mapping[ManualCommitAnswer, ManualResult] = {
    ManualCommitAnswer.COMMITTED: ManualResult.COMMITTED,
    ManualCommitAnswer.PROPOSED: ManualResult.PROPOSED,
}
PROPOSAL_REFUSALS: Mapping[ManualCommitAnswer, tuple[str, str]] = {
    ManualCommitAnswer.SECOND_PERSON_REQUIRED: (
        "second_person_required",
        "you proposed this decision: a different person with the same permission must "
        "confirm it (or you withdraw it)",
    ),
    ManualCommitAnswer.REJECTED: (
        "proposal_rejected",
        "a different decision rejected the open proposal; nothing was committed: reload the "
        "case, then propose again",
    ),
    ManualCommitAnswer.VOIDED: (
        "proposal_voided",
        "the proposer no longer holds the permission; the proposal is void and nothing was "
        "committed",
    ),
    ManualCommitAnswer.PROPOSAL_LIMIT: (
        "proposal_limit",
        "this case already had 16 proposals; settle it by talking it through first",
    ),
}
# The same for closing a proposal (a stale sign-in is answered as for a decision).
CLOSED: Mapping[ProposalCloseAnswer, ProposalResult] = {
    ProposalCloseAnswer.WITHDRAWN: ProposalResult.WITHDRAWN,
    ProposalCloseAnswer.REJECTED: ProposalResult.REJECTED,
    ProposalCloseAnswer.REPLAYED: ProposalResult.REPLAYED,
}
CLOSE_REFUSALS: Mapping[ProposalCloseAnswer, tuple[str, str]] = {
    ProposalCloseAnswer.NO_PROPOSAL: ("no_proposal", "there is no open proposal on this dispatch"),
    ProposalCloseAnswer.NOT_PROPOSER: (
        "not_proposer",
        "only the proposer can withdraw a proposal",
    ),
    ProposalCloseAnswer.OWN_PROPOSAL: (
        "own_proposal",
        "you cannot reject your own proposal: withdraw it",
    ),
    ProposalCloseAnswer.MUTATION_USED: ("conflict", "this mutation id was already used"),
}


class ManualResolutionService:
    """Checks what can be checked early, then lets one fenced statement decide."""

    def __init__(
        self,
        store: ManualStore,
        *,
        signer: FactSigner,
        max_auth_age_ms: int = MAX_AUTH_AGE_MS,
        strong_amr: frozenset[str] = STRONG_AMR,
        clock_leeway_ms: int = 30_000,
        proposal_ttl_ms: int = PROPOSAL_TTL_MS,
    ) -> None:
        self._store = store
        self._signer = signer
        self.max_auth_age_ms = max_auth_age_ms
        """How recent a decision's strong authentication must be (the console shows it)."""
        self._strong_amr = strong_amr
        self._limits = DecisionLimits(max_auth_age_ms, clock_leeway_ms, proposal_ttl_ms)

    def at(self, now_ms: int) -> ManualResolutionService:
        """This service with its store at `now_ms` (tests drive the database clock)."""
        view = copy.copy(self)
        view._store = self._store.at(now_ms)
        return view

    def decide(self, principal: Principal, decision: ManualDecision) -> ManualResult:
        self._require_strong(principal)
        context = self._context(decision.dispatch_id, decision.mutation_id)
        grant = self._grant(decision.dispatch_id, context.project_id, principal)
        authority = Authority(principal, context.project_id, grant)
        answer = self._store.commit_manual(
            authority, decision, self._sign(authority, decision), self._limits
        )
        if answer is None:
            return self._explain(principal, decision, grant)
        if answer in WRITTEN:
            return WRITTEN[answer]
        code, title = PROPOSAL_REFUSALS[answer]
        ctx = self._context(decision.dispatch_id, decision.mutation_id)
        raise ProposalConflict(code, title, current=_as_now(ctx))

    def open_proposal(self, dispatch_id: str) -> OpenProposal | None:
        """The proposal a `proposed` answer recorded (or found open)."""
        return self._store.open_proposal(dispatch_id)

    def close_proposal(
        self,
        principal: Principal,
        dispatch_id: str,
        action: ProposalAction,
        mutation_id: str,
        reason_code: str,
    ) -> ProposalResult:
        """Withdraw (the proposer) or reject (anyone else with the permission) the open
        proposal, fenced and authenticated like a decision."""
        check_mutation_id(mutation_id)
        if not REASON_CODE_PATTERN.match(reason_code):
            raise ValueError("reason_code must match [a-z0-9_.-]{1,64}")
        self._require_strong(principal)
        context = self._context(dispatch_id, mutation_id)
        grant = self._grant(dispatch_id, context.project_id, principal)
        answer = self._store.close_proposal(
            Authority(principal, context.project_id, grant),
            ProposalClose(dispatch_id, action, mutation_id, reason_code),
            self._limits,
        )
        if answer is None:
            raise PermissionDenied(f"{PERMISSION} on project {context.project_id!r} changed; retry")
        if answer is ProposalCloseAnswer.STALE_AUTH:
            raise StrongAuthRequired(self._stale_auth_message())
        if answer in CLOSED:
            return CLOSED[answer]
        code, title = CLOSE_REFUSALS[answer]
        ctx = self._context(dispatch_id, mutation_id)
        raise ProposalConflict(code, title, current=_as_now(ctx))

    def _sign(self, authority: Authority, decision: ManualDecision) -> SignedFact:
        """The authorization fact this decision records, signed with the API's key."""
        principal, grant = authority.principal, authority.grant
        person = PersonFacts(
            user_id=principal.user_id,
            issuer=principal.issuer,
            token_kid=principal.token_kid,
            auth_time_ms=principal.auth_time_ms,
            amr=principal.amr,
            project_id=authority.project_id,
            project_version=grant.project_version,
            role_binding_version=grant.role_binding_version,
        )
        facts = DecisionFacts(
            dispatch_id=decision.dispatch_id,
            outcome=decision.decision.terminal_state.value,
            expected_execution_version=decision.expected_execution_version,
            evidence_digest=decision.evidence_digest,
        )
        return self._signer.sign(person, facts)

    def _require_strong(self, principal: Principal) -> None:
        if not self._strong_amr.intersection(principal.amr):
            raise StrongAuthRequired(
                f"a recovery decision needs strong authentication (amr one of "
                f"{sorted(self._strong_amr)}); sign in again with a second factor"
            )

    def _grant(self, dispatch_id: str, project_id: str, principal: Principal) -> Grant:
        grant = self._store.find_grant(project_id, principal.user_id)
        if grant is None:
            # Answered exactly like an unknown dispatch: a write tells nobody what exists in
            # a project where they may not decide.
            raise _unknown(dispatch_id)
        return grant

    def _stale_auth_message(self) -> str:
        return (
            "authentication is older than "
            f"{self._limits.max_auth_age_ms // 60_000} minutes; sign in again with a second factor"
        )

    def _context(self, dispatch_id: str, mutation_id: str) -> ManualContext:
        context = self._store.manual_context(dispatch_id, mutation_id)
        if context is None:
            raise _unknown(dispatch_id)
        return context

    def _explain(
        self, principal: Principal, decision: ManualDecision, grant: Grant
    ) -> ManualResult:
        """The fenced commit wrote nothing: say exactly which fence held, or accept a replay."""
        ctx = self._context(decision.dispatch_id, decision.mutation_id)
        if _is_replay(ctx, principal, decision):
            return ManualResult.REPLAYED
        as_now = _as_now(ctx)
        if (
            ctx.mutation_proposed_by == principal.user_id
            and ctx.mutation_proposal_closed_as == "confirmed"
            and ctx.resolution_outcome is decision.decision.terminal_state
        ):
            return ManualResult.REPLAYED  # the proposer resends what a second person confirmed
        if ctx.mutation_proposed_by is not None and ctx.mutation_proposal_closed_as is not None:
            raise ProposalConflict(
                "proposal_closed",
                f"the proposal of mutation id {decision.mutation_id!r} was "
                f"{ctx.mutation_proposal_closed_as}; reload the case and decide again",
                current=as_now,
            )
        if ctx.mutation_dispatch_id is not None or ctx.mutation_proposed_by is not None:
            raise FenceConflict(
                f"mutation id {decision.mutation_id!r} was already used", current=as_now
            )
        if ctx.state is not ExecutionState.EXECUTING:
            raise FenceConflict(
                f"dispatch {decision.dispatch_id!r} is already {ctx.state.value}", current=as_now
            )
        if ctx.version != decision.expected_execution_version:
            raise FenceConflict(
                f"dispatch {decision.dispatch_id!r} is at version {ctx.version}, "
                f"not {decision.expected_execution_version}: reload and decide again",
                current=as_now,
            )
        if ctx.lease_expires_at_ms > ctx.db_now_ms:
            raise FenceConflict(
                f"dispatch {decision.dispatch_id!r} has a live execution lease: its executor is "
                "still running, so there is nothing to recover",
                current=as_now,
            )
        if not _auth_fresh(principal, ctx.db_now_ms, self._limits):
            raise StrongAuthRequired(self._stale_auth_message())
        current = self._store.find_grant(ctx.project_id, principal.user_id)
        if current != grant:
            raise PermissionDenied(f"{PERMISSION} on project {ctx.project_id!r} changed; retry")
        raise FenceConflict(
            f"decision on {decision.dispatch_id!r} lost a concurrent update; retry",
            current=as_now,
        )


def _unknown(dispatch_id: str) -> NotFound:
    """The one answer to a dispatch that does not exist, has no execution, or lies in a
    project where the caller may not decide."""
    del dispatch_id  # not echoed: the body is the same whichever id was asked for
    return NotFound("no such dispatch with an execution in a project where you may decide")


def _auth_fresh(principal: Principal, now_ms: int, limits: DecisionLimits) -> bool:
    return (
        now_ms - limits.max_auth_age_ms <= principal.auth_time_ms <= now_ms + limits.clock_leeway_ms
    )


def _as_now(ctx: ManualContext) -> dict[str, object]:
    """The dispatch as it stands, for a 409's `current`."""
    return {
        "state": ctx.state.value,
        "version": ctx.version,
        "control_status": ctx.control_status.value if ctx.control_status else None,
    }


def _is_replay(ctx: ManualContext, principal: Principal, decision: ManualDecision) -> bool:
    # A mutation id is idempotent only when every semantic field is the same. The mutation
    # that confirmed a two-person decision is the resolution's; its sender is the second
    # person (the resolution's actor and reason code are the proposer's).
    same_fact = (
        ctx.resolution_mutation_id == decision.mutation_id
        and ctx.resolution_source is ResolutionSource.MANUAL
        and ctx.resolution_outcome is decision.decision.terminal_state
        and ctx.resolution_evidence_digest == decision.evidence_digest
        and ctx.resolution_expected_version == decision.expected_execution_version
    )
    single = (
        ctx.resolution_actor == principal.user_id
        and ctx.resolution_confirmed_by is None
        and ctx.resolution_reason_code == decision.reason_code
    )
    return same_fact and (single or ctx.resolution_confirmed_by == principal.user_id)
