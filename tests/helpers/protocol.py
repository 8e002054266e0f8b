"""The executor protocol's SQL functions called by name, as a foreign-language executor would."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.helpers.database import SQL, T0, new_spec

LEASE_MS = 1_000
PROTOCOL = (
    "resolver_dispatch_create_v2",
    "resolver_execution_lease",
    "resolver_execution_start",
    "resolver_execution_renew",
    "resolver_execution_complete",
    "resolver_receipt_identity",
    "resolver_receipt_write",
)


_CALLS = "SELECT funcname, calls FROM pg_stat_xact_user_functions WHERE funcname = ANY (%s)"


def count_calls(conn: psycopg.Connection[Any]) -> Callable[[], dict[str, int]]:
    """Count the protocol calls `conn`'s open transaction makes from here on: returns what
    reads the count of each function called since. A difference, not the view's figure: a
    backend keeps the counts it has not reported yet from its earlier transactions, and the
    view adds them in (a pooled connection may have counted before)."""
    conn.execute("SET LOCAL track_functions = 'all'")
    before = _calls(conn)

    def since() -> dict[str, int]:
        after = {name: n - before.get(name, 0) for name, n in _calls(conn).items()}
        return {name: n for name, n in after.items() if n}

    return since


def _calls(conn: psycopg.Connection[Any]) -> dict[str, int]:
    rows = conn.execute(_CALLS, (list(PROTOCOL),)).fetchall()
    return {str(row[0]): int(row[1]) for row in rows}


def call(sql: SQL, function: str, **args: Any) -> dict[str, Any]:
    named = ", ".join(f"p_{name} => %s" for name in args)
    return sql.one(f"SELECT * FROM {function}({named})", *args.values())


def refused(sql: SQL, sqlstate: str, function: str, **args: Any) -> str:
    with pytest.raises(psycopg.Error) as caught:
        call(sql, function, **args)
    assert caught.value.sqlstate == sqlstate, caught.value.diag.message_primary
    return caught.value.diag.message_primary or ""


def created(sql: SQL) -> str:
    spec = new_spec()
    row = call(
        sql,
        "resolver_dispatch_create_v2",
        dispatch_id=spec.dispatch_id,
        approval_request_id=spec.approval_request_id,
        project_id=spec.project_id,
        action_type=spec.action_type,
        action_digest=spec.action_digest,
        idempotency_key=spec.idempotency_key,
    )
    assert row["created"] is True
    return spec.dispatch_id


def leased(sql: SQL, now_ms: int = T0) -> dict[str, Any]:
    dispatch_id = created(sql)
    return call(
        sql,
        "resolver_execution_lease",
        dispatch_id=dispatch_id,
        owner="ts-executor",
        lease_ms=LEASE_MS,
        now_ms=now_ms,
    )


def fence(lease: dict[str, Any]) -> dict[str, Any]:
    return {k: lease[k] for k in ("dispatch_id", "owner", "token", "version")}


def started(sql: SQL, now_ms: int = T0) -> dict[str, Any]:
    lease = leased(sql, now_ms)
    return call(sql, "resolver_execution_start", **fence(lease), lease_ms=LEASE_MS, now_ms=now_ms)
