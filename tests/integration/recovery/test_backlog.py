"""The backlog figures behind the metrics: right queues, right ages, bounded and indexed."""

from __future__ import annotations

from resolver.core.domain import FindingKind, ItemOutcome
from resolver.db.statements import statement
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.providers import fixed, verified
from tests.helpers.stores import Storage

AFTER = T0 + EXEC_LEASE_MS
REC_LEASE_MS = 30_000


def test_empty_database_reports_every_queue_at_zero(store: Storage) -> None:
    snap = store.at(AFTER).backlog_snapshot(100)
    assert snap.by_queue() == {"due": 0, "waiting": 0, "manual": 0}
    assert snap.dispatches == {}
    assert (snap.oldest_claimable_age_seconds, snap.oldest_manual_age_seconds) == (0.0, 0.0)
    assert snap.db_now_ms == AFTER


def test_queues_split_due_waiting_and_manual_by_action_type(world: World, store: Storage) -> None:
    world.crashed(3, action_type="pay.charge")
    world.crashed(2, action_type="db.mutation")
    world.started("pay.charge", now_ms=AFTER + 10_000)  # live lease: armed, not claimable
    (leased, manual, resolved, *_) = store.at(AFTER).claim_due_page("r", 4, REC_LEASE_MS)
    store.at(AFTER + 10).commit_outcomes(
        [
            ItemOutcome(manual, fixed(FindingKind.CONFLICT)(manual.identity), 0, "m-1"),
            ItemOutcome(resolved, verified(resolved.identity), 0, "m-2"),
        ],
    )
    del leased  # still held: armed, leased, so waiting rather than due

    snap = store.at(AFTER + 5_000).backlog_snapshot(100)
    # Claim order is (next_scan_at_ms, dispatch_id): the three pay.charge items came first.
    assert snap.dispatches == {
        ("due", "db.mutation"): 1,  # never claimed
        ("waiting", "pay.charge"): 2,  # one held by a recovery lease, one live execution
        ("waiting", "db.mutation"): 1,  # the fourth claimed item, still leased
        ("manual", "pay.charge"): 1,
    }
    assert snap.by_queue() == {"due": 1, "waiting": 3, "manual": 1}
    # The due item became due when its execution lease expired, at AFTER.
    assert snap.oldest_claimable_age_seconds == 5.0
    assert snap.oldest_manual_age_seconds == (5_000 - 10) / 1000


def test_released_backoff_is_waiting_until_due_again(world: World, store: Storage) -> None:
    world.crashed(1)
    (item,) = store.at(AFTER).claim_due_page("r", 16, REC_LEASE_MS)
    store.at(AFTER).commit_outcomes(
        [ItemOutcome(item, fixed(FindingKind.UNAVAILABLE)(item.identity), 2_000, "m")],
    )
    waiting = store.at(AFTER + 1_999).backlog_snapshot(100)
    assert waiting.by_queue()["waiting"] == 1 and waiting.oldest_claimable_at_ms is None
    due = store.at(AFTER + 2_500).backlog_snapshot(100)
    assert due.by_queue()["due"] == 1 and due.oldest_claimable_age_seconds == 0.5


def test_counts_stop_at_the_cap(world: World, store: Storage) -> None:
    world.crashed(5)
    snap = store.at(AFTER).backlog_snapshot(3)
    assert snap.by_queue()["due"] == 3 and snap.count_cap == 3
    assert snap.oldest_claimable_at_ms == AFTER  # the age probe is exact regardless


def test_backlog_statements_read_the_partial_indexes(world: World, sql: SQL) -> None:
    world.crashed(3)
    _many_resolved_controls(sql, 20_000)
    sql.all("ANALYZE")
    oldest = _explain(sql, "backlog_oldest")
    assert "ix_recovery_controls_due" in oldest and "ix_recovery_controls_manual" in oldest, oldest
    counts = _explain(sql, "backlog_counts")
    assert "ix_recovery_controls_due" in counts and "ix_recovery_controls_manual" in counts, counts
    assert "Seq Scan on approved_action_recovery_controls" not in oldest + counts


def _many_resolved_controls(sql: SQL, n: int) -> None:
    # Closed history must not make a scrape slower: the partial indexes skip it entirely.
    sql.all(
        "INSERT INTO approved_action_dispatches (dispatch_id, approval_request_id, project_id,"
        " action_type, action_digest, idempotency_key, schema_version)"
        " SELECT 'x' || g, 'a', 'p', 't', repeat('0', 64), 'k' || g, 1"
        " FROM generate_series(1, %s) g",
        n,
    )
    # History imported as the owner: rows past `leased` skip the state machine on purpose.
    sql.all("SET resolver.import_history = on")
    sql.all(
        "INSERT INTO approved_action_executions (dispatch_id, state, owner, token, version,"
        " attempt, lease_expires_at_ms, started_at_ms, finished_at_ms)"
        " SELECT 'x' || g, 'succeeded', 'o', gen_random_uuid(), 3, 1, 0, 0, 1"
        " FROM generate_series(1, %s) g",
        n,
    )
    sql.all(
        "INSERT INTO approved_action_recovery_controls (dispatch_id, status, execution_version,"
        " next_scan_at_ms, armed_at_ms, closed_by, closed_at_ms)"
        " SELECT 'x' || g, 'resolved', 3, 0, 0, 'completion', 1 FROM generate_series(1, %s) g",
        n,
    )
    sql.all("RESET resolver.import_history")


def _explain(sql: SQL, name: str) -> str:
    params = {"now_ms": AFTER, "count_cap": 10_000}
    rows = sql.conn.execute(f"EXPLAIN {statement(name)}", params).fetchall()  # type: ignore[arg-type]
    return "\n".join(r["QUERY PLAN"] for r in rows)
