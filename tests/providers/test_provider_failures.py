"""Provider failures are classified by SQLSTATE class and visible: logs, metrics, readiness.

Real PostgreSQL throughout: a role without the GRANT, a query that does not parse, a
database that is down and a statement that times out.
"""

from __future__ import annotations

import random
import socket
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import LiteralString
from urllib.parse import urlsplit, urlunsplit

import msgspec
import psycopg
import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from providers._sql import SqlPageProvider
from providers.internal_mutation import InternalMutationProvider
from resolver.app.composition import build_telemetry
from resolver.core.domain import DispatchIdentity, Finding, FindingKind, ProviderFailure
from resolver.core.errors import SourceMisconfigured, StorageUnavailable
from resolver.core.events import InspectedPage, ProviderCall
from resolver.core.liveness import Probe
from resolver.core.provider import ProviderRegistry
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver.db.evidence import ReadOnlyDatabase, is_transient
from resolver.evidence.receipts import KeyRing
from resolver.telemetry.health import ProviderHealth, ReadinessCheck
from resolver.telemetry.metrics import ResolverMetrics
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.harnesses import new_identity

KEYS = KeyRing.ephemeral("unit")
AFTER = T0 + EXEC_LEASE_MS


@pytest.fixture
def ungranted_url(database_url: str, pg_server: str) -> Iterator[str]:
    """A role that may connect but was never granted SELECT on the evidence tables."""
    role = f"resolver_nogrant_{uuid.uuid4().hex[:8]}"
    password = uuid.uuid4().hex
    database = urlsplit(database_url).path.lstrip("/")
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{password}'")  # type: ignore[arg-type]
        conn.execute(f'GRANT CONNECT ON DATABASE "{database}" TO "{role}"')  # type: ignore[arg-type]
        conn.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')  # type: ignore[arg-type]
    parts = urlsplit(database_url)
    yield urlunsplit(
        (parts.scheme, f"{role}:{password}@{parts.hostname}:{parts.port}", parts.path, "", "")
    )
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'REVOKE ALL ON SCHEMA public FROM "{role}"')  # type: ignore[arg-type]
        conn.execute(f'REVOKE ALL ON DATABASE "{database}" FROM "{role}"')  # type: ignore[arg-type]
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')  # type: ignore[arg-type]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again on exit: nothing listens there


@pytest.fixture
def down_url(database_url: str) -> str:
    parts = urlsplit(database_url)
    return urlunsplit((parts.scheme, f"postgres@127.0.0.1:{_closed_port()}", parts.path, "", ""))


def _database(url: str, timeout_seconds: float = 2) -> ReadOnlyDatabase:
    db = ReadOnlyDatabase(url, timeout_seconds=timeout_seconds)
    db.open()
    return db


class BrokenQueryProvider(SqlPageProvider):
    """A provider whose query names a column the evidence table does not have."""

    QUERY: LiteralString = "SELECT dispatch_id, no_such_column FROM action_receipts"

    def inspect_page(self, identities: Sequence[DispatchIdentity]) -> Mapping[str, Finding]:
        rows = self._fetch(self.QUERY, {})
        if isinstance(rows, Finding):
            return {i.dispatch_id: rows for i in identities}
        return {i.dispatch_id: Finding(FindingKind.MISSING) for i in identities}


def _classified(finding: Finding) -> tuple[FindingKind, ProviderFailure | None]:
    return finding.kind, finding.failure


# -- classification -------------------------------------------------------------------------


def test_a_role_without_the_grant_is_a_configuration_error(ungranted_url: str) -> None:
    db = _database(ungranted_url)
    try:
        with pytest.raises(SourceMisconfigured) as info:
            db.fetch("SELECT dispatch_id FROM action_receipts", {})
        assert isinstance(info.value.__cause__, psycopg.errors.InsufficientPrivilege)
        finding = InternalMutationProvider(db, KEYS, 2).inspect(new_identity(None))
        assert _classified(finding) == (FindingKind.UNAVAILABLE, ProviderFailure.CONFIGURATION)
        assert finding.cause == "sqlstate_42501"  # what the runbook tells the operator to read
    finally:
        db.close()


def test_a_broken_query_is_a_configuration_error(readonly: ReadOnlyDatabase) -> None:
    with pytest.raises(SourceMisconfigured) as info:
        readonly.fetch(BrokenQueryProvider.QUERY, {})
    assert isinstance(info.value.__cause__, psycopg.errors.UndefinedColumn)
    with pytest.raises(SourceMisconfigured):
        readonly.fetch("SELEC 1", {})  # a syntax error: SQLSTATE 42601
    finding = BrokenQueryProvider(readonly, 2).inspect(new_identity(None))
    assert _classified(finding) == (FindingKind.UNAVAILABLE, ProviderFailure.CONFIGURATION)
    assert finding.cause == "sqlstate_42703"


def test_a_database_that_is_down_is_an_outage(down_url: str) -> None:
    db = _database(down_url, timeout_seconds=0.5)
    try:
        with pytest.raises(StorageUnavailable):
            db.fetch("SELECT 1", {})
        finding = InternalMutationProvider(db, KEYS, 0.5).inspect(new_identity(None))
        assert _classified(finding) == (FindingKind.UNAVAILABLE, ProviderFailure.OUTAGE)
    finally:
        db.close()


def test_a_statement_timeout_and_an_admin_shutdown_are_transient(database_url: str) -> None:
    db = _database(database_url, timeout_seconds=0.2)
    try:
        with pytest.raises(StorageUnavailable) as info:
            db.fetch("SELECT pg_sleep(5)", {})  # statement_timeout: SQLSTATE 57014
        assert isinstance(info.value.__cause__, psycopg.errors.QueryCanceled)
    finally:
        db.close()
    with psycopg.connect(database_url, autocommit=True) as victim:
        pid = victim.info.backend_pid
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(psycopg.OperationalError) as terminated:
            victim.execute("SELECT 1")
    assert is_transient(terminated.value)  # 57P01 admin_shutdown, or no SQLSTATE at all


# -- visible: counted, logged once per cycle, readiness degraded ------------------------------


def test_a_misconfigured_provider_is_counted_logged_once_and_degrades_readiness(
    world: World, sql: SQL, ungranted_url: str
) -> None:
    leases = world.crashed(3, action_type="db.mutation")
    registry = CollectorRegistry()
    telemetry = build_telemetry(metrics=ResolverMetrics(registry))
    runtime = Runtime(rng=random.Random(1), subscribers=telemetry.subscribers)
    health = telemetry.provider_health
    db = _database(ungranted_url)
    reconciler = Reconciler(
        world.store,
        ProviderRegistry(
            {"db.mutation": InternalMutationProvider(db, KEYS, 2)},
            {"db.mutation": "internal_mutation"},
        ),
        ReconcilerSettings(owner="r", recovery_lease_ms=30_000),
        runtime,
    )
    ready = ReadinessCheck(lambda: None, lambda: "head", "head", providers=health.report)
    try:
        assert ready().detail == {"status": "ready", "schema_revision": "head"}
        with capture_logs() as logs:
            report = reconciler.at(AFTER).run_cycle()
    finally:
        reconciler.close()
        db.close()

    assert report.claimed == 3 and report.findings[FindingKind.UNAVAILABLE] == 3
    failed = [e for e in logs if e["event"] == "provider_failed"]
    assert failed == [
        {
            "event": "provider_failed",
            "log_level": "error",
            "replica_id": "r",
            "provider": "internal_mutation",
            "action_type": "db.mutation",
            "kind": "configuration",
            "items": 3,
            "cause": "sqlstate_42501",
        }
    ]
    labels = {"provider": "internal_mutation", "kind": "configuration"}
    assert registry.get_sample_value("resolver_provider_errors_total", labels) == 1.0  # one page
    probe = ready()
    assert probe == Probe(
        True,
        {
            "status": "degraded",
            "schema_revision": "head",
            "providers": {
                "internal_mutation": {
                    "kind": "configuration",
                    "action_types": ["db.mutation"],
                    "causes": ["sqlstate_42501"],
                }
            },
        },
    )
    # Nothing moved: every item is still recovery_required, armed and backing off.
    for lease in leases:
        control = sql.control(lease.dispatch_id)
        assert (control["status"], control["last_finding"]) == ("armed", "unavailable")
        assert sql.execution(lease.dispatch_id)["state"] == "executing"


def _page(*calls: tuple[str, str, Finding]) -> InspectedPage:
    """A page of one-item calls: (provider label, action type, finding) each."""
    made, findings = [], {}
    for n, (label, action_type, finding) in enumerate(calls):
        identity = msgspec.structs.replace(new_identity(None), action_type=action_type)
        findings[identity.dispatch_id] = finding
        made.append(
            ProviderCall(
                label, [identity], {identity.dispatch_id: finding}, n, 0.01, finding.failure
            )
        )
    return InspectedPage(findings, made, [], 0.01)


def test_readiness_recovers_when_the_provider_answers_again() -> None:
    health = ProviderHealth()
    misconfigured = Finding(FindingKind.UNAVAILABLE, failure=ProviderFailure.CONFIGURATION)
    health.inspected(_page(("internal_mutation", "db.mutation", misconfigured)))
    assert health.report()["internal_mutation"]["kind"] == "configuration"
    health.inspected(_page(("http_receipt", "pay.charge", Finding(FindingKind.MISSING))))
    assert "internal_mutation" in health.report()  # not inspected since: still degraded
    health.inspected(_page(("internal_mutation", "db.mutation", Finding(FindingKind.MISSING))))
    assert health.report() == {}


def test_an_outage_is_logged_once_per_page_and_leaves_readiness_ready() -> None:
    telemetry = build_telemetry()
    runtime = Runtime(subscribers=telemetry.subscribers)
    outage = Finding(FindingKind.UNAVAILABLE, failure=ProviderFailure.OUTAGE)
    with capture_logs() as logs:
        runtime.events.inspected(_page(*[("http_receipt", "pay.charge", outage)] * 5))
    assert [(e["event"], e["log_level"], e["items"]) for e in logs] == [
        ("provider_failed", "warning", 5)
    ]
    ready = ReadinessCheck(
        lambda: None, lambda: "head", "head", providers=telemetry.provider_health.report
    )
    assert ready() == Probe(
        True,
        {
            "status": "ready",
            "schema_revision": "head",
            "providers": {"http_receipt": {"kind": "outage", "action_types": ["pay.charge"]}},
        },
    )


def test_only_unavailable_findings_name_a_failure() -> None:
    with pytest.raises(ValueError, match="only an unavailable finding"):
        Finding(FindingKind.MISSING, failure=ProviderFailure.OUTAGE)
    with pytest.raises(ValueError, match="a cause goes with a failure on an unavailable"):
        Finding(FindingKind.UNAVAILABLE, cause="sqlstate_42501")
    with pytest.raises(ValueError, match="a cause goes with a failure"):
        Finding(
            FindingKind.UNAVAILABLE,
            failure=ProviderFailure.CONFIGURATION,
            cause="Permission denied",
        )
    # A conflict, missing or unsupported finding names its reason; verified evidence never.
    assert Finding(FindingKind.CONFLICT, cause="unknown_kid").cause == "unknown_kid"
    with pytest.raises(ValueError, match="a cause goes with a failure or an unverified"):
        Finding(FindingKind.VERIFIED_SUCCEEDED, "a" * 64, "ok", cause="unknown_kid")


@pytest.mark.parametrize("attrs", ["read-write", "primary"])
def test_a_read_write_target_is_a_configuration_error_and_primary_reads(
    database_url: str, attrs: str
) -> None:
    """`target_session_attrs=read-write` can never open a read-only session; `primary`
    follows the primary through a failover and reads."""
    db = _database(f"{database_url}?target_session_attrs={attrs}")
    try:
        if attrs == "primary":
            assert db.fetch("SELECT 1 AS one", {}) == [{"one": 1}]
            return
        with pytest.raises(SourceMisconfigured):
            db.fetch("SELECT 1", {})
        finding = InternalMutationProvider(db, KEYS, 2).inspect(new_identity(None))
        assert _classified(finding) == (FindingKind.UNAVAILABLE, ProviderFailure.CONFIGURATION)
        assert finding.cause == "target_session_attrs_read_write"
    finally:
        db.close()
