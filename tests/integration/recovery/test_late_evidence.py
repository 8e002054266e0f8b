"""Late evidence after a human decision: watched for a window, recorded beside the decision,
never changing the terminal state; fenced so two replicas never record one look twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from resolver.app.composition import build_telemetry
from resolver.core.domain import (
    Decision,
    DecisionFilter,
    DispatchIdentity,
    Finding,
    FindingKind,
    LateObservation,
    LateRecord,
    LateWatch,
    ManualDecision,
    ManualResult,
    Principal,
)
from resolver.core.late_evidence import LateEvidenceSettings, LateEvidenceWatcher
from resolver.core.provider import Capability, ProviderRegistry
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.replica import LoopSettings, Replica
from resolver.core.runtime import Runtime
from resolver.human.manual import ManualResolutionService
from resolver.telemetry.metrics import ResolverMetrics
from tests.contention.checker import LATE_SNAPSHOT_SQL, check
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.providers import ScriptedProvider, fixed
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER
from tests.helpers.stores import Storage

NOW = T0 + EXEC_LEASE_MS + 60_000
WINDOW_MS = 3_600_000
CADENCE_MS = 60_000
LEASE_MS = 30_000
ALICE = Principal(
    "alice", auth_time_ms=NOW - 60_000, amr=("pwd", "mfa"), issuer=TEST_ISSUER, token_kid="test-kid"
)


@pytest.fixture
def decide(store: Storage, sql: SQL) -> Callable[[str, int, Decision], None]:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    service = ManualResolutionService(store, signer=TEST_SIGNER)

    def decide(dispatch_id: str, version: int, decision: Decision) -> None:
        manual = ManualDecision(dispatch_id, decision, f"op-{dispatch_id}", version, "checked")
        assert service.at(NOW).decide(ALICE, manual) is ManualResult.COMMITTED

    return decide


def _watcher(
    store: Storage,
    answer: Callable[[DispatchIdentity], Finding],
    *,
    owner: str = "r1",
    metrics: ResolverMetrics | None = None,
    capability: Capability = Capability.AUTOMATIC,
) -> LateEvidenceWatcher:
    provider = ScriptedProvider(answer)
    provider.capability = capability  # type: ignore[misc]
    settings = LateEvidenceSettings(
        owner=owner, window_ms=WINDOW_MS, cadence_ms=CADENCE_MS, lease_ms=LEASE_MS
    )
    registry = ProviderRegistry({"test.action": provider})
    runtime = Runtime(subscribers=build_telemetry(metrics=metrics).subscribers)
    return LateEvidenceWatcher(store, registry, settings, runtime)


def _metric(metrics: ResolverMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_a_contradiction_is_recorded_counted_and_leaves_the_terminal_state(
    world: World, store: Storage, sql: SQL, decide: Callable[[str, int, Decision], None]
) -> None:
    (lease,) = world.crashed(1)
    decide(lease.dispatch_id, lease.version, Decision.CONFIRM_FAILED)
    settled = sql.execution(lease.dispatch_id)
    resolution = sql.resolutions(lease.dispatch_id)
    metrics = ResolverMetrics(CollectorRegistry())
    watcher = _watcher(store, fixed(FindingKind.VERIFIED_SUCCEEDED), metrics=metrics)

    report = watcher.at(NOW + 1).run_cycle()
    assert [(r.recorded, r.agrees) for r in report.records] == [(True, False)]
    (late,) = sql.all("SELECT * FROM recovery_late_evidence")
    assert (late["dispatch_id"], late["finding"], late["agrees"]) == (
        lease.dispatch_id,
        "verified_succeeded",
        False,
    )
    assert (late["decision_mutation_id"], late["observed_at_ms"]) == (
        f"op-{lease.dispatch_id}",
        NOW + 1,
    )
    # The decision stands: the same execution row, version and resolution as before.
    assert sql.execution(lease.dispatch_id) == settled
    assert settled["state"] == "failed"
    assert sql.resolutions(lease.dispatch_id) == resolution
    watch = sql.one("SELECT * FROM recovery_late_watches")
    assert (watch["closed_reason"], watch["closed_at_ms"]) == ("observed", NOW + 1)
    counted = _metric(metrics, "resolver_decision_contradictions_total", action_type="test.action")
    assert counted == 1.0
    # Shown with the case and in the decisions list.
    case = store.get_case("alice", lease.dispatch_id)
    assert case is not None
    assert [(e.finding, e.agrees, e.observed_at_ms) for e in case.late_evidence] == [
        (FindingKind.VERIFIED_SUCCEEDED, False, NOW + 1)
    ]
    (decision,) = store.list_decisions("alice", filters=DecisionFilter(), limit=10)
    assert decision.contradicted is True
    # The watch is closed: nothing is looked at or recorded again.
    assert watcher.at(NOW + CADENCE_MS * 2).run_cycle().claimed == 0
    assert len(sql.all("SELECT * FROM recovery_late_evidence")) == 1


def test_agreement_is_recorded_too_and_counts_no_contradiction(
    world: World, store: Storage, sql: SQL, decide: Callable[[str, int, Decision], None]
) -> None:
    (lease,) = world.crashed(1)
    decide(lease.dispatch_id, lease.version, Decision.CONFIRM_FAILED)
    metrics = ResolverMetrics(CollectorRegistry())
    watcher = _watcher(store, fixed(FindingKind.VERIFIED_FAILED), metrics=metrics)
    report = watcher.at(NOW + 1).run_cycle()
    assert [(r.recorded, r.agrees) for r in report.records] == [(True, True)]
    assert sql.one("SELECT agrees FROM recovery_late_evidence")["agrees"] is True
    assert (
        _metric(metrics, "resolver_decision_contradictions_total", action_type="test.action") == 0
    )
    assert (
        _metric(metrics, "resolver_late_evidence_total", action_type="test.action", agrees="true")
        == 1
    )
    (decision,) = store.list_decisions("alice", filters=DecisionFilter(), limit=10)
    assert decision.contradicted is False


def test_non_final_findings_keep_watching_at_the_cadence_until_a_late_receipt_is_recorded(
    world: World, store: Storage, sql: SQL, decide: Callable[[str, int, Decision], None]
) -> None:
    early, late = world.crashed(2)
    decide(early.dispatch_id, early.version, Decision.CONFIRM_SUCCEEDED)
    decide(late.dispatch_id, late.version, Decision.CONFIRM_SUCCEEDED)
    answers = {early.dispatch_id: FindingKind.MISSING, late.dispatch_id: FindingKind.MISSING}
    watcher = _watcher(store, lambda i: fixed(answers[i.dispatch_id])(i))

    report = watcher.at(NOW + 1).run_cycle()
    assert (
        sorted((r.recorded, r.finding) for r in report.records)
        == [(False, FindingKind.MISSING)] * 2
    )
    watches = sql.all("SELECT * FROM recovery_late_watches ORDER BY dispatch_id")
    assert {(w["closed_at_ms"], w["next_scan_at_ms"], w["observations"]) for w in watches} == {
        (None, NOW + 1 + CADENCE_MS, 1)
    }
    # Not due again before the cadence.
    assert watcher.at(NOW + CADENCE_MS).run_cycle().claimed == 0

    # The receipts arrive. One look a millisecond inside the window records; at the window's
    # end nothing is claimed, and the watch is closed instead.
    answers[early.dispatch_id] = FindingKind.VERIFIED_SUCCEEDED
    answers[late.dispatch_id] = FindingKind.VERIFIED_FAILED
    inside = watcher.at(NOW + WINDOW_MS - 1).run_cycle()
    assert {r.watch.identity.dispatch_id for r in inside.records if r.recorded} == {
        early.dispatch_id,
        late.dispatch_id,
    }
    assert {
        (r["dispatch_id"], r["agrees"]) for r in sql.all("SELECT * FROM recovery_late_evidence")
    } == {
        (early.dispatch_id, True),
        (late.dispatch_id, False),
    }


def test_at_the_end_of_the_window_the_watch_closes_unrecorded(
    world: World, store: Storage, sql: SQL, decide: Callable[[str, int, Decision], None]
) -> None:
    (lease,) = world.crashed(1)
    decide(lease.dispatch_id, lease.version, Decision.CONFIRM_SUCCEEDED)
    watcher = _watcher(store, fixed(FindingKind.VERIFIED_FAILED))
    report = watcher.at(NOW + WINDOW_MS).run_cycle()
    assert (report.expired, report.claimed, report.records) == (1, 0, ())
    watch = sql.one("SELECT * FROM recovery_late_watches")
    assert (watch["closed_reason"], watch["closed_at_ms"]) == ("window_elapsed", NOW + WINDOW_MS)
    assert sql.all("SELECT * FROM recovery_late_evidence") == []
    assert watcher.at(NOW + WINDOW_MS + CADENCE_MS).run_cycle().claimed == 0


def test_a_record_after_the_window_is_fenced_out(
    world: World, store: Storage, sql: SQL, decide: Callable[[str, int, Decision], None]
) -> None:
    """A look claimed inside the window whose record lands after it records nothing."""
    (lease,) = world.crashed(1)
    decide(lease.dispatch_id, lease.version, Decision.CONFIRM_SUCCEEDED)
    (watch,) = store.at(NOW + WINDOW_MS - 1).claim_late_watches("r1", 10, LEASE_MS, WINDOW_MS)
    observation = _observation(watch, FindingKind.VERIFIED_FAILED, "late-x-0")
    assert store.at(NOW + WINDOW_MS).record_late_observations("r1", [observation], WINDOW_MS) == []
    assert sql.all("SELECT * FROM recovery_late_evidence") == []


def test_no_watch_for_an_action_type_without_an_automatic_provider(
    world: World, store: Storage, sql: SQL, decide: Callable[[str, int, Decision], None]
) -> None:
    (unsupported,) = world.crashed(1, action_type="shell.exec")
    # Inspected with no provider for shell.exec: `unsupported`, to the manual queue.
    reconciler = Reconciler(
        store, ProviderRegistry({}), ReconcilerSettings(owner="r", recovery_lease_ms=LEASE_MS)
    )
    reconciler.at(T0 + EXEC_LEASE_MS).run_cycle()
    assert sql.control(unsupported.dispatch_id)["last_finding"] == "unsupported"
    decide(unsupported.dispatch_id, unsupported.version, Decision.CONFIRM_SUCCEEDED)
    assert sql.all("SELECT * FROM recovery_late_watches") == []

    # Decided before any inspection, on a manual-only provider: the watcher never asks it
    # and closes the watch.
    (never_inspected,) = world.crashed(1)
    decide(never_inspected.dispatch_id, never_inspected.version, Decision.CONFIRM_FAILED)
    asked: list[str] = []

    def answer(identity: DispatchIdentity) -> Finding:
        asked.append(identity.dispatch_id)
        return fixed(FindingKind.VERIFIED_SUCCEEDED)(identity)

    watcher = _watcher(store, answer, capability=Capability.MANUAL_ONLY)
    report = watcher.at(NOW + 1).run_cycle()
    assert [(r.recorded, r.finding) for r in report.records] == [(False, FindingKind.UNSUPPORTED)]
    assert asked == []
    watch = sql.one("SELECT * FROM recovery_late_watches")
    assert watch["closed_reason"] == "unsupported"
    assert sql.all("SELECT * FROM recovery_late_evidence") == []


def test_an_abandoned_decision_opens_no_watch(
    world: World, store: Storage, sql: SQL, decide: Callable[[str, int, Decision], None]
) -> None:
    (lease,) = world.crashed(1)
    decide(lease.dispatch_id, lease.version, Decision.ABANDON_UNKNOWN)
    assert sql.all("SELECT * FROM recovery_late_watches") == []


def test_a_stale_holder_records_nothing_once_another_replica_took_the_watch(
    world: World, store: Storage, sql: SQL, decide: Callable[[str, int, Decision], None]
) -> None:
    (lease,) = world.crashed(1)
    decide(lease.dispatch_id, lease.version, Decision.CONFIRM_FAILED)
    (stale,) = store.at(NOW + 1).claim_late_watches("r1", 10, LEASE_MS, WINDOW_MS)
    # r1 stalls past its lease; r2 claims the same watch and records first.
    (fresh,) = store.at(NOW + 2 + LEASE_MS).claim_late_watches("r2", 10, LEASE_MS, WINDOW_MS)
    assert fresh.watch_token != stale.watch_token
    won = store.at(NOW + 3 + LEASE_MS).record_late_observations(
        "r2",
        [_observation(fresh, FindingKind.VERIFIED_SUCCEEDED, "late-b-0")],
        WINDOW_MS,
    )
    assert [(r.recorded, r.agrees) for r in won] == [(True, False)]
    lost = store.at(NOW + 4 + LEASE_MS).record_late_observations(
        "r1",
        [_observation(stale, FindingKind.VERIFIED_SUCCEEDED, "late-a-0")],
        WINDOW_MS,
    )
    assert lost == []
    (late,) = sql.all("SELECT * FROM recovery_late_evidence")
    assert (late["observation_id"], late["observer"]) == ("late-b-0", "r2")


def test_two_replicas_never_record_the_same_observation_twice(
    world: World, store: Storage, sql: SQL, decide: Callable[[str, int, Decision], None]
) -> None:
    """Racing replicas, each with a page smaller than the work and a lease short enough that
    watches come back: the recorded history holds each dispatch at most once, and so does
    the database."""
    leases = world.crashed(24)
    for lease in leases:
        decide(lease.dispatch_id, lease.version, Decision.CONFIRM_FAILED)
    history: list[tuple[str, LateRecord]] = []
    lock = threading.Lock()
    start = threading.Barrier(3)

    def replica(owner: str) -> None:
        watcher = LateEvidenceWatcher(
            store,
            ProviderRegistry({"test.action": ScriptedProvider(fixed(FindingKind.VERIFIED_FAILED))}),
            LateEvidenceSettings(
                owner=owner, window_ms=WINDOW_MS, cadence_ms=CADENCE_MS, page_size=4, lease_ms=1
            ),
        )
        start.wait()
        for round_ in range(12):
            # lease_ms=1: a watch claimed by the other replica is claimable again a moment
            # later, so the two do claim the same watches and their records race.
            report = watcher.at(NOW + 10 * (round_ + 1)).run_cycle()
            with lock:
                history.extend((owner, r) for r in report.records)
        watcher.close()

    threads = [threading.Thread(target=replica, args=(f"r{n}",)) for n in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    recorded = [r.watch.identity.dispatch_id for _owner, r in history if r.recorded]
    assert sorted(recorded) == sorted(lease.dispatch_id for lease in leases)
    rows = sql.all("SELECT dispatch_id, observation_id, observer FROM recovery_late_evidence")
    assert sorted(r["dispatch_id"] for r in rows) == sorted(recorded)
    by_dispatch = {
        dispatch_id: owner
        for owner, r in history
        if r.recorded
        for dispatch_id in [r.watch.identity.dispatch_id]
    }
    assert {r["dispatch_id"]: r["observer"] for r in rows} == by_dispatch
    # The terminal states never moved.
    assert {sql.execution(lease.dispatch_id)["state"] for lease in leases} == {"failed"}
    # And the contention checker's rules over the same history and rows agree.
    events = [
        {
            "t": n,
            "process": owner,
            "type": "ok",
            "f": "late_record",
            "records": [
                {
                    "dispatch_id": r.watch.identity.dispatch_id,
                    "observation_id": r.observation_id,
                    "recorded": r.recorded,
                    "agrees": r.agrees,
                }
            ],
        }
        for n, (owner, r) in enumerate(history)
    ]
    assert check(events, [], {}, (), late_rows=sql.all(LATE_SNAPSHOT_SQL)).violations == []


def _observation(watch: LateWatch, kind: FindingKind, observation_id: str) -> LateObservation:
    return LateObservation(watch, fixed(kind)(watch.identity), observation_id, CADENCE_MS)


def test_a_cycle_runs_at_most_once_per_cadence_and_pages_while_pages_are_full(
    world: World, store: Storage, sql: SQL, decide: Callable[[str, int, Decision], None]
) -> None:
    for lease in world.crashed(5):
        decide(lease.dispatch_id, lease.version, Decision.CONFIRM_FAILED)
    clock = [100.0]
    settings = LateEvidenceSettings(
        owner="r1", cadence_ms=CADENCE_MS, page_size=2, pages_per_cycle=2
    )
    watcher = LateEvidenceWatcher(
        store,
        ProviderRegistry({"test.action": ScriptedProvider(fixed(FindingKind.MISSING))}),
        settings,
        Runtime(clock=lambda: clock[0]),
    )
    first = watcher.at(NOW + 1).run_if_due()
    assert first is not None and first.claimed == 4  # two full pages, then the bound
    assert watcher.at(NOW + 2).run_if_due() is None  # not again before the cadence
    clock[0] += CADENCE_MS / 1000
    second = watcher.at(NOW + 3).run_if_due()
    assert second is not None and second.claimed == 1  # the fifth; the others wait a cadence
    assert {w["observations"] for w in sql.all("SELECT * FROM recovery_late_watches")} == {1}


def test_the_replica_loop_runs_the_watcher_between_cycles(
    world: World, store: Storage, sql: SQL, decide: Callable[[str, int, Decision], None]
) -> None:
    # On the real database clock, as a running replica sees it: a lease that expired long
    # ago, decided now.
    lease = world.started(now_ms=1_000_000)
    now = Principal(
        "alice",
        auth_time_ms=int(time.time() * 1000),
        amr=("mfa",),
        issuer=TEST_ISSUER,
        token_kid="test-kid",
    )
    manual = ManualDecision(lease.dispatch_id, Decision.CONFIRM_FAILED, "op-1", lease.version, "x")
    assert (
        ManualResolutionService(store, signer=TEST_SIGNER).decide(now, manual)
        is ManualResult.COMMITTED
    )
    provider = ScriptedProvider(fixed(FindingKind.VERIFIED_FAILED))
    runtime = Runtime()
    replica = Replica(
        Reconciler(store, ProviderRegistry({}), ReconcilerSettings(owner="w")),
        LoopSettings(),
        runtime,
        store,
        late_evidence=LateEvidenceWatcher(
            store,
            ProviderRegistry({"test.action": provider}),
            LateEvidenceSettings(owner="w"),
            runtime,
        ),
    )
    replica.run(once=True)
    replica.close()
    late = sql.one("SELECT * FROM recovery_late_evidence")
    assert (late["dispatch_id"], late["agrees"], late["observer"]) == (lease.dispatch_id, True, "w")
