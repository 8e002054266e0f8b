"""The replica's lifecycle: start, stop within the grace period, health; cadence and retry."""

from __future__ import annotations

import random
import threading

from resolver.core.errors import StorageUnavailable
from resolver.core.events import CycleEvents, CycleReport, Stage
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.replica import LoopSettings, Replica, State
from resolver.core.runtime import Runtime
from tests.helpers.database import SQL, T0, World
from tests.helpers.providers import ScriptedProvider, registry, verified
from tests.helpers.stores import Storage


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


def _replica(
    store: Storage,
    provider: object,
    subscribers: tuple[CycleEvents, ...] = (),
    *,
    page_size: int = 16,
    cadence_seconds: float = 0.01,
    liveness_bound_seconds: float = float("inf"),
) -> Replica[Storage]:
    runtime = Runtime(rng=random.Random(3), subscribers=subscribers)
    rec = Reconciler(
        store,
        registry("test.action", provider),
        ReconcilerSettings(owner="w", page_size=page_size, recovery_lease_ms=30_000),
        runtime,
    )
    loop = LoopSettings(
        cadence_seconds=cadence_seconds,
        storage_retry_base_seconds=0.01,
        storage_retry_max_seconds=0.05,
    )
    return Replica(rec, loop, runtime, store, liveness_bound_seconds=liveness_bound_seconds)


def test_stop_during_inspect_finishes_the_cycle_then_exits(
    world: World, store: Storage, sql: SQL
) -> None:
    # Executions whose leases already expired on the real database clock.
    leases = [world.started(now_ms=0) for _ in range(3)]
    gate, entered = threading.Event(), threading.Event()
    rep = _replica(store, ScriptedProvider(verified, gate=gate, entered=entered))
    ended = threading.Event()
    rep.start(on_exit=ended.set)
    assert entered.wait(10), "the provider was never asked"
    assert rep.state is State.RUNNING
    rep.request_stop()
    assert rep.state is State.STOPPING and rep.health().detail["state"] == "stopping"
    gate.set()
    assert rep.stop(10)
    rep.close()
    assert ended.is_set() and rep.state is State.STOPPED
    assert {sql.execution(x.dispatch_id)["state"] for x in leases} == {"succeeded"}
    assert {sql.control(x.dispatch_id)["recovery_token"] for x in leases} == {None}


def test_a_cycle_outliving_the_grace_period_is_reported_and_its_leases_lapse(
    world: World, store: Storage, sql: SQL
) -> None:
    lease = world.started(now_ms=0)
    gate, entered = threading.Event(), threading.Event()
    rep = _replica(
        store, ScriptedProvider(verified, timeout_seconds=30, gate=gate, entered=entered)
    )
    rep.start()
    assert entered.wait(10)
    try:
        assert rep.stop(0.05) is False  # the provider still holds the cycle
        # Nothing was committed: the claim's recovery lease is what hands the item back.
        control = sql.control(lease.dispatch_id)
        assert (control["status"], control["recovery_owner"]) == ("armed", "w")
    finally:
        gate.set()
        assert rep.wait(10)
        rep.close()


def test_health_reports_a_stalled_loop(store: Storage) -> None:
    rep = _replica(store, ScriptedProvider(verified), liveness_bound_seconds=0.0)
    assert rep.health().detail["state"] == "new"
    rep.run(once=True)
    probe = rep.health()
    # A zero bound: any age is too old, so the view must say stalled (and the state).
    assert (probe.ok, probe.detail["status"], probe.detail["state"]) == (
        False,
        "stalled",
        "stopped",
    )
    assert probe.detail["cycles"] == 1 and rep.cycles_completed == 1
    healthy = _replica(store, ScriptedProvider(verified), liveness_bound_seconds=3600)
    healthy.run(once=True)
    assert healthy.health().ok
    rep.close()
    healthy.close()


def test_dead_database_is_retried_with_backoff_and_moves_nothing(world: World, sql: SQL) -> None:
    dead = Storage("postgresql://postgres@127.0.0.1:1/none", connect_timeout_seconds=0.2)
    dead.open()
    cycles = Cycles(3)
    rep = _replica(dead, ScriptedProvider(verified), (cycles,))
    rep.start()
    assert cycles.enough.wait(30)
    assert rep.stop(10)
    rep.close()
    dead.close()
    assert cycles.errors and all(isinstance(e, StorageUnavailable) for e in cycles.errors)
    assert all(0 < delay <= 0.05 for delay in cycles.retries)  # capped backoff
    assert rep.cycles_completed == 0 and cycles.reports == []


def test_full_page_goes_again_without_waiting(world: World, store: Storage) -> None:
    for _ in range(5):
        world.started(now_ms=0)
    cycles = Cycles(3)
    # A cadence far longer than the test: only full pages can explain three quick cycles.
    rep = _replica(store, ScriptedProvider(verified), (cycles,), page_size=2, cadence_seconds=3600)
    rep.start()
    done = cycles.enough.wait(10)
    assert rep.stop(10)
    rep.close()
    assert done
    assert [r.claimed for r in cycles.reports[:3]] == [2, 2, 1]


def test_a_partial_page_sleeps_until_the_next_control_falls_due_not_the_cadence(
    world: World, store: Storage, sql: SQL
) -> None:
    # One execution already recovery_required, one whose lease runs out about a second from
    # now on the database clock. The first cycle settles the first and learns from its claim
    # when the second falls due; with a cadence of an hour, only a wake-up at that time can
    # explain the second cycle settling it.
    db_now = int(sql.one("SELECT resolver_now_ms(NULL) AS ms")["ms"])
    first = world.started(now_ms=0)
    second = world.started(now_ms=db_now)
    cycles = Cycles(2)
    rep = _replica(store, ScriptedProvider(verified), (cycles,), cadence_seconds=3600)
    rep.start()
    done = cycles.enough.wait(30)
    assert rep.stop(10)
    rep.close()
    assert done, "the replica slept the cadence"
    assert [r.claimed for r in cycles.reports[:2]] == [1, 1]
    due_in = cycles.reports[0].next_due_in_ms
    assert due_in is not None and 0 < due_in <= 1_000
    assert {sql.execution(x.dispatch_id)["state"] for x in (first, second)} == {"succeeded"}
    settled = sql.one(
        "SELECT resolved_at_ms FROM approved_action_recovery_resolutions WHERE dispatch_id = %s",
        second.dispatch_id,
    )["resolved_at_ms"]
    # Settled after the lease ran out, never before (the claim's own fence).
    assert settled >= db_now + 1_000


def test_each_claimed_row_says_when_the_next_armed_control_falls_due(
    world: World, store: Storage
) -> None:
    due = world.started(now_ms=T0 - 1_000)  # due at T0
    world.started(now_ms=T0)  # due at T0 + 1,000
    world.started(now_ms=T0 + 5_000)  # due at T0 + 6,000
    (item,) = store.at(T0).claim_due_page("r", 16, 30_000)
    assert item.identity.dispatch_id == due.dispatch_id
    assert (item.claimed_at_ms, item.next_due_at_ms) == (T0, T0 + 1_000)
    # The rows just claimed moved to their recovery lease's end, past the next one due.
    (second,) = store.at(T0 + 1_000).claim_due_page("r", 16, 30_000)
    assert second.next_due_at_ms == T0 + 6_000
    (last,) = store.at(T0 + 6_000).claim_due_page("r", 16, 30_000)
    # Past it only the recovery leases just taken: they fall due when those run out.
    assert last.next_due_at_ms == T0 + 30_000
    # An empty claim answers nothing, and asks nothing more.
    assert store.at(T0 + 6_001).claim_due_page("r", 16, 30_000) == []
