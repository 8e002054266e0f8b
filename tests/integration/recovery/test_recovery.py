"""Claim -> inspect -> fenced commit against real PostgreSQL, one invariant at a time."""

from __future__ import annotations

import threading

import pytest

from resolver.core.domain import FindingKind, ItemOutcome
from resolver.core.errors import StorageUnavailable
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.providers import (
    REC_LEASE_MS,
    ScriptedProvider,
    fixed,
    reconciler,
    verified,
)
from tests.helpers.stores import Storage

AFTER = T0 + EXEC_LEASE_MS  # the crashed executions' leases have just expired


def test_live_execution_lease_is_never_claimed(world: World, store: Storage) -> None:
    world.crashed(3)
    assert store.at(AFTER - 1).claim_due_page("r", 16, REC_LEASE_MS) == []
    assert len(store.at(AFTER).claim_due_page("r", 16, REC_LEASE_MS)) == 3


def test_claim_respects_page_size_and_keyset_order(world: World, store: Storage) -> None:
    leases = world.crashed(5)
    page = store.at(AFTER).claim_due_page("r", 2, REC_LEASE_MS)
    assert [i.identity.dispatch_id for i in page] == sorted(x.dispatch_id for x in leases)[:2]
    rest = store.at(AFTER).claim_due_page("r", 16, REC_LEASE_MS)
    assert {i.identity.dispatch_id for i in rest} == {x.dispatch_id for x in leases} - {
        i.identity.dispatch_id for i in page
    }


def test_claimed_item_carries_the_whole_identity(world: World, store: Storage) -> None:
    (lease,) = world.crashed(1)
    (item,) = store.at(AFTER).claim_due_page("r", 16, REC_LEASE_MS)
    spec = world.specs[lease.dispatch_id]
    ident = item.identity
    assert (
        ident.dispatch_id,
        ident.approval_request_id,
        ident.project_id,
        ident.action_type,
        ident.action_digest,
        ident.idempotency_key,
        ident.schema_version,
    ) == (
        spec.dispatch_id,
        spec.approval_request_id,
        spec.project_id,
        spec.action_type,
        spec.action_digest,
        spec.idempotency_key,
        spec.schema_version,
    )
    assert (ident.attempt, ident.started_at_ms) == (1, T0)
    assert item.execution_version == lease.version


def test_held_recovery_lease_is_not_reclaimed_until_it_expires(
    world: World, store: Storage
) -> None:
    world.crashed(1)
    (first,) = store.at(AFTER).claim_due_page("a", 16, REC_LEASE_MS)
    assert store.at(AFTER + REC_LEASE_MS - 1).claim_due_page("b", 16, REC_LEASE_MS) == []
    (second,) = store.at(AFTER + REC_LEASE_MS).claim_due_page("b", 16, REC_LEASE_MS)
    assert second.recovery_token != first.recovery_token
    assert second.recovery_version > first.recovery_version


def test_two_concurrent_claimers_never_share_a_control(world: World, database_url: str) -> None:
    world.crashed(120)
    stores = [Storage(database_url) for _ in range(4)]
    claimed: list[list[str]] = [[] for _ in stores]
    start = threading.Barrier(len(stores))

    def claim(i: int) -> None:
        stores[i].open()
        start.wait()
        while page := stores[i].at(AFTER).claim_due_page(f"r{i}", 7, REC_LEASE_MS):
            claimed[i].extend(item.identity.dispatch_id for item in page)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    everything = [d for part in claimed for d in part]
    assert len(everything) == len(set(everything)) == 120


def test_verified_success_commits_resolution_terminal_state_and_closed_control(
    world: World, store: Storage, sql: SQL
) -> None:
    (lease,) = world.crashed(1)
    report = reconciler(store, ScriptedProvider(verified)).at(AFTER).run_cycle()
    assert report.accepted == {lease.dispatch_id}
    row = sql.execution(lease.dispatch_id)
    assert (row["state"], row["version"], row["finished_at_ms"]) == (
        "succeeded",
        lease.version + 1,
        AFTER,
    )
    (res,) = sql.resolutions(lease.dispatch_id)
    assert (res["source"], res["outcome"], res["finding"], res["expected_execution_version"]) == (
        "automatic",
        "succeeded",
        "verified_succeeded",
        lease.version,
    )
    assert res["evidence_digest"] == row["evidence_digest"]
    control = sql.control(lease.dispatch_id)
    assert (control["status"], control["closed_by"], control["recovery_token"]) == (
        "resolved",
        "automatic",
        None,
    )


def test_verified_failure_moves_to_failed(world: World, store: Storage, sql: SQL) -> None:
    (lease,) = world.crashed(1)
    reconciler(store, ScriptedProvider(fixed(FindingKind.VERIFIED_FAILED))).at(AFTER).run_cycle()
    assert sql.execution(lease.dispatch_id)["state"] == "failed"


@pytest.mark.parametrize(
    "kind", [FindingKind.MISSING, FindingKind.STILL_RUNNING, FindingKind.UNAVAILABLE]
)
def test_non_terminal_findings_back_off_and_release(
    world: World, store: Storage, sql: SQL, kind: FindingKind
) -> None:
    (lease,) = world.crashed(1)
    rec = reconciler(store, ScriptedProvider(fixed(kind)))
    rec.at(AFTER).run_cycle()
    control = sql.control(lease.dispatch_id)
    assert control["status"] == "armed" and control["last_finding"] == kind.value
    assert control["finding_count"] == 1 and control["recovery_token"] is None
    assert AFTER + 500 <= control["next_scan_at_ms"] <= AFTER + 1_000  # base 1s, equal jitter
    assert sql.execution(lease.dispatch_id)["state"] == "executing"
    assert rec.at(AFTER + 499).run_cycle().claimed == 0
    rec.at(AFTER + 1_000).run_cycle()
    second = sql.control(lease.dispatch_id)
    assert second["finding_count"] == 2
    assert AFTER + 2_000 <= second["next_scan_at_ms"] <= AFTER + 3_000  # doubled


@pytest.mark.parametrize("kind", [FindingKind.CONFLICT, FindingKind.UNSUPPORTED])
def test_conflict_and_unsupported_wait_for_a_human(
    world: World, store: Storage, sql: SQL, kind: FindingKind
) -> None:
    (lease,) = world.crashed(1)
    rec = reconciler(store, ScriptedProvider(fixed(kind)))
    rec.at(AFTER).run_cycle()
    control = sql.control(lease.dispatch_id)
    assert (control["status"], control["manual_at_ms"], control["last_finding"]) == (
        "manual",
        AFTER,
        kind.value,
    )
    row = sql.execution(lease.dispatch_id)
    assert row["state"] == "executing" and row["version"] == lease.version  # never auto-blocked
    assert rec.at(AFTER + 10**9).run_cycle().claimed == 0


def test_action_type_without_provider_is_unsupported(
    world: World, store: Storage, sql: SQL
) -> None:
    (lease,) = world.crashed(1, action_type="unmapped.type")
    report = reconciler(store, ScriptedProvider(verified)).at(AFTER).run_cycle()
    assert report.findings == {FindingKind.UNSUPPORTED: 1}
    assert sql.control(lease.dispatch_id)["status"] == "manual"


def test_renew_revokes_the_recovery_lease_and_the_stale_commit_writes_nothing(
    world: World, store: Storage, sql: SQL
) -> None:
    (lease,) = world.crashed(1)
    (item,) = store.at(AFTER).claim_due_page("stale", 16, REC_LEASE_MS)
    renewed = world.executor.at(AFTER + 10).renew(lease)  # the executor was alive after all
    before = (sql.execution(lease.dispatch_id), sql.control(lease.dispatch_id))
    assert before[1]["recovery_token"] is None
    assert before[1]["next_scan_at_ms"] == renewed.lease_expires_at_ms
    outcome = ItemOutcome(item, verified(item.identity), 1_000, "auto-stale")
    report = store.at(AFTER + 20).commit_outcomes([outcome])
    assert report.rejected == {lease.dispatch_id} and not report.accepted
    assert (sql.execution(lease.dispatch_id), sql.control(lease.dispatch_id)) == before
    assert sql.resolutions(lease.dispatch_id) == []


def test_reclaimed_item_rejects_the_first_resolvers_commit(
    world: World, store: Storage, sql: SQL
) -> None:
    (lease,) = world.crashed(1)
    (old,) = store.at(AFTER).claim_due_page("slow", 16, REC_LEASE_MS)
    (new,) = store.at(AFTER + REC_LEASE_MS).claim_due_page("fast", 16, REC_LEASE_MS)
    stale = store.at(AFTER + REC_LEASE_MS + 1).commit_outcomes(
        [ItemOutcome(old, verified(old.identity), 0, "auto-1")]
    )
    assert stale.rejected == {lease.dispatch_id}
    fresh = store.at(AFTER + REC_LEASE_MS + 2).commit_outcomes(
        [ItemOutcome(new, verified(new.identity), 0, "auto-2")]
    )
    assert fresh.accepted == {lease.dispatch_id}
    assert len(sql.resolutions(lease.dispatch_id)) == 1


def test_page_commit_is_all_or_nothing_per_dispatch(world: World, store: Storage, sql: SQL) -> None:
    leases = world.crashed(4)
    page = store.at(AFTER).claim_due_page("r", 16, REC_LEASE_MS)
    world.executor.at(AFTER + 1).renew(leases[1])  # revokes one item of the page
    outcomes = [ItemOutcome(i, verified(i.identity), 0, f"auto-{n}") for n, i in enumerate(page)]
    report = store.at(AFTER + 2).commit_outcomes(outcomes)
    assert report.rejected == {leases[1].dispatch_id}
    assert report.accepted == {x.dispatch_id for x in leases} - {leases[1].dispatch_id}
    assert sql.execution(leases[1].dispatch_id)["state"] == "executing"
    assert sql.resolutions(leases[1].dispatch_id) == []
    for lease in (leases[0], leases[2], leases[3]):
        assert sql.execution(lease.dispatch_id)["state"] == "succeeded"


def test_renew_rearms_a_manual_control(world: World, store: Storage, sql: SQL) -> None:
    (lease,) = world.crashed(1)
    reconciler(store, ScriptedProvider(fixed(FindingKind.CONFLICT))).at(AFTER).run_cycle()
    assert sql.control(lease.dispatch_id)["status"] == "manual"
    renewed = world.executor.at(AFTER + 5).renew(lease)
    control = sql.control(lease.dispatch_id)
    assert (control["status"], control["manual_at_ms"], control["next_scan_at_ms"]) == (
        "armed",
        None,
        renewed.lease_expires_at_ms,
    )


def test_stop_requested_after_claim_releases_the_page(
    world: World, store: Storage, sql: SQL
) -> None:
    (lease,) = world.crashed(1)
    provider = ScriptedProvider(verified)
    report = reconciler(store, provider).at(AFTER).run_cycle(should_stop=lambda: True)
    assert report.released == 1 and provider.calls == []
    control = sql.control(lease.dispatch_id)
    assert control["recovery_token"] is None and control["next_scan_at_ms"] == AFTER
    assert len(store.at(AFTER).claim_due_page("other", 16, REC_LEASE_MS)) == 1


def test_provider_timeout_is_unavailable(world: World, store: Storage, sql: SQL) -> None:
    (lease,) = world.crashed(1)
    gate = threading.Event()
    provider = ScriptedProvider(verified, timeout_seconds=0.2, gate=gate)
    try:
        report = reconciler(store, provider).at(AFTER).run_cycle()
    finally:
        gate.set()
    assert report.findings == {FindingKind.UNAVAILABLE: 1}
    assert sql.execution(lease.dispatch_id)["state"] == "executing"


def test_provider_exception_is_unavailable(world: World, store: Storage) -> None:
    world.crashed(1)

    def boom(_identity):  # type: ignore[no-untyped-def]
        raise RuntimeError("provider bug")

    report = reconciler(store, ScriptedProvider(boom)).at(AFTER).run_cycle()
    assert report.findings == {FindingKind.UNAVAILABLE: 1}


def test_storage_unavailable_moves_no_state(
    world: World, store: Storage, sql: SQL, database_url: str
) -> None:
    (lease,) = world.crashed(1)
    (item,) = store.at(AFTER).claim_due_page("r", 16, REC_LEASE_MS)
    before = (sql.execution(lease.dispatch_id), sql.control(lease.dispatch_id))
    dead = Storage("postgresql://postgres@127.0.0.1:1/nowhere", connect_timeout_seconds=1)
    dead.open()
    try:
        with pytest.raises(StorageUnavailable, match="unavailable"):
            dead.at(AFTER).commit_outcomes(
                [ItemOutcome(item, verified(item.identity), 0, "auto-x")]
            )
        with pytest.raises(StorageUnavailable):
            dead.claim_due_page("r", 16, REC_LEASE_MS)
    finally:
        dead.close()
    assert (sql.execution(lease.dispatch_id), sql.control(lease.dispatch_id)) == before


def test_connection_killed_mid_commit_rolls_back(world: World, store: Storage, sql: SQL) -> None:
    (lease,) = world.crashed(1)
    (item,) = store.at(AFTER).claim_due_page("r", 16, REC_LEASE_MS)
    before = sql.execution(lease.dispatch_id)
    # The commit stalls mid-transaction (its rows locked, the resolution being inserted: a
    # trigger sleeps), then its backend is terminated. The page commit skips rows another
    # transaction holds, so a held lock no longer makes it wait; a slow write does.
    sql.all(
        "CREATE FUNCTION test_stall() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN PERFORM pg_sleep(30); RETURN NEW; END $$"
    )
    sql.all(
        "CREATE TRIGGER test_stall BEFORE INSERT ON approved_action_recovery_resolutions"
        " FOR EACH ROW EXECUTE FUNCTION test_stall()"
    )
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            store.at(AFTER).commit_outcomes(
                [ItemOutcome(item, verified(item.identity), 0, "auto-k")]
            )
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=commit)
    t.start()
    pid = _wait_for_waiter(sql, "wait_event = 'PgSleep'")
    sql.all("SELECT pg_terminate_backend(%s)", pid)
    t.join(10)
    assert errors and isinstance(errors[0], StorageUnavailable)
    assert sql.execution(lease.dispatch_id) == before
    assert sql.resolutions(lease.dispatch_id) == []


def _wait_for_waiter(sql: SQL, condition: str) -> int:
    # Polls pg_stat_activity (a signal from the database), bounded, no fixed sleep.
    for _ in range(2_000):
        rows = sql.all(
            f"SELECT pid FROM pg_stat_activity WHERE {condition} AND datname = current_database()"
        )
        if rows:
            return int(rows[0]["pid"])
        sql.all("SELECT pg_sleep(0.005)")
    raise AssertionError("the commit never waited on the lock")


def test_idle_cycle_writes_nothing(world: World, store: Storage, sql: SQL) -> None:
    world.crashed(2)  # armed but not yet due

    def snapshot() -> list[dict[str, object]]:
        return sql.all(
            "SELECT xmin::text, * FROM approved_action_recovery_controls ORDER BY dispatch_id"
        )

    before = snapshot()
    rec = reconciler(store, ScriptedProvider(verified))
    for _ in range(5):
        assert rec.at(T0 + 1).run_cycle().claimed == 0
    assert snapshot() == before


def test_claim_uses_the_partial_due_index(world: World, sql: SQL) -> None:
    world.crashed(3)
    # Many closed controls: the index must keep the claim independent of them.
    sql.all(
        "INSERT INTO approved_action_dispatches (dispatch_id, approval_request_id, project_id, action_type,"
        " action_digest, idempotency_key, schema_version)"
        " SELECT 'x' || g, 'a', 'p', 't', repeat('0', 64), 'k' || g, 1 FROM generate_series(1, 20000) g"
    )
    # History imported as the owner: rows past `leased` skip the state machine on purpose.
    sql.all("SET resolver.import_history = on")
    sql.all(
        "INSERT INTO approved_action_executions (dispatch_id, state, owner, token, version, attempt,"
        " lease_expires_at_ms, started_at_ms, finished_at_ms)"
        " SELECT 'x' || g, 'succeeded', 'o', gen_random_uuid(), 3, 1, 0, 0, 1 FROM generate_series(1, 20000) g"
    )
    sql.all(
        "INSERT INTO approved_action_recovery_controls (dispatch_id, status, execution_version, next_scan_at_ms,"
        " armed_at_ms, closed_by, closed_at_ms)"
        " SELECT 'x' || g, 'resolved', 3, 0, 0, 'completion', 1 FROM generate_series(1, 20000) g"
    )
    sql.all("RESET resolver.import_history")
    sql.all("ANALYZE")
    from resolver.db.statements import statement

    plan = _explain(sql, statement("recovery_claim_due_page"))
    assert "ix_recovery_controls_due" in plan, plan


def _explain(sql: SQL, text: str) -> str:
    params = {"now_ms": AFTER, "owner": "r", "page_size": 16, "lease_ms": REC_LEASE_MS}
    rows = sql.conn.execute(f"EXPLAIN {text}", params).fetchall()  # type: ignore[arg-type]
    return "\n".join(r["QUERY PLAN"] for r in rows)
