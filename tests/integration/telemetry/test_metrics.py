"""Metrics from real cycles on real PostgreSQL, read back from a fresh registry."""

from __future__ import annotations

import random
import threading

import pytest
from prometheus_client import CollectorRegistry

from resolver.app.composition import build_telemetry
from resolver.core.domain import BacklogSnapshot, DispatchIdentity, Finding, FindingKind
from resolver.core.errors import StorageUnavailable
from resolver.core.provider import ProviderRegistry, build_registry
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver.telemetry.metrics import BacklogCollector, ResolverMetrics
from tests.helpers.clocks import FakeClock
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.providers import ScriptedProvider, fixed, verified
from tests.helpers.stores import Storage
from tests.helpers.telemetry import crashed_ago

AFTER = T0 + EXEC_LEASE_MS
WALL = 1_900_000_000.0


class Named(ScriptedProvider):
    """A scripted provider with the `name` attribute metrics use as the provider label."""

    def __init__(self, name: str, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.name = name


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry) -> ResolverMetrics:
    return ResolverMetrics(registry, wall_clock=lambda: WALL)


def reconciler(
    store: Storage, providers: dict[str, object], metrics: ResolverMetrics
) -> Reconciler:
    return Reconciler(
        store,
        ProviderRegistry(providers),  # type: ignore[arg-type]
        ReconcilerSettings(owner="replica-m", recovery_lease_ms=30_000, backoff_base_ms=1_000),
        Runtime(rng=random.Random(3), subscribers=build_telemetry(metrics=metrics).subscribers),
    )


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_a_cycle_counts_findings_resolutions_latencies_and_page_size(
    world: World, store: Storage, registry: CollectorRegistry, metrics: ResolverMetrics
) -> None:
    world.crashed(2, action_type="pay.charge")
    world.crashed(1, action_type="db.mutation")
    world.crashed(1, action_type="unmapped.type")

    def boom(_identity: DispatchIdentity) -> Finding:
        raise RuntimeError("provider bug")

    rec = reconciler(
        store,
        {
            "pay.charge": Named("http_receipt", verified),
            "db.mutation": Named("internal_mutation", boom),
        },
        metrics,
    )
    try:
        rec.at(AFTER).run_cycle()
    finally:
        rec.close()

    assert value(registry, "resolver_cycles_total", result="completed") == 1
    assert value(registry, "resolver_cycle_duration_seconds_count") == 1
    assert value(registry, "resolver_last_cycle_timestamp_seconds") == WALL
    assert value(registry, "resolver_claim_page_size_sum") == 4
    assert value(registry, "resolver_claim_duration_seconds_count") == 1
    assert value(registry, "resolver_commit_duration_seconds_count") == 1
    found = "resolver_findings_total"
    assert (
        value(
            registry,
            found,
            action_type="pay.charge",
            provider="http_receipt",
            finding="verified_succeeded",
        )
        == 2
    )
    assert (
        value(
            registry,
            found,
            action_type="db.mutation",
            provider="internal_mutation",
            finding="unavailable",
        )
        == 1
    )
    assert (
        value(registry, found, action_type="unmapped.type", provider="none", finding="unsupported")
        == 1
    )
    assert (
        value(registry, "resolver_resolutions_total", source="automatic", outcome="succeeded") == 2
    )
    assert value(registry, "resolver_resolutions_total", source="automatic", outcome="failed") == 0
    assert value(registry, "resolver_inspect_duration_seconds_count", provider="http_receipt") == 2
    assert (
        value(
            registry, "resolver_provider_errors_total", provider="internal_mutation", kind="error"
        )
        == 1
    )
    assert value(registry, "resolver_fence_rejections_total", stage="commit") == 0


def test_provider_timeout_is_counted_by_provider(
    world: World, store: Storage, registry: CollectorRegistry, metrics: ResolverMetrics
) -> None:
    world.crashed(1)
    gate = threading.Event()
    slow = Named("slow_service", verified, timeout_seconds=0.2, gate=gate)
    rec = reconciler(store, {"test.action": slow}, metrics)
    try:
        rec.at(AFTER).run_cycle()
    finally:
        gate.set()
        rec.close()
    assert (
        value(registry, "resolver_provider_errors_total", provider="slow_service", kind="timeout")
        == 1
    )
    inspect_sum = value(registry, "resolver_inspect_duration_seconds_sum", provider="slow_service")
    assert inspect_sum is not None and inspect_sum >= 0.2


def test_a_stale_commit_counts_a_fence_rejection(
    world: World, store: Storage, registry: CollectorRegistry, metrics: ResolverMetrics
) -> None:
    (lease,) = world.crashed(1)

    def renew_then_verify(identity: DispatchIdentity) -> Finding:
        world.executor.at(AFTER + 1).renew(lease)  # the executor was alive: lease revoked
        return verified(identity)

    rec = reconciler(store, {"test.action": Named("p", renew_then_verify)}, metrics)
    try:
        report = rec.at(AFTER + 2).run_cycle()
    finally:
        rec.close()
    assert report.rejected == {lease.dispatch_id}
    assert value(registry, "resolver_fence_rejections_total", stage="commit") == 1
    assert (
        value(registry, "resolver_resolutions_total", source="automatic", outcome="succeeded") == 0
    )


def test_a_revoked_lease_at_release_counts_a_fence_rejection(
    world: World, store: Storage, registry: CollectorRegistry, metrics: ResolverMetrics
) -> None:
    (lease,) = world.crashed(1)

    def stop_after_renew() -> bool:
        world.executor.at(AFTER + 1).renew(lease)  # revoked between claim and release
        return True

    rec = reconciler(store, {"test.action": Named("p", verified)}, metrics)
    try:
        report = rec.at(AFTER + 2).run_cycle(should_stop=stop_after_renew)
    finally:
        rec.close()
    assert report.released == 0
    assert value(registry, "resolver_fence_rejections_total", stage="release") == 1


def test_storage_failure_counts_a_failed_cycle(
    registry: CollectorRegistry, metrics: ResolverMetrics
) -> None:
    dead = Storage("postgresql://postgres@127.0.0.1:1/nowhere", connect_timeout_seconds=1)
    dead.open()
    rec = reconciler(dead, {}, metrics)
    try:
        with pytest.raises(StorageUnavailable):
            rec.run_cycle()
    finally:
        rec.close()
        dead.close()
    assert value(registry, "resolver_cycles_total", result="storage_unavailable") == 1
    assert value(registry, "resolver_cycles_total", result="completed") == 0
    assert value(registry, "resolver_last_cycle_timestamp_seconds") == WALL  # the start time


def test_no_metric_carries_a_dispatch_id(
    world: World, store: Storage, registry: CollectorRegistry, metrics: ResolverMetrics
) -> None:
    leases = world.crashed(3)
    rec = reconciler(store, {"test.action": Named("p", fixed(FindingKind.CONFLICT))}, metrics)
    try:
        rec.at(AFTER).run_cycle()
    finally:
        rec.close()
    registry.register(BacklogCollector(store))
    ids = {lease.dispatch_id for lease in leases}
    for family in registry.collect():
        assert family.name.startswith("resolver_"), family.name
        for sample in family.samples:
            assert "dispatch_id" not in sample.labels
            assert not ids & set(sample.labels.values()), sample


class CountingReader:
    """The real store, counting backlog reads (so caching is observable)."""

    def __init__(self, store: Storage) -> None:
        self.store = store
        self.reads = 0

    def backlog_snapshot(self, count_cap: int, now_ms: int | None = None) -> BacklogSnapshot:
        self.reads += 1
        return self.store.at(now_ms).backlog_snapshot(count_cap)

    def ping(self) -> None:
        self.store.ping()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(100.0)


@pytest.fixture
def counting(store: Storage) -> CountingReader:
    return CountingReader(store)


@pytest.fixture
def backlog(
    registry: CollectorRegistry, counting: CountingReader, clock: FakeClock
) -> BacklogCollector:
    collector = BacklogCollector(counting, ttl_seconds=5.0, clock=clock)
    registry.register(collector)
    return collector


def test_backlog_gauges_report_database_figures(
    world: World, sql: SQL, registry: CollectorRegistry, backlog: BacklogCollector
) -> None:
    crashed_ago(world, sql, 120, count=2, action_type="pay.charge")
    crashed_ago(world, sql, 30, count=1, action_type="db.mutation")
    assert value(registry, "resolver_backlog_dispatches", queue="due") == 3
    assert value(registry, "resolver_backlog_dispatches", queue="manual") == 0
    assert (
        value(
            registry,
            "resolver_backlog_action_type_dispatches",
            queue="due",
            action_type="pay.charge",
        )
        == 2
    )
    age = value(registry, "resolver_oldest_claimable_age_seconds")
    assert age is not None and 120 <= age < 180
    assert value(registry, "resolver_oldest_manual_age_seconds") == 0
    assert value(registry, "resolver_backlog_count_cap") == 10_000


def test_registering_does_not_query_and_scrapes_within_the_ttl_share_one_read(
    world: World,
    sql: SQL,
    registry: CollectorRegistry,
    counting: CountingReader,
    clock: FakeClock,
    backlog: BacklogCollector,
) -> None:
    assert counting.reads == 0  # describe() answered the registry without the database
    assert value(registry, "resolver_backlog_dispatches", queue="due") == 0
    crashed_ago(world, sql, 60)
    clock.now += 4.9
    assert value(registry, "resolver_backlog_dispatches", queue="due") == 0  # cached
    assert counting.reads == 1
    clock.now += 0.1
    assert value(registry, "resolver_backlog_dispatches", queue="due") == 1
    assert counting.reads == 2


def test_a_failed_backlog_read_omits_the_gauges_and_is_cached(
    registry: CollectorRegistry, clock: FakeClock
) -> None:
    dead = Storage("postgresql://postgres:pw@127.0.0.1:1/nowhere", connect_timeout_seconds=1)
    dead.open()
    reader = CountingReader(dead)
    registry.register(BacklogCollector(reader, ttl_seconds=5.0, clock=clock))
    try:
        assert value(registry, "resolver_oldest_claimable_age_seconds") is None
        assert value(registry, "resolver_backlog_dispatches", queue="due") is None
        assert value(registry, "resolver_backlog_read_errors_total") == 1
        assert value(registry, "resolver_backlog_read_errors_total") == 1  # no second attempt
        assert reader.reads == 1
    finally:
        dead.close()


def test_the_provider_label_is_the_configured_provider_name(
    world: World, store: Storage, registry: CollectorRegistry, metrics: ResolverMetrics
) -> None:
    world.crashed(1, action_type="pay.charge")
    providers = build_registry(
        {"pay.charge": {"provider": "receipts_v2"}},
        factories={"receipts_v2": lambda _settings: ScriptedProvider(verified)},
    )
    rec = Reconciler(
        store,
        providers,
        ReconcilerSettings(owner="replica-m", recovery_lease_ms=30_000),
        Runtime(subscribers=build_telemetry(metrics=metrics).subscribers),
    )
    try:
        rec.at(AFTER).run_cycle()
    finally:
        rec.close()
    found = "resolver_findings_total"
    labels = {
        "action_type": "pay.charge",
        "provider": "receipts_v2",
        "finding": "verified_succeeded",
    }
    assert value(registry, found, **labels) == 1
    assert value(registry, "resolver_inspect_duration_seconds_count", provider="receipts_v2") == 1
