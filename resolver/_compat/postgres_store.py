"""`PostgresStore`, the one store of the previous release, deprecated (`resolver._compat`).

Storage is split by port now (`resolver.db.store`): one `PostgresHandle` and a store per port
of `resolver.core.ports`; an executor uses `PostgresExecutionStore`. This thin aggregate
keeps the old signatures (`now_ms=` on each call included) over those stores, and warns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from resolver._compat import POSTGRES_STORE, deprecated
from resolver.core.domain import (
    NO_FILTER,
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
    ExecutionLease,
    ExecutionView,
    FoundDispatch,
    Grant,
    ItemOutcome,
    LateObservation,
    LateRecord,
    LateWatch,
    ManualContext,
    ManualDecision,
    ManualQueueItem,
    OpenProposal,
    Principal,
    ProposalAction,
    ProposalClose,
    PruneRunRecord,
    SignedFact,
)
from resolver.db.connect import Pooler
from resolver.db.store import PostgresHandle, Stores
from resolver.retention.pruning import PruneSummary

REPLACEMENT = (
    "build one resolver.executor.PostgresHandle and hand each component its port's store "
    "(an executor: resolver.executor.PostgresExecutionStore); a clock override is "
    "store.at(now_ms), not now_ms= on each call"
)


class PostgresStore:
    """Deprecated: every port's store behind the previous release's one class."""

    def __init__(
        self,
        database_url: str,
        *,
        min_connections: int = 1,
        max_connections: int = 4,
        connect_timeout_seconds: float = 5.0,
        statement_timeout_ms: int = 10_000,
        lock_timeout_ms: int = 2_000,
        application_name: str = "approved-action-resolver",
        pooler: Pooler = Pooler.NONE,
    ) -> None:
        deprecated(POSTGRES_STORE, REPLACEMENT, stacklevel=2)
        handle = PostgresHandle(
            database_url,
            min_connections=min_connections,
            max_connections=max_connections,
            connect_timeout_seconds=connect_timeout_seconds,
            statement_timeout_ms=statement_timeout_ms,
            lock_timeout_ms=lock_timeout_ms,
            application_name=application_name,
            pooler=pooler,
        )
        self._stores = Stores.over(handle)

    def at(self, now_ms: int) -> Self:
        """This store with its calls at `now_ms` (the new stores' `at`)."""
        view = object.__new__(type(self))
        view._stores = self._stores.at(now_ms)
        return view

    def _on(self, now_ms: int | None) -> Stores:
        return self._stores if now_ms is None else self._stores.at(now_ms)

    def open(self) -> None:
        self._stores.handle.open()

    def close(self) -> None:
        self._stores.handle.close()

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ping(self) -> None:
        self._stores.backlog.ping()

    def create_dispatch(self, spec: DispatchSpec) -> bool:
        return self._stores.execution.create_dispatch(spec)

    def lease_execution(
        self, dispatch_id: str, owner: str, lease_ms: int, now_ms: int | None = None
    ) -> ExecutionLease:
        return self._on(now_ms).execution.lease_execution(dispatch_id, owner, lease_ms)

    def start_execution(
        self, lease: ExecutionLease, lease_ms: int, now_ms: int | None = None
    ) -> ExecutionLease:
        return self._on(now_ms).execution.start_execution(lease, lease_ms)

    def renew_execution(
        self, lease: ExecutionLease, lease_ms: int, now_ms: int | None = None
    ) -> ExecutionLease:
        return self._on(now_ms).execution.renew_execution(lease, lease_ms)

    def complete_execution(
        self, lease: ExecutionLease, completion: Completion, now_ms: int | None = None
    ) -> bool:
        return self._on(now_ms).execution.complete_execution(lease, completion)

    def get_execution(self, dispatch_id: str, now_ms: int | None = None) -> ExecutionView | None:
        return self._on(now_ms).execution.get_execution(dispatch_id)

    def claim_due_page(
        self, owner: str, page_size: int, lease_ms: int, now_ms: int | None = None
    ) -> list[ClaimedItem]:
        return self._on(now_ms).recovery.claim_due_page(owner, page_size, lease_ms)

    def commit_outcomes(
        self, outcomes: Sequence[ItemOutcome], now_ms: int | None = None
    ) -> CommitReport:
        return self._on(now_ms).recovery.commit_outcomes(outcomes)

    def release_recovery_leases(
        self, items: Sequence[ClaimedItem], now_ms: int | None = None
    ) -> int:
        return self._on(now_ms).recovery.release_recovery_leases(items)

    def backlog_snapshot(self, count_cap: int, now_ms: int | None = None) -> BacklogSnapshot:
        return self._on(now_ms).backlog.backlog_snapshot(count_cap)

    def prune_summary(self) -> PruneSummary:
        return self._stores.backlog.prune_summary()

    def find_grant(self, project_id: str, user_id: str) -> Grant | None:
        return self._stores.human.find_grant(project_id, user_id)

    def manual_context(
        self, dispatch_id: str, mutation_id: str, now_ms: int | None = None
    ) -> ManualContext | None:
        return self._on(now_ms).human.manual_context(dispatch_id, mutation_id)

    def commit_manual(
        self,
        principal: Principal,
        decision: ManualDecision,
        project_id: str,
        grant: Grant,
        fact: SignedFact,
        *,
        max_auth_age_ms: int,
        proposal_ttl_ms: int,
        now_ms: int | None = None,
    ) -> str | None:
        return self._on(now_ms).human.commit_manual(
            Authority(principal, project_id, grant),
            decision,
            fact,
            DecisionLimits(max_auth_age_ms, proposal_ttl_ms),
        )

    def close_proposal(
        self,
        principal: Principal,
        dispatch_id: str,
        action: ProposalAction,
        mutation_id: str,
        reason_code: str,
        project_id: str,
        grant: Grant,
        fact: SignedFact,
        *,
        max_auth_age_ms: int,
        now_ms: int | None = None,
    ) -> str | None:
        # The close takes no proposal time to live: the one it holds is never read.
        return self._on(now_ms).human.close_proposal(
            Authority(principal, project_id, grant),
            ProposalClose(dispatch_id, action, mutation_id, reason_code),
            fact,
            DecisionLimits(max_auth_age_ms, proposal_ttl_ms=1000),
        )

    def open_proposal(self, dispatch_id: str, now_ms: int | None = None) -> OpenProposal | None:
        return self._on(now_ms).human.open_proposal(dispatch_id)

    def list_cases(
        self,
        user_id: str,
        which: CaseList,
        limit: int,
        after: tuple[int, str] | None = None,
        filters: CaseFilter = NO_FILTER,
        now_ms: int | None = None,
        sort: CaseSort = CaseSort.AGE,
        after_key: str = "",
    ) -> list[ManualQueueItem]:
        return self._on(now_ms).human.list_cases(
            user_id, which, limit, after, filters, sort=sort, after_key=after_key
        )

    def count_cases(
        self,
        user_id: str,
        which: CaseList,
        filters: CaseFilter,
        count_cap: int,
        now_ms: int | None = None,
    ) -> int:
        return self._on(now_ms).human.count_cases(user_id, which, filters, count_cap)

    def case_counts(
        self,
        user_id: str,
        which: CaseList,
        filters: CaseFilter,
        count_cap: int,
        now_ms: int | None = None,
    ) -> dict[str, dict[str, int]]:
        return self._on(now_ms).human.case_counts(user_id, which, filters, count_cap)

    def get_case(self, user_id: str, dispatch_id: str, now_ms: int | None = None) -> Case | None:
        return self._on(now_ms).human.get_case(user_id, dispatch_id)

    def find_dispatches(self, user_id: str, q: str) -> list[FoundDispatch]:
        return self._stores.human.find_dispatches(user_id, q)

    def audit_links(self, after_seq: int, limit: int) -> list[AuditLink]:
        return self._stores.audit.audit_links(after_seq, limit)

    def audit_head(self) -> tuple[int, str] | None:
        return self._stores.audit.audit_head()

    def audit_export_recorded(self, export_digest: str) -> bool:
        return self._stores.audit.audit_export_recorded(export_digest)

    def audit_prune_run(self, export_digest: str) -> PruneRunRecord | None:
        return self._stores.audit.audit_prune_run(export_digest)

    def audit_unlinked(self) -> tuple[str, str] | None:
        return self._stores.audit.audit_unlinked()

    def claim_late_watches(
        self, owner: str, limit: int, lease_ms: int, window_ms: int, now_ms: int | None = None
    ) -> list[LateWatch]:
        return self._on(now_ms).late_evidence.claim_late_watches(owner, limit, lease_ms, window_ms)

    def record_late_observations(
        self,
        owner: str,
        observations: Sequence[LateObservation],
        window_ms: int,
        now_ms: int | None = None,
    ) -> list[LateRecord]:
        return self._on(now_ms).late_evidence.record_late_observations(
            owner, observations, window_ms
        )

    def expire_late_watches(self, window_ms: int, limit: int, now_ms: int | None = None) -> int:
        return self._on(now_ms).late_evidence.expire_late_watches(window_ms, limit)

    def list_decisions(
        self,
        user_id: str,
        filters: DecisionFilter,
        limit: int,
        before: tuple[int, int] | None = None,
    ) -> list[DecisionRecord]:
        return self._stores.human.list_decisions(user_id, filters, limit, before)

    def count_decisions(self, user_id: str, filters: DecisionFilter, count_cap: int) -> int:
        return self._stores.human.count_decisions(user_id, filters, count_cap)
