"""The executor protocol's SQL functions called as a foreign-language executor would: SQL only.

Every refusal is checked by its SQLSTATE (class RS) and by the fence its message names; the
Python API's behaviour on the same paths is in test_execution.py.
"""

from __future__ import annotations

from psycopg.types.json import Jsonb

from resolver.db.protocol import (
    FENCE_CONFLICT,
    INVALID_INPUT,
    LEASE_LOST,
    NOT_FOUND,
    NOT_LEASABLE,
)
from tests.helpers.database import SQL, T0, new_spec
from tests.helpers.protocol import (
    LEASE_MS,
    PROTOCOL,
    call,
    fence,
    leased,
    refused,
    started,
)


def test_every_function_is_security_definer_with_a_pinned_search_path(sql: SQL) -> None:
    rows = sql.all(
        "SELECT proname, prosecdef, proconfig FROM pg_proc WHERE proname = ANY(%s)",
        list(PROTOCOL),
    )
    assert {r["proname"] for r in rows} == set(PROTOCOL)
    for row in rows:
        assert row["prosecdef"], row["proname"]
        (path,) = row["proconfig"]
        assert path.startswith("search_path=pg_catalog, ") and path.endswith(", pg_temp")


def test_create_is_idempotent_and_refuses_a_different_identity(sql: SQL) -> None:
    spec = new_spec()
    args = {
        "dispatch_id": spec.dispatch_id,
        "approval_request_id": spec.approval_request_id,
        "project_id": spec.project_id,
        "action_type": spec.action_type,
        "action_digest": spec.action_digest,
        "idempotency_key": spec.idempotency_key,
    }
    first = call(sql, "resolver_dispatch_create_v2", **args)
    again = call(sql, "resolver_dispatch_create_v2", **args)
    assert (first["created"], again["created"]) == (True, False)
    assert again["created_at_ms"] == first["created_at_ms"]
    message = refused(
        sql, INVALID_INPUT, "resolver_dispatch_create_v2", **{**args, "project_id": "other"}
    )
    assert "different identity" in message
    message = refused(
        sql, INVALID_INPUT, "resolver_dispatch_create_v2", **{**args, "action_digest": "XYZ"}
    )
    assert "p_action_digest" in message
    message = refused(
        sql,
        INVALID_INPUT,
        "resolver_dispatch_create_v2",
        **{**args, "dispatch_id": "d-new", "idempotency_key": "k-new"},
        supersedes_dispatch_id="d-nope",
    )
    assert "names no dispatch" in message


def test_the_signature_0_1_0_created_with_is_gone(sql: SQL) -> None:
    """0.1.0's eight arguments without a summary: kept beside resolver_dispatch_create_v2 in
    0.2.0, dropped in 0.3.0 (docs/executor-protocol.md, Versioning)."""
    signature = "resolver_dispatch_create(text, text, text, text, text, text, integer, text)"
    assert sql.one("SELECT to_regprocedure(%s) IS NULL AS gone", signature) == {"gone": True}
    assert sql.one(
        "SELECT count(*) AS n FROM pg_proc WHERE proname = 'resolver_dispatch_create'"
        " AND pronamespace = current_schema()::regnamespace"
    ) == {"n": 0}


def test_lease_refusals(sql: SQL) -> None:
    lease = leased(sql)
    args = {"dispatch_id": lease["dispatch_id"], "owner": "other", "lease_ms": LEASE_MS}
    message = refused(sql, NOT_LEASABLE, "resolver_execution_lease", **args, now_ms=T0 + 1)
    assert "leased by 'ts-executor'" in message
    refused(sql, NOT_FOUND, "resolver_execution_lease", **{**args, "dispatch_id": "d-none"})
    refused(sql, INVALID_INPUT, "resolver_execution_lease", **{**args, "lease_ms": 0})
    refused(sql, INVALID_INPUT, "resolver_execution_lease", **{**args, "owner": ""})
    taken = call(sql, "resolver_execution_lease", **args, now_ms=T0 + LEASE_MS)
    assert (taken["attempt"], taken["version"]) == (2, 2)
    message = refused(
        sql, LEASE_LOST, "resolver_execution_start", **fence(lease), lease_ms=LEASE_MS
    )
    assert "taken over (attempt 2)" in message


def test_start_refusals_name_the_fence(sql: SQL) -> None:
    lease = leased(sql)
    message = refused(
        sql,
        LEASE_LOST,
        "resolver_execution_start",
        **fence(lease),
        lease_ms=LEASE_MS,
        now_ms=T0 + LEASE_MS,
    )
    assert "expired before the start barrier" in message
    forged = {**fence(lease), "owner": "intruder"}
    message = refused(
        sql, FENCE_CONFLICT, "resolver_execution_start", **forged, lease_ms=LEASE_MS, now_ms=T0
    )
    assert "owner/token fence" in message
    run = call(sql, "resolver_execution_start", **fence(lease), lease_ms=LEASE_MS, now_ms=T0)
    assert run["state"] == "executing" and run["started_at_ms"] == T0
    message = refused(
        sql, FENCE_CONFLICT, "resolver_execution_start", **fence(run), lease_ms=LEASE_MS, now_ms=T0
    )
    assert "already executing" in message
    later = {"dispatch_id": run["dispatch_id"], "owner": "x", "lease_ms": LEASE_MS}
    message = refused(
        sql, NOT_LEASABLE, "resolver_execution_lease", **later, now_ms=T0 + 10 * LEASE_MS
    )
    assert "past the start barrier" in message


def test_renew_revokes_recovery_and_stale_renew_is_a_fence_conflict(sql: SQL) -> None:
    run = started(sql)
    renewed = call(
        sql, "resolver_execution_renew", **fence(run), lease_ms=LEASE_MS, now_ms=T0 + 500
    )
    # The control was armed already: nothing was re-armed (a manual one would count 1).
    assert renewed["version"] == run["version"] + 1 and renewed["controls_rearmed"] == 0
    control = sql.control(run["dispatch_id"])
    assert control["execution_version"] == renewed["version"]
    assert control["next_scan_at_ms"] == T0 + 500 + LEASE_MS
    message = refused(
        sql, FENCE_CONFLICT, "resolver_execution_renew", **fence(run), lease_ms=LEASE_MS
    )
    assert f"at version {run['version']} rejected" in message


def test_complete_commits_replays_and_refuses_drift(sql: SQL) -> None:
    run = started(sql)
    done = {"outcome": "succeeded", "result_code": "ok", "mutation_id": "m-1"}
    first = call(sql, "resolver_execution_complete", **fence(run), **done, now_ms=T0 + 5)
    again = call(sql, "resolver_execution_complete", **fence(run), **done, now_ms=T0 + 6)
    assert (first["result"], again["result"]) == ("committed", "replayed")
    assert sql.control(run["dispatch_id"])["closed_by"] == "completion"
    drift = {**done, "result_code": "other"}
    message = refused(sql, FENCE_CONFLICT, "resolver_execution_complete", **fence(run), **drift)
    assert "drifts" in message and "by a completion" in message
    bad = {**done, "outcome": "blocked"}
    refused(sql, INVALID_INPUT, "resolver_execution_complete", **fence(run), **bad)
    refused(
        sql, NOT_FOUND, "resolver_execution_complete", **{**fence(run), "dispatch_id": "no"}, **done
    )


def test_receipt_is_fenced_on_the_lease_and_bound_to_the_identity(sql: SQL) -> None:
    run = started(sql)
    sql.conn.autocommit = False
    try:
        identity = call(sql, "resolver_receipt_identity", **fence(run))
        receipt = {k: identity[k] for k in identity if k not in ("db_now_ms", "schema_version")}
        wrong = {**receipt, "attempt": 7}
        message = refused(
            sql, INVALID_INPUT, "resolver_receipt_write", **fence(run), receipt=Jsonb(wrong)
        )
        assert "attempt" in message
        sql.conn.rollback()
        written = call(sql, "resolver_receipt_write", **fence(run), receipt=Jsonb(receipt))
        sql.conn.commit()
        assert written["dispatch_id"] == run["dispatch_id"]
        stale = {**fence(run), "version": run["version"] - 1}
        refused(sql, FENCE_CONFLICT, "resolver_receipt_identity", **stale)
    finally:
        sql.conn.rollback()
        sql.conn.autocommit = True
