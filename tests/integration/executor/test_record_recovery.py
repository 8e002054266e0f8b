"""A downstream service's idempotency records as evidence, end to end, on real PostgreSQL and
real MariaDB: a real executor (the Python SDK) SIGKILLed at each point of its call, settled by
a real `resolver run --once` through `idempotency_record`, reading as a login that may only
read; tampered and mis-bound records go to a person with their reason; a request that never
landed stays missing, then escalates; the service's records are never written by the resolver.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from resolver.evidence.bindings import IDEMPOTENCY_RECORD, binding_evidence_digest
from resolver.evidence.receipts import KeyRing
from resolver.executor import idempotency_binding
from tests.helpers.crashes import (
    MISSING_WINDOW,
    crash,
    identity_of,
    lease_expired,
    missing_then_escalated,
    run_once,
    wait_until,
)
from tests.helpers.crashes import dispatch as new_dispatch
from tests.helpers.database import SQL
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
    return new_dispatch(store, ACTION, "rr")


def resolver_run_once(
    service: ServiceDatabase, database_url: str, tmp_path: Path, **provider: Any
) -> None:
    settings_ = settings(service, URL_ENV, **provider)
    run_once(
        database_url, tmp_path, ACTION, settings_, RECEIPT_ENV | {URL_ENV: service.reader_url()}
    )


def crash_executor(
    service: ServiceDatabase, database_url: str, dispatch_id: str, point: str
) -> None:
    crash(CRASHER, RECEIPT_ENV, database_url, dispatch_id, point, writer_spec(service))


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
    run = partial(resolver_run_once, service, database_url, tmp_path, **MISSING_WINDOW)
    control = missing_then_escalated(
        sql, dispatch_id, run, "no_record", "the missing record to outlast its window"
    )
    assert control["manual_at_ms"] - control["first_inspected_at_ms"] >= 1000
    assert service.rows() == []
    if isinstance(service, MariaDbService):
        statements = [s.strip().upper() for s in service.reader_statements()]
        allowed = ("SELECT", "START TRANSACTION READ ONLY", "ROLLBACK", "SET ")
        assert statements and [s for s in statements if not s.startswith(allowed)] == []
