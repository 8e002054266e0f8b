"""Defects an outside adopter found in the executor protocol's fences and refusals.

Each test drives the SQL functions (or a human decision) on real PostgreSQL and checks the
SQLSTATE and the message the docs promise.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from resolver.core.domain import Decision, ManualDecision, ManualResult, Principal
from resolver.db.protocol import FENCE_CONFLICT, INVALID_INPUT, LEASE_LOST, NOT_LEASABLE
from resolver.executor.client import ExecutionClient
from resolver.human.manual import ManualResolutionService
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World, new_spec
from tests.helpers.protocol import (
    LEASE_MS,
    call,
    created,
    fence,
    leased,
    refused,
    started,
)
from tests.helpers.providers import ScriptedProvider, reconciler, verified
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER
from tests.helpers.stores import Storage

AFTER = T0 + EXEC_LEASE_MS


# -- defect 1: a lease on a settled dispatch is RS003, not 23001 "pruned" ------------------------


def test_lease_on_a_dispatch_settled_by_a_resolution_is_not_leasable(
    world: World, store: Storage, sql: SQL
) -> None:
    (lease,) = world.crashed(1)
    resolver = reconciler(store, ScriptedProvider(verified))
    try:
        assert resolver.at(AFTER).run_cycle().accepted == {lease.dispatch_id}
    finally:
        resolver.close()
    assert sql.resolutions(lease.dispatch_id)
    message = refused(
        sql,
        NOT_LEASABLE,
        "resolver_execution_lease",
        dispatch_id=lease.dispatch_id,
        owner="late-executor",
        lease_ms=LEASE_MS,
    )
    assert "past the start barrier" in message and "pruned" not in message


# -- defect 11: a stale version under one's own token is not a takeover ----------------------------


def test_start_with_a_stale_version_is_a_fence_conflict_not_a_takeover(sql: SQL) -> None:
    lease = leased(sql)
    renewed = call(sql, "resolver_execution_renew", **fence(lease), lease_ms=LEASE_MS, now_ms=T0)
    message = refused(
        sql, FENCE_CONFLICT, "resolver_execution_start", **fence(lease), lease_ms=LEASE_MS
    )
    assert "stale version" in message and f"at version {renewed['version']}" in message
    assert "taken over" not in message
    # A real takeover still says so.
    taken = call(
        sql,
        "resolver_execution_lease",
        dispatch_id=lease["dispatch_id"],
        owner="other",
        lease_ms=LEASE_MS,
        now_ms=T0 + 10 * LEASE_MS,
    )
    message = refused(
        sql, LEASE_LOST, "resolver_execution_start", **fence(renewed), lease_ms=LEASE_MS
    )
    assert f"taken over (attempt {taken['attempt']})" in message


# -- defect 17: controls_rearmed counts a manual control only ----------------------------------------


def test_renew_counts_only_a_manual_control_as_rearmed(sql: SQL) -> None:
    run = started(sql)
    armed = call(sql, "resolver_execution_renew", **fence(run), lease_ms=LEASE_MS, now_ms=T0 + 1)
    assert armed["controls_rearmed"] == 0  # it was armed already
    sql.all(
        "UPDATE approved_action_recovery_controls SET status = 'manual', manual_at_ms = %s,"
        " recovery_version = recovery_version + 1 WHERE dispatch_id = %s",
        T0 + 2,
        run["dispatch_id"],
    )
    manual = call(sql, "resolver_execution_renew", **fence(armed), lease_ms=LEASE_MS, now_ms=T0 + 3)
    assert manual["controls_rearmed"] == 1
    assert sql.control(run["dispatch_id"])["status"] == "armed"


# -- defect 10: a receipt integer sent as a string is named ----------------------------------------


def test_a_receipt_integer_sent_as_a_string_is_named(sql: SQL) -> None:
    run = started(sql)
    sql.conn.autocommit = False
    try:
        identity = call(sql, "resolver_receipt_identity", **fence(run))
        receipt = {k: identity[k] for k in identity if k not in ("db_now_ms", "schema_version")}
        as_driver_gave_it = {**receipt, "started_at_ms": str(receipt["started_at_ms"])}
        message = refused(
            sql,
            INVALID_INPUT,
            "resolver_receipt_write",
            **fence(run),
            receipt=Jsonb(as_driver_gave_it),
        )
        assert message == "receipt field started_at_ms must be a JSON integer, not a JSON string"
    finally:
        sql.conn.rollback()
        sql.conn.autocommit = True


# -- defect 18: receipts are fenced on the live lease -----------------------------------------------


def test_a_receipt_on_an_expired_lease_is_refused_as_lease_lost(sql: SQL) -> None:
    run = started(sql)  # lease until T0 + LEASE_MS on the test clock
    message = refused(
        sql, LEASE_LOST, "resolver_receipt_identity", **fence(run), now_ms=T0 + LEASE_MS
    )
    assert "a receipt needs a live lease" in message
    live = call(sql, "resolver_receipt_identity", **fence(run), now_ms=T0 + LEASE_MS - 1)
    assert live["dispatch_id"] == run["dispatch_id"]


def _wait_until_blocked(admin: psycopg.Connection[Any]) -> None:
    """Until a backend of this database waits on a lock (the decision, behind FOR SHARE)."""
    while not admin.execute(
        "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock'"
    ).fetchone():
        admin.execute("SELECT pg_sleep(0.01)")


def test_a_receipt_committing_after_its_lease_rolls_back_beside_a_human_decision(
    store: Storage, sql: SQL, database_url: str
) -> None:
    """The late-receipt race: the executor wrote its mutation and receipt while its lease was
    live, but commits only after it expired; meanwhile a human decided `confirm_failed` and
    waits on the receipt's FOR SHARE lock. The receipt (and the mutation) must roll back, so
    the recorded failure never stands beside a valid success receipt."""
    sql.all("CREATE TABLE IF NOT EXISTS adoption_ledger (dispatch_id text PRIMARY KEY)")
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1) ON CONFLICT DO NOTHING")
    sql.all(
        "INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)"
        " ON CONFLICT DO NOTHING"
    )
    executor = ExecutionClient(store, owner="slow-executor", lease_seconds=1.0)
    spec = executor.create_dispatch(new_spec())
    lease = executor.start(executor.lease(spec.dispatch_id))  # the database clock, 1 s lease
    decided_at = lease.lease_expires_at_ms + 1_000  # the human acts once recovery may
    decision = ManualDecision(
        lease.dispatch_id, Decision.CONFIRM_FAILED, "op-race", lease.version, "vendor_says_no"
    )
    alice = Principal(
        "alice", decided_at - 1_000, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid"
    )
    outcome: list[ManualResult | BaseException] = []

    def human() -> None:
        with Storage(database_url) as own:
            try:
                outcome.append(
                    ManualResolutionService(own, signer=TEST_SIGNER)
                    .at(decided_at)
                    .decide(alice, decision)
                )
            except BaseException as exc:  # reported below, never swallowed
                outcome.append(exc)

    with (
        psycopg.connect(database_url) as conn,
        psycopg.connect(database_url, autocommit=True) as admin,
    ):
        conn.execute("INSERT INTO adoption_ledger VALUES (%s)", (lease.dispatch_id,))
        f = {k: getattr(lease, k) for k in ("dispatch_id", "owner", "token", "version")}
        (identity,) = conn.execute(
            "SELECT * FROM resolver_receipt_identity(%s, %s, %s, %s)", tuple(f.values())
        ).fetchall()
        receipt = {
            k: v
            for k, v in zip(
                (
                    "schema_version",
                    "dispatch_id",
                    "approval_request_id",
                    "project_id",
                    "action_type",
                    "action_digest",
                    "idempotency_key",
                    "attempt",
                    "started_at_ms",
                ),
                identity,
                strict=False,
            )
            if k != "schema_version"
        }
        conn.execute(
            "SELECT * FROM resolver_receipt_write(%s, %s, %s, %s, %s)",
            (*f.values(), Jsonb(receipt)),
        )
        deciding = threading.Thread(target=human)
        deciding.start()
        _wait_until_blocked(admin)
        while admin.execute("SELECT resolver_now_ms(NULL)").fetchone()[0] <= (  # type: ignore[index]
            lease.lease_expires_at_ms
        ):
            admin.execute("SELECT pg_sleep(0.05)")
        with pytest.raises(psycopg.Error) as refused_at_commit:
            conn.commit()
    deciding.join(timeout=60)
    assert refused_at_commit.value.sqlstate == LEASE_LOST
    assert "would commit after its execution lease expired" in str(refused_at_commit.value)
    assert identity[1] == lease.dispatch_id
    assert outcome == [ManualResult.COMMITTED]
    assert sql.execution(lease.dispatch_id)["state"] == "failed"
    assert not sql.all("SELECT 1 FROM action_receipts WHERE dispatch_id = %s", lease.dispatch_id)
    assert not sql.all("SELECT 1 FROM adoption_ledger WHERE dispatch_id = %s", lease.dispatch_id)


# -- defect 16: the SQLSTATE of each write outside the protocol is the documented one --------------

OUTSIDE_WRITES = {
    "a state no row may hold": (
        "UPDATE approved_action_executions SET state = 'recovery_required'",
        "23514",
    ),
    "terminal without a finish time": (
        "UPDATE approved_action_executions SET state = 'succeeded', version = version + 1",
        "23514",
    ),
    "executing back to leased": (
        "UPDATE approved_action_executions SET state = 'leased', version = version + 1",
        "RS006",
    ),
    "a lease extended without a version bump": (
        "UPDATE approved_action_executions SET lease_expires_at_ms = lease_expires_at_ms + 1",
        "RS006",
    ),
    "an edited dispatch": ("UPDATE approved_action_dispatches SET project_id = 'other'", "23001"),
    "a deleted dispatch": ("DELETE FROM approved_action_dispatches", "23001"),
}


@pytest.mark.parametrize(
    ("statement", "sqlstate"), OUTSIDE_WRITES.values(), ids=OUTSIDE_WRITES.keys()
)
def test_writes_outside_the_protocol_fail_with_the_documented_sqlstate(
    sql: SQL, statement: str, sqlstate: str
) -> None:
    run = started(sql)
    with pytest.raises(psycopg.Error) as caught:
        sql.all(f"{statement} WHERE dispatch_id = %s", run["dispatch_id"])
    assert caught.value.sqlstate == sqlstate, caught.value.diag.message_primary
    text = Path(__file__).resolve().parents[3].joinpath("docs", "executor-protocol.md")
    assert f"`{sqlstate}`" in text.read_text(encoding="utf-8")


# -- defect 19: an execution cannot be inserted past `leased`, by any writer ----------------------

BORN_LATE = {
    "executing, no control": ("executing", 2, "NULL", None),
    "succeeded, no control": ("succeeded", 3, "%(now)s", None),
    "executing with an armed control": ("executing", 2, "NULL", "armed"),
}


@pytest.mark.parametrize(
    ("state", "version", "finished", "control"), BORN_LATE.values(), ids=BORN_LATE.keys()
)
def test_the_owner_cannot_insert_an_execution_past_the_barrier(
    sql: SQL, state: str, version: int, finished: str, control: str | None
) -> None:
    dispatch_id = created(sql)
    insert = (
        "INSERT INTO approved_action_executions (dispatch_id, state, owner, token, version,"
        " attempt, lease_expires_at_ms, started_at_ms, finished_at_ms)"
        f" VALUES (%(id)s, %(state)s, 'o', gen_random_uuid(), %(version)s, 1, %(now)s, %(now)s,"
        f" {finished})"
    )
    params = {"id": dispatch_id, "state": state, "version": version, "now": T0}

    def write() -> None:
        with sql.conn.transaction():
            sql.conn.execute(insert, params)  # type: ignore[arg-type]
            if control:
                sql.conn.execute(
                    "INSERT INTO approved_action_recovery_controls (dispatch_id, status,"
                    " execution_version, next_scan_at_ms, armed_at_ms)"
                    " VALUES (%(id)s, 'armed', %(version)s, %(now)s, %(now)s)",
                    params,
                )

    with pytest.raises(psycopg.Error) as caught:
        write()
    assert caught.value.sqlstate == "RS006", caught.value.diag.message_primary
    assert "an execution is born leased" in str(caught.value)
    # The owner importing history says so, in its own transaction; then the rows go in.
    with sql.conn.transaction():
        sql.conn.execute("SELECT set_config('resolver.import_history', 'on', true)")
        sql.conn.execute(insert, params)  # type: ignore[arg-type]
        if state == "executing":
            sql.conn.execute(
                "INSERT INTO approved_action_recovery_controls (dispatch_id, status,"
                " execution_version, next_scan_at_ms, armed_at_ms)"
                " VALUES (%(id)s, 'armed', %(version)s, %(now)s, %(now)s)",
                params,
            )
    assert sql.execution(dispatch_id)["state"] == state


def test_a_control_is_born_armed(sql: SQL) -> None:
    lease = leased(sql)
    with pytest.raises(psycopg.Error) as caught:
        sql.all(
            "INSERT INTO approved_action_recovery_controls (dispatch_id, status, execution_version,"
            " next_scan_at_ms, armed_at_ms, closed_by, closed_at_ms)"
            " VALUES (%s, 'resolved', 1, 0, 0, 'completion', 1)",
            lease["dispatch_id"],
        )
    assert caught.value.sqlstate == "RS006"
    assert "a control is born armed" in str(caught.value)


# -- defect 8: a heartbeat racing the receipt transaction, and the documented way to avoid it ------


def test_a_renew_racing_the_receipt_fails_it_and_the_last_version_before_begin_does_not(
    sql: SQL,
) -> None:
    """docs/executor-protocol.md, "Renewing without racing the receipt": a renew that commits
    while the mutation's transaction is being prepared moves the version, and the receipt
    under the old version is refused (RS001); stopping the heartbeat and using the version of
    the last renew before BEGIN commits the receipt and then completes."""
    run = started(sql)
    heartbeat = call(
        sql, "resolver_execution_renew", **fence(run), lease_ms=LEASE_MS, now_ms=T0 + 1
    )
    raced = refused(sql, FENCE_CONFLICT, "resolver_receipt_identity", **fence(run), now_ms=T0 + 2)
    assert f"at version {run['version']} rejected" in raced
    last = call(
        sql, "resolver_execution_renew", **fence(heartbeat), lease_ms=LEASE_MS, now_ms=T0 + 3
    )
    sql.conn.autocommit = False
    try:
        identity = call(sql, "resolver_receipt_identity", **fence(last), now_ms=T0 + 4)
        receipt = {k: identity[k] for k in identity if k not in ("db_now_ms", "schema_version")}
        call(sql, "resolver_receipt_write", **fence(last), receipt=Jsonb(receipt))
        sql.conn.commit()
    finally:
        sql.conn.rollback()
        sql.conn.autocommit = True
    done = call(
        sql,
        "resolver_execution_complete",
        **fence(last),
        outcome="succeeded",
        result_code="applied",
        mutation_id="m-heartbeat",
        now_ms=T0 + 5,
    )
    assert done["result"] == "committed"
