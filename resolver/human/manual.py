"""Manual resolution: a human's explicit, authorized, version-fenced terminal decision.

There is no retry, reset-to-pending, clear-start-barrier or dispatch edit. Doing the action
again means a new dispatch that references this one (`supersedes_dispatch_id`).

Where the database's two-person rules say so, the first decision is a proposal and a second,
different person's same decision settles it (docs/manual-resolution.md). Each request is one
act of one person, signed as such; the database records it only if it is that act, once, and
this service turns its answer into a result or a typed refusal.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import NoReturn

from resolver.core.domain import (
    REASON_CODE_PATTERN,
    Act,
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
    ActRefused,
    FactConsumed,
    FenceConflict,
    NotFound,
    PermissionDenied,
    ProposalConflict,
    StrongAuthRequired,
)
from resolver.core.ports import ManualStore
from resolver.human.signing import ActFacts, DecisionFacts, FactSigner, PersonFacts

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
# The service's own refusals of a two-person decision, decided on the case as read (the
# database refuses the same acts, RS008): the proposer deciding again, and a different
# decision, which rejects the open proposal as this person's act and settles nothing.
SECOND_PERSON_REQUIRED = (
    "second_person_required",
    "you proposed this decision: a different person with the same permission must "
    "confirm it (or you withdraw it)",
)
PROPOSAL_REJECTED = (
    "proposal_rejected",
    "a different decision rejected the open proposal; nothing was committed: reload the "
    "case, then propose again",
)
# The same for closing a proposal (a stale sign-in is answered as for a decision), and why a
# close is refused, as the case was read.
CLOSED: Mapping[ProposalCloseAnswer, ProposalResult] = {
    ProposalCloseAnswer.WITHDRAWN: ProposalResult.WITHDRAWN,
    ProposalCloseAnswer.REJECTED: ProposalResult.REJECTED,
}
CLOSE_REFUSALS: Mapping[str, tuple[str, str]] = {
    "no_proposal": ("no_proposal", "there is no open proposal on this dispatch"),
    "not_proposer": ("not_proposer", "only the proposer can withdraw a proposal"),
    "own_proposal": ("own_proposal", "you cannot reject your own proposal: withdraw it"),
    "mutation_used": ("conflict", "this mutation id was already used"),
}
# How often an act is signed again when the case changed between reading it and committing
# the act (another person proposed, confirmed or closed in between; the database refused the
# fact as the wrong act, RS008). Each try reads the case afresh.
ACT_ATTEMPTS = 3
# The leeway for a time ahead of the database clock when the database has no policy row.
DEFAULT_CLOCK_LEEWAY_MS = 30_000


class ManualResolutionService:
    """Reads the case, signs the one act a person's request is, and lets one fenced statement
    decide whether it stands.

    Each request is one act of one person, named in the signed fact (resolver.human.signing):
    `decide` where one person settles the case, `propose` where a two-person rule applies and
    nothing is open, `confirm` of the open proposal by someone else with the same decision,
    `reject` of it by a different decision or the reject route, `withdraw` by its proposer.
    The database consumes the fact once and refuses it for any other act; when the case changed
    between the read and the commit, the act is read and signed again (ACT_ATTEMPTS).
    """

    def __init__(
        self,
        store: ManualStore,
        *,
        signer: FactSigner,
        max_auth_age_ms: int = MAX_AUTH_AGE_MS,
        strong_amr: frozenset[str] = STRONG_AMR,
        proposal_ttl_ms: int = PROPOSAL_TTL_MS,
    ) -> None:
        self._store = store
        self._signer = signer
        self.max_auth_age_ms = max_auth_age_ms
        """How recent a decision's strong authentication must be (the console shows it); the
        database's policy may be tighter, never looser."""
        self._strong_amr = strong_amr
        self._limits = DecisionLimits(max_auth_age_ms, proposal_ttl_ms)

    def at(self, now_ms: int) -> ManualResolutionService:
        """This service with its store at `now_ms` (tests drive the database clock)."""
        view = copy.copy(self)
        view._store = self._store.at(now_ms)
        return view

    def decide(self, principal: Principal, decision: ManualDecision) -> ManualResult:
        self._require_strong(principal)
        for _ in range(ACT_ATTEMPTS):
            ctx = self._context(decision.dispatch_id, decision.mutation_id)
            grant = self._grant(decision.dispatch_id, ctx.project_id, principal)
            if _mutation_used(ctx) or not _decidable(ctx, decision):
                return self._explain(principal, decision, grant)
            act, proposal_id = self._plan(principal, decision, ctx)
            authority = Authority(principal, ctx.project_id, grant)
            try:
                if act is Act.REJECT:
                    self._reject_by_decision(authority, decision, ctx)
                answer = self._store.commit_manual(
                    authority,
                    decision,
                    self._sign(authority, decision, ctx, act, proposal_id),
                    self._limits.within(ctx),
                )
            except FactConsumed:
                return self._explain(principal, decision, grant)
            except ActRefused:
                continue  # the case changed since it was read: read it and sign again
            if answer is None:
                return self._explain(principal, decision, grant)
            if answer in WRITTEN:
                return WRITTEN[answer]
            code, title = PROPOSAL_REFUSALS[answer]
            ctx = self._context(decision.dispatch_id, decision.mutation_id)
            raise ProposalConflict(code, title, current=_as_now(ctx))
        raise self._kept_changing(decision.dispatch_id, decision.mutation_id)

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
        proposal, fenced, authenticated and signed like a decision."""
        check_mutation_id(mutation_id)
        if not REASON_CODE_PATTERN.match(reason_code):
            raise ValueError("reason_code must match [a-z0-9_.-]{1,64}")
        self._require_strong(principal)
        close = ProposalClose(dispatch_id, action, mutation_id, reason_code)
        for _ in range(ACT_ATTEMPTS):
            ctx = self._context(dispatch_id, mutation_id)
            grant = self._grant(dispatch_id, ctx.project_id, principal)
            if _mutation_used(ctx):
                return _explain_close(principal, close, ctx)
            _require_closable(principal, action, ctx)
            try:
                answer = self._close(Authority(principal, ctx.project_id, grant), close, ctx)
            except FactConsumed:
                return _explain_close(principal, close, self._context(dispatch_id, mutation_id))
            except ActRefused:
                continue  # the proposal changed since it was read: read it and sign again
            return answer
        raise self._kept_changing(dispatch_id, mutation_id)

    def _plan(
        self, principal: Principal, decision: ManualDecision, ctx: ManualContext
    ) -> tuple[Act, int | None]:
        """The act this decision is on the case as read, and the proposal it confirms or
        rejects (the database checks the same again when it records the act)."""
        outcome = decision.decision.terminal_state
        if ctx.open_proposal_id is None:
            return (Act.PROPOSE if outcome in ctx.two_person_outcomes else Act.DECIDE), None
        if ctx.open_proposed_by == principal.user_id:
            code, title = SECOND_PERSON_REQUIRED
            raise ProposalConflict(code, title, current=_as_now(ctx))
        if ctx.open_outcome is outcome and ctx.open_evidence_digest == decision.evidence_digest:
            return Act.CONFIRM, ctx.open_proposal_id
        return Act.REJECT, ctx.open_proposal_id

    def _reject_by_decision(
        self, authority: Authority, decision: ManualDecision, ctx: ManualContext
    ) -> NoReturn:
        """A different decision on an open proposal rejects it, as this person's own signed
        act with the decision's mutation id and reason code, and settles nothing."""
        close = ProposalClose(
            decision.dispatch_id, ProposalAction.REJECT, decision.mutation_id, decision.reason_code
        )
        self._close(authority, close, ctx)
        code, title = PROPOSAL_REJECTED
        ctx = self._context(decision.dispatch_id, decision.mutation_id)
        raise ProposalConflict(code, title, current=_as_now(ctx))

    def _close(
        self, authority: Authority, close: ProposalClose, ctx: ManualContext
    ) -> ProposalResult:
        """Record a reject or withdraw of the open proposal `ctx` read; its answer, or the
        refusal it means (the grant changed, the authentication went stale)."""
        # The caller read an open proposal: its id, outcome and version come together.
        assert ctx.open_proposal_id is not None and ctx.open_outcome is not None
        assert ctx.open_expected_version is not None
        facts = DecisionFacts(
            dispatch_id=close.dispatch_id,
            outcome=ctx.open_outcome.value,
            expected_execution_version=ctx.open_expected_version,
            evidence_digest=ctx.open_evidence_digest,
        )
        act = ActFacts(close.action.act, close.mutation_id, ctx.open_proposal_id, ctx.db_now_ms)
        fact = self._signer.sign(_person(authority), facts, act)
        answer = self._store.close_proposal(authority, close, fact, self._limits.within(ctx))
        if answer is None:
            raise PermissionDenied(
                f"{PERMISSION} on project {authority.project_id!r} changed; retry"
            )
        if answer is ProposalCloseAnswer.STALE_AUTH:
            raise StrongAuthRequired(self._stale_auth_message())
        return CLOSED[answer]

    def _sign(
        self,
        authority: Authority,
        decision: ManualDecision,
        ctx: ManualContext,
        act: Act,
        proposal_id: int | None,
    ) -> SignedFact:
        """The authorization fact of this act, signed with the API's key. Its time is the
        database clock as `ctx` read it."""
        facts = DecisionFacts(
            dispatch_id=decision.dispatch_id,
            outcome=decision.decision.terminal_state.value,
            expected_execution_version=decision.expected_execution_version,
            evidence_digest=decision.evidence_digest,
        )
        bound = ActFacts(act, decision.mutation_id, proposal_id, ctx.db_now_ms)
        return self._signer.sign(_person(authority), facts, bound)

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

    def _kept_changing(self, dispatch_id: str, mutation_id: str) -> FenceConflict:
        ctx = self._context(dispatch_id, mutation_id)
        return FenceConflict(
            f"the case {dispatch_id!r} changed each time it was read; reload it and decide again",
            current=_as_now(ctx),
        )

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
        if _is_open_proposal_resent(ctx, principal, decision):
            return ManualResult.PROPOSED  # the proposer resends its open proposal
        closed_as = ctx.mutation_proposal_closed_as
        if closed_as is None and _is_own_expired_proposal(ctx, principal):
            closed_as = "expired"
        if ctx.mutation_proposed_by is not None and closed_as is not None:
            raise ProposalConflict(
                "proposal_closed",
                f"the proposal of mutation id {decision.mutation_id!r} was "
                f"{closed_as}; reload the case and decide again",
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
        if not _auth_fresh(principal, ctx, self._limits.within(ctx)):
            raise StrongAuthRequired(self._stale_auth_message())
        current = self._store.find_grant(ctx.project_id, principal.user_id)
        if current != grant:
            raise PermissionDenied(f"{PERMISSION} on project {ctx.project_id!r} changed; retry")
        raise FenceConflict(
            f"decision on {decision.dispatch_id!r} lost a concurrent update; retry",
            current=as_now,
        )


def _person(authority: Authority) -> PersonFacts:
    """Who acts, as the verified token and the grant fence describe them."""
    principal, grant = authority.principal, authority.grant
    return PersonFacts(
        user_id=principal.user_id,
        issuer=principal.issuer,
        token_kid=principal.token_kid,
        auth_time_ms=principal.auth_time_ms,
        amr=principal.amr,
        project_id=authority.project_id,
        project_version=grant.project_version,
        role_binding_version=grant.role_binding_version,
    )


def _mutation_used(ctx: ManualContext) -> bool:
    """The request's mutation id already names a decision, a proposal or a close."""
    return ctx.mutation_dispatch_id is not None or ctx.mutation_proposed_by is not None


def _decidable(ctx: ManualContext, decision: ManualDecision) -> bool:
    """The case is where the decision expects it: an act is signed only then (otherwise a
    stale request would reject an open proposal instead of answering its conflict)."""
    return (
        ctx.state is ExecutionState.EXECUTING and ctx.version == decision.expected_execution_version
    )


def _require_closable(principal: Principal, action: ProposalAction, ctx: ManualContext) -> None:
    """A proposal is open and this person may end it this way, as the case was read."""
    refusal = None
    if ctx.open_proposal_id is None:
        refusal = "no_proposal"
    elif action is ProposalAction.WITHDRAW and ctx.open_proposed_by != principal.user_id:
        refusal = "not_proposer"
    elif action is ProposalAction.REJECT and ctx.open_proposed_by == principal.user_id:
        refusal = "own_proposal"
    if refusal is not None:
        code, title = CLOSE_REFUSALS[refusal]
        raise ProposalConflict(code, title, current=_as_now(ctx))


def _explain_close(
    principal: Principal, close: ProposalClose, ctx: ManualContext
) -> ProposalResult:
    """The close's mutation id was used: a replay of exactly this close, or a conflict."""
    if (
        ctx.mutation_closes_proposal
        and ctx.mutation_proposal_dispatch_id == close.dispatch_id
        and ctx.mutation_closed_by == principal.user_id
        and ctx.mutation_proposal_closed_as == close.action.closed_as
        and ctx.mutation_close_reason_code == close.reason_code
    ):
        return ProposalResult.REPLAYED
    code, title = CLOSE_REFUSALS["mutation_used"]
    raise ProposalConflict(code, title, current=_as_now(ctx))


def _unknown(dispatch_id: str) -> NotFound:
    """The one answer to a dispatch that does not exist, has no execution, or lies in a
    project where the caller may not decide."""
    del dispatch_id  # not echoed: the body is the same whichever id was asked for
    return NotFound("no such dispatch with an execution in a project where you may decide")


def _auth_fresh(principal: Principal, ctx: ManualContext, limits: DecisionLimits) -> bool:
    now_ms = ctx.db_now_ms
    leeway_ms = ctx.policy_clock_leeway_ms
    if leeway_ms is None:
        leeway_ms = DEFAULT_CLOCK_LEEWAY_MS
    return now_ms - limits.max_auth_age_ms <= principal.auth_time_ms <= now_ms + leeway_ms


def _is_own_expired_proposal(ctx: ManualContext, principal: Principal) -> bool:
    """The mutation id is this person's proposal, not closed yet but no longer open: it
    expired (the next act on the case closes it as such)."""
    return (
        ctx.mutation_proposed_by == principal.user_id
        and not ctx.mutation_closes_proposal
        and ctx.open_proposal_id != ctx.mutation_proposal_id
    )


def _is_open_proposal_resent(
    ctx: ManualContext, principal: Principal, decision: ManualDecision
) -> bool:
    """The proposer sends its still-open proposal again (same mutation id and fields)."""
    return (
        ctx.mutation_proposed_by == principal.user_id
        and not ctx.mutation_closes_proposal
        and ctx.mutation_proposal_closed_as is None
        and ctx.open_proposal_id is not None
        and ctx.open_proposal_id == ctx.mutation_proposal_id
        and ctx.mutation_proposal_outcome is decision.decision.terminal_state
        and ctx.mutation_proposal_reason_code == decision.reason_code
        and ctx.mutation_proposal_evidence_digest == decision.evidence_digest
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
