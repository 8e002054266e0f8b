"""Rows of the case, list and decision statements as the read model's values."""

from __future__ import annotations

from collections.abc import Sequence

from resolver.core.domain import (
    ActionSummary,
    Case,
    CaseAuthorization,
    CaseControl,
    CaseExecution,
    CaseIdentity,
    CaseResolution,
    ControlStatus,
    Decision,
    DecisionRecord,
    ExecutionState,
    FindingKind,
    LateEvidence,
    ManualQueueItem,
    OpenProposal,
    ProposalRecord,
    ProviderFailure,
    PruneMark,
    ResolutionSource,
)
from resolver.db.store.handle import Row
from resolver.db.store.rows import enums


def queue_item(row: Row) -> ManualQueueItem:
    enums(row, last_finding=FindingKind, last_failure_class=ProviderFailure)
    open_proposal = proposal(row)
    for column in PROPOSAL_COLUMNS:
        del row[column]
    summary = ActionSummary.from_stored(row.pop("action_summary"))
    two = two_person(row.pop("two_person_outcomes"))
    return ManualQueueItem(
        **row, proposal=open_proposal, action_summary=summary, two_person_decisions=two
    )


def proposal_record(row: Row) -> ProposalRecord:
    outcome = ExecutionState(row.pop("outcome"))
    return ProposalRecord(**row, decision=Decision.settling(outcome))


def two_person(outcomes: Sequence[str]) -> tuple[Decision, ...]:
    return tuple(Decision.settling(ExecutionState(o)) for o in outcomes)


# The open-proposal columns of the case and list statements (queries.sql, proposal_open).
PROPOSAL_COLUMNS = (
    "proposal_outcome",
    "proposed_by",
    "proposed_at_ms",
    "proposal_expires_at_ms",
    "proposal_reason_code",
    "proposal_evidence_digest",
    "proposal_expected_version",
)


def proposal(row: Row) -> OpenProposal | None:
    if row["proposal_outcome"] is None:
        return None
    return OpenProposal(
        decision=Decision.settling(ExecutionState(row["proposal_outcome"])),
        proposed_by=row["proposed_by"],
        proposed_at_ms=row["proposed_at_ms"],
        expires_at_ms=row["proposal_expires_at_ms"],
        reason_code=row["proposal_reason_code"],
        evidence_digest=row["proposal_evidence_digest"],
        expected_execution_version=row["proposal_expected_version"],
    )


def case(row: Row, authorizations: Sequence[Row], late: Sequence[Row] = ()) -> Case:
    identity = CaseIdentity(
        dispatch_id=row["dispatch_id"],
        approval_request_id=row["approval_request_id"],
        project_id=row["project_id"],
        action_type=row["action_type"],
        action_digest=row["action_digest"],
        idempotency_key=row["idempotency_key"],
        schema_version=row["schema_version"],
        supersedes_dispatch_id=row["supersedes_dispatch_id"],
        superseded_by=tuple(row["superseded_by"]),
        created_at_ms=row["created_at_ms"],
        action_summary=ActionSummary.from_stored(row["action_summary"]),
    )
    execution = None
    if row["state"] is not None:
        execution = CaseExecution(
            state=ExecutionState(row["state"]),
            owner=row["owner"],
            attempt=row["attempt"],
            version=row["version"],
            started_at_ms=row["started_at_ms"],
            lease_expires_at_ms=row["lease_expires_at_ms"],
            finished_at_ms=row["finished_at_ms"],
            result_code=row["result_code"],
            recovery_required=row["recovery_required"],
        )
    control = None
    if row["control_status"] is not None:
        enums(row, last_finding=FindingKind, last_failure_class=ProviderFailure)
        control = CaseControl(
            status=ControlStatus(row["control_status"]),
            armed_at_ms=row["armed_at_ms"],
            finding_count=row["finding_count"],
            finding_counts=dict(row["finding_counts"]),
            first_inspected_at_ms=row["first_inspected_at_ms"],
            last_inspected_at_ms=row["last_inspected_at_ms"],
            last_finding=row["last_finding"],
            last_failure_class=row["last_failure_class"],
            last_evidence_digest=row["last_evidence_digest"],
            next_scan_at_ms=row["next_scan_at_ms"],
            manual_at_ms=row["manual_at_ms"],
            manual_reason=row["manual_reason"],
            closed_by=row["closed_by"],
            closed_at_ms=row["closed_at_ms"],
            last_reason=row["last_reason"],
            reason_counts=dict(row["reason_counts"]),
            escalates_at_ms=row["escalates_at_ms"],
        )
    resolution = None
    if row["resolution_source"] is not None:
        source = ResolutionSource(row["resolution_source"])
        outcome = ExecutionState(row["resolution_outcome"])
        resolution = CaseResolution(
            source=source,
            outcome=outcome,
            decision=Decision.settling(outcome) if source is ResolutionSource.MANUAL else None,
            reason_code=row["resolution_reason_code"],
            actor_user_id=row["resolution_actor_user_id"],
            evidence_digest=row["resolution_evidence_digest"],
            resolved_at_ms=row["resolved_at_ms"],
            mutation_id=row["resolution_mutation_id"],
        )
    return Case(
        identity=identity,
        execution=execution,
        control=control,
        resolution=resolution,
        authorizations=tuple(
            CaseAuthorization(
                user_id=a["user_id"],
                permission=a["permission"],
                amr=tuple(a["amr"]),
                auth_time_ms=a["auth_time_ms"],
                role=_role(a["user_id"], row["resolution_actor_user_id"], len(authorizations)),
            )
            for a in authorizations
        ),
        db_now_ms=row["db_now_ms"],
        proposal=proposal(row),
        pruned=_prune_mark(row),
        late_evidence=tuple(
            LateEvidence(
                finding=FindingKind(e["finding"]),
                agrees=e["agrees"],
                evidence_digest=e["evidence_digest"],
                observed_at_ms=e["observed_at_ms"],
            )
            for e in late
        ),
    )


def _prune_mark(row: Row) -> PruneMark | None:
    if row["pruned_run_id"] is None:
        return None
    return PruneMark(row["pruned_run_id"], row["pruned_at_ms"], row["pruned_export_digest"])


def _role(user_id: str, actor: str | None, people: int) -> str:
    """One person decides; of two, the resolution's actor proposed and the other confirmed."""
    if people < 2:
        return "decider"
    return "proposer" if user_id == actor else "confirmer"


def decision_record(row: Row) -> DecisionRecord:
    outcome = ExecutionState(row["outcome"])
    finding = row["overridden_finding"]
    return DecisionRecord(
        dispatch_id=row["dispatch_id"],
        project_id=row["project_id"],
        action_type=row["action_type"],
        idempotency_key=row["idempotency_key"],
        approval_request_id=row["approval_request_id"],
        decision=Decision.settling(outcome),
        outcome=outcome,
        actor_user_id=row["actor_user_id"],
        confirmed_by=row["confirmed_by"],
        reason_code=row["reason_code"],
        amr=tuple(row["amr"] or ()),
        auth_time_ms=row["auth_time_ms"] or 0,
        evidence_digest=row["evidence_digest"],
        overridden_finding=FindingKind(finding) if finding is not None else None,
        resolved_at_ms=row["resolved_at_ms"],
        resolution_id=row["resolution_id"],
        contradicted=row["contradicted"],
    )
