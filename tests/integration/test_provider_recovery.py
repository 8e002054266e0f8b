"""End to end: the reconciler settles crashed executions from each built-in provider's evidence."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from providers.http_receipt import HttpReceiptProvider
from providers.internal_mutation import InternalMutationProvider, write_receipt
from providers.manual_only import ManualOnlyProvider
from providers.package_install import PackageInstallProvider
from providers.run_create import RunCreateProvider
from resolver.db.readonly import ReadOnlyDatabase
from resolver.db.repository import PostgresStore
from resolver.domain import Completion, DispatchIdentity, ExecutionLease, Outcome, canonical_json
from resolver.errors import FenceConflict
from resolver.evidence import ProviderRegistry
from resolver.execution import CompletionResult
from resolver.readonly_http import ReadOnlyHttpClient
from resolver.receipts import KeyRing
from resolver.reconciler import Reconciler, ReconcilerSettings
from resolver.runtime import Runtime
from resolver.testing.contract import Scenario
from resolver.testing.receipt_server import ReceiptServer
from tests.conftest import EXEC_LEASE_MS, SQL, T0, World
from tests.providers.harnesses import insert_run_fact, plant_install, signed

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


def reconciler(store: PostgresStore, registry: ProviderRegistry) -> Reconciler:
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
    store: PostgresStore,
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

    report = reconciler(store, registry).run_cycle(now_ms=AFTER)

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
    world: World, store: PostgresStore, sql: SQL, registry: ProviderRegistry, database_url: str
) -> None:
    lease = world.started("db.mutation")
    rec = reconciler(store, registry)
    rec.run_cycle(now_ms=AFTER)
    assert settled(sql, lease.dispatch_id) == ("executing", "armed", "missing")
    # The slow executor's mutation commits after all, receipt included.
    with psycopg.connect(database_url) as conn, conn.transaction():
        write_receipt(
            conn, lease, outcome=Outcome.SUCCEEDED, result_code="ok", receipt_id="r", keys=KEYS
        )
    due = sql.control(lease.dispatch_id)["next_scan_at_ms"]
    assert rec.run_cycle(now_ms=due).accepted == {lease.dispatch_id}
    assert settled(sql, lease.dispatch_id) == ("succeeded", "resolved", "verified_succeeded")


def test_source_down_moves_nothing(
    world: World, store: PostgresStore, sql: SQL, receipt_server: ReceiptServer
) -> None:
    lease = world.started("db.mutation")
    dead = ReadOnlyDatabase("postgresql://postgres@127.0.0.1:1/nowhere", timeout_seconds=1)
    dead.open()
    try:
        registry = ProviderRegistry({"db.mutation": InternalMutationProvider(dead, KEYS, 2)})
        reconciler(store, registry).run_cycle(now_ms=AFTER)
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
    world: World, store: PostgresStore, database_url: str, provider_class: Any
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
        report = reconciler(store, ProviderRegistry({"db.mutation": provider})).run_cycle(
            now_ms=AFTER
        )
    finally:
        db.close()
    assert report.claimed == 12 and db.fetches == 1
