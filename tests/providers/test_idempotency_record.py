"""`idempotency_record` against a downstream service's own database, real PostgreSQL and real
MariaDB: the contract kit, the reader that can only read, and the settings' rules."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import msgspec
import psycopg
import pymysql
import pytest

from providers.idempotency_record import create
from resolver.core.domain import DispatchIdentity, FindingKind, ProviderFailure, action_digest
from resolver.core.errors import ConfigError
from resolver.evidence.contract import NotApplicable, ProviderContract, ProviderHarness, Scenario
from resolver.evidence.receipts import KeyRing
from resolver.executor import idempotency_binding
from tests.helpers.downstream import MariaDbService, PostgresService, ServiceDatabase, settings
from tests.helpers.mariadb import MariaDb

KEYS = KeyRing({"svc-k1": bytes.fromhex("6b" * 32)}, signing_kid="svc-k1")
KEYS_ENV = {"RESOLVER_RECEIPT_KEYS": f"svc-k1={'6b' * 32}"}
URL_ENV = "SERVICE_READER_URL"


def new_identity() -> DispatchIdentity:
    dispatch_id = f"r-{uuid.uuid4().hex[:16]}"
    return DispatchIdentity(
        schema_version=1,
        dispatch_id=dispatch_id,
        approval_request_id=f"ar-{dispatch_id}",
        project_id="proj-svc",
        action_type="refunds.create",
        action_digest=action_digest({"refund": dispatch_id}),
        attempt=1,
        started_at_ms=1_800_000_000_000,
        idempotency_key=f"idem-{dispatch_id}",
    )


class RecordHarness:
    """Plants what the service would record for a request the executor sent."""

    entry_point = "idempotency_record"

    def __init__(self, service: ServiceDatabase, monkeypatch: pytest.MonkeyPatch) -> None:
        self.service = service
        self.monkeypatch = monkeypatch
        for name, value in KEYS_ENV.items():
            monkeypatch.setenv(name, value)
        self._providers: list[Any] = []

    def _provider(self, url: str) -> Any:
        self.monkeypatch.setenv(URL_ENV, url)
        options = settings(self.service, URL_ENV, timeout_seconds=3)
        options.pop("provider")
        provider = create(options)
        self._providers.append(provider)
        return provider

    def provider(self) -> Any:
        return self._provider(self.service.reader_url())

    def unavailable_provider(self) -> Any:
        return self._provider(self.service.dead_url())

    def identity(self) -> DispatchIdentity:
        return new_identity()

    def plant(self, scenario: Scenario, identity: DispatchIdentity) -> None:
        key = identity.idempotency_key
        token = idempotency_binding(identity, KEYS)
        if scenario is Scenario.SUCCEEDED:
            self.service.record(key, token, "completed", "refunded")
        elif scenario is Scenario.FAILED:
            self.service.record(key, token, "declined", "card_declined")
        elif scenario is Scenario.STILL_RUNNING:
            self.service.record(key, token, "processing")
        elif scenario is Scenario.TAMPERED:
            # The token of this very dispatch, its signature altered in the table.
            self.service.record(key, token[:-1] + ("0" if token[-1] != "0" else "1"), "completed")
        elif scenario is Scenario.IDENTITY_DRIFT:
            # A genuine token, but of another attempt of the dispatch.
            other = msgspec.structs.replace(identity, attempt=identity.attempt + 1)
            self.service.record(key, idempotency_binding(other, KEYS), "completed")
        elif scenario is Scenario.OVERSIZE:
            self.service.record(key, token + " " + "x" * 600, "completed")
        else:
            raise NotApplicable("a record has fixed columns: no field can be added")

    def snapshot(self) -> object:
        return self.service.rows()

    def close(self) -> None:
        for provider in self._providers:
            provider.close()


@pytest.fixture(params=["postgresql", "mariadb"])
def service(request: pytest.FixtureRequest) -> Iterator[ServiceDatabase]:
    built: ServiceDatabase
    if request.param == "mariadb":
        built = MariaDbService(request.getfixturevalue("mariadb"))
    else:
        built = PostgresService(request.getfixturevalue("database_url"))
    yield built
    built.close()


class TestIdempotencyRecordContract(ProviderContract):
    @pytest.fixture
    def provider_harness(
        self, service: ServiceDatabase, monkeypatch: pytest.MonkeyPatch
    ) -> Iterator[ProviderHarness]:
        harness = RecordHarness(service, monkeypatch)
        yield harness  # type: ignore[misc]
        harness.close()


def test_each_answer_of_the_record_and_its_reason(
    service: ServiceDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = RecordHarness(service, monkeypatch)
    provider = harness.provider()
    try:
        identity = new_identity()
        assert provider.inspect(identity).cause == "no_record"
        service.record(identity.idempotency_key, None, "completed")
        assert provider.inspect(identity).cause == "record_not_bound"
        other = new_identity()
        service.record(other.idempotency_key, idempotency_binding(other, KEYS), "refunding")
        conflict = provider.inspect(other)
        assert (conflict.kind, conflict.cause) == (FindingKind.CONFLICT, "unknown_status")
        # A token another dispatch left, on this dispatch's key: bound elsewhere.
        third = new_identity()
        service.record(third.idempotency_key, idempotency_binding(other, KEYS), "completed")
        assert provider.inspect(third).cause == "identity_mismatch"
        # A service result code that is free text is never stored: the status stands in.
        fourth = new_identity()
        token = idempotency_binding(fourth, KEYS)
        service.record(fourth.idempotency_key, token, "completed", "Refunded OK!")
        assert provider.inspect(fourth).result_code == "completed"
    finally:
        harness.close()


def test_the_reader_can_only_read_and_its_refusal_is_a_configuration_error(
    service: ServiceDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    for statement in (
        "INSERT INTO idempotency_records (idempotency_key, status) VALUES ('x', 'completed')",
        "UPDATE idempotency_records SET status = 'completed'",
        "DELETE FROM idempotency_records",
    ):
        with pytest.raises((psycopg.errors.InsufficientPrivilege, pymysql.err.OperationalError)):
            service.as_reader(statement)
    # A reader whose grant was taken away: the provider says so, it never guesses.
    harness = RecordHarness(service, monkeypatch)
    provider = harness.provider()
    try:
        if isinstance(service, PostgresService):
            service.conn.execute(f"REVOKE SELECT ON idempotency_records FROM {service.role}")
            cause = "sqlstate_42501"
        else:
            assert isinstance(service, MariaDbService)
            service.server.execute(
                f"REVOKE SELECT ON {service.name}.idempotency_records FROM '{service.reader}'@'%'"
            )
            # Its only grant gone, the login may not even use the database.
            cause = "mysql_1044"
        finding = provider.inspect(new_identity())
        assert (finding.kind, finding.failure, finding.cause) == (
            FindingKind.UNAVAILABLE,
            ProviderFailure.CONFIGURATION,
            cause,
        )
    finally:
        harness.close()


def test_mariadb_log_shows_the_reader_sent_only_reads(
    mariadb: MariaDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = MariaDbService(mariadb)
    harness = RecordHarness(service, monkeypatch)
    try:
        ProviderContract().test_inspect_writes_nothing_and_repeats_exactly(harness)
        statements = [s.strip().upper() for s in service.reader_statements()]
        assert any(s.startswith("SELECT STATUS") for s in statements)
        allowed = ("SELECT", "START TRANSACTION READ ONLY", "ROLLBACK", "SET ")
        assert [s for s in statements if not s.startswith(allowed)] == []
    finally:
        harness.close()
        service.close()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"query": "DELETE FROM idempotency_records"}, "one SELECT"),
        ({"query": "SELECT 1; DROP TABLE x"}, "one SELECT"),
        ({"query": "SELECT status FROM t WHERE k = %(secret)s"}, "names \\['secret'\\]"),
        ({"query": "SELECT status, binding FROM t"}, "idempotency_key"),
        ({"statuses": {"succeeded": ["ok"], "failed": ["ok"]}}, "one list only"),
        ({"database_url": "mysql://reader:pw@db/shop"}, "holds a password"),
        ({"dialect": "oracle"}, "dialect"),
    ],
)
def test_bad_settings_are_a_clear_start_up_error(change: dict[str, Any], message: str) -> None:
    service = PostgresService.__new__(PostgresService)
    service.dialect = "postgresql"
    options = settings(service, URL_ENV)
    options.pop("provider")
    if "database_url" in change:
        options.pop("database_url_env")
    with pytest.raises(ConfigError, match=message):
        create({**options, **change})
