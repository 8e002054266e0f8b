"""End to end: the reconciler settles crashed executions from each built-in provider's evidence."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from providers.http_receipt import HttpReceiptProvider
from providers.internal_mutation import InternalMutationProvider
from providers.manual_only import ManualOnlyProvider
from providers.package_install import PackageInstallProvider
from providers.run_create import RunCreateProvider
from resolver.core.domain import (
    Completion,
    DispatchIdentity,
    ExecutionLease,
    FindingKind,
    Outcome,
    canonical_json,
)
from resolver.core.errors import FenceConflict
from resolver.core.provider import ProviderRegistry
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver.db.evidence import ReadOnlyDatabase
from resolver.evidence.contract import Scenario
from resolver.evidence.readonly_http import ReadOnlyHttpClient
from resolver.evidence.receipt_server import ReceiptServer
from resolver.evidence.receipts import KeyRing
from resolver.executor.client import CompletionResult
from resolver.executor.receipts import write_receipt
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.harnesses import insert_run_fact, plant_install, signed
from tests.helpers.stores import Storage

AFTER = T0 + EXEC_LEASE_MS
KEYS = KeyRing.ephemeral("e2e")


@pytest.fixture
def writer(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def registry(readonly: ReadOnlyDatabase, receipt_server: ReceiptServer) -> ProviderRegistry:
    client = ReadOnlyHttpClient(
        receipt_server.base_url,
        timeout_seconds=2,
        max_body_bytes=8192,
        headers={"Authorization": "Bearer e2e"},
    )
    return ProviderRegistry(
        {
            "db.mutation": InternalMutationProvider(readonly, KEYS, 2),
            "run.create": RunCreateProvider(readonly, 2),
            "package.install": PackageInstallProvider(readonly, 2),
            "payments.charge": HttpReceiptProvider(client, KEYS, 2),
            "shell.exec": ManualOnlyProvider(),
        }
    )


def reconciler(store: Storage, registry: ProviderRegistry) -> Reconciler:
    settings = ReconcilerSettings(
        owner="e2e", page_size=64, recovery_lease_ms=30_000, backoff_base_ms=1_000
    )
    return Reconciler(store, registry, settings, Runtime(rng=random.Random(3)))


def identity(world: World, lease: ExecutionLease) -> DispatchIdentity:
    spec = world.specs[lease.dispatch_id]
    return DispatchIdentity(
        schema_version=spec.schema_version,
        dispatch_id=spec.dispatch_id,
        approval_request_id=spec.approval_request_id,
        project_id=spec.project_id,
        action_type=spec.action_type,
        action_digest=spec.action_digest,
        attempt=lease.attempt,
        started_at_ms=T0,
        idempotency_key=spec.idempotency_key,
    )


def settled(sql: SQL, dispatch_id: str) -> tuple[str, str, str | None]:
    execution, control = sql.execution(dispatch_id), sql.control(dispatch_id)
    return execution["state"], control["status"], control["last_finding"]


def test_every_provider_settles_its_dispatches_in_one_cycle(
    world: World,
    store: Storage,
    sql: SQL,
    writer: psycopg.Connection[Any],
    registry: ProviderRegistry,
    receipt_server: ReceiptServer,
    database_url: str,
) -> None:
    expected: dict[str, tuple[str, str, str | None]] = {}

    def case(action_type: str, plant: Any, want: tuple[str, str, str | None]) -> ExecutionLease:
        lease = world.started(action_type)
        plant(identity(world, lease), lease)
        expected[lease.dispatch_id] = want
        return lease

    def receipt(outcome: Outcome) -> Any:
        def plant(_i: DispatchIdentity, lease: ExecutionLease) -> None:
            with psycopg.connect(database_url) as conn, conn.transaction():
                write_receipt(
                    conn, lease, outcome=outcome, result_code="done", receipt_id="r", keys=KEYS
                )

        return plant

    def nothing(_i: DispatchIdentity, _lease: ExecutionLease) -> None:
        return

    def http(status: int, scenario: Scenario | None = None) -> Any:
        def plant(i: DispatchIdentity, _lease: ExecutionLease) -> None:
            body = canonical_json(signed(i, KEYS, scenario)) if scenario else b""
            receipt_server.plant(i.idempotency_key, status, body)

        return plant

    def run(state: str) -> Any:
        def plant(i: DispatchIdentity, _lease: ExecutionLease) -> None:
            settled_state = state != "running"
            insert_run_fact(
                writer,
                {
                    "run_id": f"run-{i.dispatch_id}",
                    "dispatch_id": i.dispatch_id,
                    "idempotency_key": i.idempotency_key,
                    "project_id": i.project_id,
                    "action_digest": i.action_digest,
                    "attempt": i.attempt,
                    "state": state,
                    "result_code": "ok" if settled_state else None,
                    "finished_at_ms": AFTER if settled_state else None,
                },
            )

        return plant

    def install(**facts: Any) -> Any:
        return lambda i, _lease: plant_install(writer, i, **facts)

    done = ("succeeded", "resolved", "verified_succeeded")
    failed = ("failed", "resolved", "verified_failed")
    manual_conflict = ("executing", "manual", "conflict")
    mutation_ok = case("db.mutation", receipt(Outcome.SUCCEEDED), done)
    mutation_failed = case("db.mutation", receipt(Outcome.FAILED), failed)
    case("db.mutation", nothing, ("executing", "armed", "missing"))
    case("run.create", run("succeeded"), done)
    case("run.create", run("failed"), failed)
    case("run.create", run("running"), ("executing", "armed", "still_running"))
    case("package.install", install(), done)
    case("package.install", install(outcome="failed", marker=None), failed)
    case("package.install", install(record=False), manual_conflict)
    case("package.install", nothing, ("executing", "armed", "missing"))
    case("payments.charge", http(200, Scenario.SUCCEEDED), done)
    case("payments.charge", http(200, Scenario.FAILED), failed)
    case("payments.charge", http(200, Scenario.TAMPERED), manual_conflict)
    case("payments.charge", http(200, Scenario.IDENTITY_DRIFT), manual_conflict)
    case("payments.charge", http(202), ("executing", "armed", "still_running"))
    case("payments.charge", http(404), ("executing", "armed", "missing"))
    case("payments.charge", http(503), ("executing", "armed", "unavailable"))
    case("shell.exec", nothing, ("executing", "manual", "unsupported"))
    case("unmapped.type", nothing, ("executing", "manual", "unsupported"))

    report = reconciler(store, registry).at(AFTER).run_cycle()

    assert report.claimed == len(expected)
    actual = {d: settled(sql, d) for d in expected}
    assert actual == expected
    assert receipt_server.methods() == {"GET"}  # recovery never re-sent anything

    # A late completion carrying the receipt's digest is an exact replay of the resolution;
    # one that drifts from the verified outcome is a fence conflict.
    (resolution,) = sql.resolutions(mutation_ok.dispatch_id)
    replay = Completion(Outcome.SUCCEEDED, "done", "late-1", resolution["evidence_digest"])
    assert world.executor.complete(mutation_ok, replay) is CompletionResult.REPLAYED
    with pytest.raises(FenceConflict):
        world.executor.complete(
            mutation_failed, Completion(Outcome.SUCCEEDED, "done", "late-2", "0" * 64)
        )


def test_missing_evidence_that_appears_later_settles_on_the_next_scan(
    world: World, store: Storage, sql: SQL, registry: ProviderRegistry, database_url: str
) -> None:
    lease = world.started("db.mutation")
    rec = reconciler(store, registry)
    rec.at(AFTER).run_cycle()
    assert settled(sql, lease.dispatch_id) == ("executing", "armed", "missing")
    # The slow executor's mutation commits after all, receipt included.
    with psycopg.connect(database_url) as conn, conn.transaction():
        write_receipt(
            conn, lease, outcome=Outcome.SUCCEEDED, result_code="ok", receipt_id="r", keys=KEYS
        )
    due = sql.control(lease.dispatch_id)["next_scan_at_ms"]
    assert rec.at(due).run_cycle().accepted == {lease.dispatch_id}
    assert settled(sql, lease.dispatch_id) == ("succeeded", "resolved", "verified_succeeded")


def test_source_down_moves_nothing(
    world: World, store: Storage, sql: SQL, receipt_server: ReceiptServer
) -> None:
    lease = world.started("db.mutation")
    dead = ReadOnlyDatabase("postgresql://postgres@127.0.0.1:1/nowhere", timeout_seconds=1)
    dead.open()
    try:
        registry = ProviderRegistry({"db.mutation": InternalMutationProvider(dead, KEYS, 2)})
        reconciler(store, registry).at(AFTER).run_cycle()
    finally:
        dead.close()
    assert settled(sql, lease.dispatch_id) == ("executing", "armed", "unavailable")
    assert sql.resolutions(lease.dispatch_id) == []


class CountingDatabase(ReadOnlyDatabase):
    """The real read-only pool, counting round trips."""

    fetches = 0

    def fetch(self, query: Any, params: Any) -> Any:
        self.fetches += 1
        return super().fetch(query, params)


@pytest.mark.parametrize(
    "provider_class", [InternalMutationProvider, RunCreateProvider, PackageInstallProvider]
)
def test_sql_providers_answer_a_page_with_one_query(
    world: World, store: Storage, database_url: str, provider_class: Any
) -> None:
    world.crashed(12, action_type="db.mutation")
    db = CountingDatabase(database_url, timeout_seconds=2)
    db.open()
    try:
        provider = (
            provider_class(db, KEYS, 2)
            if provider_class is InternalMutationProvider
            else provider_class(db, 2)
        )
        report = (
            reconciler(store, ProviderRegistry({"db.mutation": provider})).at(AFTER).run_cycle()
        )
    finally:
        db.close()
    assert report.claimed == 12 and db.fetches == 1


def test_a_slow_receipt_times_out_alone_and_the_page_commits_the_rest(
    world: World, store: Storage, sql: SQL, receipt_server: ReceiptServer
) -> None:
    leases = [world.started("payments.charge") for _ in range(4)]
    identities = [identity(world, lease) for lease in leases]
    for i in identities:
        receipt_server.plant(
            i.idempotency_key, 200, canonical_json(signed(i, KEYS, Scenario.SUCCEEDED))
        )
    slow = identities[0]
    receipt_server.hold_keys.add(slow.idempotency_key)  # answered only when the server stops
    client = ReadOnlyHttpClient(receipt_server.base_url, timeout_seconds=0.5, max_body_bytes=8192)
    registry = ProviderRegistry({"payments.charge": HttpReceiptProvider(client, KEYS, 0.5)})
    try:
        report = reconciler(store, registry).at(AFTER).run_cycle()
    finally:
        registry.close()
    # The cycle returned while the slow request was still held by the server: it waited for
    # the provider's timeout, not for the slowest answer.
    assert not receipt_server.release.is_set()
    assert report.accepted == {i.dispatch_id for i in identities}  # every item committed
    assert report.findings == {FindingKind.VERIFIED_SUCCEEDED: 3, FindingKind.UNAVAILABLE: 1}
    for i in identities[1:]:
        assert settled(sql, i.dispatch_id) == ("succeeded", "resolved", "verified_succeeded")
    assert settled(sql, slow.dispatch_id) == ("executing", "armed", "unavailable")


class ThreadNoting(InternalMutationProvider):
    """The real provider, noting which thread answers and able to fail on demand."""

    threads: list[str]
    fail = False

    def inspect_page(self, identities: Any) -> Any:
        import threading

        self.threads.append(threading.current_thread().name)
        if self.fail:
            raise RuntimeError("provider bug")
        return super().inspect_page(identities)


@pytest.mark.parametrize("bounded", [True, False])
def test_a_page_provider_that_bounds_its_own_time_runs_on_the_cycle_thread(
    world: World, store: Storage, sql: SQL, readonly: ReadOnlyDatabase, bounded: bool
) -> None:
    import threading

    leases = world.crashed(3, action_type="db.mutation")
    provider = ThreadNoting(readonly, KEYS, 2)
    provider.threads = []
    if not bounded:
        provider.bounds_own_time = False  # type: ignore[misc]
    report = reconciler(store, ProviderRegistry({"db.mutation": provider})).at(AFTER).run_cycle()
    assert report.claimed == 3
    on_cycle_thread = provider.threads == [threading.current_thread().name]
    assert on_cycle_thread is bounded
    for lease in leases:
        assert settled(sql, lease.dispatch_id) == ("executing", "armed", "missing")


def test_a_failing_inline_page_provider_is_unavailable_and_the_page_commits(
    world: World, store: Storage, sql: SQL, readonly: ReadOnlyDatabase
) -> None:
    (lease,) = world.crashed(1, action_type="db.mutation")
    provider = ThreadNoting(readonly, KEYS, 2)
    provider.threads, provider.fail = [], True
    report = reconciler(store, ProviderRegistry({"db.mutation": provider})).at(AFTER).run_cycle()
    assert report.accepted == {lease.dispatch_id}
    assert settled(sql, lease.dispatch_id) == ("executing", "armed", "unavailable")
