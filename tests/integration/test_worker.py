"""The replica loop: cadence, clean stop mid-cycle, retry on a dead database."""

from __future__ import annotations

import random
import threading

from resolver.db.repository import PostgresStore
from resolver.errors import StorageUnavailable
from resolver.events import CycleEvents, CycleReport, Stage
from resolver.reconciler import Reconciler, ReconcilerSettings
from resolver.runtime import Runtime
from resolver.worker import Worker, WorkerSettings
from tests.conftest import SQL, World
from tests.providers_for_tests import ScriptedProvider, registry, verified


class Cycles(CycleEvents):
    """Completed reports and failures, as the seam delivers them; `enough` after `target`."""

    def __init__(self, target: int) -> None:
        self.reports: list[CycleReport] = []
        self.errors: list[BaseException] = []
        self.retries: list[float] = []
        self.target = target
        self.enough = threading.Event()

    def cycle_completed(self, report: CycleReport, seconds: float) -> None:
        self.reports.append(report)
        self._check()

    def cycle_failed(self, stage: Stage, error: BaseException, seconds: float) -> None:
        self.errors.append(error)

    def storage_retry(self, error: StorageUnavailable, failures: int, delay_seconds: float) -> None:
        self.retries.append(delay_seconds)
        self._check()

    def _check(self) -> None:
        if max(len(self.reports), len(self.retries)) >= self.target:
            self.enough.set()


def _worker(
    store: PostgresStore, provider: object, subscribers: tuple[CycleEvents, ...] = ()
) -> tuple[Worker, Reconciler]:
    runtime = Runtime(rng=random.Random(3), subscribers=subscribers)
    rec = Reconciler(
        store,
        registry("test.action", provider),
        ReconcilerSettings(owner="w", page_size=16, recovery_lease_ms=30_000),
        runtime,
    )
    return Worker(
        rec,
        WorkerSettings(
            cadence_seconds=0.01, storage_retry_base_seconds=0.01, storage_retry_max_seconds=0.05
        ),
        runtime,
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
    cycles = Cycles(3)
    worker, rec = _worker(dead, ScriptedProvider(verified), (cycles,))
    thread = threading.Thread(target=worker.run)
    thread.start()
    assert cycles.enough.wait(30)
    worker.request_stop()
    thread.join(10)
    rec.close()
    dead.close()
    assert not thread.is_alive()
    assert cycles.errors and all(isinstance(e, StorageUnavailable) for e in cycles.errors)
    assert all(0 < delay <= 0.05 for delay in cycles.retries)  # capped backoff
    assert worker.cycles_completed == 0 and cycles.reports == []


def test_full_page_goes_again_without_waiting(world: World, store: PostgresStore) -> None:
    for _ in range(5):
        world.started(now_ms=0)
    cycles = Cycles(3)
    runtime = Runtime(subscribers=(cycles,))
    rec = Reconciler(
        store,
        registry("test.action", ScriptedProvider(verified)),
        ReconcilerSettings(owner="w", page_size=2, recovery_lease_ms=30_000),
        runtime,
    )
    # A cadence far longer than the test: only full pages can explain three quick cycles.
    worker = Worker(rec, WorkerSettings(cadence_seconds=3600), runtime)
    thread = threading.Thread(target=worker.run)
    thread.start()
    done = cycles.enough.wait(10)
    worker.request_stop()
    thread.join(10)
    rec.close()
    assert done
    assert [r.claimed for r in cycles.reports[:3]] == [2, 2, 1]
