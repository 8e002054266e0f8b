"""The backlog read model of `/metrics`, `/readyz` and `resolver status`: bounded reads only."""

from __future__ import annotations

from resolver.core.domain import BacklogSnapshot
from resolver.db.retention import prune_summary
from resolver.db.statements import statement
from resolver.db.store.handle import PortStore
from resolver.retention.pruning import PruneSummary


class PostgresBacklogReader(PortStore):
    """The backlog, the prune runs, and a ping."""

    def backlog_snapshot(self, count_cap: int) -> BacklogSnapshot:
        """The backlog read model of `/metrics` and `resolver status`: oldest ages by two
        index probes, counts by a capped index scan, in one transaction."""
        now_ms = self._db.now_ms
        with self._db.transaction() as conn:
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
        with self._db.transaction(single_statement=True) as conn:
            return prune_summary(conn)

    def ping(self) -> None:
        self._db.ping()
