"""The human side's read models: the case lists and their filters, the case, the decisions."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

import msgspec

from resolver.core.domain.decisions import OpenProposal, ProposalRecord
from resolver.core.domain.dispatch import ActionSummary
from resolver.core.domain.late_evidence import LateEvidence
from resolver.core.domain.sets import (
    ControlStatus,
    Decision,
    ExecutionState,
    FindingKind,
    ProviderFailure,
    ResolutionSource,
)


class ManualQueueItem(msgspec.Struct, frozen=True):
    """One open case as the manual queue and the waiting list show it."""

    dispatch_id: str
    project_id: str
    action_type: str
    last_finding: FindingKind | None
    finding_count: int
    manual_at_ms: int | None
    execution_version: int
    started_at_ms: int
    attempt: int
    approval_request_id: str = ""
    idempotency_key: str = ""
    action_digest: str = ""
    manual_reason: str | None = None
    last_failure_class: ProviderFailure | None = None
    first_inspected_at_ms: int | None = None
    since_ms: int = 0
    """When the case entered its list (the keyset): manual_at_ms or first_inspected_at_ms."""
    proposal: OpenProposal | None = None
    action_summary: ActionSummary | None = None
    last_reason: str | None = None
    """The last inspection's reason code (`unknown_kid`, `http_404`), if its provider gave one."""
    two_person_decisions: tuple[Decision, ...] = ()
    """The decisions a two-person rule covers for this action type."""
    owner: str = ""
    """The executor that held the lease (its owner name: a host, a pod)."""
    sort_key: str = ""
    """The row's value of the list's sort column (the keyset's first part)."""
    next_look_at_ms: int | None = None
    """A waiting case's next inspection; None in the manual queue."""
    escalates_at_ms: int | None = None
    """When a waiting case goes to the manual queue if its evidence stays what it last was
    (at the first look from then on); None when that finding never escalates."""


# Find by words of what was approved: fewer characters than this are not a search (they would
# match nearly everything).
FIND_WORDS_MIN = 3


class FoundDispatch(msgspec.Struct, frozen=True):
    """One dispatch a lookup found: enough to open its case and to tell several apart."""

    dispatch_id: str
    project_id: str
    action_type: str
    created_at_ms: int
    matched_by: str
    """What matched: `dispatch_id`, `idempotency_key`, `approval_request_id`, or `summary`
    (words of what was approved)."""
    state: str | None
    """The execution's state; None when it was never leased."""
    control_status: str | None
    closed_by: str | None
    action_summary: ActionSummary | None = None
    pruned_at_ms: int | None = None
    """When retention pruned it (its execution, or the whole dispatch); None while kept."""
    pruned_run_id: int | None = None
    pruned_export_digest: str | None = None
    """The sha256 of the export the pruning run wrote, if it wrote one."""


class CaseSort(StrEnum):
    """The order of an open list: oldest first, or grouped by a column (oldest first within)."""

    AGE = "age"
    ACTION_TYPE = "action_type"
    PROJECT_ID = "project_id"
    LAST_FINDING = "last_finding"


class CaseList(StrEnum):
    """The lists of open cases: the manual queue, and those still waiting for evidence."""

    MANUAL = "manual"
    WAITING = "waiting"


class CaseFilter(msgspec.Struct, frozen=True):
    """Filters of the case lists; None does not filter. `q` is an exact dispatch id,
    idempotency key or approval request id."""

    project_id: str | None = None
    action_type: str | None = None
    last_finding: FindingKind | None = None
    min_age_ms: int = 0
    q: str | None = None
    summary: str | None = None
    """Words of what was approved (its summary's title or facts), case-insensitive."""
    open_proposal: bool = False
    """Only cases whose two-person proposal waits for a second person."""
    owner: str | None = None
    """The executor that held the lease (its owner name: a host, a pod)."""
    last_reason: str | None = None
    """The last inspection's reason code."""


NO_FILTER = CaseFilter()


class CaseIdentity(msgspec.Struct, frozen=True):
    dispatch_id: str
    approval_request_id: str
    project_id: str
    action_type: str
    action_digest: str
    idempotency_key: str
    schema_version: int
    supersedes_dispatch_id: str | None
    superseded_by: tuple[str, ...]
    created_at_ms: int
    action_summary: ActionSummary | None = None


class CaseExecution(msgspec.Struct, frozen=True):
    state: ExecutionState
    owner: str | None
    attempt: int
    version: int
    started_at_ms: int | None
    lease_expires_at_ms: int
    finished_at_ms: int | None
    result_code: str | None
    recovery_required: bool


class CaseControl(msgspec.Struct, frozen=True):
    status: ControlStatus
    armed_at_ms: int
    finding_count: int
    finding_counts: Mapping[str, int]
    first_inspected_at_ms: int | None
    last_inspected_at_ms: int | None
    last_finding: FindingKind | None
    last_failure_class: ProviderFailure | None
    last_evidence_digest: str | None
    next_scan_at_ms: int
    manual_at_ms: int | None
    manual_reason: str | None
    closed_by: str | None
    closed_at_ms: int | None
    last_reason: str | None = None
    reason_counts: Mapping[str, int] = msgspec.field(default_factory=dict)
    escalates_at_ms: int | None = None
    """While armed: when the case goes to the manual queue if its evidence stays what it
    last was (at the first look from then on); None when that finding never escalates."""


class CaseResolution(msgspec.Struct, frozen=True):
    source: ResolutionSource
    outcome: ExecutionState
    decision: Decision | None
    reason_code: str | None
    actor_user_id: str | None
    evidence_digest: str | None
    resolved_at_ms: int
    mutation_id: str


class CaseAuthorization(msgspec.Struct, frozen=True):
    user_id: str
    permission: str
    amr: tuple[str, ...]
    auth_time_ms: int
    role: str


class PruneMark(msgspec.Struct, frozen=True):
    """Retention pruned part of a dispatch: when, by which run, and the sha256 of the export
    that run wrote (None when it wrote none)."""

    run_id: int
    pruned_at_ms: int
    export_digest: str | None = None


class Case(msgspec.Struct, frozen=True):
    """Everything known about one dispatch, read-only: what an operator decides on."""

    identity: CaseIdentity
    execution: CaseExecution | None
    control: CaseControl | None
    resolution: CaseResolution | None
    authorizations: tuple[CaseAuthorization, ...]
    db_now_ms: int
    proposal: OpenProposal | None = None
    late_evidence: tuple[LateEvidence, ...] = ()
    """Verified findings observed after a manual decision (docs/manual-resolution.md)."""
    proposals: tuple[ProposalRecord, ...] = ()
    """Every two-person proposal of the case, open or closed, oldest first."""
    two_person_decisions: tuple[Decision, ...] = ()
    """The decisions a two-person rule covers for this action type."""
    pruned: PruneMark | None = None
    """Retention pruned its execution (its identity and decision kept as audit facts)."""


class DecisionFilter(msgspec.Struct, frozen=True):
    """Filters of the decisions list; None does not filter. `q` is an exact dispatch id,
    idempotency key or approval request id (as in CaseFilter); `overridden_finding` is the
    finding the decision overrode; the time range [since_ms, until_ms) is when it was made."""

    project_id: str | None = None
    user_id: str | None = None
    since_ms: int = 0
    until_ms: int = 2**63 - 1
    action_type: str | None = None
    overridden_finding: FindingKind | None = None
    q: str | None = None


class DecisionRecord(msgspec.Struct, frozen=True):
    """One manual decision as the decisions list shows it."""

    dispatch_id: str
    project_id: str
    action_type: str
    idempotency_key: str
    approval_request_id: str
    decision: Decision
    outcome: ExecutionState
    actor_user_id: str
    confirmed_by: str | None
    reason_code: str
    amr: tuple[str, ...]
    auth_time_ms: int
    evidence_digest: str | None
    overridden_finding: FindingKind | None
    resolved_at_ms: int
    resolution_id: int
    contradicted: bool | None = None
    """Late evidence contradicted (True) or agreed with (False) it; None while none came."""
