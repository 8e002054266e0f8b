"""A fresh deployment: the executor path reads its tables by index before any statistics exist.

A long-lived session (an SDK's pool, a replica) keeps the plans it made while the tables were
empty and never analyzed. A plan that scanned a whole table then costs each action a little
more as the table grows, until the first autoanalyze: this reads what the server counted,
not how long anything took.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from tests.helpers.database import SQL
from tests.helpers.protocol import LEASE_MS, call, created, fence

# The tables every approved action writes on its way to a terminal state.
PATH_TABLES = (
    "approved_action_dispatches",
    "approved_action_executions",
    "approved_action_recovery_controls",
    "action_receipts",
    "recovery_outcomes",
)
ACTIONS = 120


def _one_action(sql: SQL) -> None:
    """create, lease, start, the receipt in its own transaction, complete: the database clock."""
    dispatch_id = created(sql)
    lease = call(
        sql, "resolver_execution_lease", dispatch_id=dispatch_id, owner="fresh", lease_ms=LEASE_MS
    )
    run = call(sql, "resolver_execution_start", **fence(lease), lease_ms=60_000)
    with sql.conn.transaction():
        identity = call(sql, "resolver_receipt_identity", **fence(run))
        receipt = {k: identity[k] for k in identity if k not in ("db_now_ms", "schema_version")}
        call(sql, "resolver_receipt_write", **fence(run), receipt=Jsonb(receipt))
    done = call(
        sql,
        "resolver_execution_complete",
        **fence(run),
        outcome="succeeded",
        result_code="applied",
        mutation_id=f"m-{dispatch_id}",
    )
    assert done["result"] == "committed"


def _rows_read_by_scans(url: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute(
            "SELECT relname, coalesce(seq_tup_read, 0) AS n FROM pg_stat_user_tables"
            " WHERE relname = ANY(%s)",
            [list(PATH_TABLES)],
        ).fetchall()
    return {r["relname"]: r["n"] for r in rows}


def test_a_session_settling_actions_on_never_analyzed_tables_scans_no_row(
    database_url: str,
) -> None:
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as owner:
        for table in PATH_TABLES:
            # No autoanalyze mid-test: the tables stay as a new deployment has them.
            owner.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        never_analyzed = owner.execute(
            "SELECT count(*) AS n FROM pg_stat_user_tables WHERE relname = ANY(%s)"
            " AND last_analyze IS NULL AND last_autoanalyze IS NULL",
            [list(PATH_TABLES)],
        ).fetchone()
        assert never_analyzed is not None and never_analyzed["n"] == len(PATH_TABLES)
    before = _rows_read_by_scans(database_url)
    session: psycopg.Connection[dict[str, Any]]
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as session:
        sql = SQL(session)
        for _ in range(ACTIONS):
            _one_action(sql)
    # The session has ended, so the server has its counts (a backend reports them on exit).
    after = _rows_read_by_scans(database_url)
    scanned = {t: after[t] - before.get(t, 0) for t in after if after[t] > before.get(t, 0)}
    assert scanned == {}, f"rows read by sequential scans over {ACTIONS} actions: {scanned}"
