"""The claim's cost stays per page: it stops after one page of the due index, commits alone."""

from __future__ import annotations

import json

from benchmarks.seed import seed_closed
from resolver.db.repository import PostgresStore
from resolver.db.statements import statement
from tests.conftest import EXEC_LEASE_MS, SQL, T0, World

AFTER = T0 + EXEC_LEASE_MS
PAGE = 4


def _claim_params() -> dict[str, object]:
    return {"now_ms": AFTER, "owner": "r", "page_size": PAGE, "lease_ms": 30_000}


def _nodes(plan: dict[str, object]) -> list[dict[str, object]]:
    found = [plan]
    for child in plan.get("Plans", []):  # type: ignore[attr-defined]
        found += _nodes(child)
    return found


def test_claim_reads_one_page_of_the_due_index_however_large_the_backlog(
    world: World, sql: SQL
) -> None:
    world.crashed(60)
    seed_closed(sql.conn, 5_000, first=1, prefix="c-", now_ms=T0)  # settled history
    sql.all("ANALYZE")
    with sql.conn.transaction(force_rollback=True):
        (row,) = sql.conn.execute(
            f"EXPLAIN (ANALYZE, FORMAT JSON) {statement('recovery_claim_due_page')}",  # type: ignore[arg-type]
            _claim_params(),
        ).fetchall()
    plan = row["QUERY PLAN"]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    scans = [
        n for n in _nodes(plan[0]["Plan"]) if n.get("Index Name") == "ix_recovery_controls_due"
    ]
    assert scans, plan
    # Read in index order and stopped at the page: never every due row, then a sort.
    assert all(n["Actual Rows"] <= PAGE for n in scans), plan
    assert plan[0]["Plan"]["Actual Rows"] == PAGE


def test_claim_is_one_statement_that_commits_without_a_flush_wait(
    world: World, store: PostgresStore, sql: SQL
) -> None:
    world.crashed(2)
    # Durable for this session whatever the server's default (a throwaway test cluster runs
    # with synchronous_commit=off), so the statement's own transaction-local switch shows.
    sql.all("SET synchronous_commit = on")
    with sql.conn.transaction(force_rollback=True):
        sql.conn.execute(statement("recovery_claim_due_page"), _claim_params())  # type: ignore[arg-type]
        assert sql.one("SHOW synchronous_commit")["synchronous_commit"] == "off"
    assert sql.one("SHOW synchronous_commit")["synchronous_commit"] == "on"
    # Through the store, the claim is durable enough to be seen by everyone at once.
    assert len(store.claim_due_page("r", PAGE, 30_000, now_ms=AFTER)) == 2
    assert (
        sql.one(
            "SELECT count(*) AS n FROM approved_action_recovery_controls WHERE recovery_owner = 'r'"
        )["n"]
        == 2
    )
