"""Contract-kit harnesses for the built-in providers: plant evidence as real writers would."""

from __future__ import annotations

import socket
import uuid
from typing import Any

import msgspec
import psycopg
from psycopg import sql as pgsql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from providers.http_receipt import HttpReceiptProvider
from providers.internal_mutation import InternalMutationProvider
from providers.manual_only import ManualOnlyProvider
from providers.package_install import PackageInstallProvider
from providers.run_create import RunCreateProvider
from resolver.core.domain import DispatchIdentity, Outcome, action_digest, canonical_json
from resolver.core.provider import EvidenceProvider
from resolver.db.readonly import ReadOnlyDatabase
from resolver.evidence.contract import NotApplicable, Scenario
from resolver.evidence.readonly_http import ReadOnlyHttpClient
from resolver.evidence.receipt_server import ReceiptServer
from resolver.evidence.receipts import MAX_RAW_RECEIPT_BYTES, KeyRing, sign_receipt

DEAD_URL = "postgresql://postgres@127.0.0.1:1/nowhere"
# The SQL providers' bounds (connect, statement, inspect): a healthy answer never waits for
# them, and a loaded machine (CI beside other jobs, parallel workers) must not turn a slow
# answer into an outage. A dead server (DEAD_URL) refuses at once whatever the bound.
TIMEOUT_SECONDS = 5.0
STARTED_AT_MS = 1_800_000_000_000
TOKEN = "contract-test-token"
OTHER_DIGEST = action_digest({"something": "else"})
CONTENT = action_digest({"package": "contents"})


def new_identity(conn: psycopg.Connection[Any] | None, attempt: int = 1) -> DispatchIdentity:
    """A fresh identity; with a connection its dispatch row exists (facts reference it)."""
    dispatch_id = f"c-{uuid.uuid4().hex[:16]}"
    identity = DispatchIdentity(
        schema_version=1,
        dispatch_id=dispatch_id,
        approval_request_id=f"ar-{dispatch_id}",
        project_id="proj-contract",
        action_type="contract.action",
        action_digest=action_digest({"id": dispatch_id}),
        attempt=attempt,
        started_at_ms=STARTED_AT_MS,
        idempotency_key=f"idem-{dispatch_id}",
    )
    if conn is not None:
        conn.execute(
            "INSERT INTO approved_action_dispatches (dispatch_id, approval_request_id, project_id,"
            " action_type, action_digest, idempotency_key, schema_version)"
            " VALUES (%s, %s, %s, %s, %s, %s, 1)",
            (
                identity.dispatch_id,
                identity.approval_request_id,
                identity.project_id,
                identity.action_type,
                identity.action_digest,
                identity.idempotency_key,
            ),
        )
    return identity


def signed(identity: DispatchIdentity, keys: KeyRing, scenario: Scenario) -> dict[str, Any]:
    """The receipt a writer would produce for a receipt-based scenario."""
    if scenario is Scenario.STILL_RUNNING:
        raise NotApplicable("a receipt is written only once the outcome is known")
    outcome = Outcome.FAILED if scenario is Scenario.FAILED else Outcome.SUCCEEDED
    bound = identity
    if scenario is Scenario.IDENTITY_DRIFT:  # correctly signed, but for another attempt
        bound = msgspec.structs.replace(identity, attempt=identity.attempt + 1)
    receipt = sign_receipt(
        bound,
        outcome=outcome,
        result_code="declined" if outcome is Outcome.FAILED else "ok",
        finished_at_ms=STARTED_AT_MS + 5,
        receipt_id=f"rcpt-{identity.dispatch_id}",
        keys=keys,
    )
    if scenario is Scenario.TAMPERED:
        receipt["outcome"] = "failed"  # flipped after signing
    if scenario in (Scenario.OVERSIZE, Scenario.EXTRA_FIELD):
        receipt.pop("sig")
        receipt["note" if scenario is Scenario.EXTRA_FIELD else "pad"] = (
            "extra" if scenario is Scenario.EXTRA_FIELD else "x" * 5000
        )
        receipt["sig"] = keys.mac(receipt["kid"], canonical_json(receipt))  # signed, still wrong
    return receipt


class SqlHarness:
    """Base of the SQL harnesses: a private migrated database, planted with autocommit."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.conn = psycopg.connect(database_url, autocommit=True, row_factory=dict_row)
        self._providers: list[Any] = []

    def close(self) -> None:
        for provider in self._providers:
            provider.close()
        self.conn.close()

    def database(self, url: str | None = None) -> ReadOnlyDatabase:
        db = ReadOnlyDatabase(url or self.database_url, timeout_seconds=TIMEOUT_SECONDS)
        db.open()
        return db

    def track(self, provider: Any) -> Any:
        self._providers.append(provider)
        return provider

    def identity(self) -> DispatchIdentity:
        return new_identity(self.conn)

    def snapshot(self) -> object:
        """Every row of every table with its xmin: any write would change it."""
        tables = [
            r["tablename"]
            for r in self.conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            )
        ]
        return {
            table: self.conn.execute(
                pgsql.SQL(
                    "SELECT xmin::text AS xmin, t::text AS row FROM {} AS t ORDER BY 2"
                ).format(pgsql.Identifier(table))
            ).fetchall()
            for table in tables
        }


class InternalMutationHarness(SqlHarness):
    entry_point = "internal_mutation"

    def __init__(self, database_url: str, keys: KeyRing) -> None:
        super().__init__(database_url)
        self.keys = keys

    def provider(self) -> EvidenceProvider:
        return self.track(InternalMutationProvider(self.database(), self.keys, TIMEOUT_SECONDS))

    def unavailable_provider(self) -> EvidenceProvider:
        return self.track(
            InternalMutationProvider(self.database(DEAD_URL), self.keys, TIMEOUT_SECONDS)
        )

    def plant(self, scenario: Scenario, identity: DispatchIdentity) -> None:
        receipt = signed(identity, self.keys, scenario)
        self.conn.execute(
            "INSERT INTO action_receipts (dispatch_id, receipt) VALUES (%s, %s)",
            (identity.dispatch_id, Jsonb(receipt)),
        )


class RunCreateHarness(SqlHarness):
    entry_point = "run_create"

    def provider(self) -> EvidenceProvider:
        return self.track(RunCreateProvider(self.database(), TIMEOUT_SECONDS))

    def unavailable_provider(self) -> EvidenceProvider:
        return self.track(RunCreateProvider(self.database(DEAD_URL), TIMEOUT_SECONDS))

    def plant(self, scenario: Scenario, identity: DispatchIdentity) -> None:
        if scenario in (Scenario.OVERSIZE, Scenario.EXTRA_FIELD):
            raise NotApplicable("fixed columns with CHECK constraints cannot hold it")
        state = {Scenario.FAILED: "failed", Scenario.STILL_RUNNING: "running"}.get(
            scenario, "succeeded"
        )
        fact = {
            "run_id": f"run-{identity.dispatch_id}",
            "dispatch_id": identity.dispatch_id,
            "idempotency_key": identity.idempotency_key,
            "project_id": identity.project_id,
            "action_digest": OTHER_DIGEST
            if scenario is Scenario.TAMPERED
            else identity.action_digest,
            "attempt": identity.attempt + (scenario is Scenario.IDENTITY_DRIFT),
            "state": state,
            "result_code": None if state == "running" else ("ok" if state == "succeeded" else "no"),
            "finished_at_ms": None if state == "running" else STARTED_AT_MS + 9,
        }
        insert_run_fact(self.conn, fact)


def insert_run_fact(conn: psycopg.Connection[Any], fact: dict[str, Any]) -> None:
    conn.execute(
        "INSERT INTO run_origin_facts (run_id, dispatch_id, idempotency_key, project_id,"
        " action_digest, attempt, state, result_code, finished_at_ms) VALUES (%(run_id)s,"
        " %(dispatch_id)s, %(idempotency_key)s, %(project_id)s, %(action_digest)s, %(attempt)s,"
        " %(state)s, %(result_code)s, %(finished_at_ms)s)",
        fact,
    )


class PackageInstallHarness(SqlHarness):
    entry_point = "package_install"

    def provider(self) -> EvidenceProvider:
        return self.track(PackageInstallProvider(self.database(), TIMEOUT_SECONDS))

    def unavailable_provider(self) -> EvidenceProvider:
        return self.track(PackageInstallProvider(self.database(DEAD_URL), TIMEOUT_SECONDS))

    def plant(self, scenario: Scenario, identity: DispatchIdentity) -> None:
        if scenario in (Scenario.OVERSIZE, Scenario.EXTRA_FIELD, Scenario.STILL_RUNNING):
            raise NotApplicable("three fixed-column facts; an install in progress has no record")
        failed = scenario is Scenario.FAILED
        plant_install(
            self.conn,
            identity,
            outcome="failed" if failed else "succeeded",
            record_digest=OTHER_DIGEST
            if scenario is Scenario.IDENTITY_DRIFT
            else identity.action_digest,
            marker=None if failed else (OTHER_DIGEST if scenario is Scenario.TAMPERED else CONTENT),
        )


def plant_install(
    conn: psycopg.Connection[Any],
    identity: DispatchIdentity,
    *,
    outcome: str = "succeeded",
    record_digest: str | None = None,
    record: bool = True,
    target: bool = True,
    marker: str | None = CONTENT,
    installed_version: str = "1.4.2",
) -> None:
    """The installer's facts in its order: verified target, commit marker, record last."""
    if target:
        conn.execute(
            "INSERT INTO package_install_targets (dispatch_id, installed_version, content_digest)"
            " VALUES (%s, %s, %s)",
            (identity.dispatch_id, installed_version, CONTENT),
        )
    if marker is not None:
        conn.execute(
            "INSERT INTO package_commit_markers (dispatch_id, content_digest) VALUES (%s, %s)",
            (identity.dispatch_id, marker),
        )
    if record:
        conn.execute(
            "INSERT INTO package_install_records (dispatch_id, idempotency_key, action_digest,"
            " attempt, target_version, content_digest, outcome, result_code)"
            " VALUES (%s, %s, %s, %s, '1.4.2', %s, %s, %s)",
            (
                identity.dispatch_id,
                identity.idempotency_key,
                record_digest or identity.action_digest,
                identity.attempt,
                CONTENT,
                outcome,
                "installed" if outcome == "succeeded" else "rolled_back",
            ),
        )


class HttpReceiptHarness:
    entry_point = "http_receipt"

    def __init__(self, server: ReceiptServer, keys: KeyRing) -> None:
        self.server = server
        self.keys = keys

    def _provider(self, base_url: str) -> HttpReceiptProvider:
        client = ReadOnlyHttpClient(
            base_url,
            timeout_seconds=2.0,
            max_body_bytes=MAX_RAW_RECEIPT_BYTES,
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        return HttpReceiptProvider(client, self.keys, 2.0)

    def provider(self) -> EvidenceProvider:
        return self._provider(self.server.base_url)

    def unavailable_provider(self) -> EvidenceProvider:
        return self._provider(f"http://127.0.0.1:{closed_port()}")

    def identity(self) -> DispatchIdentity:
        return new_identity(None)

    def plant(self, scenario: Scenario, identity: DispatchIdentity) -> None:
        if scenario is Scenario.STILL_RUNNING:
            self.server.plant(identity.idempotency_key, 202)
            return
        body = canonical_json(signed(identity, self.keys, scenario))
        self.server.plant(identity.idempotency_key, 200, body)

    def snapshot(self) -> object:
        # The service's state, and whether anything but a read ever reached it.
        return self.server.answers(), self.server.methods() - {"GET", "HEAD"}


class ManualOnlyHarness:
    entry_point = "manual_only"

    def provider(self) -> EvidenceProvider:
        return ManualOnlyProvider()

    def unavailable_provider(self) -> EvidenceProvider:
        return ManualOnlyProvider()

    def identity(self) -> DispatchIdentity:
        return new_identity(None)

    def plant(self, scenario: Scenario, identity: DispatchIdentity) -> None:
        return  # whatever exists elsewhere, manual_only never looks

    def snapshot(self) -> object:
        return None


def closed_port() -> int:
    """A port nothing listens on (bound then released): connecting is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
