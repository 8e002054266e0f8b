"""The narrow boundary between the worker/API and storage: what they may ask of it.

Protocols only: the values they take and return live in `resolver.core.domain`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, Self

from resolver.core.domain import (
    AuditLink,
    Authority,
    BacklogSnapshot,
    Case,
    CaseFilter,
    CaseList,
    CaseSort,
    ClaimedItem,
    CommitReport,
    Completion,
    DecisionFilter,
    DecisionLimits,
    DecisionRecord,
    DispatchSpec,
    DispatchStatus,
    ExecutionLease,
    ExecutionView,
    FoundDispatch,
    Grant,
    HistoryEntry,
    ItemOutcome,
    LateObservation,
    LateRecord,
    LateWatch,
    ManualCommitAnswer,
    ManualContext,
    ManualDecision,
    ManualQueueItem,
    OpenProposal,
    OutcomeRecord,
    ProposalClose,
    ProposalCloseAnswer,
    PruneRunRecord,
    SignedFact,
)


class ClockOverride(Protocol):
    """A store whose calls can run at another time than the database's."""

    def at(self, now_ms: int) -> Self:
        """This store with its calls at `now_ms` in place of the database clock: set once
        for the calls it makes (tests and tools, as the table owner; a pod role's override is
        refused, and production never sets one)."""
        ...


class RecoveryStore(ClockOverride, Protocol):
    """What the reconciler and worker need from storage."""

    def claim_due_page(self, owner: str, page_size: int, lease_ms: int) -> list[ClaimedItem]: ...

    def commit_outcomes(self, outcomes: Sequence[ItemOutcome]) -> CommitReport: ...

    def release_recovery_leases(self, items: Sequence[ClaimedItem]) -> int: ...


class ExecutionStore(ClockOverride, Protocol):
    """What the executor API needs from storage: one call per protocol function.

    Every transition raises its typed refusal (`FenceConflict`, `LeaseLost`, `NotLeasable`,
    `NotFound`, `InvalidDispatch`) decided inside the database (docs/executor-protocol.md).
    """

    def create_dispatch(self, spec: DispatchSpec) -> bool:
        """True if recorded now, False for an exact re-create."""
        ...

    def lease_execution(self, dispatch_id: str, owner: str, lease_ms: int) -> ExecutionLease: ...

    def start_execution(self, lease: ExecutionLease, lease_ms: int) -> ExecutionLease: ...

    def renew_execution(self, lease: ExecutionLease, lease_ms: int) -> ExecutionLease: ...

    def complete_execution(self, lease: ExecutionLease, completion: Completion) -> bool:
        """True if this call committed the terminal state, False for an exact replay."""
        ...

    def get_execution(self, dispatch_id: str) -> ExecutionView | None: ...


class ManualStore(ClockOverride, Protocol):
    """What the manual-resolution service needs from storage."""

    def find_grant(self, project_id: str, user_id: str) -> Grant | None: ...

    def manual_context(self, dispatch_id: str, mutation_id: str) -> ManualContext | None: ...

    def commit_manual(
        self,
        authority: Authority,
        decision: ManualDecision,
        fact: SignedFact,
        limits: DecisionLimits,
    ) -> ManualCommitAnswer | None:
        """What the fenced commit did, or None when a fence held and nothing was written.
        Raises FactConsumed (the fact was recorded before, or verified outside the clock
        leeway) or ActRefused (its act does not fit the function or the case)."""
        ...

    def close_proposal(
        self,
        authority: Authority,
        close: ProposalClose,
        fact: SignedFact,
        limits: DecisionLimits,
    ) -> ProposalCloseAnswer | None:
        """The proposal close's answer, or None when the grant fence held. Raises
        FactConsumed or ActRefused like the commit."""
        ...

    def open_proposal(self, dispatch_id: str) -> OpenProposal | None: ...


class CaseReader(ClockOverride, Protocol):
    """What the read routes need: cases, lists and decisions, scoped to what the user may read
    (`approval.recover` or `approval.recover.read` on the project)."""

    def get_case(self, user_id: str, dispatch_id: str) -> Case | None: ...

    def list_cases(
        self,
        user_id: str,
        which: CaseList,
        limit: int,
        after: tuple[int, str] | None = None,
        filters: CaseFilter = ...,
        sort: CaseSort = ...,
        after_key: str = "",
    ) -> list[ManualQueueItem]: ...

    def count_cases(
        self,
        user_id: str,
        which: CaseList,
        filters: CaseFilter,
        count_cap: int,
    ) -> int: ...

    def list_decisions(
        self,
        user_id: str,
        filters: DecisionFilter,
        limit: int,
        before: tuple[int, int] | None = None,
    ) -> list[DecisionRecord]: ...

    def count_decisions(self, user_id: str, filters: DecisionFilter, count_cap: int) -> int: ...

    def find_dispatches(self, user_id: str, q: str) -> list[FoundDispatch]: ...

    def find_by_words(self, user_id: str, words: str) -> list[FoundDispatch]: ...

    def case_counts(
        self,
        user_id: str,
        which: CaseList,
        filters: CaseFilter,
        count_cap: int,
    ) -> dict[str, dict[str, int]]: ...


class BacklogReader(ClockOverride, Protocol):
    """What the metrics and readiness endpoints need from storage: bounded reads only."""

    def backlog_snapshot(self, count_cap: int) -> BacklogSnapshot: ...

    def ping(self) -> None: ...


class HumanStore(ManualStore, CaseReader, Protocol):
    """What the manual-resolution API needs: decisions and the read routes."""


class AuditReader(Protocol):
    """What `resolver audit verify` reads: the chain page by page, its head, stray decisions."""

    def audit_links(self, after_seq: int, limit: int) -> list[AuditLink]: ...

    def audit_head(self) -> tuple[int, str] | None: ...

    def audit_unlinked(self, acts_since_ms: int | None = None) -> tuple[str, str] | None: ...

    def audit_export_recorded(self, export_digest: str) -> bool: ...

    def audit_prune_run(self, export_digest: str) -> PruneRunRecord | None: ...


class LateEvidenceStore(ClockOverride, Protocol):
    """What the late-evidence watcher needs: claim due watches, record what was found, close
    the watches whose window elapsed. Every call is one statement on the database clock."""

    def claim_late_watches(
        self, owner: str, limit: int, lease_ms: int, window_ms: int
    ) -> list[LateWatch]: ...

    def record_late_observations(
        self,
        owner: str,
        observations: Sequence[LateObservation],
        window_ms: int,
    ) -> list[LateRecord]: ...

    def expire_late_watches(self, window_ms: int, limit: int) -> int: ...


class OutcomeReader(Protocol):
    """What a runtime reads after the resolver (the outcome feed, docs/outcomes.md): records
    after a cursor, consumers' stored cursors, one dispatch's status and history. Every call is
    one statement through the feed's SQL functions."""

    def outcomes_after(
        self, cursor: str | None, limit: int, project_id: str | None = None
    ) -> list[OutcomeRecord]: ...

    def outcome_cursor_now(self) -> str: ...

    def consumer_cursor(self, consumer: str) -> str | None: ...

    def save_consumer_cursor(self, consumer: str, cursor: str) -> str: ...

    def drop_consumer(self, consumer: str) -> bool: ...

    def dispatch_status(self, dispatch_id: str) -> DispatchStatus | None: ...

    def dispatch_history(self, dispatch_id: str) -> list[HistoryEntry]: ...
