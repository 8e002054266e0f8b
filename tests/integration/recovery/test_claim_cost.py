"""The claim's cost stays per page: it stops after one page of the due index, commits alone."""

from __future__ import annotations

import json

import psycopg
import pytest

from benchmarks.seed import db_now_ms, seed_closed, seed_due, seed_live
from resolver.db.statements import claim_statement, statement
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.stores import Storage

AFTER = T0 + EXEC_LEASE_MS
PAGE = 4


def _claim_params() -> dict[str, object]:
    return {"now_ms": AFTER, "owner": "r", "lease_ms": 30_000}


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
            f"EXPLAIN (ANALYZE, FORMAT JSON) {claim_statement(PAGE)}",  # type: ignore[arg-type]
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
    world: World, store: Storage, sql: SQL
) -> None:
    world.crashed(2)
    # Durable for this session whatever the server's default (a throwaway test cluster runs
    # with synchronous_commit=off), so the statement's own transaction-local switch shows.
    sql.all("SET synchronous_commit = on")
    with sql.conn.transaction(force_rollback=True):
        sql.conn.execute(claim_statement(PAGE), _claim_params())  # type: ignore[arg-type]
        assert sql.one("SHOW synchronous_commit")["synchronous_commit"] == "off"
    assert sql.one("SHOW synchronous_commit")["synchronous_commit"] == "on"
    # Through the store, the claim is durable enough to be seen by everyone at once.
    assert len(store.at(AFTER).claim_due_page("r", PAGE, 30_000)) == 2
    assert (
        sql.one(
            "SELECT count(*) AS n FROM approved_action_recovery_controls WHERE recovery_owner = 'r'"
        )["n"]
        == 2
    )


def test_the_claim_probes_each_due_execution_whatever_the_statistics(
    database_url: str, sql: SQL
) -> None:
    """With a settled history of 100,000 dispatches beside 1,000 due and 1,000 live, the
    planner's estimates once made it hash every executing execution (a sequential scan of the
    whole history, 20 ms per claim, and a sort) instead of walking the due index and probing
    each execution: the execution test is a per-row probe now, whatever it estimates."""
    now_ms = db_now_ms(sql.conn)
    seed_closed(sql.conn, 100_000, first=1, prefix="c-", now_ms=now_ms)
    seed_live(sql.conn, 1_000, prefix="l-", now_ms=now_ms)
    seed_due(sql.conn, 1_000, action_type="test.bulk", prefix="q-", due_ms=now_ms)
    sql.all("VACUUM ANALYZE")
    params = {"now_ms": None, "owner": "r", "lease_ms": 30_000}
    with sql.conn.transaction(force_rollback=True):
        (row,) = sql.conn.execute(
            f"EXPLAIN (ANALYZE, FORMAT JSON) {claim_statement(16)}",  # type: ignore[arg-type]
            params,
        ).fetchall()
    plan = row["QUERY PLAN"]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    nodes = _nodes(plan[0]["Plan"])
    assert not [n for n in nodes if n["Node Type"] in ("Seq Scan", "Sort", "Hash Join")], plan
    scans = [n for n in nodes if n.get("Index Name") == "ix_recovery_controls_due"]
    assert scans and all(n["Actual Rows"] <= 16 for n in scans), plan
    assert plan[0]["Plan"]["Actual Rows"] == 16


def _plans_after(url: str, text: str, params: dict[str, object], calls: int) -> dict[str, int]:
    """Claim with a prepared statement `calls` times on a connection of its own and read the
    server's count of generic and custom plans for it. Each claim commits: psycopg drops its
    prepared statements on a rollback."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(calls):
            assert len(conn.execute(text, params, prepare=True).fetchall()) == PAGE  # type: ignore[call-overload]
        ((generic, custom),) = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
        ).fetchall()
    return {"generic": generic, "custom": custom}


def test_the_claim_is_planned_once_per_connection_not_per_call(database_url: str, sql: SQL) -> None:
    # A backlog as after an outage: with a parameter for the LIMIT the generic plan's cost
    # grows with the due set; with tens of rows both statements would look alike.
    seed_due(sql.conn, 20_000, action_type="test.bulk", prefix="bulk-", due_ms=T0)
    sql.all("ANALYZE")
    # PostgreSQL plans a prepared statement afresh for its first five calls, then keeps the
    # generic plan when it is no costlier than the custom ones.
    literal = _plans_after(database_url, claim_statement(PAGE), _claim_params(), 10)
    assert literal["generic"] >= 4, literal
    # The page size as a parameter: the generic plan cannot know the LIMIT, costs more, and
    # every call is planned again (what claim_statement avoids).
    as_parameter = _plans_after(
        database_url,
        statement("recovery_claim_due_page"),
        {**_claim_params(), "page_size": PAGE},
        10,
    )
    assert as_parameter == {"generic": 0, "custom": 10}, as_parameter


@pytest.mark.parametrize("page_size", [0, -1, 65, 10_001, True, 2.0, "16"])
def test_claim_statement_takes_only_a_plain_page_size(page_size: object) -> None:
    with pytest.raises(ValueError, match="page_size"):
        claim_statement(page_size)  # type: ignore[arg-type]
