"""The manual-resolution port: grants, the decision's context, the fenced human writes."""

from __future__ import annotations

from typing import Any

from resolver.core.domain import (
    Authority,
    ControlStatus,
    DecisionLimits,
    ExecutionState,
    Grant,
    ManualCommitAnswer,
    ManualContext,
    ManualDecision,
    OpenProposal,
    ProposalClose,
    ProposalCloseAnswer,
    ResolutionSource,
    SignedFact,
)
from resolver.core.errors import ConstraintViolation, FactConsumed
from resolver.db.store.case_rows import proposal
from resolver.db.store.handle import PortStore
from resolver.db.store.rows import enums


class PostgresManualStore(PortStore):
    """What the manual-resolution service calls; every write is fenced in the database."""

    def find_grant(self, project_id: str, user_id: str) -> Grant | None:
        row = self._db.one("manual_grant_get", {"project_id": project_id, "user_id": user_id})
        return None if row is None else Grant(**row)

    def manual_context(self, dispatch_id: str, mutation_id: str) -> ManualContext | None:
        params = {"dispatch_id": dispatch_id, "mutation_id": mutation_id, "now_ms": self._db.now_ms}
        row = self._db.one("manual_context_get", params)
        if row is None:
            return None
        enums(row, state=ExecutionState, control_status=ControlStatus)
        enums(row, resolution_source=ResolutionSource, resolution_outcome=ExecutionState)
        enums(row, mutation_proposal_outcome=ExecutionState, open_outcome=ExecutionState)
        row["two_person_outcomes"] = tuple(ExecutionState(o) for o in row["two_person_outcomes"])
        return ManualContext(**row)

    def commit_manual(
        self,
        authority: Authority,
        decision: ManualDecision,
        fact: SignedFact,
        limits: DecisionLimits,
    ) -> ManualCommitAnswer | None:
        params = {
            **_authorization(authority, fact, limits),
            "dispatch_id": decision.dispatch_id,
            "outcome": decision.decision.terminal_state.value,
            "mutation_id": decision.mutation_id,
            "expected_execution_version": decision.expected_execution_version,
            "reason_code": decision.reason_code,
            "evidence_digest": decision.evidence_digest,
            "proposal_ttl_ms": limits.proposal_ttl_ms,
            "now_ms": self._db.now_ms,
        }
        try:
            row = self._db.one("manual_commit", params)
        except ConstraintViolation as exc:
            # A reused mutation id or signature a concurrent act recorded first: nothing was
            # written; the service explains it.
            if exc.constraint in _CONSUMED_ONCE:
                raise FactConsumed(str(exc)) from exc
            raise
        return None if row is None else ManualCommitAnswer(row["result"])

    def close_proposal(
        self,
        authority: Authority,
        close: ProposalClose,
        fact: SignedFact,
        limits: DecisionLimits,
    ) -> ProposalCloseAnswer | None:
        params = {
            **_authorization(authority, fact, limits),
            "dispatch_id": close.dispatch_id,
            "mutation_id": close.mutation_id,
            "reason_code": close.reason_code,
            "now_ms": self._db.now_ms,
        }
        try:
            row = self._db.one("proposal_close", params)
        except ConstraintViolation as exc:
            if exc.constraint in _CONSUMED_ONCE:
                raise FactConsumed(str(exc)) from exc
            raise
        return None if row is None else ProposalCloseAnswer(row["result"])

    def open_proposal(self, dispatch_id: str) -> OpenProposal | None:
        row = self._db.one(
            "proposal_open_get", {"dispatch_id": dispatch_id, "now_ms": self._db.now_ms}
        )
        return None if row is None else proposal(row)


# The unique constraints that make a signed fact count once; a concurrent act that recorded
# the same mutation id or signature first trips one of them.
_CONSUMED_ONCE = frozenset(
    {
        "uq_approved_action_recovery_resolutions_mutation_id",
        "uq_recovery_proposals_mutation_id",
        "uq_recovery_proposals_closed_mutation_id",
        "uq_recovery_authorizations_signature",
        "uq_recovery_authorizations_act_mutation_id",
        "uq_recovery_proposals_signature",
        "uq_recovery_proposals_closed_signature",
    }
)


def _authorization(
    authority: Authority, fact: SignedFact, limits: DecisionLimits
) -> dict[str, Any]:
    """The parameters of a person's signed act: who, on which grant, the act and its proposal,
    the signed fact, and the bound it asks for."""
    principal, grant = authority.principal, authority.grant
    return {
        "project_id": authority.project_id,
        "user_id": principal.user_id,
        "auth_time_ms": principal.auth_time_ms,
        "amr": list(principal.amr),
        "project_version": grant.project_version,
        "role_binding_version": grant.role_binding_version,
        "act": fact.act.value,
        "proposal_id": fact.proposal_id,
        "verified_at_ms": fact.verified_at_ms,
        "issuer": fact.issuer,
        "token_kid": fact.token_kid,
        "signing_kid": fact.signing_kid,
        "signature": fact.signature,
        "max_auth_age_ms": limits.max_auth_age_ms,
    }
