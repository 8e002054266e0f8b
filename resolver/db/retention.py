"""PostgreSQL side of `resolver prune`: one connection, one short transaction per call.

Every call goes through the prune functions of migration 0005; driver errors stop here and
come out as the typed errors of `resolver.core.errors`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row

from resolver.core.errors import LockTimeout, RetentionRefused, StorageUnavailable
from resolver.db.dsn import libpq_dsn, redact
from resolver.db.statements import statement
from resolver.retention.pruning import BatchResult, PruneCandidate, PruneSummary, RunTotals

Row = dict[str, Any]

# SQLSTATEs the prune functions raise for a request they refuse (nothing was deleted).
_REFUSALS = frozenset({"22023", "P0002"})


class PostgresRetention:
    """The retention role's session: candidates, begin, batches, finish."""

    def __init__(
        self,
        database_url: str,
        *,
        connect_timeout_seconds: float = 5.0,
        statement_timeout_ms: int = 60_000,
        application_name: str = "resolver-prune",
    ) -> None:
        self._url = redact(database_url)
        try:
            self._conn: psycopg.Connection[Row] = psycopg.connect(
                libpq_dsn(database_url),
                autocommit=True,
                row_factory=dict_row,
                connect_timeout=max(1, int(connect_timeout_seconds)),
                application_name=application_name,
                options=f"-c statement_timeout={statement_timeout_ms}",
            )
        except psycopg.OperationalError as exc:
            raise StorageUnavailable(f"PostgreSQL at {self._url} is unavailable: {exc}") from exc

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> PostgresRetention:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self, lock_timeout_ms: int | None = None) -> Iterator[psycopg.Connection[Row]]:
        try:
            with self._conn.transaction():
                if lock_timeout_ms is not None:
                    self._conn.execute(
                        statement("prune_lock_timeout"), {"lock_timeout": f"{lock_timeout_ms}ms"}
                    )
                yield self._conn
        except psycopg.errors.LockNotAvailable as exc:
            raise LockTimeout(
                f"prune batch hit its lock_timeout: {exc.diag.message_primary}"
            ) from exc
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise StorageUnavailable(f"PostgreSQL at {self._url} is unavailable: {exc}") from exc
        except psycopg.errors.InsufficientPrivilege as exc:
            raise RetentionRefused(
                f"this role may not prune: {exc.diag.message_primary}; connect as the "
                "retention role (deploy/sql/roles.sql)"
            ) from exc
        except psycopg.errors.UndefinedFunction as exc:
            raise RetentionRefused(
                "the prune functions are missing: run `resolver migrate` first"
            ) from exc
        except psycopg.Error as exc:
            if exc.sqlstate in _REFUSALS:
                raise RetentionRefused(str(exc.diag.message_primary)) from exc
            raise

    def db_now_ms(self) -> int:
        with self._transaction() as conn:
            row = conn.execute(statement("prune_db_now")).fetchone()
        assert row is not None
        return int(row["db_now_ms"])

    def candidates(
        self, cutoff_ms: int, include_audit: bool, after: str, limit: int
    ) -> list[PruneCandidate]:
        params = {
            "cutoff_ms": cutoff_ms,
            "include_audit": include_audit,
            "after": after,
            "limit": limit,
        }
        with self._transaction() as conn:
            rows = conn.execute(statement("prune_candidates_page"), params).fetchall()
        return [PruneCandidate(r["dispatch_id"], r["audited"], r["record"]) for r in rows]

    def begin(
        self, cutoff_ms: int, include_audit: bool, export_digest: str | None, actor: str
    ) -> int:
        params = {
            "cutoff_ms": cutoff_ms,
            "include_audit": include_audit,
            "export_digest": export_digest,
            "actor": actor,
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
        return BatchResult(row["dispatches"], row["audit"], row["evidence"], row["remnants"])

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
