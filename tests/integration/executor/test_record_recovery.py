"""A downstream service's idempotency records as evidence, end to end, on real PostgreSQL and
real MariaDB: a real executor (the Python SDK) SIGKILLed at each point of its call, settled by
a real `resolver run --once` through `idempotency_record`, reading as a login that may only
read; tampered and mis-bound records go to a person with their reason; a request that never
landed stays missing, then escalates; the service's records are never written by the resolver.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from resolver.core.domain import DispatchIdentity
from resolver.evidence.bindings import IDEMPOTENCY_RECORD, binding_evidence_digest
from resolver.evidence.receipts import KeyRing
from resolver.executor import idempotency_binding
from resolver.executor.client import ExecutionClient
from tests.helpers.database import SQL, new_spec
from tests.helpers.downstream import (
    TABLE,
    MariaDbService,
    PostgresService,
    ServiceDatabase,
    settings,
)
from tests.helpers.stores import Storage

KEYS = KeyRing({"rec-k1": bytes.fromhex("7d" * 32)}, signing_kid="rec-k1")
RECEIPT_ENV = {
    "RESOLVER_RECEIPT_KEYS": f"rec-k1={'7d' * 32}",
    "RESOLVER_RECEIPT_SIGNING_KID": "rec-k1",
}
ACTION = "refunds.create"
URL_ENV = "REFUNDS_READER_URL"
CRASHER = Path(__file__).with_name("record_crash_executor.py")
WAIT_SECONDS = 30.0


@pytest.fixture(params=["postgresql", "mariadb"])
def service(request: pytest.FixtureRequest) -> Iterator[ServiceDatabase]:
    built: ServiceDatabase
    if request.param == "mariadb":
        built = MariaDbService(request.getfixturevalue("mariadb"))
    else:
        built = PostgresService(request.getfixturevalue("database_url"))
    yield built
    built.close()


def writer_spec(service: ServiceDatabase) -> str:
    """How the crash executor's service writes its own records (the service's login)."""
    if isinstance(service, MariaDbService):
        server = service.server
        connect = {"host": server.host, "port": server.port, "user": "root", "password": ""}
        return json.dumps(
            {"dialect": "mariadb", "table": f"{service.name}.{TABLE}", "connect": connect}
        )
    assert isinstance(service, PostgresService)
    return json.dumps({"dialect": "postgresql", "table": TABLE, "url": service.admin_url})


def dispatch(store: Storage) -> str:
    spec = new_spec(ACTION, dispatch_id=f"rr-{uuid.uuid4().hex[:12]}")
    ExecutionClient(store, owner="platform").create_dispatch(spec)
    return spec.dispatch_id


def wait_until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def lease_expired(sql: SQL, dispatch_id: str) -> bool:
    row = sql.one(
        "SELECT lease_expires_at_ms <= resolver_now_ms(NULL) AS expired"
        " FROM approved_action_executions WHERE dispatch_id = %s",
        dispatch_id,
    )
    return bool(row["expired"])


def resolver_run_once(
    service: ServiceDatabase, database_url: str, tmp_path: Path, **provider: Any
) -> None:
    config = tmp_path / "providers.yaml"
    config.write_text(
        yaml.safe_dump({"action_types": {ACTION: settings(service, URL_ENV, **provider)}})
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
    env |= RECEIPT_ENV | {URL_ENV: service.reader_url()}
    env |= {
        "RESOLVER_DATABASE_URL": database_url,
        "RESOLVER_CONFIG": str(config),
        "RESOLVER_BACKOFF_BASE_SECONDS": "0.2",
        "RESOLVER_BACKOFF_MAX_SECONDS": "0.4",
    }
    done = subprocess.run(
        [sys.executable, "-m", "resolver", "run", "--once"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def crash_executor(
    service: ServiceDatabase, database_url: str, dispatch_id: str, point: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")} | RECEIPT_ENV
    process = subprocess.run(
        [sys.executable, str(CRASHER), database_url, dispatch_id, point, writer_spec(service)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert process.returncode == -signal.SIGKILL, process.stderr


def recovered(
    service: ServiceDatabase,
    database_url: str,
    sql: SQL,
    tmp_path: Path,
    dispatch_id: str,
    **provider: Any,
) -> None:
    wait_until(lambda: lease_expired(sql, dispatch_id), "the crashed executor's lease to end")
    resolver_run_once(service, database_url, tmp_path, **provider)


CRASH_POINTS = {
    # point: (execution state after recovery, the control's last finding, resolved by)
    "before_request": ("executing", "missing", []),
    "in_flight": ("executing", "still_running", []),
    "after_response": ("succeeded", None, ["automatic"]),
    "after_complete": ("succeeded", None, []),
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_crash_at_every_point_of_the_call_settles_from_the_service_s_record(
    service: ServiceDatabase,
    store: Storage,
    database_url: str,
    sql: SQL,
    tmp_path: Path,
    point: str,
) -> None:
    state, finding, sources = CRASH_POINTS[point]
    dispatch_id = dispatch(store)
    crash_executor(service, database_url, dispatch_id, point)
    before = service.rows()
    if point != "after_complete":
        assert sql.execution(dispatch_id)["state"] == "executing"
        recovered(service, database_url, sql, tmp_path, dispatch_id)
    execution = sql.execution(dispatch_id)
    assert execution["state"] == state
    assert [r["source"] for r in sql.resolutions(dispatch_id)] == sources
    if state == "succeeded":
        identity = identity_of(sql, dispatch_id)
        key = identity.idempotency_key
        token = idempotency_binding(identity, KEYS)  # deterministic: what the executor sent
        # What the executor completed with and what recovery stored: one digest, so a late
        # completion racing the resolution replays it exactly.
        assert execution["evidence_digest"] == binding_evidence_digest(
            IDEMPOTENCY_RECORD, f"{key}:completed:refunded", token
        )
        assert execution["result_code"] == "refunded"
    else:
        assert sql.control(dispatch_id)["last_finding"] == finding
    # Nothing of the service's was written by the resolver.
    assert service.rows() == before


def identity_of(sql: SQL, dispatch_id: str) -> DispatchIdentity:
    """The identity recovery inspects: the dispatch with its execution's attempt and start."""
    row = sql.one(
        "SELECT d.schema_version, d.dispatch_id, d.approval_request_id, d.project_id,"
        " d.action_type, d.action_digest, e.attempt, e.started_at_ms, d.idempotency_key"
        " FROM approved_action_dispatches d JOIN approved_action_executions e USING (dispatch_id)"
        " WHERE d.dispatch_id = %s",
        dispatch_id,
    )
    return DispatchIdentity(**row)


@pytest.mark.parametrize(
    ("tamper", "reason"), [("altered", "bad_signature"), ("other", "identity_mismatch")]
)
def test_a_tampered_or_mis_bound_record_goes_to_a_person_with_its_reason(
    service: ServiceDatabase,
    store: Storage,
    database_url: str,
    sql: SQL,
    tmp_path: Path,
    tamper: str,
    reason: str,
) -> None:
    dispatch_id = dispatch(store)
    crash_executor(service, database_url, dispatch_id, "before_request")
    identity = identity_of(sql, dispatch_id)
    token = idempotency_binding(identity, KEYS)
    if tamper == "altered":
        token = token[:-1] + ("0" if token[-1] != "0" else "1")
    else:
        # Another lost dispatch's genuine token, left on this dispatch's key.
        other = dispatch(store)
        crash_executor(service, database_url, other, "before_request")
        token = idempotency_binding(identity_of(sql, other), KEYS)
    service.record(identity.idempotency_key, token, "completed", "refunded")
    before = service.rows()
    recovered(service, database_url, sql, tmp_path, dispatch_id)
    control = sql.control(dispatch_id)
    assert (control["status"], control["last_finding"], control["last_reason"]) == (
        "manual",
        "conflict",
        reason,
    )
    assert sql.execution(dispatch_id)["state"] == "executing"
    assert service.rows() == before


def test_a_request_that_never_landed_is_missing_then_escalates(
    service: ServiceDatabase, store: Storage, database_url: str, sql: SQL, tmp_path: Path
) -> None:
    dispatch_id = dispatch(store)
    crash_executor(service, database_url, dispatch_id, "before_request")
    window = {"escalate_after_seconds": {"missing": 1}}
    recovered(service, database_url, sql, tmp_path, dispatch_id, **window)
    first = sql.control(dispatch_id)
    assert (first["status"], first["last_finding"], first["last_reason"]) == (
        "armed",
        "missing",
        "no_record",
    )

    def escalated() -> bool:
        resolver_run_once(service, database_url, tmp_path, **window)
        return bool(sql.control(dispatch_id)["status"] == "manual")

    wait_until(escalated, "the missing record to outlast its window")
    control = sql.control(dispatch_id)
    assert control["manual_reason"] == "evidence_window_elapsed"
    assert control["manual_at_ms"] - control["first_inspected_at_ms"] >= 1000
    assert service.rows() == []
    if isinstance(service, MariaDbService):
        statements = [s.strip().upper() for s in service.reader_statements()]
        allowed = ("SELECT", "START TRANSACTION READ ONLY", "ROLLBACK", "SET ")
        assert statements and [s for s in statements if not s.startswith(allowed)] == []
