"""The recovery port: claim a due page, commit its outcomes, release what was not inspected."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg.rows import tuple_row

from resolver.core.domain import (
    ESCALATION_REASON,
    ClaimedItem,
    CommitReport,
    ControlStatus,
    ItemOutcome,
)
from resolver.db.statements import claim_statement, statement
from resolver.db.store.handle import PortStore
from resolver.db.store.rows import claimed, page_items


class PostgresRecoveryStore(PortStore):
    """What the reconciler calls, each one statement on the database clock."""

    def claim_due_page(self, owner: str, page_size: int, lease_ms: int) -> list[ClaimedItem]:
        params = {"owner": owner, "lease_ms": lease_ms, "now_ms": self._db.now_ms}
        # One statement, one round trip; it commits asynchronously (see queries.sql).
        with self._db.transaction(single_statement=True) as conn:
            cur = conn.cursor(row_factory=tuple_row)
            rows = cur.execute(claim_statement(page_size), params).fetchall()
        return [claimed(*row) for row in rows]

    def commit_outcomes(self, outcomes: Sequence[ItemOutcome]) -> CommitReport:
        if not outcomes:
            return CommitReport({}, frozenset())
        params = {"items": page_items(outcomes), "now_ms": self._db.now_ms}
        # One statement: the function locks and writes in one transaction of its own.
        with self._db.transaction(single_statement=True) as conn:
            rows = conn.execute(statement("commit_automatic"), params).fetchall()
        routed = {row["dispatch_id"]: ControlStatus(row["status"]) for row in rows}
        return CommitReport(
            routed,
            frozenset(o.item.identity.dispatch_id for o in outcomes) - routed.keys(),
            escalated=frozenset(
                row["dispatch_id"] for row in rows if row["manual_reason"] == ESCALATION_REASON
            ),
        )

    def release_recovery_leases(self, items: Sequence[ClaimedItem]) -> int:
        if not items:
            return 0
        params = {
            "dispatch_ids": [i.identity.dispatch_id for i in items],
            "recovery_tokens": [i.recovery_token for i in items],
            "recovery_versions": [i.recovery_version for i in items],
            "now_ms": self._db.now_ms,
        }
        return len(self._db.all("recovery_release_leases", params))
