"""A payments API's own answer as evidence, end to end: a real executor (the Python SDK)
SIGKILLed at each point of its call to a real API over TLS (uvicorn), settled by a real
`resolver run --once` through `http_lookup`, configured, not coded, with a token the API lets
only read; a tampered or mis-bound answer goes to a person with its reason; a request that never
landed stays missing, then escalates; the API's log shows the resolver only ever read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

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
from tests.helpers.payments_api import PaymentsApi, running_payments_api
from tests.helpers.stores import Storage

KEYS = KeyRing({"api-e2e": bytes.fromhex("4a" * 32)}, signing_kid="api-e2e")
RECEIPT_ENV = {
    "RESOLVER_RECEIPT_KEYS": f"api-e2e={'4a' * 32}",
    "RESOLVER_RECEIPT_SIGNING_KID": "api-e2e",
}
ACTION = "refunds.create"
CRASHER = Path(__file__).with_name("api_crash_executor.py")


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PaymentsApi]:
    with running_payments_api(tmp_path_factory.mktemp("payments")) as running:
        yield running


def dispatch(store: Storage) -> str:
    return new_dispatch(store, ACTION, "pr")


def resolver_run_once(api: PaymentsApi, database_url: str, tmp_path: Path, **more: Any) -> None:
    settings = {"provider": "http_lookup", **api.settings(**more)}
    env = RECEIPT_ENV | {"PAYMENTS_READER_TOKEN": "reader-token-1"}
    run_once(database_url, tmp_path, ACTION, settings, env)


def crash_executor(api: PaymentsApi, database_url: str, dispatch_id: str, point: str) -> None:
    where = json.dumps({"url": api.url, "ca": str(api.ca_bundle)})
    crash(CRASHER, RECEIPT_ENV, database_url, dispatch_id, point, where)


def recovered(
    api: PaymentsApi, database_url: str, sql: SQL, tmp_path: Path, dispatch_id: str, **more: Any
) -> None:
    wait_until(lambda: lease_expired(sql, dispatch_id), "the crashed executor's lease to end")
    resolver_run_once(api, database_url, tmp_path, **more)


CRASH_POINTS = {
    # point: (execution state after recovery, the control's last finding, resolved by)
    "before_request": ("executing", "missing", []),
    "in_flight": ("executing", "still_running", []),
    "after_response": ("succeeded", None, ["automatic"]),
    "after_complete": ("succeeded", None, []),
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_crash_at_every_point_of_the_call_settles_from_the_api_s_answer(
    api: PaymentsApi, store: Storage, database_url: str, sql: SQL, tmp_path: Path, point: str
) -> None:
    state, finding, sources = CRASH_POINTS[point]
    dispatch_id = dispatch(store)
    crash_executor(api, database_url, dispatch_id, point)
    seen = len(api.state.log)
    if point != "after_complete":
        assert sql.execution(dispatch_id)["state"] == "executing"
        recovered(api, database_url, sql, tmp_path, dispatch_id)
    execution = sql.execution(dispatch_id)
    assert execution["state"] == state
    assert [r["source"] for r in sql.resolutions(dispatch_id)] == sources
    if state != "succeeded":
        assert sql.control(dispatch_id)["last_finding"] == finding
    elif sources:
        assert execution["result_code"] == "refunded"
    # The resolver only read: every request it made of the API was a GET with its token.
    assert {(method, who) for method, _, who in api.state.log[seen:]} <= {("GET", "reader")}


@pytest.mark.parametrize(
    ("tamper", "reason"), [("altered", "bad_signature"), ("other", "identity_mismatch")]
)
def test_a_tampered_or_mis_bound_answer_goes_to_a_person_with_its_reason(
    api: PaymentsApi,
    store: Storage,
    database_url: str,
    sql: SQL,
    tmp_path: Path,
    tamper: str,
    reason: str,
) -> None:
    dispatch_id = dispatch(store)
    crash_executor(api, database_url, dispatch_id, "before_request")
    identity = identity_of(sql, dispatch_id)
    token = idempotency_binding(identity, KEYS)
    if tamper == "altered":
        token = token[:-1] + ("0" if token[-1] != "0" else "1")
    else:
        other = dispatch(store)
        crash_executor(api, database_url, other, "before_request")
        token = idempotency_binding(identity_of(sql, other), KEYS)
    api.state.refunds[identity.idempotency_key] = {
        "id": "re_t",
        "status": "succeeded",
        "code": "refunded",
        "metadata": {"resolver_binding": token},
    }
    recovered(api, database_url, sql, tmp_path, dispatch_id)
    control = sql.control(dispatch_id)
    assert (control["status"], control["last_finding"], control["last_reason"]) == (
        "manual",
        "conflict",
        reason,
    )


def test_a_request_that_never_landed_is_missing_then_escalates(
    api: PaymentsApi, store: Storage, database_url: str, sql: SQL, tmp_path: Path
) -> None:
    dispatch_id = dispatch(store)
    crash_executor(api, database_url, dispatch_id, "before_request")
    run = partial(resolver_run_once, api, database_url, tmp_path, **MISSING_WINDOW)
    missing_then_escalated(
        sql, dispatch_id, run, "no_record", "the missing refund to outlast its window"
    )
