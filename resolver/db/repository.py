"""PostgreSQL implementation of the storage ports; driver errors stop at this boundary."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import StrEnum
from typing import Any

import msgspec
import psycopg
import psycopg_pool
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb

from resolver.core.domain import (
    ESCALATION_REASON,
    NO_FILTER,
    ActionSummary,
    AuditLink,
    BacklogSnapshot,
    Case,
    CaseAuthorization,
    CaseControl,
    CaseExecution,
    CaseFilter,
    CaseIdentity,
    CaseList,
    CaseResolution,
    CaseSort,
    ClaimedItem,
    CommitReport,
    Completion,
    ControlStatus,
    Decision,
    DecisionFilter,
    DecisionRecord,
    DispatchIdentity,
    DispatchSpec,
    ExecutionLease,
    ExecutionState,
    ExecutionView,
    Finding,
    FindingKind,
    FoundDispatch,
    Grant,
    ItemOutcome,
    LateEvidence,
    LateObservation,
    LateRecord,
    LateWatch,
    ManualContext,
    ManualDecision,
    ManualQueueItem,
    OpenProposal,
    Principal,
    ProposalAction,
    ProposalRecord,
    ProviderFailure,
    PruneRunRecord,
    ResolutionSource,
    SignedFact,
)
from resolver.core.errors import (
    ConstraintViolation,
)
from resolver.db.connect import Pooler, Profile, build_pool, transaction
from resolver.db.dsn import redact
from resolver.db.errors import storage_error
from resolver.db.protocol import protocol_error
from resolver.db.retention import prune_summary
from resolver.db.statements import claim_statement, statement
from resolver.retention.pruning import PruneSummary

Row = dict[str, Any]


class PostgresStore:
    """One connection pool; every method is one short transaction."""

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
        self._url = redact(database_url)
        self._profile = Profile(
            application_name=application_name,
            connect_timeout_seconds=connect_timeout_seconds,
            # A row lock held elsewhere (an operator's open transaction) fails the call fast
            # and typed (LockTimeout) instead of holding a pool connection until the
            # statement timeout.
            # No parallel workers: every statement here is an index walk bounded by a page or
            # a cap (the console's counts stop at theirs), and a worker's start costs more
            # than the walk; the planner still picks one for a count at the cap.
            settings={
                "statement_timeout": statement_timeout_ms,
                "lock_timeout": lock_timeout_ms,
                "max_parallel_workers_per_gather": 0,
            },
            pooler=pooler,
        )
        # Behind a transaction pooler a lone statement still needs its transaction: the
        # settings are `SET LOCAL` in it.
        self._single_statements = not self._profile.per_transaction
        self._pool = build_pool(
            database_url,
            self._profile,
            min_size=min_connections,
            max_size=max_connections,
            # Transactions are explicit (`_transaction`); a lone statement is its own.
            autocommit=True,
        )

    def open(self) -> None:
        # wait=False: a dead database must not block start-up; the first call reports it.
        self._pool.open(wait=False)

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> PostgresStore:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -------------------------------------------------------------------------

    @contextmanager
    def _transaction(self, *, single_statement: bool = False) -> Iterator[psycopg.Connection[Row]]:
        """One transaction. A single statement needs no BEGIN/COMMIT round trips: on these
        autocommit connections it is a transaction of its own."""
        try:
            with self._pool.connection() as conn:
                if single_statement and self._single_statements:
                    yield conn
                else:
                    with transaction(conn, self._profile):
                        yield conn
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            typed = storage_error(exc, self._url)
            if typed is None:
                raise
            raise typed from exc

    def _all(self, name: str, params: dict[str, Any]) -> list[Row]:
        with self._transaction() as conn:
            return conn.execute(statement(name), params).fetchall()

    def _one(self, name: str, params: dict[str, Any]) -> Row | None:
        rows = self._all(name, params)
        return rows[0] if rows else None

    def _filtered(self, name: str, params: dict[str, Any]) -> list[Row]:
        """A statement with optional filters (`%(x)s IS NULL OR ...`) and a constant sort,
        never prepared: its plan is made for these values, where the folded conditions leave
        the list's own index walk. A prepared statement's generic plan keeps every branch."""
        with self._transaction() as conn:
            return conn.execute(statement(name), params, prepare=False).fetchall()

    def ping(self) -> None:
        self._all("ping", {})

    # -- executor API ---------------------------------------------------------------------

    def create_dispatch(self, spec: DispatchSpec) -> bool:
        params = {
            "dispatch_id": spec.dispatch_id,
            "approval_request_id": spec.approval_request_id,
            "project_id": spec.project_id,
            "action_type": spec.action_type,
            "action_digest": spec.action_digest,
            "idempotency_key": spec.idempotency_key,
            "schema_version": spec.schema_version,
            "supersedes_dispatch_id": spec.supersedes_dispatch_id,
            "action_summary": spec.action_summary.json() if spec.action_summary else None,
        }
        row = self._one("dispatch_create", params)
        assert row is not None  # the function answers one row or raises
        return bool(row["created"])

    def lease_execution(
        self, dispatch_id: str, owner: str, lease_ms: int, now_ms: int | None = None
    ) -> ExecutionLease:
        params = {"dispatch_id": dispatch_id, "owner": owner, "lease_ms": lease_ms}
        return _lease(self._one("execution_lease", {**params, "now_ms": now_ms}))

    def start_execution(
        self, lease: ExecutionLease, lease_ms: int, now_ms: int | None = None
    ) -> ExecutionLease:
        return _lease(self._one("execution_start", _fence(lease, lease_ms=lease_ms, now_ms=now_ms)))

    def renew_execution(
        self, lease: ExecutionLease, lease_ms: int, now_ms: int | None = None
    ) -> ExecutionLease:
        return _lease(self._one("execution_renew", _fence(lease, lease_ms=lease_ms, now_ms=now_ms)))

    def complete_execution(
        self, lease: ExecutionLease, completion: Completion, now_ms: int | None = None
    ) -> bool:
        params = _fence(
            lease,
            now_ms=now_ms,
            outcome=completion.outcome.value,
            result_code=completion.result_code,
            mutation_id=completion.mutation_id,
            evidence_digest=completion.evidence_digest,
        )
        row = self._one("execution_complete", params)
        assert row is not None  # the function answers one row or raises
        return bool(row["result"] == "committed")

    def get_execution(self, dispatch_id: str, now_ms: int | None = None) -> ExecutionView | None:
        row = self._one("execution_get", {"dispatch_id": dispatch_id, "now_ms": now_ms})
        if row is None:
            return None
        row.pop("token")
        _enums(row, state=ExecutionState, resolution_source=ResolutionSource)
        _enums(row, resolution_outcome=ExecutionState)
        return ExecutionView(**row)

    # -- recovery -------------------------------------------------------------------------

    def claim_due_page(
        self, owner: str, page_size: int, lease_ms: int, now_ms: int | None = None
    ) -> list[ClaimedItem]:
        params = {"owner": owner, "lease_ms": lease_ms, "now_ms": now_ms}
        # One statement, one round trip; it commits asynchronously (see queries.sql).
        with self._transaction(single_statement=True) as conn:
            cur = conn.cursor(row_factory=tuple_row)
            rows = cur.execute(claim_statement(page_size), params).fetchall()
        return [_claimed(*row) for row in rows]

    def commit_outcomes(
        self, outcomes: Sequence[ItemOutcome], now_ms: int | None = None
    ) -> CommitReport:
        if not outcomes:
            return CommitReport({}, frozenset())
        params = {"items": page_items(outcomes), "now_ms": now_ms}
        # One statement: the function locks and writes in one transaction of its own.
        with self._transaction(single_statement=True) as conn:
            rows = conn.execute(statement("commit_automatic"), params).fetchall()
        routed = {row["dispatch_id"]: ControlStatus(row["status"]) for row in rows}
        return CommitReport(
            routed,
            frozenset(o.item.identity.dispatch_id for o in outcomes) - routed.keys(),
            escalated=frozenset(
                row["dispatch_id"] for row in rows if row["manual_reason"] == ESCALATION_REASON
            ),
        )

    def release_recovery_leases(
        self, items: Sequence[ClaimedItem], now_ms: int | None = None
    ) -> int:
        if not items:
            return 0
        params = {
            "dispatch_ids": [i.identity.dispatch_id for i in items],
            "recovery_tokens": [i.recovery_token for i in items],
            "recovery_versions": [i.recovery_version for i in items],
            "now_ms": now_ms,
        }
        return len(self._all("recovery_release_leases", params))

    def backlog_snapshot(self, count_cap: int, now_ms: int | None = None) -> BacklogSnapshot:
        """The backlog read model of `/metrics` and `resolver status`: oldest ages by two
        index probes, counts by a capped index scan, in one transaction."""
        with self._transaction() as conn:
            oldest = conn.execute(statement("backlog_oldest"), {"now_ms": now_ms}).fetchone()
            counts = conn.execute(
                statement("backlog_counts"), {"now_ms": now_ms, "count_cap": count_cap}
            ).fetchall()
            proposals = conn.execute(
                statement("backlog_proposals"), {"now_ms": now_ms, "count_cap": count_cap}
            ).fetchone()
        assert oldest is not None and proposals is not None
        return BacklogSnapshot(
            db_now_ms=oldest["db_now_ms"],
            count_cap=count_cap,
            dispatches={(r["queue"], r["action_type"]): r["dispatches"] for r in counts},
            oldest_claimable_at_ms=oldest["oldest_claimable_at_ms"],
            oldest_manual_at_ms=oldest["oldest_manual_at_ms"],
            open_proposals=proposals["open_proposals"],
            oldest_open_proposal_at_ms=proposals["oldest_open_proposal_at_ms"],
        )

    def prune_summary(self) -> PruneSummary:
        """Every recorded `resolver prune` run, for /metrics (one small aggregate)."""
        with self._transaction(single_statement=True) as conn:
            return prune_summary(conn)

    # -- manual resolution ----------------------------------------------------------------

    def find_grant(self, project_id: str, user_id: str) -> Grant | None:
        row = self._one("manual_grant_get", {"project_id": project_id, "user_id": user_id})
        return None if row is None else Grant(**row)

    def manual_context(
        self, dispatch_id: str, mutation_id: str, now_ms: int | None = None
    ) -> ManualContext | None:
        params = {"dispatch_id": dispatch_id, "mutation_id": mutation_id, "now_ms": now_ms}
        row = self._one("manual_context_get", params)
        if row is None:
            return None
        _enums(row, state=ExecutionState, control_status=ControlStatus)
        _enums(row, resolution_source=ResolutionSource, resolution_outcome=ExecutionState)
        return ManualContext(**row)

    def commit_manual(
        self,
        principal: Principal,
        decision: ManualDecision,
        project_id: str,
        grant: Grant,
        fact: SignedFact,
        *,
        max_auth_age_ms: int,
        clock_leeway_ms: int,
        proposal_ttl_ms: int,
        now_ms: int | None = None,
    ) -> str | None:
        params = {
            **_authorization(principal, project_id, grant, max_auth_age_ms, clock_leeway_ms),
            "issuer": fact.issuer,
            "token_kid": fact.token_kid,
            "signing_kid": fact.signing_kid,
            "signature": fact.signature,
            "dispatch_id": decision.dispatch_id,
            "outcome": decision.decision.terminal_state.value,
            "mutation_id": decision.mutation_id,
            "expected_execution_version": decision.expected_execution_version,
            "reason_code": decision.reason_code,
            "evidence_digest": decision.evidence_digest,
            "proposal_ttl_ms": proposal_ttl_ms,
            "now_ms": now_ms,
        }
        try:
            row = self._one("manual_commit", params)
        except ConstraintViolation as exc:
            # A reused mutation id: nothing was written; the service explains it.
            if exc.constraint == "uq_approved_action_recovery_resolutions_mutation_id":
                return None
            raise
        return None if row is None else str(row["result"])

    def close_proposal(
        self,
        principal: Principal,
        dispatch_id: str,
        action: ProposalAction,
        mutation_id: str,
        reason_code: str,
        project_id: str,
        grant: Grant,
        *,
        max_auth_age_ms: int,
        clock_leeway_ms: int,
        now_ms: int | None = None,
    ) -> str | None:
        params = {
            **_authorization(principal, project_id, grant, max_auth_age_ms, clock_leeway_ms),
            "dispatch_id": dispatch_id,
            "action": action.value,
            "mutation_id": mutation_id,
            "reason_code": reason_code,
            "now_ms": now_ms,
        }
        row = self._one("proposal_close", params)
        return None if row is None else str(row["result"])

    def open_proposal(self, dispatch_id: str, now_ms: int | None = None) -> OpenProposal | None:
        row = self._one("proposal_open_get", {"dispatch_id": dispatch_id, "now_ms": now_ms})
        return None if row is None else _proposal(row)

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
        """One keyset page of the manual queue or the waiting list: oldest first, or grouped
        by `sort` first (then oldest first within each value); `after_key` is the sort value
        of the last row of the page before."""
        after_ms, after_id = after if after is not None else (-1, "")
        params = {
            **_case_filter(user_id, filters, now_ms),
            "limit": limit,
            "after_since_ms": after_ms,
            "after_dispatch_id": after_id,
            "sort": sort.value,
            "after_key": after_key,
        }
        name = "manual_queue_page" if which is CaseList.MANUAL else "waiting_page"
        return [_queue_item(row) for row in self._filtered(name, params)]

    def count_cases(
        self,
        user_id: str,
        which: CaseList,
        filters: CaseFilter,
        count_cap: int,
        now_ms: int | None = None,
    ) -> int:
        """How many open cases match, counted up to `count_cap`."""
        params = {**_case_filter(user_id, filters, now_ms), "count_cap": count_cap}
        name = "manual_queue_total" if which is CaseList.MANUAL else "waiting_total"
        (row,) = self._filtered(name, params)  # an aggregate answers one row
        return int(row["total"])

    def case_counts(
        self,
        user_id: str,
        which: CaseList,
        filters: CaseFilter,
        count_cap: int,
        now_ms: int | None = None,
    ) -> dict[str, dict[str, int]]:
        """The matching open cases counted by action type, reason, project and owner."""
        params = {**_case_filter(user_id, filters, now_ms), "count_cap": count_cap}
        name = "manual_queue_counts" if which is CaseList.MANUAL else "waiting_counts"
        counts: dict[str, dict[str, int]] = {
            "action_type": {},
            "reason": {},
            "project_id": {},
            "owner": {},
        }
        for row in self._filtered(name, params):
            counts[row["dimension"]][row["value"]] = int(row["cases"])
        return counts

    def get_case(self, user_id: str, dispatch_id: str, now_ms: int | None = None) -> Case | None:
        """The whole case, or None when it is unknown or the user may not read its project."""
        params = {"user_id": user_id, "dispatch_id": dispatch_id, "now_ms": now_ms}
        with self._transaction() as conn:
            row = conn.execute(statement("case_get"), params).fetchone()
            if row is None:
                return None
            # The case row says which of these exist: a settled case mostly has none, and
            # each read skipped is a round trip saved.
            mutation_id = row["resolution_mutation_id"]
            authorizations = (
                conn.execute(
                    statement("case_authorizations"), {"mutation_id": mutation_id}
                ).fetchall()
                if row["has_authorizations"]
                else []
            )
            late_rows = (
                conn.execute(
                    statement("case_late_evidence"), {"dispatch_id": dispatch_id}
                ).fetchall()
                if row["has_late_evidence"]
                else []
            )
            proposal_rows = (
                conn.execute(statement("case_proposals"), {"dispatch_id": dispatch_id}).fetchall()
                if row["has_proposals"]
                else []
            )
        return msgspec.structs.replace(
            _case(row, authorizations, late_rows),
            two_person_decisions=_two_person(row["two_person_outcomes"]),
            proposals=tuple(_proposal_record(p) for p in proposal_rows),
        )

    def find_dispatches(self, user_id: str, q: str) -> list[FoundDispatch]:
        """Every readable dispatch whose dispatch id, idempotency key or approval id is `q`."""
        rows = self._all("dispatch_find", {"user_id": user_id, "q": q})
        return [
            FoundDispatch(
                **{**row, "action_summary": ActionSummary.from_stored(row["action_summary"])}
            )
            for row in rows
        ]

    def audit_links(self, after_seq: int, limit: int) -> list[AuditLink]:
        """One page of the audit chain in order, each link with its facts' content."""
        rows = self._all("audit_links_page", {"after_seq": after_seq, "limit": limit})
        return [AuditLink(**row) for row in rows]

    def audit_head(self) -> tuple[int, str] | None:
        """The head row, or None when it is gone (the verifier names that `head`)."""
        row = self._one("audit_head", {})
        return None if row is None else (int(row["seq"]), str(row["hash"]))

    def audit_export_recorded(self, export_digest: str) -> bool:
        """Whether a prune run recorded an export with this sha256."""
        return self.audit_prune_run(export_digest) is not None

    def audit_prune_run(self, export_digest: str) -> PruneRunRecord | None:
        """The prune run that recorded an export with this sha256, with its audit range."""
        row = self._one("audit_export_recorded", {"export_digest": export_digest})
        return None if row is None else PruneRunRecord(**row)

    def audit_unlinked(self) -> tuple[str, str] | None:
        """The first manual resolution since the chain began without a link, if any."""
        row = self._one("audit_unlinked", {})
        return None if row is None else (row["mutation_id"], row["dispatch_id"])

    # -- late evidence after a manual decision --------------------------------------------

    def claim_late_watches(
        self, owner: str, limit: int, lease_ms: int, window_ms: int, now_ms: int | None = None
    ) -> list[LateWatch]:
        """Due open watches inside the window, under a fresh token (SKIP LOCKED)."""
        params = {
            "owner": owner,
            "limit": limit,
            "lease_ms": lease_ms,
            "window_ms": window_ms,
            "now_ms": now_ms,
        }
        return [_late_watch(row) for row in self._all("late_watch_claim", params)]

    def record_late_observations(
        self,
        owner: str,
        observations: Sequence[LateObservation],
        window_ms: int,
        now_ms: int | None = None,
    ) -> list[LateRecord]:
        """The fenced record of one page of looks; only the fenced ones are answered."""
        items = _encode_items(
            [
                {
                    "dispatch_id": o.watch.identity.dispatch_id,
                    "watch_token": o.watch.watch_token,
                    "finding": o.finding.kind.value,
                    "evidence_digest": o.finding.evidence_digest,
                    "result_code": o.finding.result_code,
                    "observation_id": o.observation_id,
                    "delay_ms": o.next_look_ms,
                }
                for o in observations
            ]
        ).decode("utf-8")
        params = {"items": items, "owner": owner, "window_ms": window_ms, "now_ms": now_ms}
        by_id = {o.observation_id: o for o in observations}
        return [
            LateRecord(
                watch=by_id[row["observation_id"]].watch,
                finding=by_id[row["observation_id"]].finding.kind,
                recorded=row["recorded"],
                agrees=row["agrees"],
                observation_id=row["observation_id"],
            )
            for row in self._all("late_watch_record", params)
        ]

    def expire_late_watches(self, window_ms: int, limit: int, now_ms: int | None = None) -> int:
        """Close up to `limit` open watches whose window elapsed; how many were closed."""
        params = {"window_ms": window_ms, "limit": limit, "now_ms": now_ms}
        return len(self._all("late_watch_expire", params))

    def list_decisions(
        self,
        user_id: str,
        filters: DecisionFilter,
        limit: int,
        before: tuple[int, int] | None = None,
    ) -> list[DecisionRecord]:
        """One keyset page of manual decisions, newest first."""
        before_ms, before_id = before if before is not None else (2**63 - 1, 2**63 - 1)
        params = {
            **_decision_filter(user_id, filters),
            "before_ms": before_ms,
            "before_id": before_id,
            "limit": limit,
        }
        return [_decision(row) for row in self._filtered("decisions_page", params)]

    def count_decisions(self, user_id: str, filters: DecisionFilter, count_cap: int) -> int:
        """How many manual decisions match, counted up to `count_cap`."""
        (row,) = self._filtered(  # an aggregate answers one row
            "decisions_total", {**_decision_filter(user_id, filters), "count_cap": count_cap}
        )
        return int(row["total"])


def _fence(lease: ExecutionLease, **extra: Any) -> dict[str, Any]:
    return {
        "dispatch_id": lease.dispatch_id,
        "owner": lease.owner,
        "token": lease.token,
        "version": lease.version,
        **extra,
    }


def _lease(row: Row | None) -> ExecutionLease:
    assert row is not None  # the protocol functions answer one row or raise
    return ExecutionLease(
        dispatch_id=row["dispatch_id"],
        owner=row["owner"],
        token=row["token"],
        version=row["version"],
        attempt=row["attempt"],
        lease_expires_at_ms=row["lease_expires_at_ms"],
        state=ExecutionState(row["state"]),
    )


# What the claim returns, in its RETURNING order: rows are read as tuples (a dict per row
# cost more than the rest of building the page). tests/integration/schema/test_statements.py
# checks the statement against this list.
CLAIM_COLUMNS = (
    "dispatch_id",
    "recovery_token",
    "recovery_version",
    "execution_version",
    "finding_count",
    "schema_version",
    "approval_request_id",
    "project_id",
    "action_type",
    "action_digest",
    "idempotency_key",
    "attempt",
    "started_at_ms",
    "claimed_at_ms",
)


def _claimed(
    dispatch_id: str,
    recovery_token: str,
    recovery_version: int,
    execution_version: int,
    finding_count: int,
    schema_version: int,
    approval_request_id: str,
    project_id: str,
    action_type: str,
    action_digest: str,
    idempotency_key: str,
    attempt: int,
    started_at_ms: int,
    claimed_at_ms: int,
) -> ClaimedItem:
    # Positional, in the fields' declared order: a page builds two of these per row, and
    # keyword arguments cost a frozen dataclass's __init__ more than its work.
    identity = DispatchIdentity(
        schema_version,
        dispatch_id,
        approval_request_id,
        project_id,
        action_type,
        action_digest,
        attempt,
        started_at_ms,
        idempotency_key,
    )
    return ClaimedItem(
        identity,
        recovery_token,
        recovery_version,
        execution_version,
        finding_count,
        claimed_at_ms,
    )


def _queue_item(row: Row) -> ManualQueueItem:
    _enums(row, last_finding=FindingKind, last_failure_class=ProviderFailure)
    proposal = _proposal(row)
    for column in PROPOSAL_COLUMNS:
        del row[column]
    summary = ActionSummary.from_stored(row.pop("action_summary"))
    two = _two_person(row.pop("two_person_outcomes"))
    return ManualQueueItem(
        **row, proposal=proposal, action_summary=summary, two_person_decisions=two
    )


def _proposal_record(row: Row) -> ProposalRecord:
    outcome = ExecutionState(row.pop("outcome"))
    return ProposalRecord(**row, decision=Decision.settling(outcome))


def _two_person(outcomes: Sequence[str]) -> tuple[Decision, ...]:
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


def _proposal(row: Row) -> OpenProposal | None:
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


def _authorization(
    principal: Principal, project_id: str, grant: Grant, max_auth_age_ms: int, leeway_ms: int
) -> dict[str, Any]:
    """The authorization parameters every fenced human write takes."""
    return {
        "project_id": project_id,
        "user_id": principal.user_id,
        "auth_time_ms": principal.auth_time_ms,
        "amr": list(principal.amr),
        "project_version": grant.project_version,
        "role_binding_version": grant.role_binding_version,
        "max_auth_age_ms": max_auth_age_ms,
        "clock_leeway_ms": leeway_ms,
    }


def _case_filter(user_id: str, filters: CaseFilter, now_ms: int | None) -> dict[str, Any]:
    return {
        "user_id": user_id,
        "project_id": filters.project_id,
        "action_type": filters.action_type,
        "last_finding": filters.last_finding.value if filters.last_finding else None,
        "summary": filters.summary,
        "open_proposal": filters.open_proposal,
        "owner": filters.owner,
        "last_reason": filters.last_reason,
        "q": filters.q,
        "min_age_ms": filters.min_age_ms,
        "now_ms": now_ms,
    }


def _decision_filter(user_id: str, filters: DecisionFilter) -> dict[str, Any]:
    finding = filters.overridden_finding
    return {
        "user_id": user_id,
        "project_id": filters.project_id,
        "actor_user_id": filters.user_id,
        "action_type": filters.action_type,
        "overridden_finding": finding.value if finding is not None else None,
        "q": filters.q,
        "since_ms": filters.since_ms,
        "until_ms": filters.until_ms,
    }


def _case(row: Row, authorizations: Sequence[Row], late: Sequence[Row] = ()) -> Case:
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
        _enums(row, last_finding=FindingKind, last_failure_class=ProviderFailure)
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
        proposal=_proposal(row),
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


def _late_watch(row: Row) -> LateWatch:
    return LateWatch(
        identity=DispatchIdentity(
            schema_version=row["schema_version"],
            dispatch_id=row["dispatch_id"],
            approval_request_id=row["approval_request_id"],
            project_id=row["project_id"],
            action_type=row["action_type"],
            action_digest=row["action_digest"],
            attempt=row["attempt"],
            started_at_ms=row["started_at_ms"],
            idempotency_key=row["idempotency_key"],
        ),
        watch_token=row["watch_token"],
        decided_outcome=ExecutionState(row["decided_outcome"]),
        observations=row["observations"],
    )


def _role(user_id: str, actor: str | None, people: int) -> str:
    """One person decides; of two, the resolution's actor proposed and the other confirmed."""
    if people < 2:
        return "decider"
    return "proposer" if user_id == actor else "confirmer"


def _decision(row: Row) -> DecisionRecord:
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


def _enums(row: Row, **columns: Callable[[str], StrEnum]) -> None:
    """Stored codes become their enums (NULL stays None); an unknown code raises."""
    for column, enum in columns.items():
        if row[column] is not None:
            row[column] = enum(row[column])


def page_items(outcomes: Sequence[ItemOutcome]) -> str:
    """A page's outcomes as the JSON array `resolver_commit_automatic` reads, one object per item.

    One C-level encode of the whole page: adapting nine parallel arrays element by element
    cost the replica more CPU than the rest of the commit.
    """
    return _encode_items(
        [
            {
                "dispatch_id": o.item.identity.dispatch_id,
                "recovery_token": o.item.recovery_token,
                "recovery_version": o.item.recovery_version,
                "execution_version": o.item.execution_version,
                "finding": o.finding.kind.value,
                "result_code": o.finding.result_code,
                "evidence_digest": o.finding.evidence_digest,
                "mutation_id": o.mutation_id,
                "delay_ms": o.retry_delay_ms,
                "failure": o.finding.failure.value if o.finding.failure is not None else None,
                "escalate_after_ms": o.escalate_after_ms,
                "reason": _reason(o.finding),
            }
            for o in outcomes
        ]
    ).decode("utf-8")


def _reason(finding: Finding) -> str | None:
    """The inspection's reason code for the control: the provider's cause, else the failure
    class of an unavailable source (`timeout`, `outage`)."""
    if finding.cause is not None:
        return finding.cause
    return finding.failure.value if finding.failure is not None else None


# msgspec's encoder: the page as one compact JSON text in C, several times faster than the
# standard library's for a page of small flat objects (UTF-8 kept, as before).
_encode_items = msgspec.json.Encoder().encode


# -- internal receipts: in the caller's own transaction ------------------------------------


def receipt_identity(conn: psycopg.Connection[Any], lease: ExecutionLease) -> Row:
    """The identity a receipt must carry, with the database clock (`db_now_ms`); the
    execution stays locked FOR SHARE under the lease until the caller's transaction ends."""
    return _call_in(conn, "receipt_identity", _fence(lease, now_ms=None))


def receipt_write(
    conn: psycopg.Connection[Any], lease: ExecutionLease, receipt: Mapping[str, Any]
) -> None:
    """Insert a signed receipt v1 in the caller's transaction, fenced on the lease."""
    _call_in(conn, "receipt_write", _fence(lease, receipt=Jsonb(dict(receipt))))


def _call_in(conn: psycopg.Connection[Any], name: str, params: dict[str, Any]) -> Row:
    try:
        with conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(statement(name), params).fetchone()
    except psycopg.DatabaseError as exc:
        refused = protocol_error(exc)
        if refused is None:
            raise
        raise refused from exc
    assert row is not None  # the protocol functions answer one row or raise
    return row
