"""SQL providers on real PostgreSQL: read-only sessions, the writer helper, edge facts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest

from providers import internal_mutation, package_install, run_create
from providers.internal_mutation import InternalMutationProvider
from providers.package_install import PackageInstallProvider
from providers.run_create import RunCreateProvider
from resolver.app.config import load_provider_config
from resolver.core.domain import DispatchIdentity, FindingKind, Outcome, ProviderFailure
from resolver.core.errors import ConfigError, FenceConflict, SourceMisconfigured
from resolver.core.provider import build_registry, discover_factories
from resolver.db.evidence import ReadOnlyDatabase
from resolver.evidence.receipts import KeyRing
from resolver.executor.receipts import write_receipt
from tests.helpers.database import SQL, T0, World
from tests.helpers.harnesses import (
    CONTENT,
    OTHER_DIGEST,
    insert_run_fact,
    new_identity,
    plant_install,
)

KEYS = KeyRing.ephemeral("unit")


@pytest.fixture
def plant(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        yield conn


# -- read-only sessions ---------------------------------------------------------------------


def test_provider_sessions_cannot_write(readonly: ReadOnlyDatabase, sql: SQL) -> None:
    # A refused write is a provider bug, not an outage: it fails the same way every time.
    with pytest.raises(SourceMisconfigured) as info, readonly.transaction() as conn:
        conn.execute("CREATE TABLE sneaky (x int)")
    assert isinstance(info.value.__cause__, psycopg.errors.ReadOnlySqlTransaction)
    with readonly.transaction() as conn:
        row = conn.execute("SHOW transaction_read_only").fetchone()
    assert row == {"transaction_read_only": "on"}
    assert sql.all("SELECT 1 FROM pg_tables WHERE tablename = 'sneaky'") == []


def test_a_lone_statement_is_read_only_too(readonly: ReadOnlyDatabase, sql: SQL) -> None:
    # fetch() runs without BEGIN (one round trip): the session default must still hold.
    assert readonly.fetch("SHOW transaction_read_only", {}) == [{"transaction_read_only": "on"}]
    with pytest.raises(SourceMisconfigured) as info:
        readonly.fetch("CREATE TABLE sneaky (x int)", {})
    assert isinstance(info.value.__cause__, psycopg.errors.ReadOnlySqlTransaction)
    assert sql.all("SELECT 1 FROM pg_tables WHERE tablename = 'sneaky'") == []


def test_unmigrated_source_is_unavailable_by_configuration(pg_server: str) -> None:
    db = ReadOnlyDatabase(pg_server, timeout_seconds=2)  # the maintenance db: no evidence tables
    db.open()
    try:
        identity = new_identity(None)
        for provider in (
            InternalMutationProvider(db, KEYS, 2),
            RunCreateProvider(db, 2),
            PackageInstallProvider(db, 2),
        ):
            finding = provider.inspect(identity)
            assert (finding.kind, finding.failure) == (
                FindingKind.UNAVAILABLE,
                ProviderFailure.CONFIGURATION,  # undefined table: migrating fixes it, not waiting
            )
    finally:
        db.close()


@pytest.mark.parametrize(
    "table", ["action_receipts", "package_install_records", "package_commit_markers"]
)
def test_evidence_tables_are_insert_only(
    sql: SQL, plant: psycopg.Connection[Any], table: str
) -> None:
    identity = new_identity(plant)
    plant_install(plant, identity)
    if table == "action_receipts":
        plant.execute(
            "INSERT INTO action_receipts (dispatch_id, receipt) VALUES (%s, '{}')",
            (identity.dispatch_id,),
        )
    with pytest.raises(psycopg.errors.RestrictViolation):
        sql.all(f"DELETE FROM {table}")


# -- internal_mutation writer ---------------------------------------------------------------


def test_receipt_written_with_the_mutation_verifies(
    world: World, readonly: ReadOnlyDatabase, database_url: str
) -> None:
    lease = world.started("db.mutation")
    with psycopg.connect(database_url) as conn, conn.transaction():
        conn.execute("CREATE TEMP TABLE ledger (n int)")  # stands in for the platform's mutation
        conn.execute("INSERT INTO ledger VALUES (1)")
        written = write_receipt(
            conn, lease, outcome=Outcome.SUCCEEDED, result_code="ok", receipt_id="m-1", keys=KEYS
        )
    provider = InternalMutationProvider(readonly, KEYS, 2)
    finding = provider.inspect(identity_of(world, lease.dispatch_id))
    assert finding.kind is FindingKind.VERIFIED_SUCCEEDED
    assert finding.evidence_digest == written.evidence_digest


def test_rolled_back_mutation_leaves_no_receipt(
    world: World, readonly: ReadOnlyDatabase, database_url: str
) -> None:
    lease = world.started("db.mutation")

    def mutation_that_fails(conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            write_receipt(
                conn, lease, outcome=Outcome.SUCCEEDED, result_code="ok", receipt_id="m", keys=KEYS
            )
            raise RuntimeError("the mutation failed after the receipt insert")

    with psycopg.connect(database_url) as conn, pytest.raises(RuntimeError):
        mutation_that_fails(conn)
    finding = InternalMutationProvider(readonly, KEYS, 2).inspect(
        identity_of(world, lease.dispatch_id)
    )
    assert finding.kind is FindingKind.MISSING


def test_writer_is_fenced_on_the_executor_lease(world: World, database_url: str, sql: SQL) -> None:
    lease = world.started("db.mutation")
    renewed = world.executor.at(T0 + 10).renew(lease)
    with psycopg.connect(database_url) as conn:
        with pytest.raises(FenceConflict), conn.transaction():
            write_receipt(
                conn, lease, outcome=Outcome.SUCCEEDED, result_code="ok", receipt_id="m", keys=KEYS
            )
        with conn.transaction():
            write_receipt(
                conn, renewed, outcome=Outcome.FAILED, result_code="no", receipt_id="m", keys=KEYS
            )
    assert len(sql.all("SELECT * FROM action_receipts")) == 1


def test_writer_refuses_to_commit_on_its_own(world: World, database_url: str) -> None:
    lease = world.started("db.mutation")
    with psycopg.connect(database_url, autocommit=True) as conn, pytest.raises(ValueError):
        write_receipt(
            conn, lease, outcome=Outcome.SUCCEEDED, result_code="ok", receipt_id="m", keys=KEYS
        )


def identity_of(world: World, dispatch_id: str) -> DispatchIdentity:
    spec = world.specs[dispatch_id]
    view = world.store.get_execution(dispatch_id)
    assert view is not None and view.started_at_ms is not None
    return DispatchIdentity(
        schema_version=spec.schema_version,
        dispatch_id=spec.dispatch_id,
        approval_request_id=spec.approval_request_id,
        project_id=spec.project_id,
        action_type=spec.action_type,
        action_digest=spec.action_digest,
        attempt=view.attempt,
        started_at_ms=view.started_at_ms,
        idempotency_key=spec.idempotency_key,
    )


# -- run_create -----------------------------------------------------------------------------


def run_fact(identity: DispatchIdentity, **changes: Any) -> dict[str, Any]:
    fact = {
        "run_id": f"run-{identity.dispatch_id}",
        "dispatch_id": identity.dispatch_id,
        "idempotency_key": identity.idempotency_key,
        "project_id": identity.project_id,
        "action_digest": identity.action_digest,
        "attempt": identity.attempt,
        "state": "running",
        "result_code": None,
        "finished_at_ms": None,
    }
    return {**fact, **changes}


def test_run_key_collision_is_conflict(
    plant: psycopg.Connection[Any], readonly: ReadOnlyDatabase
) -> None:
    mine, other = new_identity(plant), new_identity(plant)
    # Another dispatch's run claims my idempotency key: never evidence for me.
    insert_run_fact(plant, run_fact(other, idempotency_key=mine.idempotency_key))
    assert RunCreateProvider(readonly, 2).inspect(mine).kind is FindingKind.CONFLICT


@pytest.mark.parametrize("field", ["project_id", "action_digest", "attempt"])
def test_run_fact_bound_elsewhere_is_conflict(
    plant: psycopg.Connection[Any], readonly: ReadOnlyDatabase, field: str
) -> None:
    identity = new_identity(plant)
    changed = {"project_id": "proj-other", "action_digest": OTHER_DIGEST, "attempt": 7}[field]
    insert_run_fact(plant, run_fact(identity, **{field: changed}))
    assert RunCreateProvider(readonly, 2).inspect(identity).kind is FindingKind.CONFLICT


def test_run_state_settles_once_and_origin_is_frozen(
    plant: psycopg.Connection[Any], readonly: ReadOnlyDatabase
) -> None:
    identity = new_identity(plant)
    insert_run_fact(plant, run_fact(identity))
    provider = RunCreateProvider(readonly, 2)
    assert provider.inspect(identity).kind is FindingKind.STILL_RUNNING
    plant.execute(
        "UPDATE run_origin_facts SET state = 'succeeded', result_code = 'ok', finished_at_ms = 1"
        " WHERE dispatch_id = %s",
        (identity.dispatch_id,),
    )
    assert provider.inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED
    for statement in (
        "UPDATE run_origin_facts SET state = 'failed', result_code = 'no'",
        "UPDATE run_origin_facts SET attempt = 2",
        "DELETE FROM run_origin_facts",
    ):
        with pytest.raises(psycopg.errors.RestrictViolation):
            plant.execute(statement)


# -- package_install ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("facts", "kind"),
    [
        ({"record": False, "target": False, "marker": None}, FindingKind.MISSING),
        ({"record": False, "target": False}, FindingKind.CONFLICT),  # marker only
        ({"record": False}, FindingKind.CONFLICT),  # published, no record
        ({"marker": None}, FindingKind.CONFLICT),  # record says succeeded, nothing committed
        ({"target": False}, FindingKind.CONFLICT),  # no verified target
        ({"installed_version": "1.4.3"}, FindingKind.CONFLICT),
        ({"marker": OTHER_DIGEST}, FindingKind.CONFLICT),
        ({"outcome": "failed"}, FindingKind.CONFLICT),  # failed, yet a marker was published
        ({"outcome": "failed", "marker": None}, FindingKind.VERIFIED_FAILED),
        ({"outcome": "failed", "marker": None, "target": False}, FindingKind.VERIFIED_FAILED),
        ({}, FindingKind.VERIFIED_SUCCEEDED),
    ],
)
def test_package_install_needs_all_three_facts(
    plant: psycopg.Connection[Any],
    readonly: ReadOnlyDatabase,
    facts: dict[str, Any],
    kind: FindingKind,
) -> None:
    identity = new_identity(plant)
    plant_install(plant, identity, **facts)
    assert PackageInstallProvider(readonly, 2).inspect(identity).kind is kind


def test_package_record_of_another_attempt_is_conflict(
    plant: psycopg.Connection[Any], readonly: ReadOnlyDatabase
) -> None:
    identity = new_identity(plant)
    plant_install(plant, identity)
    later = msgspec.structs.replace(identity, attempt=2)
    assert PackageInstallProvider(readonly, 2).inspect(later).kind is FindingKind.CONFLICT
    assert CONTENT  # the planted content digest is what all three facts agree on


# -- configuration --------------------------------------------------------------------------


def test_entry_points_register_every_built_in() -> None:
    assert {
        "manual_only",
        "internal_mutation",
        "run_create",
        "package_install",
        "http_receipt",
    } <= set(discover_factories())


def test_yaml_config_builds_a_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    monkeypatch.setenv("RESOLVER_DATABASE_URL", database_url)
    monkeypatch.setenv("RESOLVER_RECEIPT_KEYS", "k1=" + "ab" * 32)
    monkeypatch.setenv("PAYMENTS_TOKEN", "t0ken")
    config = tmp_path / "providers.yaml"
    config.write_text(
        "action_types:\n"
        "  payments.charge: {provider: http_receipt, base_url: 'http://127.0.0.1:9',"
        " token_env: PAYMENTS_TOKEN, timeout_seconds: 2}\n"
        "  db.mutation: {provider: internal_mutation}\n"
        "  run.create: {provider: run_create, timeout_seconds: 3}\n"
        "  package.install: {provider: package_install, max_connections: 1}\n"
        "  shell.exec: {provider: manual_only}\n"
    )
    registry = build_registry(load_provider_config(config))
    try:
        assert set(registry.by_action_type) == {
            "payments.charge",
            "db.mutation",
            "run.create",
            "package.install",
            "shell.exec",
        }
        assert registry.longest_timeout_seconds == 5.0  # the SQL providers' default
    finally:
        registry.close()


@pytest.mark.parametrize(
    ("module", "settings", "needle"),
    [
        (
            internal_mutation,
            {"databse_url": "x"},
            "databse_url: provider internal_mutation has no such setting",
        ),
        (run_create, {"database_url": "postgresql://u:pw@h/db"}, "database_url: holds a password"),
        (
            package_install,
            {"database_url_env": "NOT_SET_ANYWHERE"},
            "database_url_env: environment variable NOT_SET_ANYWHERE",
        ),
        (run_create, {"timeout_seconds": -1}, "timeout_seconds: Input should be greater than 0"),
        (package_install, {"max_connections": 99}, "max_connections"),
    ],
)
def test_bad_sql_provider_settings_fail_at_start(
    monkeypatch: pytest.MonkeyPatch, module: Any, settings: dict[str, Any], needle: str
) -> None:
    monkeypatch.setenv("RESOLVER_RECEIPT_KEYS", "k1=" + "ab" * 32)
    with pytest.raises(ConfigError, match=needle) as info:
        module.create(settings)
    assert "pw" not in str(info.value)


def test_registry_error_names_the_action_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RESOLVER_RECEIPT_KEYS", raising=False)
    monkeypatch.delenv("RESOLVER_SECRETS_DIR", raising=False)
    with pytest.raises(ConfigError, match=r"action_types\.db\.mutation: .*RESOLVER_RECEIPT_KEYS"):
        build_registry({"db.mutation": {"provider": "internal_mutation"}})


def test_cli_refuses_to_start_on_bad_provider_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    from click.testing import CliRunner

    from resolver.app.cli import main

    config = tmp_path / "providers.yaml"
    config.write_text("action_types:\n  shell.exec: {provider: manual_only, retries: 2}\n")
    monkeypatch.setenv("RESOLVER_DATABASE_URL", database_url)
    monkeypatch.setenv("RESOLVER_CONFIG", str(config))
    result = CliRunner().invoke(main, ["run", "--once"])
    assert result.exit_code == 2
    assert "action_types.shell.exec: retries: provider manual_only takes no settings" in (
        result.output
    )


def test_sql_providers_read_through_the_evidence_reader_url_when_it_is_set() -> None:
    """The chart and kustomize set RESOLVER_EVIDENCE_DATABASE_URL from the evidence reader's
    Secret; without a database_url_env of their own, SQL providers must use it, not the
    runtime role's URL (which has no SELECT on the evidence tables)."""
    from providers._sql import SqlSourceSettings

    runtime, reader = "postgresql://resolver_runtime@db/app", "postgresql://reader@db/app"
    both = {"RESOLVER_DATABASE_URL": runtime, "RESOLVER_EVIDENCE_DATABASE_URL": reader}
    assert SqlSourceSettings().resolve_url(both) == reader
    assert SqlSourceSettings().resolve_url({"RESOLVER_DATABASE_URL": runtime}) == runtime
    named = SqlSourceSettings(database_url_env="RESOLVER_DATABASE_URL")
    assert named.resolve_url(both) == runtime  # an explicit name always wins
