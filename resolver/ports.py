"""The narrow boundary between the worker/API and storage: what they may ask of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from resolver.manual import ManualDecision, Principal

from resolver.domain import (
    ClaimedItem,
    Completion,
    DispatchSpec,
    ExecutionLease,
    ExecutionState,
    Finding,
)


@dataclass(frozen=True, slots=True)
class ItemOutcome:
    """A finding to commit for one claimed item, under that item's fences."""

    item: ClaimedItem
    finding: Finding
    retry_delay_ms: int
    mutation_id: str


@dataclass(frozen=True, slots=True)
class CommitReport:
    accepted: frozenset[str]
    rejected: frozenset[str]


BACKLOG_QUEUES: tuple[str, ...] = ("due", "waiting", "manual")


@dataclass(frozen=True, slots=True)
class BacklogSnapshot:
    """Open recovery work: the one read model of `/metrics` and `resolver status`.

    Counts are capped at `count_cap` per partial index (armed, manual), so a runaway backlog
    costs a bounded read; the ages are exact whatever the backlog.
    """

    db_now_ms: int
    count_cap: int
    dispatches: dict[tuple[str, str], int] = field(default_factory=dict)  # (queue, action_type)
    oldest_claimable_at_ms: int | None = None
    oldest_manual_at_ms: int | None = None

    def controls_by_status(self) -> dict[str, int]:
        """Open controls by stored status: armed (due or waiting) and manual."""
        queues = self.by_queue()
        return {"armed": queues["due"] + queues["waiting"], "manual": queues["manual"]}

    @property
    def capped(self) -> bool:
        """True when a count stopped at the cap: the real figures are then at least these."""
        return any(n >= self.count_cap for n in self.controls_by_status().values())

    def by_queue(self) -> dict[str, int]:
        """Every queue, zero when empty, so the series exist before the first backlog."""
        totals = dict.fromkeys(BACKLOG_QUEUES, 0)
        for (queue, _action_type), count in self.dispatches.items():
            totals[queue] = totals.get(queue, 0) + count
        return totals

    @property
    def oldest_claimable_age_seconds(self) -> float:
        return _age_seconds(self.db_now_ms, self.oldest_claimable_at_ms)

    @property
    def oldest_manual_age_seconds(self) -> float:
        return _age_seconds(self.db_now_ms, self.oldest_manual_at_ms)


def _age_seconds(now_ms: int, since_ms: int | None) -> float:
    return 0.0 if since_ms is None else max(0, now_ms - since_ms) / 1000.0


@dataclass(frozen=True, slots=True)
class ExecutionView:
    """An execution as stored, with the resolution (if any) that closed it."""

    dispatch_id: str
    state: ExecutionState
    owner: str
    version: int
    attempt: int
    lease_expires_at_ms: int
    started_at_ms: int | None
    finished_at_ms: int | None
    result_code: str | None
    completion_mutation_id: str | None
    evidence_digest: str | None
    resolution_source: str | None
    resolution_outcome: str | None
    resolution_evidence_digest: str | None
    db_now_ms: int

    @property
    def recovery_required(self) -> bool:
        return self.state is ExecutionState.EXECUTING and self.lease_expires_at_ms <= self.db_now_ms


@dataclass(frozen=True, slots=True)
class Grant:
    """The versions of a user's `approval.recover` binding and its project, as read."""

    project_version: int
    role_binding_version: int


@dataclass(frozen=True, slots=True)
class ManualContext:
    project_id: str
    state: ExecutionState
    version: int
    lease_expires_at_ms: int
    control_status: str | None
    resolution_mutation_id: str | None
    resolution_source: str | None
    resolution_outcome: str | None
    resolution_actor: str | None
    resolution_reason_code: str | None
    resolution_evidence_digest: str | None
    resolution_expected_version: int | None
    mutation_dispatch_id: str | None
    db_now_ms: int


@dataclass(frozen=True, slots=True)
class ManualQueueItem:
    dispatch_id: str
    project_id: str
    action_type: str
    last_finding: str | None
    finding_count: int
    manual_at_ms: int
    execution_version: int
    started_at_ms: int
    attempt: int


class RecoveryStore(Protocol):
    """What the reconciler and worker need from storage."""

    def claim_due_page(
        self, owner: str, page_size: int, lease_ms: int, now_ms: int | None = None
    ) -> list[ClaimedItem]: ...

    def commit_outcomes(
        self, outcomes: Sequence[ItemOutcome], now_ms: int | None = None
    ) -> CommitReport: ...

    def release_recovery_leases(
        self, items: Sequence[ClaimedItem], now_ms: int | None = None
    ) -> int: ...


class ExecutionStore(Protocol):
    """What the executor API needs from storage."""

    def insert_dispatch(self, spec: DispatchSpec) -> bool: ...

    def get_dispatch(self, dispatch_id: str, idempotency_key: str) -> DispatchSpec | None: ...

    def lease_execution(
        self, dispatch_id: str, owner: str, lease_ms: int, now_ms: int | None = None
    ) -> ExecutionLease | None: ...

    def start_execution(
        self, lease: ExecutionLease, lease_ms: int, now_ms: int | None = None
    ) -> ExecutionLease | None: ...

    def renew_execution(
        self, lease: ExecutionLease, lease_ms: int, now_ms: int | None = None
    ) -> ExecutionLease | None: ...

    def complete_execution(
        self, lease: ExecutionLease, completion: Completion, now_ms: int | None = None
    ) -> bool: ...

    def get_execution(
        self, dispatch_id: str, now_ms: int | None = None
    ) -> ExecutionView | None: ...


class ManualStore(Protocol):
    """What the manual-resolution service needs from storage."""

    def find_grant(self, project_id: str, user_id: str) -> Grant | None: ...

    def manual_context(
        self, dispatch_id: str, mutation_id: str, now_ms: int | None = None
    ) -> ManualContext | None: ...

    def commit_manual(
        self,
        principal: Principal,
        decision: ManualDecision,
        project_id: str,
        grant: Grant,
        *,
        max_auth_age_ms: int,
        clock_leeway_ms: int,
        now_ms: int | None = None,
    ) -> bool: ...

    def manual_queue(
        self, user_id: str, limit: int, after: tuple[int, str] | None = None
    ) -> list[ManualQueueItem]: ...


class BacklogReader(Protocol):
    """What the metrics and readiness endpoints need from storage: bounded reads only."""

    def backlog_snapshot(self, count_cap: int, now_ms: int | None = None) -> BacklogSnapshot: ...

    def ping(self) -> None: ...
