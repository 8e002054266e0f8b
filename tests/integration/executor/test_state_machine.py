"""The state machine is enforced for every writer, the table owner included.

Hand-written UPDATEs (as a buggy executor, a migration script or an operator would write
them) outside the state machine fail loudly, naming the rule; the resolver's own statements
pass. The misbehaving-executor test then shows that whatever such a writer manages to do,
no execution whose lease is live on the database clock is ever resolved.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import psycopg
import pytest

from resolver.core.domain import Completion, ExecutionLease, ItemOutcome, Outcome
from resolver.core.errors import FenceConflict, LeaseLost
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver.db.protocol import STATE_MACHINE
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World, new_spec
from tests.helpers.providers import ScriptedProvider, registry, verified
from tests.helpers.stores import Storage

AFTER = T0 + EXEC_LEASE_MS


@contextmanager
def rejected(rule: str) -> Iterator[None]:
    with pytest.raises(psycopg.Error) as caught:
        yield
    assert caught.value.sqlstate == STATE_MACHINE, caught.value
    assert rule in (caught.value.diag.message_primary or ""), caught.value


def test_a_terminal_execution_never_changes(world: World, sql: SQL) -> None:
    lease = world.started()
    world.executor.at(T0 + 1).complete(lease, Completion(Outcome.SUCCEEDED, "ok", "m-1"))
    for change in ("result_code = 'forged'", "state = 'failed', version = version + 1"):
        with rejected("a terminal execution never changes"):
            sql.all(
                f"UPDATE approved_action_executions SET {change} WHERE dispatch_id = %s",
                lease.dispatch_id,
            )
    assert sql.execution(lease.dispatch_id)["result_code"] == "ok"


def test_executing_never_returns_to_leased_nor_skips_the_barrier(world: World, sql: SQL) -> None:
    lease = world.started()
    with rejected("executing never returns to leased"):
        sql.all(
            "UPDATE approved_action_executions SET state = 'leased', version = version + 1"
            " WHERE dispatch_id = %s",
            lease.dispatch_id,
        )
    spec = world.executor.create_dispatch(new_spec())
    world.executor.at(T0).lease(spec.dispatch_id)
    with rejected("the start barrier cannot be skipped"):
        sql.all(
            "UPDATE approved_action_executions SET state = 'succeeded', version = version + 1,"
            " finished_at_ms = 1, started_at_ms = 1 WHERE dispatch_id = %s",
            spec.dispatch_id,
        )


def test_a_lease_is_extended_only_with_a_version_bump(world: World, sql: SQL) -> None:
    lease = world.started()
    with rejected("a lease is extended only with a version bump"):
        sql.all(
            "UPDATE approved_action_executions SET lease_expires_at_ms = lease_expires_at_ms + 1"
            " WHERE dispatch_id = %s",
            lease.dispatch_id,
        )
    with rejected("version and attempt never decrease"):
        sql.all(
            "UPDATE approved_action_executions SET version = version - 1 WHERE dispatch_id = %s",
            lease.dispatch_id,
        )


def test_an_execution_keeps_its_dispatch_id_its_start_and_its_owner_within_a_version(
    world: World, sql: SQL
) -> None:
    # Moved onto another dispatch that has no execution (a started one's control would hold
    # it back by its foreign key first).
    leased = world.executor.at(T0).lease(world.executor.create_dispatch(new_spec()).dispatch_id)
    other = world.executor.create_dispatch(new_spec())
    with rejected("an execution keeps its dispatch_id"):
        sql.all(
            "UPDATE approved_action_executions SET dispatch_id = %s, version = version + 1"
            " WHERE dispatch_id = %s",
            other.dispatch_id,
            leased.dispatch_id,
        )
    lease = world.started()
    with rejected("a state, owner or token change needs a version bump"):
        sql.all(
            "UPDATE approved_action_executions SET owner = 'someone-else' WHERE dispatch_id = %s",
            lease.dispatch_id,
        )
    with rejected("started_at_ms is set once, at the start barrier"):
        sql.all(
            "UPDATE approved_action_executions SET started_at_ms = started_at_ms + 1,"
            " version = version + 1 WHERE dispatch_id = %s",
            lease.dispatch_id,
        )
    assert sql.execution(lease.dispatch_id)["owner"] == lease.owner


def test_a_statement_of_many_rows_is_checked_row_by_row(world: World, sql: SQL) -> None:
    """The rules read each row's old and new values as a pair: one broken row among allowed
    ones fails the statement and is the one named; a statement whose every row is allowed
    passes, whatever order its rows come in. The rows differ (each started at its own time),
    so a row read against another's old values would break the start's rule."""
    leases = [world.started(now_ms=T0 + i) for i in range(5)]
    ids = [lease.dispatch_id for lease in leases]
    with rejected(f"approved_action_executions {ids[3]}: UPDATE rejected (a lease is extended"):
        sql.all(
            "UPDATE approved_action_executions SET lease_expires_at_ms = lease_expires_at_ms + 1,"
            " version = version + CASE WHEN dispatch_id = %s THEN 0 ELSE 1 END"
            " WHERE dispatch_id = ANY (%s)",
            ids[3],
            ids,
        )
    assert [sql.execution(d)["version"] for d in ids] == [lease.version for lease in leases]
    # Allowed for every row (the controls follow in the same transaction, as a renewal's do).
    with sql.conn.transaction():
        sql.all(
            "UPDATE approved_action_executions SET version = version + 1,"
            " lease_expires_at_ms = lease_expires_at_ms + 1 WHERE dispatch_id = ANY (%s)",
            list(reversed(ids)),
        )
        sql.all(
            "UPDATE approved_action_recovery_controls SET execution_version = execution_version"
            " + 1 WHERE dispatch_id = ANY (%s)",
            ids,
        )
    assert [sql.execution(d)["version"] for d in ids] == [lease.version + 1 for lease in leases]


def test_an_open_control_follows_its_execution_at_commit(world: World, sql: SQL) -> None:
    lease = world.started()
    # A hand-written renew that forgets the control: allowed row by row, refused at commit.
    with rejected("must equal its execution's version ("), sql.conn.transaction():
        sql.all(
            "UPDATE approved_action_executions SET version = version + 1,"
            " lease_expires_at_ms = lease_expires_at_ms + 1000 WHERE dispatch_id = %s",
            lease.dispatch_id,
        )
    assert sql.execution(lease.dispatch_id)["version"] == lease.version
    # Done right (both rows, one transaction), the same renew commits.
    with sql.conn.transaction():
        sql.all(
            "UPDATE approved_action_executions SET version = version + 1,"
            " lease_expires_at_ms = lease_expires_at_ms + 1000 WHERE dispatch_id = %s",
            lease.dispatch_id,
        )
        sql.all(
            "UPDATE approved_action_recovery_controls SET execution_version = execution_version"
            " + 1, recovery_version = recovery_version + 1 WHERE dispatch_id = %s",
            lease.dispatch_id,
        )
    assert sql.control(lease.dispatch_id)["execution_version"] == lease.version + 1


HAND_START = """
WITH started AS (
    UPDATE approved_action_executions AS e
    SET state = 'executing', version = e.version + 1, started_at_ms = %(now)s,
        lease_expires_at_ms = %(now)s + 1000
    WHERE e.dispatch_id = %(id)s
    RETURNING e.dispatch_id, e.version
)
INSERT INTO approved_action_recovery_controls (
    dispatch_id, status, execution_version, next_scan_at_ms, armed_at_ms)
SELECT s.dispatch_id, 'armed', s.version + %(off_by)s, %(now)s + 1000, %(now)s FROM started AS s
"""


def test_a_control_born_at_the_start_barrier_follows_its_execution_at_commit(
    world: World, sql: SQL
) -> None:
    # The start barrier changes the execution's state, so its new version is checked through
    # the control it inserts: a hand-written barrier that arms the control at another version
    # is refused at commit, whichever trigger reads the pair.
    spec = world.executor.create_dispatch(new_spec())
    leased = world.executor.at(T0).lease(spec.dispatch_id)
    with rejected("must equal its execution's version ("), sql.conn.transaction():
        sql.conn.execute(HAND_START, {"id": spec.dispatch_id, "now": T0 + 1, "off_by": -1})
    assert sql.execution(spec.dispatch_id)["state"] == "leased"
    sql.conn.execute(HAND_START, {"id": spec.dispatch_id, "now": T0 + 1, "off_by": 0})
    assert sql.control(spec.dispatch_id)["execution_version"] == leased.version + 1


def test_a_takeover_keeps_a_control_in_step_too(world: World, sql: SQL) -> None:
    # A new version in the same state (a takeover of a leased execution) is checked from the
    # execution's side: a control armed beside it by hand must follow it.
    spec = world.executor.create_dispatch(new_spec())
    world.executor.at(T0).lease(spec.dispatch_id)
    sql.all(
        "INSERT INTO approved_action_recovery_controls (dispatch_id, status, execution_version,"
        " next_scan_at_ms, armed_at_ms) SELECT dispatch_id, 'armed', version, 0, 0"
        " FROM approved_action_executions WHERE dispatch_id = %s",
        spec.dispatch_id,
    )
    with rejected("must equal its execution's version ("), sql.conn.transaction():
        sql.all(
            "UPDATE approved_action_executions SET version = version + 1, attempt = attempt + 1,"
            " owner = 'other', token = gen_random_uuid() WHERE dispatch_id = %s",
            spec.dispatch_id,
        )


def test_a_terminal_transition_closes_its_control_in_the_same_statement(
    world: World, sql: SQL
) -> None:
    lease = world.started()
    with rejected("closed by the same statement"):
        sql.all(
            "UPDATE approved_action_executions SET state = 'succeeded', version = version + 1,"
            " finished_at_ms = 1, result_code = 'forged' WHERE dispatch_id = %s",
            lease.dispatch_id,
        )
    assert sql.execution(lease.dispatch_id)["state"] == "executing"


def test_a_resolved_control_never_reopens(world: World, store: Storage, sql: SQL) -> None:
    (lease,) = world.crashed(1)
    _resolve_all(store, now_ms=AFTER)
    assert sql.control(lease.dispatch_id)["status"] == "resolved"
    with rejected("a resolved control never reopens"):
        sql.all(
            "UPDATE approved_action_recovery_controls SET status = 'armed', closed_by = NULL,"
            " closed_at_ms = NULL WHERE dispatch_id = %s",
            lease.dispatch_id,
        )


def test_a_recovery_lease_changes_only_with_a_recovery_version_bump(
    world: World, store: Storage, sql: SQL
) -> None:
    (lease,) = world.crashed(1)
    (item,) = store.at(AFTER).claim_due_page("replica", 16, 30_000)
    with rejected("recovery_version bump"):
        sql.all(
            "UPDATE approved_action_recovery_controls SET recovery_token = gen_random_uuid()"
            " WHERE dispatch_id = %s",
            lease.dispatch_id,
        )
    assert str(sql.control(lease.dispatch_id)["recovery_token"]) == item.recovery_token


# -- a misbehaving executor ----------------------------------------------------------------


def _resolve_all(store: Storage, now_ms: int) -> set[str]:
    reconciler = Reconciler(
        store,
        registry("test.action", ScriptedProvider(verified)),
        ReconcilerSettings(owner="replica", page_size=16, recovery_lease_ms=30_000),
        Runtime(rng=random.Random(1)),
    )
    try:
        return set(reconciler.at(now_ms).run_cycle().accepted)
    finally:
        reconciler.close()


def test_a_lease_extended_behind_the_triggers_back_is_still_never_resolved(
    world: World, store: Storage, sql: SQL
) -> None:
    """Even with the state-machine trigger disabled by the owner, the page commit's own
    lease fence (database clock) refuses to settle an execution whose lease is live."""
    (lease,) = world.crashed(1)
    (item,) = store.at(AFTER).claim_due_page("replica", 16, 30_000)
    sql.all("ALTER TABLE approved_action_executions DISABLE TRIGGER USER")
    try:
        sql.all(
            "UPDATE approved_action_executions SET lease_expires_at_ms = %s WHERE dispatch_id = %s",
            AFTER + 60_000,
            lease.dispatch_id,
        )
    finally:
        sql.all("ALTER TABLE approved_action_executions ENABLE TRIGGER USER")
    report = store.at(AFTER + 1).commit_outcomes(
        [ItemOutcome(item, verified(item.identity), 0, "auto-1")]
    )
    assert report.rejected == {lease.dispatch_id}
    assert sql.resolutions(lease.dispatch_id) == []
    assert sql.execution(lease.dispatch_id)["state"] == "executing"


def test_a_misbehaving_executor_never_gets_a_live_execution_resolved(
    world: World, store: Storage, sql: SQL
) -> None:
    """A table-owner executor that renews by hand (whatever the trigger lets through),
    shortens and stretches leases, and forgets the control, interleaved with resolver
    cycles: every resolution lands on an execution whose lease had expired."""
    rng = random.Random(9)
    leases: dict[str, ExecutionLease] = {lease.dispatch_id: lease for lease in world.crashed(12)}
    now = AFTER
    for _ in range(30):
        now += rng.choice((0, 200, 700, 1_500))
        dispatch_id = rng.choice(sorted(leases))
        move = rng.choice(("renew", "hand_renew", "hand_forget", "stretch", "cycle", "cycle"))
        if move == "renew":
            with suppress(FenceConflict, LeaseLost):
                leases[dispatch_id] = world.executor.at(now).renew(leases[dispatch_id])
        elif move in ("hand_renew", "hand_forget", "stretch"):
            _misbehave(sql, dispatch_id, move, now + rng.choice((-500, 500, 5_000)))
        else:
            _resolve_all(store, now_ms=now)
        _assert_no_live_resolution(sql)
    assert sql.all("SELECT 1 FROM approved_action_recovery_resolutions"), "nothing was resolved"


def _misbehave(sql: SQL, dispatch_id: str, move: str, lease_ms: int) -> None:
    statements = {
        # Allowed by the trigger: a version bump with the control kept in step.
        "hand_renew": [
            "UPDATE approved_action_executions SET version = version + 1,"
            f" lease_expires_at_ms = {lease_ms} WHERE dispatch_id = %s AND state = 'executing'",
            "UPDATE approved_action_recovery_controls AS c SET execution_version = e.version"
            " FROM approved_action_executions AS e WHERE c.dispatch_id = e.dispatch_id"
            " AND c.dispatch_id = %s AND c.status <> 'resolved'",
        ],
        # Refused at commit: the control is left behind.
        "hand_forget": [
            "UPDATE approved_action_executions SET version = version + 1,"
            f" lease_expires_at_ms = {lease_ms} WHERE dispatch_id = %s AND state = 'executing'",
        ],
        # Refused at once: a longer lease without a version bump.
        "stretch": [
            f"UPDATE approved_action_executions SET lease_expires_at_ms = {lease_ms + 60_000}"
            " WHERE dispatch_id = %s AND state = 'executing'",
        ],
    }[move]
    failure: psycopg.Error | None = None
    try:
        with sql.conn.transaction():
            for statement in statements:
                sql.all(statement, dispatch_id)
    except psycopg.Error as exc:
        failure = exc
    if failure is not None:
        assert failure.sqlstate == STATE_MACHINE, failure
        assert move != "hand_renew", failure


def _assert_no_live_resolution(sql: SQL) -> None:
    live = sql.all(
        "SELECT r.dispatch_id, r.resolved_at_ms, e.lease_expires_at_ms"
        " FROM approved_action_recovery_resolutions AS r"
        " JOIN approved_action_executions AS e USING (dispatch_id)"
        " WHERE e.lease_expires_at_ms > r.resolved_at_ms"
    )
    assert live == []
