"""PostgreSQL side of `resolver prune`: one connection, one short transaction per call.

Every call goes through the prune functions (resolver/db/schema/functions/07_retention.sql);
driver errors stop here and come out as the typed errors of `resolver.core.errors`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from resolver.core.errors import RetentionRefused
from resolver.db.connect import Pooler, Profile, connect, transaction
from resolver.db.dsn import redact
from resolver.db.errors import retention_error, unavailable
from resolver.db.statements import statement
from resolver.retention.pruning import (
    BatchResult,
    ConsumerHold,
    PruneCandidate,
    PruneSummary,
    RunTotals,
)

Row = dict[str, Any]


class PostgresRetention:
    """The retention role's session: candidates, begin, batches, finish."""

    def __init__(
        self,
        database_url: str,
        *,
        connect_timeout_seconds: float = 5.0,
        statement_timeout_ms: int = 60_000,
        application_name: str = "resolver-prune",
        pooler: Pooler = Pooler.NONE,
    ) -> None:
        self._url = redact(database_url)
        self._profile = Profile(
            application_name=application_name,
            connect_timeout_seconds=connect_timeout_seconds,
            settings={"statement_timeout": statement_timeout_ms},
            pooler=pooler,
        )
        try:
            self._conn: psycopg.Connection[Row] = connect(
                database_url, self._profile, autocommit=True, dict_rows=True
            )
        except psycopg.OperationalError as exc:
            raise unavailable(self._url, exc) from exc

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> PostgresRetention:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self, lock_timeout_ms: int | None = None) -> Iterator[psycopg.Connection[Row]]:
        try:
            with transaction(self._conn, self._profile):
                if lock_timeout_ms is not None:
                    self._conn.execute(
                        statement("prune_lock_timeout"), {"lock_timeout": f"{lock_timeout_ms}ms"}
                    )
                yield self._conn
        except psycopg.Error as exc:
            typed = retention_error(exc, self._url)
            if typed is None:
                raise
            raise typed from exc

    def db_now_ms(self) -> int:
        with self._transaction() as conn:
            row = conn.execute(statement("prune_db_now")).fetchone()
        assert row is not None
        return int(row["db_now_ms"])

    def candidates(
        self,
        cutoff_ms: int,
        include_audit: bool,
        after: str,
        limit: int,
        past_consumers: bool = False,
    ) -> list[PruneCandidate]:
        params = {
            "cutoff_ms": cutoff_ms,
            "include_audit": include_audit,
            "after": after,
            "limit": limit,
            "past_consumers": past_consumers,
        }
        with self._transaction() as conn:
            rows = conn.execute(statement("prune_candidates_page"), params).fetchall()
        return [PruneCandidate(r["dispatch_id"], r["audited"], r["record"]) for r in rows]

    def begin(
        self,
        cutoff_ms: int,
        include_audit: bool,
        export_digest: str | None,
        actor: str,
        past_consumers: bool = False,
    ) -> int:
        params = {
            "cutoff_ms": cutoff_ms,
            "include_audit": include_audit,
            "export_digest": export_digest,
            "actor": actor,
            "past_consumers": past_consumers,
        }
        with self._transaction() as conn:
            row = conn.execute(statement("prune_run_begin"), params).fetchone()
        assert row is not None
        return int(row["run_id"])

    def batch(
        self,
        run_id: int,
        limit: int,
        dispatch_ids: Sequence[str] | None,
        lock_timeout_ms: int,
    ) -> BatchResult:
        params = {
            "run_id": run_id,
            "limit": limit,
            "dispatch_ids": None if dispatch_ids is None else list(dispatch_ids),
        }
        with self._transaction(lock_timeout_ms) as conn:
            row = conn.execute(statement("prune_batch"), params).fetchone()
        assert row is not None
        return BatchResult(
            row["dispatches"],
            row["audit"],
            row["evidence"],
            row["remnants"],
            row["outcomes"],
            row["outcomes_unread"],
        )

    def consumers(self, cutoff_ms: int) -> list[ConsumerHold]:
        with self._transaction() as conn:
            rows = conn.execute(statement("prune_consumers"), {"cutoff_ms": cutoff_ms}).fetchall()
        return [
            ConsumerHold(r["consumer"], r["cursor"], r["saved_at_ms"], r["holding"]) for r in rows
        ]

    def finish(self, run_id: int) -> RunTotals:
        with self._transaction() as conn:
            row = conn.execute(statement("prune_run_finish"), {"run_id": run_id}).fetchone()
        if row is None:
            raise RetentionRefused(f"prune run {run_id} is not open")
        return RunTotals(row["dispatches_pruned"], row["audit_pruned"], row["evidence_pruned"])


def prune_summary(conn: psycopg.Connection[Row]) -> PruneSummary:
    """What /metrics shows of every recorded run (read by the replicas' store)."""
    row = conn.execute(statement("prune_summary")).fetchone()
    assert row is not None
    return PruneSummary(
        dispatches_pruned=row["dispatches_pruned"],
        audit_pruned=row["audit_pruned"],
        last_batch_at_ms=row["last_batch_at_ms"],
        last_finished_at_ms=row["last_finished_at_ms"],
    )
