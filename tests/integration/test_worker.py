"""The replica loop: cadence, clean stop mid-cycle, retry on a dead database."""

from __future__ import annotations

import random
import threading

from resolver.db.repository import PostgresStore
from resolver.errors import StorageUnavailable
from resolver.reconciler import CycleReport, Reconciler, ReconcilerSettings
from resolver.worker import Worker, WorkerSettings
from tests.conftest import SQL, World
from tests.providers_for_tests import ScriptedProvider, registry, verified


def _worker(
    store: PostgresStore, provider: object, listeners: tuple = ()
) -> tuple[Worker, Reconciler]:  # type: ignore[type-arg]
    rec = Reconciler(
        store,
        registry("test.action", provider),
        ReconcilerSettings(owner="w", page_size=16, recovery_lease_ms=30_000),
        rng=random.Random(3),
    )
    return Worker(
        rec,
        WorkerSettings(
            cadence_seconds=0.01, storage_retry_base_seconds=0.01, storage_retry_max_seconds=0.05
        ),
        listeners=listeners,
    ), rec


def test_stop_during_inspect_finishes_the_cycle_then_exits(
    world: World, store: PostgresStore, sql: SQL
) -> None:
    # Executions whose leases already expired on the real database clock.
    leases = [world.started(now_ms=0) for _ in range(3)]
    gate, entered = threading.Event(), threading.Event()
    worker, rec = _worker(store, ScriptedProvider(verified, gate=gate, entered=entered))
    thread = threading.Thread(target=worker.run)
    thread.start()
    assert entered.wait(10), "the provider was never asked"
    worker.request_stop()
    gate.set()
    thread.join(10)
    rec.close()
    assert not thread.is_alive()
    assert {sql.execution(x.dispatch_id)["state"] for x in leases} == {"succeeded"}
    assert {sql.control(x.dispatch_id)["recovery_token"] for x in leases} == {None}


def test_dead_database_is_retried_with_backoff_and_moves_nothing(world: World, sql: SQL) -> None:
    dead = PostgresStore("postgresql://postgres@127.0.0.1:1/none", connect_timeout_seconds=0.2)
    dead.open()
    errors: list[BaseException] = []
    enough = threading.Event()

    def listen(report: CycleReport | None, error: BaseException | None) -> None:
        if error is not None:
            errors.append(error)
            if len(errors) >= 3:
                enough.set()

    worker, rec = _worker(dead, ScriptedProvider(verified), listeners=(listen,))
    thread = threading.Thread(target=worker.run)
    thread.start()
    assert enough.wait(30)
    worker.request_stop()
    thread.join(10)
    rec.close()
    dead.close()
    assert not thread.is_alive()
    assert all(isinstance(e, StorageUnavailable) for e in errors)
    assert worker.cycles_completed == 0


def test_full_page_goes_again_without_waiting(world: World, store: PostgresStore) -> None:
    for _ in range(5):
        world.started(now_ms=0)
    reports: list[CycleReport] = []
    three = threading.Event()

    def listen(report: CycleReport | None, error: BaseException | None) -> None:
        if report is not None:
            reports.append(report)
            if len(reports) == 3:
                three.set()

    rec = Reconciler(
        store,
        registry("test.action", ScriptedProvider(verified)),
        ReconcilerSettings(owner="w", page_size=2, recovery_lease_ms=30_000),
    )
    # A cadence far longer than the test: only full pages can explain three quick cycles.
    worker = Worker(rec, WorkerSettings(cadence_seconds=3600), listeners=(listen,))
    thread = threading.Thread(target=worker.run)
    thread.start()
    done = three.wait(10)
    worker.request_stop()
    thread.join(10)
    rec.close()
    assert done
    assert [r.claimed for r in reports[:3]] == [2, 2, 1]
