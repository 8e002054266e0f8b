"""The history benchmark in a tiny configuration: it runs, and its drains count the backlog only.

Never a timing threshold: whether history moves the claim or the drain is a ratio measured by
`python -m benchmarks.history`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks import history
from benchmarks.phases import RECEIPT_ACTION
from benchmarks.seed import db_now_ms, seed_due, seed_late_window
from resolver.db.statements import claim_statement, statement
from tests.helpers.database import SQL

K = 200


def test_history_case_drains_the_backlog_beside_a_seeded_history(
    pg_server: str, tmp_path: Path
) -> None:
    args = argparse.Namespace(
        database_url=pg_server,
        count=K,
        replicas=2,
        page_size=16,
        rounds=1,
        samples=25,
        max_drain_seconds=60.0,
        work_dir=str(tmp_path),
        json=None,
        settled=1_000,
        manual=100,
        late=100,
    )
    report = history.run(args)

    assert report["history"] == {
        "settled dispatches": 1_000,
        "manual queue": 100,
        "late-evidence window": 100,
    }
    for side in ("empty", "full"):
        (drain,) = report["drains"][side]
        # Only the backlog's resolutions count, not the half of the settled history that has
        # resolutions of its own; the manual queue is never claimed.
        assert not drain["timed_out"], side
        assert drain["resolved"] == drain["seeded"] == K, side
        assert report[side]["claim_samples"] == 25
        assert 0 < report[side]["claim_p50_ms"] <= report[side]["claim_p99_ms"]
    assert report["claim_p50_ratio"] > 0 and len(report["drain_ratio_per_round"]) == 1


def test_the_late_window_is_what_manual_decisions_leave_and_no_claim_or_commit_reads_it(
    database_url: str, sql: SQL
) -> None:
    now_ms = db_now_ms(sql.conn)
    window_ms = 86_400_000
    seed_late_window(
        sql.conn, 5_000, prefix="l-", action_type=RECEIPT_ACTION, now_ms=now_ms, window_ms=window_ms
    )
    seed_due(sql.conn, 200, action_type=RECEIPT_ACTION, prefix="b-", due_ms=now_ms - 1_000)
    sql.all("VACUUM ANALYZE")
    # What resolver_commit_manual leaves: a manual resolution and its authorization fact per
    # dispatch, terminal execution, control closed by `manual`; the resolution's trigger
    # opened each watch, inside the window and due at the decision.
    row = sql.one(
        "SELECT count(*) AS watches, count(*) FILTER (WHERE w.closed_at_ms IS NULL"
        " AND w.decided_at_ms + %s > %s AND w.next_scan_at_ms = w.decided_at_ms) AS open,"
        " count(*) FILTER (WHERE r.source = 'manual' AND c.closed_by = 'manual'"
        " AND e.state = 'succeeded' AND a.user_id = r.actor_user_id) AS settled"
        " FROM recovery_late_watches AS w"
        " JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)"
        " JOIN approved_action_recovery_controls AS c USING (dispatch_id)"
        " JOIN approved_action_executions AS e USING (dispatch_id)"
        " JOIN recovery_authorizations AS a ON a.mutation_id = r.mutation_id",
        window_ms,
        now_ms,
    )
    assert row == {"watches": 5_000, "open": 5_000, "settled": 5_000}
    with sql.conn.transaction(force_rollback=True):
        claim = _plan(sql, claim_statement(64), {"owner": "r", "lease_ms": 30_000, "now_ms": None})
        watch = _plan(
            sql,
            statement("late_watch_claim"),
            {"owner": "r", "lease_ms": 60_000, "now_ms": None, "window_ms": window_ms, "limit": 16},
        )
        # A window a twentieth shorter: the oldest twentieth of the watches has elapsed.
        expire = _plan(
            sql,
            statement("late_watch_expire"),
            {"now_ms": None, "window_ms": window_ms - window_ms // 20, "limit": 1_000},
        )
    assert "recovery_late_watches" not in json.dumps(claim)
    # The automatic commit writes resolutions of verified findings only; the watch trigger's
    # WHEN clause (manual source) is false for each, so it never opens or reads a watch.
    assert "recovery_late_watches" not in statement("commit_automatic")
    # The watcher's claim walks the open watches' index in due order and stops at its page
    # (its join back to the claimed rows may hash a table this small; by key at scale).
    due = [n for n in _nodes(watch) if n.get("Index Name") == "ix_recovery_late_watches_open"]
    assert [n["Actual Rows"] for n in due] == [16], watch
    assert not [n for n in _nodes(watch) if n["Node Type"] == "Sort"], watch
    # The expire reads the elapsed open watches only, from their index by decision time, never
    # every watch (ix_recovery_late_watches_open_decided).
    elapsed = [
        n for n in _nodes(expire) if n.get("Index Name") == "ix_recovery_late_watches_open_decided"
    ]
    assert [n["Actual Rows"] for n in elapsed] == [expire["Actual Rows"]], expire
    assert 240 <= expire["Actual Rows"] <= 260, expire


def _plan(sql: SQL, text: str, params: dict[str, object]) -> dict[str, Any]:
    (row,) = sql.conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {text}", params).fetchall()  # type: ignore[call-overload]
    plan = row["QUERY PLAN"]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return dict(plan[0]["Plan"])


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += _nodes(child)
    return found
